"""Fact domains: the kinds of personal fact an episode can track, with their values and wording.

Each domain's value pool, subjects, questions and sentence templates are data (domains.json);
this module holds their shape (`FactDomain`) and the rule explicit wording must follow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from supersede_lib.data.synthetic.tables import load_table

# Phrases that make an update explicit ("X is now Y"). Every explicit update template holds one;
# no implicit template, acknowledgement, retraction or distractor may hold any of them.
EXPLICIT_MARKERS = ("is now", "are now", "has changed to", "changed to")


@dataclass(frozen=True)
class FactDomain:
    """One kind of personal fact with its values and surface templates.

    Templates are `str.format` strings. Slots: {value} (the value stated), {old} (the value it
    replaces), {a_value} ({value} with "a"/"an"), {value_word}, {increment} and {delta} (counts and
    numbers), plus the keys of the chosen subject (e.g. {pet}, {thing}, {plural}).
    """

    name: str
    value_kind: str  # pool | money | count | race_time
    subjects: tuple[dict[str, Any], ...]  # which instance of the fact (the puppy, the 5K, ...)
    questions: tuple[str, ...]
    intro_explicit: tuple[str, ...]
    intro_implicit: tuple[str, ...]
    update_explicit: tuple[str, ...]
    update_implicit: tuple[str, ...]
    requests: tuple[tuple[str, str], ...]  # (user request, assistant reply) said around the fact
    acks: tuple[str, ...]  # assistant acknowledgements that echo {value}
    values: tuple[str, ...] = ()  # the value pool (value_kind "pool")
    previous_questions: tuple[str, ...] = ()  # the value before the latest change
    initial_questions: tuple[str, ...] = ()  # the first value
    relative_up: tuple[str, ...] = ()  # updates that give only the change ({delta}, {increment})
    relative_down: tuple[str, ...] = ()
    retractions: tuple[str, ...] = ()  # domain-specific corrections ({wrong} -> {value})

    @property
    def allows_retraction(self) -> bool:
        return self.value_kind != "count"

    @property
    def capacity(self) -> int:
        """How many distinct values one episode can use."""
        return len(self.values) if self.value_kind == "pool" else 1_000


# Subjects of numeric domains carry their range: money {lo, hi, step} in dollars, race_time {lo, hi}
# in seconds; counts subjects name what is counted ({plural}, {verb_pp}, {verb_past}, {single}, ...).
FACT_DOMAINS: dict[str, FactDomain] = {
    name: FactDomain(name=name, **fields) for name, fields in load_table("domains.json").items()
}
