"""Answers that name the gold without saying, consistently, that it is the asked value.

A mention of the gold can be asserted and still not answer: the answer takes it back, or garbles
whose value it is. Each rule reads the whole answer, after the mentions are found:

- contradicted: the answer asserts the gold and also denies that same value ("You go to Planet
  Fitness. You don't go to Planet Fitness."), or a later sentence takes back the value named just
  before it ("Planet Fitness. Scratch that."). A careful reader cannot tell which it means. A denied
  rival is no contradiction ("Planet Fitness, not Gold's Gym"), nor a number's qualifier ("$925, so
  don't spend more than $925": a limit, not a denial of the amount).
- garbled owner: the gold is made the owner of the asked thing and then its value ("Ingrid's
  girlfriend is Ingrid"): the answer names the right value but says it belongs to something else.
  "Ingrid's your girlfriend" (one mention, "'s" as "is") and "Your girlfriend is Ingrid, and Ingrid's
  birthday is in May" keep their credit. "I am <value>" is left alone: in the user's voice it answers
  ("I am a UX designer" for the job title), and the two cannot be told apart by words.
"""

from __future__ import annotations

from collections.abc import Sequence

from supersede_lib.eval.matcher.mentions import Hit, is_asked, is_negated
from supersede_lib.eval.matcher.numbers import is_number
from supersede_lib.eval.matcher.stems import occurrences
from supersede_lib.eval.matcher.text import SENTENCE, AnalysedText
from supersede_lib.eval.matcher.words import COPULAS, NUMERIC_QUALIFIERS, RETRACTIONS

OWNER_TO_VALUE_WORDS = 4
"""How many words may stand between a possessor and the copula of its clause ("Ingrid's new
girlfriend's name is ...")."""


def _mention_ends(text: AnalysedText, values: Sequence[tuple[str, ...]]) -> list[int]:
    """Where each occurrence of each value ends."""
    return [start + len(value) for value in values for start in occurrences(text.words, value)]


def is_contradicted(
    text: AnalysedText,
    gold_values: Sequence[tuple[str, ...]],
    stale_values: Sequence[tuple[str, ...]],
    gold_hits: Sequence[Hit],
) -> bool:
    """The answer asserts the gold and denies it too, or retracts the gold it just named (module doc)."""
    if not gold_hits:
        return False
    for value in gold_values:
        for start in occurrences(text.words, value):
            span = frozenset(range(start, start + len(value)))
            if any(span == hit.positions for hit in gold_hits):
                continue
            if is_number(text.words[start]) and _qualified_before(text, start):
                continue
            if not is_asked(text, Hit(span, True)) and is_negated(text, start, start + len(value)):
                return True
    return _retracted(text, gold_values, stale_values)


def _qualified_before(text: AnalysedText, start: int) -> bool:
    """A numeric qualifier ends right before the number ("over 925", "more than 925")."""
    return any(
        start >= len(marker) and tuple(text.words[start - len(marker) : start]) == marker
        for marker in NUMERIC_QUALIFIERS
    )


def _retracted(
    text: AnalysedText, gold_values: Sequence[tuple[str, ...]], stale_values: Sequence[tuple[str, ...]]
) -> bool:
    """A retraction opens a sentence whose nearest earlier value mention is the gold's."""
    gold_ends, stale_ends = _mention_ends(text, gold_values), _mention_ends(text, stale_values)
    for position in range(1, len(text.words)):
        if text.breaks[position] != SENTENCE:
            continue
        if not any(tuple(text.words[position : position + len(m)]) == m for m in _retraction_openings()):
            continue
        last_gold = max((end for end in gold_ends if end <= position), default=-1)
        last_stale = max((end for end in stale_ends if end <= position), default=-1)
        if last_gold > last_stale:
            return True
    return False


def _retraction_openings() -> tuple[tuple[str, ...], ...]:
    """The retractions, also after an opening "no" or "actually" ("No, scratch that")."""
    return RETRACTIONS + tuple((lead, *marker) for lead in ("no", "actually") for marker in RETRACTIONS)


def is_garbled_owner(text: AnalysedText, gold_hits: Sequence[Hit]) -> bool:
    """Every asserted gold mention is made the value of a thing the same value owns (module doc)."""
    return bool(gold_hits) and all(_owns_itself(text, hit) for hit in gold_hits)


def _owns_itself(text: AnalysedText, hit: Hit) -> bool:
    """The same words, as a possessor, open the clause whose copula leads to this mention."""
    start, end = min(hit.positions), max(hit.positions) + 1
    value = text.words[start:end]
    if start == 0 or text.words[start - 1] not in COPULAS:
        return False
    copula = start - 1
    for owner in range(max(0, copula - OWNER_TO_VALUE_WORDS - len(value)), copula):
        owner_end = owner + len(value)
        if owner_end > copula or text.words[owner:owner_end] != value or not text.possessors[owner_end - 1]:
            continue
        if not any(text.breaks[owner + 1 : start + 1]):
            return True
    return False
