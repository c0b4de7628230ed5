"""Distractor topics: plausible chats on other subjects that bury the tracked fact.

The topics and the values their slots are filled with are data (distractors.json).
"""

from __future__ import annotations

from dataclasses import dataclass

from supersede_lib.data.synthetic.tables import load_table


@dataclass(frozen=True)
class DistractorTopic:
    """A chat topic unrelated to the tracked fact. Slots: the keys of SLOT_VALUES and CROSS_DOMAIN_SLOTS."""

    name: str
    exchanges: tuple[tuple[str, str], ...]
    details: tuple[str, ...]  # extra advice sentences for longer sessions and filler


_TABLE = load_table("distractors.json")
DISTRACTOR_TOPICS: tuple[DistractorTopic, ...] = tuple(DistractorTopic(**topic) for topic in _TABLE["topics"])
# Slot -> its values ({destination}, {dish}, {language}).
SLOT_VALUES: dict[str, tuple[str, ...]] = _TABLE["slot_values"]
# Slots that may hold another domain's value: slot -> (that domain, neutral values used instead when
# it is the tracked domain), so a distractor never mentions a tracked value.
CROSS_DOMAIN_SLOTS: dict[str, tuple[str, tuple[str, ...]]] = {
    slot: (entry["domain"], entry["neutral"]) for slot, entry in _TABLE["cross_domain_slots"].items()
}
