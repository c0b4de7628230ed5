"""Timeline planning: which values the tracked fact takes, and how each change will be worded.

An episode's fact is introduced once and superseded `n_updates` times; each change is an `Event`
(its value, explicit or implicit wording, said as a relative change, or first stated wrongly and
corrected). Numbers drift the way the fact would (counts grow, personal bests get faster).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from supersede_lib.data.synthetic.config import GeneratorConfig
from supersede_lib.data.synthetic.domains import FactDomain


@dataclass
class Event:
    """One change to the tracked fact, said in one session."""

    kind: str  # introduce | update | retract
    value: Any  # internal value (str, dollars, count, seconds) held after this event
    style: str  # explicit | implicit
    relative: bool = False  # said only as a change ("another one", "up $20,000")
    retracted_value: Any = None  # retract: the wrong value stated first, then corrected
    session_index: int = -1


def _sample_values(rng: random.Random, domain: FactDomain, subject: dict[str, Any], count: int) -> list[Any]:
    """`count` distinct values in timeline order (numbers drift the way the fact would)."""
    kind = domain.value_kind
    if kind == "pool":
        return rng.sample(domain.values, count)
    if kind == "count":
        values = [rng.randint(2, 4)]
        while len(values) < count:
            values.append(values[-1] + rng.choice((1, 1, 1, 2)))
        return values
    if kind == "race_time":  # personal bests only ever get faster
        span = subject["hi"] - subject["lo"]  # start in the slower half; MAX_UPDATES gains stay above lo
        values = [rng.randint(subject["lo"] + span // 2, subject["hi"])]
        while len(values) < count:
            values.append(values[-1] - rng.randint(max(2, span // 60), max(3, span // 12)))
        return values
    if kind == "money":
        low, high, step = subject["lo"], subject["hi"], subject["step"]
        values = [rng.randrange(low, high + 1, step)]
        while len(values) < count:
            candidates = [values[-1] + sign * steps * step for sign in (1, -1) for steps in range(2, 9)]
            candidates = [value for value in candidates if low <= value <= high and value not in values]
            values.append(rng.choice(candidates))
        return values
    raise ValueError(f"FactDomain.value_kind: unknown {kind!r} in domain {domain.name!r}")


def _wrong_value(
    rng: random.Random, domain: FactDomain, subject: dict[str, Any], correct: Any, used: set[Any]
) -> Any:
    """A plausible value that is never true in this episode (said, then corrected to `correct`)."""
    if domain.value_kind == "pool":
        return rng.choice([value for value in domain.values if value not in used])
    if domain.value_kind == "money":  # a misread figure near the right one
        offsets = [sign * k * subject["step"] for sign in (1, -1) for k in range(1, 6)]
        return rng.choice(
            [correct + offset for offset in offsets if correct + offset > 0 and correct + offset not in used]
        )
    if domain.value_kind == "race_time":  # a paused watch reads faster than the official time
        return rng.choice([correct - k for k in range(3, 45) if correct - k not in used])
    raise ValueError(f"domain {domain.name!r} has no retractions")


def plan_events(
    rng: random.Random, config: GeneratorConfig, domain: FactDomain, subject: dict[str, Any], n_updates: int
) -> list[Event]:
    """The introduction and each update: value held afterwards, wording style, relative or retracted."""
    retracts = [domain.allows_retraction and rng.random() < config.retraction_prob for _ in range(n_updates)]
    # Small pools (days of the week) cannot also hold every wrong value: keep the updates, drop corrections.
    while 1 + n_updates + sum(retracts) > domain.capacity:
        retracts[retracts.index(True)] = False
    values = _sample_values(rng, domain, subject, 1 + n_updates)
    used = set(values)
    events = []
    for index, value in enumerate(values):
        style = config.update_style
        if style == "mixed":
            style = rng.choice(("explicit", "implicit"))
        if index == 0:
            events.append(Event("introduce", value, style))
        elif retracts[index - 1]:
            wrong = _wrong_value(rng, domain, subject, value, used)
            used.add(wrong)
            events.append(Event("retract", value, style, retracted_value=wrong))
        else:
            going_up = domain.value_kind != "pool" and value > values[index - 1]
            relative = (
                style == "implicit"
                and domain.value_kind != "pool"
                and bool(domain.relative_up if going_up else domain.relative_down)
                and rng.random() < config.relative_wording_prob
            )
            events.append(Event("update", value, style, relative=relative))
    return events
