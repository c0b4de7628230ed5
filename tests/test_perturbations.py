"""Perturbations: each twin keeps its gold and its stale values determined, the matcher grades them,
unperturbed episodes do not move, and profiles reach them with errors that name the file and key."""

from __future__ import annotations

import hashlib
import json
import re
import string
from pathlib import Path
from typing import Any

import pytest
import yaml

from supersede_lib.agent.episode import Episode
from supersede_lib.data.episodes import EpisodeSpec, load_episodes
from supersede_lib.data.synthetic import (
    CHANGE_CUES,
    DIFFICULTY_LADDER,
    DISTRACTOR_TOPICS,
    EXPLICIT_TEMPLATED,
    FACT_DOMAINS,
    HELD_OUT_DOMAINS,
    PERTURBATIONS,
    add_distractor_sessions,
    episodes_config,
    generate_episodes,
    parse_date,
    perturb,
)
from supersede_lib.data.synthetic.distractors import CROSS_DOMAIN_SLOTS, SLOT_VALUES
from supersede_lib.data.synthetic.tables import load_table
from supersede_lib.eval.matcher import score_episode_answer
from supersede_lib.profiles import ProfileError, validate_profile

PRESETS = (*DIFFICULTY_LADDER, EXPLICIT_TEMPLATED)
# Every named setting; k=1 and count=0 are the unperturbed twins themselves.
CASES = (
    ("k_facts", {"k": 2}),
    ("k_facts", {"k": 4}),
    ("someone_else", {}),
    ("considered_not_made", {}),
    ("reverted", {}),
    ("indirect", {}),
    ("past_tense_later", {}),
    ("held_out_vocab", {}),
    ("distractor_density", {"count": 4}),
    ("distractor_density", {"count": 8}),
    ("last_update_position", {"position": "early"}),
    ("last_update_position", {"position": "last"}),
)
CASE_IDS = [name + "".join(f"-{value}" for value in params.values()) for name, params in CASES]
# sha256 of generate_episodes(8, seed=50) for every preset, recorded before perturbations existed.
UNPERTURBED_SET_SHA256 = "7027790aaa1574957b5f62f9bf4aed6563f697805c770c7f56d503ecde1cb284"
SMOKE_PROFILE = Path(__file__).parents[1] / "configs" / "smoke.yaml"


def _mentions(text: str, value: str) -> bool:
    return re.search(rf"(?<![\w$]){re.escape(value)}(?![\w]|,\d)", text, flags=re.IGNORECASE) is not None


def _first_session_saying(episode: Episode, forms: tuple[str, ...] | list[str]) -> int | None:
    for index, session in enumerate(episode.sessions):
        if any(_mentions(turn.content, form) for turn in session.turns for form in forms):
            return index
    return None


def _set_digest(episodes: list[Episode]) -> str:
    return hashlib.sha256(json.dumps([e.to_dict() for e in episodes], sort_keys=True).encode()).hexdigest()


def _twins(difficulty: str, name: str, params: dict[str, Any], n: int = 12) -> list[tuple[Episode, Episode]]:
    config = episodes_config(difficulty)
    return [(e, perturb(e, name, config=config, **params)) for e in generate_episodes(n, 21, difficulty)]


# ---------------------------------------------------------------- unperturbed episodes do not move


def test_unperturbed_episodes_are_byte_identical_and_perturbing_leaves_them_alone() -> None:
    episodes = [episode for d in PRESETS for episode in generate_episodes(8, seed=50, difficulty=d)]
    assert _set_digest(episodes) == UNPERTURBED_SET_SHA256
    for name, params in CASES:
        for episode in episodes[::7]:
            perturb(episode, name, config=episodes_config(episode.metadata["difficulty"]), **params)
    assert _set_digest(episodes) == UNPERTURBED_SET_SHA256


def test_identity_settings_return_the_unperturbed_twin() -> None:
    episode = generate_episodes(1, seed=3)[0]
    assert perturb(episode, "k_facts", k=1) is episode
    assert perturb(episode, "distractor_density", count=0) is episode
    assert load_episodes({"n": 3, "perturbation": {"name": "k_facts", "k": 1}}) == load_episodes({"n": 3})


# ---------------------------------------------------------------- every twin: paired, seeded, determined


@pytest.mark.parametrize(("name", "params"), CASES, ids=CASE_IDS)
@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_twin_is_seeded_paired_and_its_gold_is_determined(
    name: str, params: dict[str, Any], difficulty: str
) -> None:
    for base, twin in _twins(difficulty, name, params):
        assert twin.to_dict() == perturb(base, name, config=episodes_config(difficulty), **params).to_dict()
        assert twin.episode_id != base.episode_id and twin.episode_id.startswith(base.episode_id + "+")
        assert twin.metadata["perturbation"] == name and twin.metadata["perturbation_params"] == params
        assert twin.metadata["twin_of"] == twin.metadata["base_episode_id"] == base.episode_id
        assert twin.metadata["seed"] == base.metadata["seed"]
        assert len({session.session_id for session in twin.sessions}) == len(twin.sessions)
        dates = [parse_date(session.date) for session in twin.sessions]
        assert dates == sorted(dates) and len(set(dates)) == len(dates)
        assert parse_date(twin.question_date) > dates[-1]
        _assert_gold_and_stale_are_determined(twin)


def _assert_gold_and_stale_are_determined(twin: Episode) -> None:
    """The gold is said in its session and never before; each stale value before the current one;
    the matcher credits the gold and calls the shortcut's answer stale."""
    timeline = twin.metadata["value_timeline"]
    assert twin.gold_text == twin.gold_answers[0]
    assert not set(twin.gold_answers) & set(twin.superseded_values)
    assert twin.metadata["mention_sessions"] == [entry["session_index"] for entry in timeline]
    gold_entry = next(entry for entry in reversed(timeline) if entry["value"] == twin.gold_text)
    if not twin.asks_previous_value:
        assert gold_entry is timeline[-1]
        text = "\n".join(turn.content for turn in twin.sessions[gold_entry["session_index"]].turns)
        assert gold_entry["user_sentence"] in text
    if twin.metadata["domain"] != "counts":  # small numbers also occur in ordinary chat
        first = _first_session_saying(twin, [twin.gold_text])
        first_entry = next(entry for entry in timeline if entry["value"] == twin.gold_text)
        assert first is None or first >= first_entry["session_index"]
        if not twin.asks_previous_value:
            for entry in timeline[:-1]:
                stale_at = _first_session_saying(twin, entry["variants"])
                assert stale_at is None or stale_at <= timeline[-1]["session_index"]
    gold = score_episode_answer(twin, f"It's {twin.gold_text}.")
    assert gold.answered_current and not gold.asserted_stale
    shortcut = twin.metadata["shortcut_answer"]
    if shortcut != twin.gold_text:
        wrong = score_episode_answer(twin, f"It's {shortcut}.")
        assert not wrong.answered_current
        assert wrong.asserted_stale == (shortcut in twin.superseded_values)


# ---------------------------------------------------------------- each perturbation's own promise


def test_k_facts_adds_live_facts_with_updates_and_keeps_the_asked_one() -> None:
    for base, twin in _twins("medium", "k_facts", {"k": 4}):
        assert (twin.question, twin.gold_answers, twin.superseded_values) == (
            base.question,
            base.gold_answers,
            base.superseded_values,
        )
        others = twin.metadata["other_facts"]
        assert len(others) == 3 and len({fact["domain"] for fact in others} | {base.metadata["domain"]}) == 4
        assert len(twin.sessions) == len(base.sessions) + 6
        for fact in others:
            assert len(fact["values"]) == 2 and fact["values"][0] != fact["values"][1]  # each updated
            update_text = "\n".join(t.content for t in twin.sessions[fact["sessions"][1]].turns)
            assert not any(t.has_answer for index in fact["sessions"] for t in twin.sessions[index].turns)
            if FACT_DOMAINS[fact["domain"]].value_kind == "pool":
                assert fact["gold_text"].lower() in update_text.lower()
        assert [twin.sessions[entry["session_index"]] for entry in twin.metadata["value_timeline"]] == [
            base.sessions[entry["session_index"]] for entry in base.metadata["value_timeline"]
        ]


@pytest.mark.parametrize("name", ["someone_else", "considered_not_made"])
def test_no_change_perturbations_keep_the_value_and_call_the_other_value_stale(name: str) -> None:
    for base, twin in _twins("medium", name, {}):
        assert (twin.question, twin.gold_answers) == (base.question, base.gold_answers)
        other = twin.metadata["shortcut_answer"]
        assert other not in base.gold_answers and other not in base.superseded_values
        assert twin.superseded_values[: len(base.superseded_values)] == base.superseded_values
        assert other in twin.superseded_values
        (index,) = twin.metadata["perturbation_sessions"]
        session = twin.sessions[index]
        assert index > base.metadata["value_timeline"][-1]["session_index"]
        assert twin.metadata["perturbation_sentence"] in "\n".join(turn.content for turn in session.turns)
        assert not session.is_evidence
        assert twin.metadata["value_timeline"] == [
            {**entry, "session_index": entry["session_index"] + (entry["session_index"] >= index)}
            for entry in base.metadata["value_timeline"]
        ]


def test_reverted_goes_back_to_the_value_before_the_last_change() -> None:
    for base, twin in _twins("medium", "reverted", {}, n=20):
        before, last = base.metadata["value_timeline"][-2:]
        assert twin.metadata["value_timeline"][-1]["value"] == before["value"]
        assert twin.metadata["shortcut_answer"] == last["value"]
        if not base.asks_previous_value:  # "before the latest change" is now the reverted-from value
            assert twin.gold_text == before["value"] and last["value"] in twin.superseded_values


def test_indirect_updates_carry_no_change_cue() -> None:
    for _, twin in _twins("hard", "indirect", {}, n=30):
        sentence = twin.metadata["value_timeline"][-1]["user_sentence"]
        assert not [cue for cue in CHANGE_CUES if _mentions(sentence, cue)], sentence
        assert any(_mentions(sentence, form) for form in twin.metadata["value_timeline"][-1]["variants"])
    for domain, templates in load_table("perturbations.json")["templates"]["indirect"].items():
        for template in templates:
            assert not [cue for cue in CHANGE_CUES if _mentions(template, cue)], (domain, template)


def test_past_tense_update_is_told_later_and_falls_after_every_earlier_session() -> None:
    phrases = {item["phrase"] for item in load_table("perturbations.json")["past_tense_when"]}
    for base, twin in _twins("medium", "past_tense_later", {}):
        entry = twin.metadata["value_timeline"][-1]
        assert entry["session_index"] == len(twin.sessions) - 1 == len(base.sessions)
        assert any(entry["user_sentence"].lower().startswith(phrase.lower()) for phrase in phrases)
        changed_on = parse_date(twin.sessions[-1].date).date().toordinal() - entry["changed_days_before"]
        assert changed_on > parse_date(base.sessions[-1].date).date().toordinal()
        assert parse_date(twin.question_date) - parse_date(twin.sessions[-1].date) == parse_date(
            base.question_date
        ) - parse_date(base.sessions[-1].date)


def test_held_out_vocabulary_is_disjoint_from_every_training_domain() -> None:
    assert not set(HELD_OUT_DOMAINS) & set(FACT_DOMAINS)
    training_text = json.dumps(load_table("domains.json")) + json.dumps(load_table("distractors.json"))
    training_questions = {q for domain in FACT_DOMAINS.values() for q in domain.questions}
    for domain in HELD_OUT_DOMAINS.values():
        assert domain.value_kind == "pool" and len(domain.values) >= 8
        assert not [value for value in domain.values if _mentions(training_text, value)], domain.name
        assert not set(domain.questions) & training_questions
        # the asked key: no training question asks about a dentist, a bank or a bike
        assert not [q for q in training_questions if _mentions(q, domain.name.replace("_", " "))]
    slot_values = {v for values in SLOT_VALUES.values() for v in values}
    slot_values |= {v for _, neutral in CROSS_DOMAIN_SLOTS.values() for v in neutral}
    held = {value for domain in HELD_OUT_DOMAINS.values() for value in domain.values}
    assert not held & slot_values and DISTRACTOR_TOPICS
    for base, twin in _twins("medium", "held_out_vocab", {}):
        assert twin.metadata["domain"] in HELD_OUT_DOMAINS
        assert (len(twin.sessions), twin.metadata["n_updates"]) == (
            len(base.sessions),
            base.metadata["n_updates"],
        )


def test_distractor_density_is_add_distractor_sessions() -> None:
    for base, twin in _twins("medium", "distractor_density", {"count": 8}, n=4):
        longer = add_distractor_sessions(base, 8)
        assert twin.sessions == longer.sessions and twin.episode_id == longer.episode_id
        assert twin.metadata["extra_distractor_sessions"] == 8


@pytest.mark.parametrize("position", ["early", "last"])
def test_last_update_position_moves_sessions_not_dates(position: str) -> None:
    for base, twin in _twins("hard", "last_update_position", {"position": position}):
        assert [s.date for s in twin.sessions] == [s.date for s in base.sessions]
        assert sorted(s.session_id for s in twin.sessions) == sorted(s.session_id for s in base.sessions)
        events = [entry["session_index"] for entry in twin.metadata["value_timeline"]]
        if position == "early":
            assert events == list(range(len(events)))
        else:
            assert events[-1] == len(twin.sessions) - 1
        assert (twin.gold_answers, twin.superseded_values) == (base.gold_answers, base.superseded_values)


def test_every_template_table_covers_every_training_domain_and_formats() -> None:
    table = load_table("perturbations.json")
    for name, by_domain in table["templates"].items():
        assert set(by_domain) == set(FACT_DOMAINS), name
        for templates in by_domain.values():
            for template in templates:
                slots = {field for _, field, _, _ in string.Formatter().parse(template) if field}
                assert slots <= {
                    "value",
                    "a_value",
                    "current",
                    "a_current",
                    "person",
                    "when",
                    "pet",
                    "thing",
                    "short",
                    "plural",
                    "verb_pp",
                    "verb_past",
                    "single",
                    "activity",
                    "event",
                }
    assert set(table["acks"]) == set(table["templates"])


# ---------------------------------------------------------------- reaching them from a profile


def test_a_profile_block_perturbs_its_episodes() -> None:
    spec = EpisodeSpec.model_validate({"n": 3, "seed": 4, "perturbation": {"name": "k_facts", "k": 2}})
    assert spec.label == "synthetic, medium preset, perturbed: k_facts (k=2)"
    episodes = load_episodes(spec)
    assert [e.metadata["twin_of"] for e in episodes] == [
        e.episode_id for e in load_episodes({"n": 3, "seed": 4})
    ]
    assert EpisodeSpec.model_validate({"perturbation": "reverted"}).perturbation == {"name": "reverted"}
    assert "perturbation" not in EpisodeSpec(n=2).model_dump()
    assert "perturbation" in EpisodeSpec.allowed_keys()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"name": "k_facs"}, "unknown perturbation 'k_facs'; known: k_facts"),
        ({"name": "k_facts", "k": 5}, "k must be one of (1, 2, 3, 4)"),
        ({"name": "reverted", "kk": 1}, "unknown parameter 'kk'"),
        ({"name": "last_update_position", "position": "middle"}, "position must be one of"),
        ({"name": "distractor_density"}, "missing parameter"),
        ({"name": "reverted", "seed": -1}, "seed must be an integer >= 0"),
        ([1], "expected a perturbation name or a mapping"),
    ],
)
def test_a_bad_perturbation_names_the_file_and_the_key(value: Any, expected: str) -> None:
    data = yaml.safe_load(SMOKE_PROFILE.read_text())
    data["isolation"]["episodes"]["perturbation"] = value
    with pytest.raises(ProfileError) as raised:
        validate_profile(data, "configs/robust.yaml")
    message = str(raised.value)
    assert message.startswith("configs/robust.yaml: isolation.episodes.perturbation: ")
    assert expected in message


def test_perturbation_is_for_synthetic_episodes_only() -> None:
    with pytest.raises(ValueError, match="synthetic episodes only"):
        EpisodeSpec.model_validate({"source": "longmemeval", "perturbation": "reverted"})
    assert set(PERTURBATIONS) >= {name for name, _ in CASES}


def test_long_histories_that_use_up_a_small_pool_still_get_a_determined_twin() -> None:
    # Expert histories hold up to six updates plus corrections: seven weekdays can all be used.
    names = ("k_facts", "someone_else", "considered_not_made", "reverted", "indirect", "past_tense_later")
    config = episodes_config("expert")
    for episode in generate_episodes(60, seed=5, difficulty="expert"):
        for name in names:
            twin = perturb(episode, name, config=config, **({"k": 4} if name == "k_facts" else {}))
            assert not set(twin.gold_answers) & set(twin.superseded_values)
            assert score_episode_answer(twin, f"It's {twin.gold_text}.").answered_current
