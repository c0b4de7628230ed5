"""Procedural supersession timelines: deterministic by seed, no model calls.

Each episode is a multi-session chat in which one fact about the user (where they live,
their car, how many Korean restaurants they have tried, ...) is introduced, later
superseded one or more times, and buried among distractor sessions on other topics. The
question asks for the current value (or, optionally, an earlier one), and every episode
records the stale values so the stale-answer penalty of the reward can be computed.

The pieces: `config` (knobs and difficulty presets), `domains` and `distractors` (what is
said, from JSON tables), `timeline` (which values, worded how), `render` (the chat text).
This module places the sessions in time and assembles the `Episode`. All randomness flows
through one `random.Random(seed)`, so an episode is a pure function of (seed, config).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from datetime import datetime, timedelta
from typing import Any

from supersede_lib.agent.episode import Episode, Session, Turn
from supersede_lib.data.synthetic.config import GeneratorConfig, config_for_difficulty, resolve_config
from supersede_lib.data.synthetic.domains import FACT_DOMAINS, FactDomain
from supersede_lib.data.synthetic.render import (
    EventRendering,
    canonical,
    distractor_exchanges,
    distractor_slots,
    event_exchanges,
    fill,
    pick_topics,
    to_turns,
    variants,
)
from supersede_lib.data.synthetic.timeline import Event, plan_events

EPISODE_SEED_STRIDE = 1_000_000  # generate_episodes: episode i of base seed s uses s * stride + i

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


# --------------------------------------------------------------------------------------------
# Dates
# --------------------------------------------------------------------------------------------


def format_date(moment: datetime) -> str:
    """LongMemEval's date form, e.g. '2023/05/30 (Tue) 23:40' (locale-independent)."""
    return f"{moment:%Y/%m/%d} ({_WEEKDAYS[moment.weekday()]}) {moment:%H:%M}"


def parse_date(text: str) -> datetime:
    """Inverse of `format_date`; the weekday in parentheses is ignored."""
    match = re.fullmatch(r"(\d{4}/\d{2}/\d{2}) \(\w{3}\) (\d{2}:\d{2})", text.strip())
    if not match:
        raise ValueError(f"date {text!r}: expected the form '2023/05/30 (Tue) 23:40'")
    return datetime.strptime(f"{match[1]} {match[2]}", "%Y/%m/%d %H:%M")


def _session_dates(
    rng: random.Random, config: GeneratorConfig, count: int
) -> tuple[list[datetime], datetime]:
    """Strictly increasing session dates (at least a day apart, waking hours), then the question's."""

    def at_random_time(day: datetime) -> datetime:
        return day.replace(hour=rng.randint(7, 23), minute=rng.randint(0, 59))

    day = datetime(2023, rng.randint(1, 6), rng.randint(1, 28))
    dates = []
    for _ in range(count):
        dates.append(at_random_time(day))
        day += timedelta(days=rng.randint(*config.days_between_sessions))
    question_date = at_random_time(dates[-1] + timedelta(days=rng.randint(1, 30)))
    return dates, question_date


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def _pick_domain(
    rng: random.Random, config: GeneratorConfig, fact_domains: Mapping[str, FactDomain]
) -> FactDomain:
    names = list(config.domains or fact_domains)
    weights = [config.counts_weight if name == "counts" else 1.0 for name in names]
    return fact_domains[rng.choices(names, weights=weights)[0]]


def _render_sessions(
    rng: random.Random,
    config: GeneratorConfig,
    domain: FactDomain,
    subject: dict[str, Any],
    events: list[Event],
    n_sessions: int,
    episode_id: str,
) -> tuple[list[Session], list[EventRendering], str]:
    """Place the events among distractor sessions and write every session out (+ the question date)."""
    trailing = min(rng.randint(*config.trailing_distractors), n_sessions - len(events))
    positions = sorted(rng.sample(range(n_sessions - trailing), len(events)))
    for event, position in zip(events, positions, strict=True):
        event.session_index = position
    event_at = {event.session_index: index for index, event in enumerate(events)}

    dates, question_date = _session_dates(rng, config, n_sessions)
    topics = iter(pick_topics(rng, n_sessions - len(events)))
    sessions: list[Session] = []
    renderings: dict[int, EventRendering] = {}
    for session_index in range(n_sessions):
        if session_index in event_at:
            index = event_at[session_index]
            old = events[index - 1].value if index else None
            exchanges, renderings[index] = event_exchanges(rng, config, domain, subject, events[index], old)
        else:
            n_exchanges = rng.randint(*config.distractor_exchanges)
            slots = distractor_slots(rng, domain.name)
            exchanges = distractor_exchanges(rng, next(topics), n_exchanges, config.filler_chars, slots)
        session_id = f"{episode_id}-s{session_index:02d}"
        sessions.append(Session(session_id, format_date(dates[session_index]), to_turns(exchanges)))
    return sessions, [renderings[index] for index in range(len(events))], format_date(question_date)


def _timeline_entries(
    domain: FactDomain, events: list[Event], renderings: list[EventRendering]
) -> list[dict[str, Any]]:
    """metadata["value_timeline"]: one JSON-able entry per event, in session order."""
    timeline = []
    for index, (event, rendering) in enumerate(zip(events, renderings, strict=True)):
        entry: dict[str, Any] = {
            "session_index": event.session_index,
            "value": canonical(domain, event.value),
            "variants": list(variants(domain, event.value)),
            "kind": event.kind,
            "style": event.style,
            "relative": event.relative,
            "stated": rendering.stated,
            "user_sentence": rendering.user_sentence,
        }
        if domain.value_kind == "count" and index:
            entry["delta"] = event.value - events[index - 1].value
        if event.retracted_value is not None:
            entry["retracted_value"] = canonical(domain, event.retracted_value)
            entry["retracted_variants"] = list(variants(domain, event.retracted_value))
        timeline.append(entry)
    return timeline


def generate_episode(
    seed: int,
    config: GeneratorConfig | str = "medium",
    *,
    fact_domains: Mapping[str, FactDomain] | None = None,
) -> Episode:
    """One synthetic knowledge-update episode; the same (seed, config) always gives the same episode.

    `fact_domains` replaces the table the tracked fact is drawn from (the held-out vocabulary of the
    perturbations); left unset, it is `FACT_DOMAINS` and `config.domains` narrows it.
    """
    config = resolve_config(config)
    rng = random.Random(seed)
    episode_id = f"syn-{config.name}-{seed}"
    n_sessions = rng.randint(*config.n_sessions)
    n_updates = rng.randint(*config.n_updates)
    domain = _pick_domain(rng, config, FACT_DOMAINS if fact_domains is None else fact_domains)
    subject = rng.choice(domain.subjects)
    subject_words = {key: item for key, item in subject.items() if isinstance(item, str)}
    events = plan_events(rng, config, domain, subject, n_updates)
    sessions, renderings, question_date = _render_sessions(
        rng, config, domain, subject, events, n_sessions, episode_id
    )

    held = [event.value for event in events]  # the value after each event
    asked = "current"
    if n_updates and domain.previous_questions and rng.random() < config.previous_value_prob:
        asked = rng.choice(("previous", "initial"))
    asked_value = {"current": held[-1], "previous": held[-2] if n_updates else None, "initial": held[0]}[
        asked
    ]
    question_pool = {
        "current": domain.questions,
        "previous": domain.previous_questions,
        "initial": domain.initial_questions or domain.previous_questions,
    }[asked]
    question = fill(rng.choice(question_pool), subject_words)

    stale = [value for value in held if value != asked_value]
    stale += [event.retracted_value for event in events if event.retracted_value is not None]
    superseded = tuple(dict.fromkeys(form for value in stale for form in variants(domain, value)))
    metadata = {
        "generator": "supersede_lib.data.synthetic",
        "seed": seed,
        "difficulty": config.name,
        "domain": domain.name,
        "subject": subject_words,
        "update_style": config.update_style,
        "n_updates": n_updates,
        "n_distractor_sessions": n_sessions - len(events),
        "asked": asked,
        "value_timeline": _timeline_entries(domain, events, renderings),
        "mention_sessions": [index for index, session in enumerate(sessions) if session.is_evidence],
        "distractor_exchanges": list(config.distractor_exchanges),
        "filler_chars": config.filler_chars,
    }
    return Episode(
        episode_id=episode_id,
        sessions=tuple(sessions),
        question=question,
        question_date=question_date,
        gold_answers=variants(domain, asked_value),
        superseded_values=superseded,
        asks_previous_value=asked != "current",
        source=f"synthetic:{config.name}",
        question_type="knowledge-update",
        gold_text=canonical(domain, asked_value),
        metadata=metadata,
    )


def episode_seed(seed: int, index: int) -> int:
    """The seed of episode `index` in `generate_episodes(..., seed=seed)` (disjoint across base seeds)."""
    if seed < 0 or not 0 <= index < EPISODE_SEED_STRIDE:
        raise ValueError(
            f"need seed >= 0 and 0 <= index < {EPISODE_SEED_STRIDE}, got seed={seed}, index={index}"
        )
    return seed * EPISODE_SEED_STRIDE + index


def generate_episodes(n: int, seed: int = 0, difficulty: str = "medium", **overrides: Any) -> list[Episode]:
    """`n` episodes of a difficulty preset; `overrides` replace GeneratorConfig fields.

    Episode i uses `episode_seed(seed, i)`, so `generate_episode(episode_seed(seed, i), config)`
    rebuilds it alone, and sets from different base seeds never share an episode.
    """
    if n < 0:
        raise ValueError(f"generate_episodes: n must be >= 0, got {n}")
    config = episodes_config(difficulty, **overrides)
    return [generate_episode(episode_seed(seed, index), config) for index in range(n)]


def episodes_config(difficulty: str = "medium", **overrides: Any) -> GeneratorConfig:
    """The config `generate_episodes(n, seed, difficulty, **overrides)` generates with (perturbations
    rebuild parts of an episode with the config that made it)."""
    config = config_for_difficulty(difficulty)
    known = {item.name for item in fields(GeneratorConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(
            f"generate_episodes: unknown GeneratorConfig field(s) {unknown}; known: {sorted(known)}"
        )
    return replace(config, **overrides) if overrides else config


def add_distractor_sessions(episode: Episode, count: int, *, seed: int | None = None) -> Episode:
    """The same episode with `count` more distractor sessions spread through its history.

    For the scale study: the tracked fact, its sessions and the question stay as they were; new
    sessions get dates strictly between their neighbours and never mention the tracked domain's
    values. Metadata session indices (value_timeline, mention_sessions) are shifted to match.
    The result is a different episode, so its id gets a "+x{count}" suffix; metadata
    "base_episode_id" keeps the original id for pairing short and long runs. Works on any
    Episode; only synthetic ones name the tracked domain that new sessions must avoid.
    """
    if count < 0:
        raise ValueError(f"add_distractor_sessions: count must be >= 0, got {count}")
    if count == 0:
        return episode
    rng = random.Random(f"{episode.episode_id}:{count}" if seed is None else seed)
    metadata = dict(episode.metadata)
    tracked = metadata.get("domain")
    exchanges_range = tuple(metadata.get("distractor_exchanges", (2, 3)))
    filler_chars = int(metadata.get("filler_chars", 0))
    # Gap g sits just before original session g (g == len(sessions): before the question).
    gaps = sorted(rng.choices(range(len(episode.sessions) + 1), k=count))

    def distractors(how_many: int) -> list[tuple[Turn, ...]]:
        return [
            to_turns(
                distractor_exchanges(
                    rng, topic, rng.randint(*exchanges_range), filler_chars, distractor_slots(rng, tracked)
                )
            )
            for topic in pick_topics(rng, how_many)
        ]

    new_sessions, index_map = insert_sessions(episode, gaps, distractors, tag="x")
    metadata = shift_session_indices(metadata, index_map)
    if "n_distractor_sessions" in metadata:
        metadata["n_distractor_sessions"] = metadata["n_distractor_sessions"] + count
    metadata["extra_distractor_sessions"] = metadata.get("extra_distractor_sessions", 0) + count
    metadata.setdefault("base_episode_id", episode.episode_id)
    return replace(
        episode, episode_id=f"{episode.episode_id}+x{count}", sessions=tuple(new_sessions), metadata=metadata
    )


def insert_sessions(
    episode: Episode, gaps: list[int], write_turns: Callable[[int], list[tuple[Turn, ...]]], *, tag: str
) -> tuple[list[Session], dict[int, int]]:
    """The episode's sessions with new ones at `gaps`, and where each original session went.

    Gap g sits just before original session g (g == len(sessions): before the question); new
    sessions of one gap are dated evenly between their neighbours. `write_turns(count)` writes the
    turns of one gap's `count` sessions; it is called gap by gap in order, so a caller drawing from
    one random stream gets the same text for the same gaps. New session ids are the episode id,
    `-{tag}` and the session's new index.
    """
    dates = [parse_date(session.date) for session in episode.sessions] + [parse_date(episode.question_date)]
    new_sessions: list[Session] = []
    index_map: dict[int, int] = {}
    for original_index in range(len(episode.sessions) + 1):
        inserted = gaps.count(original_index)
        if inserted:
            end = dates[original_index]
            start = dates[original_index - 1] if original_index else end - timedelta(days=7 * inserted)
            span = (end - start) / (inserted + 1)
            if span < timedelta(minutes=1):
                raise ValueError(
                    f"episode {episode.episode_id}: sessions {original_index - 1} and {original_index} "
                    "are too close in time to insert sessions between them"
                )
            for offset, turns in enumerate(write_turns(inserted), start=1):
                moment = (start + span * offset).replace(second=0, microsecond=0)
                session_id = f"{episode.episode_id}-{tag}{len(new_sessions):02d}"
                new_sessions.append(Session(session_id=session_id, date=format_date(moment), turns=turns))
        if original_index < len(episode.sessions):
            index_map[original_index] = len(new_sessions)
            new_sessions.append(episode.sessions[original_index])
    return new_sessions, index_map


def shift_session_indices(metadata: dict[str, Any], index_map: dict[int, int]) -> dict[str, Any]:
    """Metadata whose session indices (value_timeline, mention_sessions) follow sessions that moved."""
    metadata = dict(metadata)
    if "value_timeline" in metadata:
        metadata["value_timeline"] = [
            {**entry, "session_index": index_map[entry["session_index"]]}
            for entry in metadata["value_timeline"]
        ]
    if "mention_sessions" in metadata:
        metadata["mention_sessions"] = [index_map[index] for index in metadata["mention_sessions"]]
    return metadata
