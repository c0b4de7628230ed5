"""The procedural generator: determinism, timeline/text agreement, knobs, wording styles, variety."""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supersede_lib.data.synthetic import (
    DIFFICULTY_LADDER,
    DISTRACTOR_TOPICS,
    EXPLICIT_MARKERS,
    EXPLICIT_TEMPLATED,
    FACT_DOMAINS,
    GeneratorConfig,
    add_distractor_sessions,
    config_for_difficulty,
    describe_config,
    episode_seed,
    generate_episode,
    generate_episodes,
    next_difficulty,
    parse_date,
)
from supersede_lib.episode import Episode

ALL_PRESETS = (*DIFFICULTY_LADDER, EXPLICIT_TEMPLATED)
POOL_DOMAINS = tuple(name for name, domain in FACT_DOMAINS.items() if domain.value_kind == "pool")
WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

seeds = st.integers(min_value=0, max_value=10**9)
presets = st.sampled_from(ALL_PRESETS)
quick = settings(max_examples=30, deadline=None)


def _mentions(text: str, value: str) -> bool:
    """`value` occurs in `text` as a whole word/number (case-insensitive)."""
    return re.search(rf"(?<![\w$]){re.escape(value)}(?![\w]|,\d)", text, flags=re.IGNORECASE) is not None


def _first_mention(episode: Episode, *forms: str) -> tuple[int, int] | None:
    """(session, turn) of the first turn that says any of `forms`."""
    for session_index, session in enumerate(episode.sessions):
        for turn_index, turn in enumerate(session.turns):
            if any(_mentions(turn.content, form) for form in forms):
                return session_index, turn_index
    return None


def _session_text(episode: Episode, index: int) -> str:
    return "\n".join(turn.content for turn in episode.sessions[index].turns)


def _timeline(episode: Episode) -> list[dict[str, Any]]:
    return episode.metadata["value_timeline"]


def _last_evidence_turn(episode: Episode, session_index: int) -> int:
    turns = episode.sessions[session_index].turns
    return max(index for index, turn in enumerate(turns) if turn.has_answer)


# ---------------------------------------------------------------- determinism and record shape


@quick
@given(seed=seeds, difficulty=presets)
def test_same_seed_gives_the_identical_episode(seed: int, difficulty: str) -> None:
    assert generate_episode(seed, difficulty).to_dict() == generate_episode(seed, difficulty).to_dict()


@pytest.mark.parametrize("difficulty", ALL_PRESETS)
def test_different_seeds_give_different_episodes(difficulty: str) -> None:
    episodes = [generate_episode(seed, difficulty) for seed in range(20)]
    contents = {
        json.dumps([episode.question, [s.turns for s in episode.sessions]], default=str)
        for episode in episodes
    }
    assert len(contents) == len(episodes)


@quick
@given(seed=seeds, difficulty=presets)
def test_round_trip_through_dict_and_json(seed: int, difficulty: str) -> None:
    episode = generate_episode(seed, difficulty)
    assert Episode.from_dict(episode.to_dict()) == episode
    as_json = json.loads(json.dumps(episode.to_dict()))
    rebuilt = Episode.from_dict(as_json)
    assert rebuilt == episode
    assert rebuilt.metadata == as_json["metadata"]


@quick
@given(seed=seeds, difficulty=presets)
def test_record_fields_follow_the_contract(seed: int, difficulty: str) -> None:
    episode = generate_episode(seed, difficulty)
    assert episode.episode_id == f"syn-{difficulty}-{seed}"
    assert episode.source == f"synthetic:{difficulty}"
    assert episode.question_type == "knowledge-update"
    assert not episode.is_abstention
    assert episode.gold_text == episode.gold_answers[0]
    assert not set(episode.gold_answers) & set(episode.superseded_values)
    assert bool(episode.superseded_values) == (episode.metadata["n_updates"] > 0)
    assert {"domain", "value_timeline", "update_style", "mention_sessions"} <= set(episode.metadata)
    assert len({session.session_id for session in episode.sessions}) == len(episode.sessions)


@quick
@given(seed=seeds, difficulty=presets)
def test_sessions_are_dated_in_order_and_the_question_comes_last(seed: int, difficulty: str) -> None:
    episode = generate_episode(seed, difficulty)
    dates = [parse_date(session.date) for session in episode.sessions]
    assert dates == sorted(dates) and len(set(dates)) == len(dates)
    assert parse_date(episode.question_date) > dates[-1]
    assert all(
        re.fullmatch(r"\d{4}/\d{2}/\d{2} \((Mon|Tue|Wed|Thu|Fri|Sat|Sun)\) \d{2}:\d{2}", s.date)
        for s in episode.sessions
    )
    for session in episode.sessions:  # the weekday in parentheses is the real one
        assert parse_date(session.date).strftime("%a") == session.date.split("(")[1][:3]


# ---------------------------------------------------------------- the timeline agrees with the text


@quick
@given(seed=seeds, difficulty=presets)
def test_timeline_values_are_said_where_the_timeline_says(seed: int, difficulty: str) -> None:
    episode = generate_episode(seed, difficulty)
    timeline = _timeline(episode)
    assert timeline[0]["kind"] == "introduce"
    assert all(entry["kind"] in ("update", "retract") for entry in timeline[1:])
    assert len(timeline) - 1 == episode.metadata["n_updates"]
    assert [entry["session_index"] for entry in timeline] == sorted(
        {entry["session_index"] for entry in timeline}
    )
    for entry in timeline:
        text = _session_text(episode, entry["session_index"])
        assert entry["user_sentence"] in text
        if entry["stated"]:
            assert any(_mentions(text, form) for form in entry["variants"])
        if entry["kind"] == "retract":  # the wrong value is said first, then corrected
            wrong_at = _first_mention(episode, *entry["retracted_variants"])
            assert wrong_at is not None and wrong_at[0] == entry["session_index"]
            assert wrong_at[1] < _last_evidence_turn(episode, entry["session_index"])


@quick
@given(seed=seeds, difficulty=presets)
def test_gold_is_said_in_its_update_session_and_never_before(seed: int, difficulty: str) -> None:
    episode = generate_episode(seed, difficulty)
    timeline = _timeline(episode)
    gold_entry = next(entry for entry in timeline if entry["value"] == episode.gold_text)
    gold_session = gold_entry["session_index"]
    if not episode.asks_previous_value:
        assert gold_entry is timeline[-1]
        if gold_entry["stated"]:
            assert any(_mentions(_session_text(episode, gold_session), form) for form in episode.gold_answers)
    if episode.metadata["domain"] != "counts":  # small numbers also occur in ordinary chat
        first = _first_mention(episode, episode.gold_text)
        assert first is None or first[0] >= gold_session


@quick
@given(seed=seeds, difficulty=presets)
def test_every_stale_value_is_said_before_the_current_one(seed: int, difficulty: str) -> None:
    episode = generate_episode(seed, difficulty)
    timeline = _timeline(episode)
    if episode.asks_previous_value or len(timeline) == 1:
        return
    current_session = timeline[-1]["session_index"]
    current_turn = _last_evidence_turn(episode, current_session)
    stale = [(entry["variants"], entry["stated"]) for entry in timeline[:-1]]
    stale += [(entry["retracted_variants"], True) for entry in timeline if "retracted_value" in entry]
    for variants, stated in stale:
        assert set(variants) <= set(episode.superseded_values)
        if stated:
            first = _first_mention(episode, *variants)
            assert first is not None and first < (current_session, current_turn), variants


@quick
@given(seed=seeds, difficulty=presets)
def test_has_answer_marks_exactly_the_sessions_that_carry_the_fact(seed: int, difficulty: str) -> None:
    episode = generate_episode(seed, difficulty)
    event_sessions = [entry["session_index"] for entry in _timeline(episode)]
    evidence = [index for index, session in enumerate(episode.sessions) if session.is_evidence]
    assert evidence == event_sessions == episode.metadata["mention_sessions"]
    for entry in _timeline(episode):
        marked_user_turns = [
            turn.content
            for turn in episode.sessions[entry["session_index"]].turns
            if turn.has_answer and turn.role == "user"
        ]
        assert any(entry["user_sentence"] in content for content in marked_user_turns)
    assert all(turn.has_answer in (True, False) for session in episode.sessions for turn in session.turns)


# ---------------------------------------------------------------- knobs


@pytest.mark.parametrize("difficulty", ALL_PRESETS)
def test_episode_sizes_follow_the_preset(difficulty: str) -> None:
    config = config_for_difficulty(difficulty)
    for episode in generate_episodes(25, seed=3, difficulty=difficulty):
        n_sessions = len(episode.sessions)
        n_updates = episode.metadata["n_updates"]
        assert config.n_sessions[0] <= n_sessions <= config.n_sessions[1]
        assert config.n_updates[0] <= n_updates <= config.n_updates[1]
        assert episode.metadata["n_distractor_sessions"] == n_sessions - n_updates - 1
        last_event = _timeline(episode)[-1]["session_index"]
        assert n_sessions - 1 - last_event >= min(config.trailing_distractors[0], n_sessions - n_updates - 1)
        event_sessions = {entry["session_index"] for entry in _timeline(episode)}
        for index, session in enumerate(episode.sessions):
            exchanges = len(session.turns) // 2
            assert [turn.role for turn in session.turns] == ["user", "assistant"] * exchanges
            if index in event_sessions:
                assert config.evidence_exchanges[0] <= exchanges <= max(config.evidence_exchanges[1], 2)
            elif config.filler_chars == 0:  # + an optional closing "thanks" exchange
                assert config.distractor_exchanges[0] <= exchanges <= config.distractor_exchanges[1] + 1


def test_overrides_set_exact_sizes() -> None:
    for episode in generate_episodes(10, seed=5, difficulty="medium", n_sessions=11, n_updates=(4, 4)):
        assert len(episode.sessions) == 11
        assert episode.metadata["n_updates"] == 4
        assert len(_timeline(episode)) == 5
        assert len(set(episode.superseded_values)) >= 4


def test_filler_makes_distractor_sessions_long() -> None:
    for episode in generate_episodes(5, seed=2, difficulty="medium", filler_chars=3000):
        event_sessions = {entry["session_index"] for entry in _timeline(episode)}
        for index, session in enumerate(episode.sessions):
            if index not in event_sessions:
                assert session.char_count >= 3000
    short = generate_episodes(5, seed=2, difficulty="medium")
    assert sum(e.total_chars for e in short) < sum(
        e.total_chars for e in generate_episodes(5, 2, "medium", filler_chars=3000)
    )


def test_difficulty_ladder_grows_histories_and_updates() -> None:
    def mean(difficulty: str, key: str) -> float:
        episodes = generate_episodes(20, seed=1, difficulty=difficulty)
        values = [e.total_chars if key == "chars" else e.metadata["n_updates"] for e in episodes]
        return sum(values) / len(values)

    chars = [mean(difficulty, "chars") for difficulty in DIFFICULTY_LADDER]
    updates = [mean(difficulty, "updates") for difficulty in DIFFICULTY_LADDER]
    assert chars == sorted(chars) and updates == sorted(updates)
    assert updates[0] == 1.0 and updates[-1] >= 3


# ---------------------------------------------------------------- wording styles


def _markers_in(text: str) -> list[str]:
    return [marker for marker in EXPLICIT_MARKERS if marker in text.lower()]


@pytest.mark.parametrize("difficulty", ["easy", EXPLICIT_TEMPLATED])
def test_explicit_updates_use_the_explicit_phrases(difficulty: str) -> None:
    for episode in generate_episodes(40, seed=9, difficulty=difficulty):
        assert episode.metadata["update_style"] == "explicit"
        for entry in _timeline(episode)[1:]:
            assert entry["style"] == "explicit"
            assert _markers_in(entry["user_sentence"]), entry["user_sentence"]


@pytest.mark.parametrize("difficulty", ["hard", "expert"])
def test_implicit_episodes_never_use_the_explicit_phrases(difficulty: str) -> None:
    for episode in generate_episodes(40, seed=9, difficulty=difficulty):
        assert all(entry["style"] == "implicit" for entry in _timeline(episode))
        for session in episode.sessions:
            for turn in session.turns:
                assert not _markers_in(turn.content), turn.content


def test_mixed_style_mixes_and_templates_are_clean() -> None:
    styles = Counter(entry["style"] for e in generate_episodes(60, seed=4) for entry in _timeline(e))
    assert styles["explicit"] > 10 and styles["implicit"] > 10
    for domain in FACT_DOMAINS.values():
        assert all(_markers_in(template) for template in domain.update_explicit), domain.name
        request_text = [text for pair in domain.requests for text in pair]
        implicit_text = [
            *domain.intro_explicit, *domain.intro_implicit, *domain.update_implicit, *domain.relative_up,
            *domain.relative_down, *domain.retractions, *domain.acks, *request_text,
        ]  # fmt: skip
        assert not [text for text in implicit_text if _markers_in(text)], domain.name
    for topic in DISTRACTOR_TOPICS:
        for text in (*topic.details, *(text for pair in topic.exchanges for text in pair)):
            assert not _markers_in(text) and "$" not in text, text
            assert not any(day in text for day in WEEKDAY_NAMES), text


# ---------------------------------------------------------------- domains, variety, distractors


def test_many_domains_and_surface_variety() -> None:
    episodes = generate_episodes(200, seed=11, difficulty="medium")
    domains = Counter(episode.metadata["domain"] for episode in episodes)
    assert len(domains) >= 8
    assert len({episode.question for episode in episodes}) >= 40
    shapes = set()
    for episode in episodes:
        for entry in _timeline(episode)[1:]:
            shape = entry["user_sentence"]
            for value in {item["value"] for item in _timeline(episode)}:
                shape = re.sub(re.escape(value), "<V>", shape, flags=re.IGNORECASE)
            shapes.add(shape)
    assert len(shapes) >= 60
    # every domain is reachable when asked for
    for name in FACT_DOMAINS:
        assert (
            generate_episodes(1, seed=0, difficulty="medium", domains=(name,))[0].metadata["domain"] == name
        )


@functools.cache
def _pool_pattern(domain_name: str) -> re.Pattern[str]:
    """One regex that finds any value of a pool domain as a whole word (case-insensitive)."""
    values = sorted(FACT_DOMAINS[domain_name].values, key=len, reverse=True)
    alternatives = "|".join(re.escape(value) for value in values)
    return re.compile(rf"(?<![\w$])(?:{alternatives})(?!\w)", flags=re.IGNORECASE)


def _pool_values_in(text: str, domain_name: str) -> set[str]:
    by_lower = {value.lower(): value for value in FACT_DOMAINS[domain_name].values}
    return {by_lower[found.lower()] for found in _pool_pattern(domain_name).findall(text)}


@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_distractors_never_mention_the_tracked_domain(difficulty: str) -> None:
    cross_mentions = 0
    for episode in generate_episodes(60, seed=13, difficulty=difficulty):
        domain = FACT_DOMAINS[episode.metadata["domain"]]
        timeline = _timeline(episode)
        event_sessions = {entry["session_index"] for entry in timeline}
        allowed = {entry["value"] for entry in timeline} | {e.get("retracted_value") for e in timeline}
        for index, session in enumerate(episode.sessions):
            text = "\n".join(turn.content for turn in session.turns)
            if domain.value_kind == "pool":
                named = _pool_values_in(text, domain.name)
                assert named <= (allowed if index in event_sessions else set()), (
                    episode.episode_id,
                    index,
                    named,
                )
            elif domain.value_kind == "money" and index not in event_sessions:
                assert "$" not in text
            elif domain.value_kind == "race_time" and index not in event_sessions:
                assert not re.search(r"\d+:\d\d", text)
            if index not in event_sessions:
                others = [name for name in POOL_DOMAINS if name != domain.name]
                cross_mentions += any(_pool_values_in(text, name) for name in others)
    assert cross_mentions > 10  # other domains' values do show up as noise


def test_value_pools_are_unambiguous() -> None:
    pools = {name: domain.values for name, domain in FACT_DOMAINS.items() if domain.values}
    for name, values in pools.items():
        assert len(set(values)) == len(values) >= 7, name
        for value in values:
            assert [other for other in values if other != value and _mentions(other, value)] == [], (
                name,
                value,
            )
    all_values = [value.lower() for values in pools.values() for value in values]
    assert len(all_values) == len(set(all_values))


# ---------------------------------------------------------------- counts, previous values, retractions


def test_counts_gold_is_the_running_total_in_digits_and_words() -> None:
    words = "zero one two three four five six seven eight nine ten eleven twelve".split()
    relative_seen = 0
    for episode in generate_episodes(40, seed=17, difficulty="hard", domains=("counts",)):
        timeline = _timeline(episode)
        values = [int(entry["value"]) for entry in timeline]
        assert values == sorted(values) and len(set(values)) == len(values)
        assert values[-1] == values[0] + sum(entry["delta"] for entry in timeline[1:])
        total = int(episode.gold_text)
        assert total == values[-1] and not episode.asks_previous_value
        assert episode.gold_answers == (str(total), words[total])
        assert all(str(value) in episode.superseded_values for value in values[:-1])
        assert re.match(r"How many|Up to now, how many|What's my running total", episode.question)
        for entry in timeline[1:]:
            if entry["relative"]:
                relative_seen += 1
                said = "another" if entry["delta"] == 1 else f"{words[entry['delta']]} more"
                assert said in entry["user_sentence"] and not entry["stated"]
                assert not _mentions(entry["user_sentence"], entry["value"])
    assert relative_seen > 5


def test_money_and_race_times_are_well_formed() -> None:
    for episode in generate_episodes(20, seed=29, difficulty="hard", domains=("budget",)):
        assert re.fullmatch(r"\$\d{1,3}(,\d{3})*", episode.gold_text)
        assert episode.gold_text.lstrip("$") in episode.gold_answers
    for episode in generate_episodes(20, seed=29, difficulty="hard", domains=("personal_best",)):
        minutes, seconds = (int(part) for part in episode.gold_text.split(":"))
        assert 0 < minutes < 60 and 0 <= seconds < 60
        assert any(form.startswith(f"{minutes} minutes") for form in episode.gold_answers)
        held = [entry["value"] for entry in _timeline(episode)]
        assert held == sorted(held, key=lambda text: [int(part) for part in text.split(":")], reverse=True)


def test_previous_value_questions_have_an_earlier_gold() -> None:
    asked = Counter()
    for episode in generate_episodes(
        60, seed=19, difficulty="medium", previous_value_prob=1.0, n_updates=(1, 3)
    ):
        if episode.metadata["domain"] == "counts":  # counts always ask for the total
            assert not episode.asks_previous_value
            continue
        assert episode.asks_previous_value
        asked[episode.metadata["asked"]] += 1
        held = [entry["value"] for entry in _timeline(episode)]
        assert episode.gold_text in held[:-1]
        assert episode.gold_text == (held[0] if episode.metadata["asked"] == "initial" else held[-2])
        assert held[-1] in episode.superseded_values
        assert episode.gold_text not in episode.superseded_values
    assert asked["previous"] > 5 and asked["initial"] > 5


def test_retractions_state_a_wrong_value_then_correct_it() -> None:
    non_counts = tuple(name for name in FACT_DOMAINS if FACT_DOMAINS[name].allows_retraction)
    for episode in generate_episodes(30, seed=23, difficulty="hard", retraction_prob=1.0, domains=non_counts):
        updates = _timeline(episode)[1:]
        assert updates and all(entry["kind"] == "retract" for entry in updates)
        for entry in updates:
            wrong = entry["retracted_value"]
            assert wrong not in {item["value"] for item in _timeline(episode)}
            assert wrong in episode.superseded_values
            turns = episode.sessions[entry["session_index"]].turns
            said_wrong = [
                index
                for index, turn in enumerate(turns)
                if turn.role == "user"
                and any(_mentions(turn.content, form) for form in entry["retracted_variants"])
            ]
            corrected = [index for index, turn in enumerate(turns) if entry["user_sentence"] in turn.content]
            assert said_wrong and corrected and said_wrong[0] < corrected[0]
            assert any(_mentions(turns[corrected[0]].content, form) for form in entry["variants"])


# ---------------------------------------------------------------- seeds, presets, config


def test_generate_episodes_seeds_are_reproducible_and_disjoint() -> None:
    batch = generate_episodes(6, seed=7, difficulty="hard", retraction_prob=0.5)
    assert [e.episode_id for e in batch] == [f"syn-hard-{episode_seed(7, i)}" for i in range(6)]
    config = replace(config_for_difficulty("hard"), retraction_prob=0.5)
    assert generate_episode(episode_seed(7, 4), config).to_dict() == batch[4].to_dict()
    other = generate_episodes(6, seed=8, difficulty="hard")
    assert not {e.episode_id for e in batch} & {e.episode_id for e in other}
    assert generate_episodes(0) == []
    with pytest.raises(ValueError, match="seed"):
        episode_seed(-1, 0)


def test_ladder_presets_and_description() -> None:
    assert DIFFICULTY_LADDER == ("easy", "medium", "hard", "expert")
    assert [next_difficulty(name) for name in DIFFICULTY_LADDER] == ["medium", "hard", "expert", "expert"]
    with pytest.raises(ValueError, match="ladder"):
        next_difficulty("impossible")
    with pytest.raises(ValueError, match="unknown difficulty"):
        config_for_difficulty("impossible")
    medium = config_for_difficulty("medium")
    assert medium.n_sessions == (6, 8) and medium.update_style == "mixed"
    assert config_for_difficulty("easy").update_style == "explicit"
    assert config_for_difficulty("hard").update_style == "implicit"
    templated = config_for_difficulty(EXPLICIT_TEMPLATED)
    assert templated.update_style == "explicit" and templated.retraction_prob == 0.0
    assert templated.relative_wording_prob == 0.0
    description = describe_config("medium")
    assert description["name"] == "medium" and description["distractor_sessions"] == (3, 6)
    assert set(description["domains"]) == set(FACT_DOMAINS)
    assert describe_config(medium) == description
    json.dumps(description)


def test_config_accepts_yaml_shapes_and_rejects_bad_values() -> None:
    assert GeneratorConfig(n_sessions=[5, 7]).n_sessions == (5, 7)  # type: ignore[arg-type]
    assert GeneratorConfig(n_sessions=9).n_sessions == (9, 9)  # type: ignore[arg-type]
    cases = [
        (dict(update_style="sarcastic"), "update_style"),
        (dict(n_sessions=(3, 3), n_updates=(3, 3)), "n_sessions"),
        (dict(n_updates=(8, 8), n_sessions=12), "n_updates"),
        (dict(retraction_prob=1.5), "retraction_prob"),
        (dict(domains=("weather",)), "domains"),
        (dict(n_sessions=(8, 6)), "n_sessions"),
        (dict(distractor_exchanges="many"), "distractor_exchanges"),
    ]
    for kwargs, field_name in cases:
        with pytest.raises(ValueError, match=field_name):
            GeneratorConfig(**kwargs)
    with pytest.raises(ValueError, match="n_sesions"):
        generate_episodes(2, n_sesions=4)
    with pytest.raises(TypeError, match="GeneratorConfig"):
        generate_episode(0, 3)  # type: ignore[arg-type]


# ---------------------------------------------------------------- longer histories for the scale study


def test_add_distractor_sessions_keeps_the_fact_and_the_order() -> None:
    episode = generate_episode(31, "hard")
    longer = add_distractor_sessions(episode, 7)
    assert longer.to_dict() == add_distractor_sessions(episode, 7).to_dict()
    assert len(longer.sessions) == len(episode.sessions) + 7
    assert longer.episode_id == f"{episode.episode_id}+x7"
    assert longer.metadata["base_episode_id"] == episode.episode_id
    assert len({session.session_id for session in longer.sessions}) == len(longer.sessions)
    assert (longer.question, longer.gold_answers, longer.superseded_values) == (
        episode.question,
        episode.gold_answers,
        episode.superseded_values,
    )
    dates = [parse_date(session.date) for session in longer.sessions]
    assert dates == sorted(dates) and parse_date(longer.question_date) > dates[-1]
    assert [s for s in longer.sessions if s.is_evidence] == [s for s in episode.sessions if s.is_evidence]
    for old_entry, new_entry in zip(_timeline(episode), _timeline(longer), strict=True):
        assert longer.sessions[new_entry["session_index"]] == episode.sessions[old_entry["session_index"]]
    assert longer.metadata["mention_sessions"] == [i for i, s in enumerate(longer.sessions) if s.is_evidence]
    assert longer.metadata["n_distractor_sessions"] == episode.metadata["n_distractor_sessions"] + 7
    assert add_distractor_sessions(episode, 0) is episode
    with pytest.raises(ValueError, match="count"):
        add_distractor_sessions(episode, -1)
