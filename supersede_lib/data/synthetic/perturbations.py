"""Perturbations: named, seeded twins of a generated episode whose answer stays determined.

A memory that really tracks superseded facts should answer a perturbed episode as well as the one it
came from; a policy that learned a shortcut (one slot that the latest sentence overwrites, "the last
thing said with 'now'") should not. Each perturbation takes an unperturbed episode and the
`GeneratorConfig` that made it and returns its twin: the same seed and facts with one thing changed.
The twin's id is the original's plus `+<name>` (and `-<parameter>`); its metadata says
`perturbation`, `perturbation_params`, `twin_of` (the unperturbed id, also `base_episode_id`) and
`shortcut_answer` (what an agent taking the shortcut the perturbation targets would answer). The
identity settings (`k_facts` k=1, `distractor_density` count=0) return the episode itself: it is its
own unperturbed twin. Sentences are data: perturbations.json and held_out_domains.json.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from supersede_lib.agent.episode import Episode, Session, Turn
from supersede_lib.data.synthetic.config import (
    DIFFICULTY_LADDER,
    EXPLICIT_TEMPLATED,
    GeneratorConfig,
    config_for_difficulty,
)
from supersede_lib.data.synthetic.domains import FACT_DOMAINS, FactDomain
from supersede_lib.data.synthetic.generator import (
    add_distractor_sessions,
    format_date,
    generate_episode,
    insert_sessions,
    parse_date,
    shift_session_indices,
)
from supersede_lib.data.synthetic.render import (
    canonical,
    distractor_exchanges,
    distractor_slots,
    fill,
    pick_topics,
    to_turns,
    variants,
)
from supersede_lib.data.synthetic.tables import load_table

_TABLE = load_table("perturbations.json")
# Words and phrases that tell a reader a value changed; an indirect update holds none of them.
CHANGE_CUES: tuple[str, ...] = _TABLE["change_cues"]
# Fact domains that no training episode draws from (same shape as FACT_DOMAINS).
HELD_OUT_DOMAINS: dict[str, FactDomain] = {
    name: FactDomain(name=name, **fields) for name, fields in load_table("held_out_domains.json").items()
}
PRESET_NAMES = (*DIFFICULTY_LADDER, EXPLICIT_TEMPLATED)
PAST_TENSE_LEAD_DAYS = (35, 50)  # days between the last session and a past-tense retelling


@dataclass(frozen=True)
class Perturbation:
    """One named perturbation: what it tests, its parameters (name -> allowed values) and its code."""

    name: str
    tests: str
    parameters: Mapping[str, tuple[Any, ...]]
    apply: Callable[..., Episode]  # (episode, config, rng, **parameters) -> twin
    identity: Mapping[str, Any] | None = None  # parameters that leave the episode as it is


# --------------------------------------------------------------------------------------------
# Values of the tracked fact
# --------------------------------------------------------------------------------------------


@dataclass
class _Fact:
    """The tracked fact of a synthetic episode, read back from its metadata."""

    domain: FactDomain
    subject: dict[str, Any]
    held: list[Any]  # the value after each event, in internal form (dollars, seconds, counts)
    retracted: list[Any]
    asked: str  # current | previous | initial


def _internal(domain: FactDomain, text: str) -> Any:
    """A value as `canonical` wrote it, back in the generator's internal form."""
    if domain.value_kind == "money":
        return int(text.lstrip("$").replace(",", ""))
    if domain.value_kind == "race_time":
        minutes, seconds = text.split(":")
        return int(minutes) * 60 + int(seconds)
    if domain.value_kind == "count":
        return int(text)
    return text


def _read_fact(episode: Episode) -> _Fact:
    metadata = episode.metadata
    if "value_timeline" not in metadata or metadata.get("domain") not in FACT_DOMAINS:
        raise ValueError(
            f"episode {episode.episode_id}: perturbations need a synthetic episode of a training domain "
            "(metadata value_timeline and domain)"
        )
    domain = FACT_DOMAINS[metadata["domain"]]
    words = metadata.get("subject", {})
    subject = next(s for s in domain.subjects if all(s.get(key) == value for key, value in words.items()))
    timeline = metadata["value_timeline"]
    return _Fact(
        domain=domain,
        subject=dict(subject),
        held=[_internal(domain, entry["value"]) for entry in timeline],
        retracted=[_internal(domain, e["retracted_value"]) for e in timeline if "retracted_value" in e],
        asked=metadata.get("asked", "current"),
    )


def _fresh_value(rng: random.Random, fact: _Fact, used: set[Any]) -> Any:
    """A value the fact never held in this episode, the way it would next move (counts grow, personal
    bests get faster, money moves by whole steps). A long history can use up a small pool (seven
    weekdays): then an earlier value other than the current one, which keeps the gold determined."""
    domain, current = fact.domain, fact.held[-1]
    if domain.value_kind == "count":
        return rng.choice([current + step for step in (1, 2, 3) if current + step not in used])
    if domain.value_kind == "pool":
        candidates = list(domain.values)
    elif domain.value_kind == "race_time":
        span = fact.subject["hi"] - fact.subject["lo"]
        candidates = [current - step for step in range(max(2, span // 60), max(3, span // 12) + 1)]
    else:
        low, high, step = fact.subject["lo"], fact.subject["hi"], fact.subject["step"]
        candidates = [current + sign * k * step for sign in (1, -1) for k in range(2, 9)]
        candidates = [value for value in candidates if low <= value <= high]
    fresh = [value for value in candidates if value not in used]
    return rng.choice(fresh or [value for value in dict.fromkeys(fact.held) if value != current])


def _answers(fact: _Fact, held: list[Any], shortcut: Any = None) -> dict[str, Any]:
    """gold_answers, gold_text and superseded_values for the held values (as generate_episode computes
    them), with a shortcut's value counted as stale too."""
    asked_value = {"current": held[-1], "previous": held[-2], "initial": held[0]}[fact.asked]
    stale = [value for value in held if value != asked_value] + fact.retracted
    if shortcut is not None and shortcut != asked_value:
        stale.append(shortcut)
    return {
        "gold_answers": variants(fact.domain, asked_value),
        "gold_text": canonical(fact.domain, asked_value),
        "superseded_values": tuple(dict.fromkeys(f for value in stale for f in variants(fact.domain, value))),
    }


# --------------------------------------------------------------------------------------------
# Writing a perturbation's session
# --------------------------------------------------------------------------------------------


def _slots(fact: _Fact, value: Any, current: Any, **extra: str) -> dict[str, Any]:
    said, now = canonical(fact.domain, value), canonical(fact.domain, current)
    slots = {key: item for key, item in fact.subject.items() if isinstance(item, str)}
    slots.update(value=said, a_value=_with_article(said), current=now, a_current=_with_article(now), **extra)
    return slots


def _with_article(phrase: str) -> str:
    return f"{'an' if phrase[:1].lower() in 'aeio' else 'a'} {phrase}"


def _sentence(rng: random.Random, name: str, fact: _Fact, slots: dict[str, Any]) -> str:
    return fill(rng.choice(_TABLE["templates"][name][fact.domain.name]), slots)


def _session_with(
    rng: random.Random, episode: Episode, name: str, sentence: str, evidence: bool
) -> tuple[Turn, ...]:
    """A distractor session (never naming the tracked fact's values) in which the user also says
    `sentence` and the assistant acknowledges it; `evidence` marks that user turn as saying the fact."""
    metadata = episode.metadata
    exchanges = distractor_exchanges(
        rng,
        pick_topics(rng, 1)[0],
        rng.randint(*metadata.get("distractor_exchanges", (2, 3))),
        int(metadata.get("filler_chars", 0)),
        distractor_slots(rng, metadata.get("domain")),
    )
    exchange = exchanges[rng.randrange(len(exchanges))]
    exchange.user = f"{sentence} {exchange.user}"
    exchange.assistant = f"{rng.choice(_TABLE['acks'][name])} {exchange.assistant}"
    exchange.user_has_answer = evidence
    return to_turns(exchanges)


def _insert_after_last_update(
    rng: random.Random, episode: Episode, turns: tuple[Turn, ...]
) -> tuple[list[Session], dict[str, Any], int]:
    """The sessions with `turns` as a new session somewhere after the last update, the metadata with
    its indices shifted, and the new session's index."""
    last_update = episode.metadata["value_timeline"][-1]["session_index"]
    gap = rng.randint(last_update + 1, len(episode.sessions))
    sessions, index_map = insert_sessions(episode, [gap], lambda count: [turns], tag="p")
    new_index = next(i for i in range(len(sessions)) if i not in index_map.values())
    return sessions, shift_session_indices(dict(episode.metadata), index_map), new_index


def _timeline_entry(fact: _Fact, value: Any, previous: Any, index: int, sentence: str, name: str) -> dict:
    entry: dict[str, Any] = {
        "session_index": index,
        "value": canonical(fact.domain, value),
        "variants": list(variants(fact.domain, value)),
        "kind": "update",
        "style": "implicit",
        "relative": False,
        "stated": True,
        "user_sentence": sentence,
        "perturbation": name,
    }
    if fact.domain.value_kind == "count":
        entry["delta"] = value - previous
    return entry


def _twin(episode: Episode, name: str, params: dict[str, Any], suffix: str, **changes: Any) -> Episode:
    """The perturbed episode: a new id, the pairing metadata, and whatever else changed."""
    metadata = dict(changes.pop("metadata", episode.metadata))
    metadata.setdefault("base_episode_id", episode.episode_id)
    metadata.update(
        perturbation=name,
        perturbation_params=dict(params),
        twin_of=episode.metadata.get("base_episode_id", episode.episode_id),
    )
    metadata.setdefault("shortcut_answer", changes.get("gold_text", episode.gold_text))
    return replace(episode, episode_id=f"{episode.episode_id}+{suffix}", metadata=metadata, **changes)


# --------------------------------------------------------------------------------------------
# The perturbations
# --------------------------------------------------------------------------------------------


def _no_change(name: str) -> Callable[..., Episode]:
    """someone_else / considered_not_made: a sentence names another value of the fact, which does not
    become the user's; gold stays, the other value is what a shortcut answers (counted as stale)."""

    def apply(episode: Episode, config: GeneratorConfig, rng: random.Random) -> Episode:
        fact = _read_fact(episode)
        other = _fresh_value(rng, fact, set(fact.held) | set(fact.retracted))
        person = rng.choice(_TABLE["people"])
        sentence = _sentence(rng, name, fact, _slots(fact, other, fact.held[-1], person=person))
        turns = _session_with(rng, episode, name, sentence, evidence=False)
        sessions, metadata, index = _insert_after_last_update(rng, episode, turns)
        metadata.update(
            perturbation_sessions=[index],
            perturbation_sentence=sentence,
            shortcut_answer=canonical(fact.domain, other),
            n_distractor_sessions=metadata.get("n_distractor_sessions", 0) + 1,
        )
        answers = _answers(fact, fact.held, shortcut=other)
        return _twin(episode, name, {}, name, sessions=tuple(sessions), metadata=metadata, **answers)

    return apply


def _new_update(name: str) -> Callable[..., Episode]:
    """reverted / indirect: one more update after the last, in a new session.

    reverted: back to the value before the last change (A -> B -> A: gold A, B stale and what an
    agent that stops at the latest explicit change answers). indirect: a new value said as a plain
    present fact with none of CHANGE_CUES (the shortcut answers the last cued value)."""

    def apply(episode: Episode, config: GeneratorConfig, rng: random.Random) -> Episode:
        fact = _read_fact(episode)
        if name == "reverted":
            value = fact.held[-2]
        else:
            value = _fresh_value(rng, fact, set(fact.held) | set(fact.retracted))
        sentence = _sentence(rng, name, fact, _slots(fact, value, fact.held[-1]))
        turns = _session_with(rng, episode, name, sentence, evidence=True)
        sessions, metadata, index = _insert_after_last_update(rng, episode, turns)
        entry = _timeline_entry(fact, value, fact.held[-1], index, sentence, name)
        metadata.update(
            value_timeline=[*metadata["value_timeline"], entry],
            mention_sessions=sorted([*metadata["mention_sessions"], index]),
            n_updates=metadata["n_updates"] + 1,
            shortcut_answer=canonical(fact.domain, fact.held[-1]),
        )
        answers = _answers(fact, [*fact.held, value])
        return _twin(episode, name, {}, name, sessions=tuple(sessions), metadata=metadata, **answers)

    return apply


def _past_tense_later(episode: Episode, config: GeneratorConfig, rng: random.Random) -> Episode:
    """A new value told in the past tense ("last month I switched to ...") in a new last session,
    dated 35-50 days after the last one, so the change it tells falls after every earlier session;
    the question keeps its distance from the last session. Shortcut: the last value told as it happened."""
    fact = _read_fact(episode)
    value = _fresh_value(rng, fact, set(fact.held) | set(fact.retracted))
    when = rng.choice(_TABLE["past_tense_when"])
    sentence = _sentence(
        rng, "past_tense_later", fact, _slots(fact, value, fact.held[-1], when=when["phrase"])
    )
    turns = _session_with(rng, episode, "past_tense_later", sentence, evidence=True)
    last = parse_date(episode.sessions[-1].date)
    told_on = (last + timedelta(days=rng.randint(*PAST_TENSE_LEAD_DAYS))).replace(
        hour=rng.randint(7, 23), minute=rng.randint(0, 59)
    )
    question_date = told_on + (parse_date(episode.question_date) - last)
    index = len(episode.sessions)
    session = Session(f"{episode.episode_id}-p{index:02d}", format_date(told_on), turns)
    metadata = dict(episode.metadata)
    entry = _timeline_entry(fact, value, fact.held[-1], index, sentence, "past_tense_later")
    metadata.update(
        value_timeline=[*metadata["value_timeline"], {**entry, "changed_days_before": when["days"]}],
        mention_sessions=[*metadata["mention_sessions"], index],
        n_updates=metadata["n_updates"] + 1,
        shortcut_answer=canonical(fact.domain, fact.held[-1]),
    )
    return _twin(
        episode,
        "past_tense_later",
        {},
        "past_tense_later",
        sessions=(*episode.sessions, session),
        question_date=format_date(question_date),
        metadata=metadata,
        **_answers(fact, [*fact.held, value]),
    )


def _mentions_any(text: str, forms: tuple[str, ...]) -> bool:
    return any(re.search(rf"(?<![\w$]){re.escape(form)}(?![\w]|,\d)", text, re.IGNORECASE) for form in forms)


def _other_fact(
    rng: random.Random, config: GeneratorConfig, domain_name: str, avoid: tuple[str, ...]
) -> Episode:
    """A two-session history (introduction, one update) of another fact whose text never says any of
    `avoid` (the asked fact's values), so the asked gold stays where it was."""
    other_config = replace(
        config,
        domains=(domain_name,),
        counts_weight=1.0,
        n_sessions=(2, 2),
        n_updates=(1, 1),
        trailing_distractors=(0, 0),
        previous_value_prob=0.0,
    )
    for _ in range(200):
        other = generate_episode(rng.randrange(2**31), other_config)
        text = "\n".join(turn.content for session in other.sessions for turn in session.turns)
        if not _mentions_any(text, avoid):
            return other
    raise ValueError(f"k_facts: no {domain_name} history avoids the asked values {avoid}")


def _k_facts(episode: Episode, config: GeneratorConfig, rng: random.Random, k: int) -> Episode:
    """k - 1 more facts of other domains, each introduced and updated in two new sessions placed
    anywhere in the history: live distractors with updates of their own. The asked fact, its gold and
    its stale values stay; the shortcut (one slot the latest update overwrites) answers whichever
    fact was updated last."""
    asked = episode.metadata["domain"]
    # Small numbers occur in any chat: a count is told apart by its sentence, not by never being said.
    avoid = () if asked == "counts" else (*episode.gold_answers, *episode.superseded_values)
    others = rng.sample(sorted(name for name in FACT_DOMAINS if name != asked), k - 1)
    placed: list[tuple[int, int, int, tuple[Turn, ...]]] = []  # (gap, order, which fact, turns)
    facts = []
    for fact_number, name in enumerate(others):
        other = _other_fact(rng, config, name, avoid)
        gaps = sorted(rng.choices(range(len(episode.sessions) + 1), k=len(other.sessions)))
        for gap, session in zip(gaps, other.sessions, strict=True):
            turns = tuple(Turn(turn.role, turn.content, False) for turn in session.turns)
            placed.append((gap, len(placed), fact_number, turns))
        facts.append(other)
    placed.sort()
    queue = iter(item[3] for item in placed)
    sessions, index_map = insert_sessions(
        episode, [item[0] for item in placed], lambda count: [next(queue) for _ in range(count)], tag="k"
    )
    # New sessions appear in the order they were placed: the i-th new index is placed[i].
    new_indices = [index for index in range(len(sessions)) if index not in index_map.values()]
    where: dict[int, list[int]] = {}
    for index, item in zip(new_indices, placed, strict=True):
        where.setdefault(item[2], []).append(index)
    other_facts = [
        {
            "domain": other.metadata["domain"],
            "question": other.question,
            "gold_text": other.gold_text,
            "values": [entry["value"] for entry in other.metadata["value_timeline"]],
            "sessions": where[number],
        }
        for number, other in enumerate(facts)
    ]
    metadata = shift_session_indices(dict(episode.metadata), index_map)
    latest = max(other_facts, key=lambda fact: fact["sessions"][-1])
    asked_last = metadata["value_timeline"][-1]["session_index"] > latest["sessions"][-1]
    metadata.update(
        other_facts=other_facts,
        distractor_values=[fact["gold_text"] for fact in other_facts],
        perturbation_sessions=new_indices,
        n_distractor_sessions=metadata.get("n_distractor_sessions", 0) + len(new_indices),
        shortcut_answer=episode.gold_text if asked_last else latest["gold_text"],
    )
    return _twin(episode, "k_facts", {"k": k}, f"k_facts-{k}", sessions=tuple(sessions), metadata=metadata)


def _held_out_vocab(episode: Episode, config: GeneratorConfig, rng: random.Random) -> Episode:
    """The same seed and config, the fact drawn from HELD_OUT_DOMAINS (keys, values and wording no
    training episode holds). A policy that memorised the training vocabulary (one notes key per
    trained domain) has nothing to key the new fact to."""
    seed = episode.metadata["seed"]
    fresh = generate_episode(
        seed, replace(config, domains=(), counts_weight=1.0), fact_domains=HELD_OUT_DOMAINS
    )
    new_id = f"{episode.episode_id}+held_out_vocab"
    sessions = tuple(
        replace(session, session_id=new_id + session.session_id[len(fresh.episode_id) :])
        for session in fresh.sessions
    )
    metadata = {**fresh.metadata, "held_out_vocab": True}
    twin = _twin(
        episode,
        "held_out_vocab",
        {},
        "held_out_vocab",
        metadata=metadata,
        **{key: getattr(fresh, key) for key in ("question", "question_date", "gold_answers", "gold_text")},
        superseded_values=fresh.superseded_values,
        asks_previous_value=fresh.asks_previous_value,
        sessions=sessions,
    )
    return twin


def _distractor_density(episode: Episode, config: GeneratorConfig, rng: random.Random, count: int) -> Episode:
    """`count` more distractor sessions through the history: `add_distractor_sessions` with its own
    seed, so a twin is the long episode an `extra_distractor_sessions` block asks (a `seed` parameter
    does not apply). The shortcut that fails here is a memory that keeps only
    the last few sessions."""
    longer = add_distractor_sessions(episode, count)
    metadata = {
        **longer.metadata,
        "perturbation": "distractor_density",
        "perturbation_params": {"count": count},
        "twin_of": episode.episode_id,
        "shortcut_answer": episode.gold_text,
    }
    return replace(longer, metadata=metadata)


def _last_update_position(
    episode: Episode, config: GeneratorConfig, rng: random.Random, position: str
) -> Episode:
    """The same sessions on the same dates, in another order: `early` puts every session that says
    the fact first (the last update early, every distractor after it), `last` moves the last update
    into the last session. A memory that forgets over many sessions fails `early`; one that only
    reads the end of the history gains on `last`."""
    events = [entry["session_index"] for entry in episode.metadata["value_timeline"]]
    rest = [index for index in range(len(episode.sessions)) if index not in events]
    if position == "early":
        order = events + rest
    else:
        order = [index for index in range(len(episode.sessions)) if index != events[-1]] + [events[-1]]
    sessions = tuple(
        replace(episode.sessions[source], date=episode.sessions[target].date)
        for target, source in enumerate(order)
    )
    index_map = {source: target for target, source in enumerate(order)}
    metadata = shift_session_indices(dict(episode.metadata), index_map)
    metadata["mention_sessions"] = sorted(metadata["mention_sessions"])
    return _twin(
        episode,
        "last_update_position",
        {"position": position},
        f"last_update_position-{position}",
        sessions=sessions,
        metadata=metadata,
    )


PERTURBATIONS: dict[str, Perturbation] = {
    item.name: item
    for item in (
        Perturbation("k_facts", "several tracked facts, one asked", {"k": (1, 2, 3, 4)}, _k_facts, {"k": 1}),
        Perturbation("someone_else", "an update about someone else", {}, _no_change("someone_else")),
        Perturbation(
            "considered_not_made", "a change considered, not made", {}, _no_change("considered_not_made")
        ),
        Perturbation("reverted", "A -> B -> A", {}, _new_update("reverted")),
        Perturbation("indirect", "an update with no change cue", {}, _new_update("indirect")),
        Perturbation("past_tense_later", "an update told in the past tense later", {}, _past_tense_later),
        Perturbation("held_out_vocab", "keys and domains never seen in training", {}, _held_out_vocab),
        Perturbation(
            "distractor_density",
            "more distractor sessions",
            {"count": tuple(range(33))},
            _distractor_density,
            {"count": 0},
        ),
        Perturbation(
            "last_update_position",
            "the last update early or last",
            {"position": ("early", "last")},
            _last_update_position,
        ),
    )
}


def check_perturbation(name: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The perturbation's parameters, checked; `seed` (an int >= 0) is allowed for every one.

    Raises ValueError naming the unknown perturbation or parameter and what is allowed."""
    if name not in PERTURBATIONS:
        raise ValueError(f"unknown perturbation {name!r}; known: {', '.join(PERTURBATIONS)}")
    allowed = PERTURBATIONS[name].parameters
    params = dict(params or {})
    for key, value in params.items():
        if key == "seed":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"perturbation {name}: seed must be an integer >= 0, got {value!r}")
        elif key not in allowed:
            known = ", ".join([*allowed, "seed"])
            raise ValueError(f"perturbation {name}: unknown parameter {key!r}; allowed: {known}")
        elif isinstance(value, bool) or value not in allowed[key]:
            raise ValueError(
                f"perturbation {name}: {key} must be one of {_show(allowed[key])}, got {value!r}"
            )
    missing = [key for key in allowed if key not in params]
    if missing:
        raise ValueError(f"perturbation {name}: missing parameter(s) {missing}")
    return params


def _show(values: tuple[Any, ...]) -> str:
    ints = all(isinstance(value, int) for value in values) and len(values) > 6
    return f"{values[0]}..{values[-1]}" if ints else str(values)


def perturb(episode: Episode, name: str, *, config: GeneratorConfig | None = None, **params: Any) -> Episode:
    """The twin of `episode` under perturbation `name`, deterministic in (episode, name, params).

    `config` is the GeneratorConfig that made the episode (its difficulty preset when unset); the
    random stream is `params["seed"]` or, by default, one named by the episode id and the perturbation."""
    params = check_perturbation(name, params)
    perturbation = PERTURBATIONS[name]
    settings = {key: value for key, value in params.items() if key != "seed"}
    if perturbation.identity is not None and settings == dict(perturbation.identity):
        return episode
    if config is None:
        difficulty = episode.metadata.get("difficulty", "medium")
        config = config_for_difficulty(difficulty) if difficulty in PRESET_NAMES else GeneratorConfig()
    label = ",".join(f"{key}={value}" for key, value in sorted(settings.items()))
    rng = random.Random(params.get("seed", f"{episode.episode_id}:{name}:{label}"))
    return perturbation.apply(episode, config, rng, **settings)
