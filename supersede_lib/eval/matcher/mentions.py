"""What one mention of a value says: denied, asked, context (another time than the one asked), or asserted.

Rules read the tokens around the mention within its clause or sentence, with the marker lists of
`words` (negations, doubts, numeric qualifiers, past and forward framing). A denied mention conveys
nothing; a context mention is history, not the answer; an asked one asserts nothing (package doc).
A `Hit` is where a mention sits, and whether it was an exact run of the value or the overlap fallback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from supersede_lib.eval.matcher.numbers import is_number
from supersede_lib.eval.matcher.text import SENTENCE, AnalysedText
from supersede_lib.eval.matcher.words import (
    AUXILIARIES,
    CLAUSE_WORDS,
    CONTRACTED_DENIALS,
    DENIAL_FRAMES,
    DOUBTS,
    ENDINGS,
    FORWARD_AFTER,
    FORWARD_BEFORE,
    LIST_SEPARATORS,
    MARKER_NEXT_EXCEPTIONS,
    NEGATION_IDIOM_NEXT,
    NEGATIONS,
    NOT_MENTIONED_AFTER,
    NOT_MENTIONED_FRAMES,
    NUMERIC_QUALIFIERS,
    NUMERIC_QUALIFIERS_AFTER,
    PAST_AFTER,
    PAST_AFTER_ACROSS_CLAUSES,
    PAST_BEFORE,
    PAST_FRAMES,
    PAST_SCAN_BOUNDARIES,
    PREDICATE_DENIALS,
    RANGE_WORDS,
)

Framing = Literal["past", "forward"]
"""Which framing makes a mention history: "past" for a question about the current value ("you used to
live in Denver"), "forward" for one about an earlier value ("before I moved to Minneapolis")."""
CONTEXT_WINDOW = 3
"""How many tokens before (or after) a mention a negation or "previously" marker may sit."""
DOUBT_WINDOW = 6
"""How many tokens before a mention a doubt ("I doubt that you moved to Denver") may sit."""


@dataclass(frozen=True)
class Hit:
    """Token positions of the answer that one mention of a value occupies."""

    positions: frozenset[int]
    exact: bool


def is_asked(text: AnalysedText, hit: Hit) -> bool:
    """The mention sits in a question ("Did you move to Denver?"): it asserts nothing."""
    return all(text.questions[position] for position in hit.positions)


def _marker_before(
    text: AnalysedText,
    start: int,
    markers: Sequence[tuple[str, ...]],
    window: int,
    boundaries: frozenset[str] = frozenset(),
) -> bool:
    """A marker ends within `window` tokens before `start`, in the same clause."""
    position = start
    for _ in range(window):
        if position == 0 or text.breaks[position]:
            return False
        position -= 1
        following = text.words[position + 1] if position + 1 < len(text.words) else ""
        for marker in markers:
            begin = position - len(marker) + 1
            if begin >= 0 and text.words[begin : position + 1] == marker:
                if following not in NEGATION_IDIOM_NEXT | MARKER_NEXT_EXCEPTIONS.get(marker, frozenset()):
                    return True
        if text.words[position] in CLAUSE_WORDS or text.words[position] in boundaries:
            return False
    return False


def _marker_after(
    text: AnalysedText,
    end: int,
    markers: Sequence[tuple[str, ...]],
    window: int,
    across_clauses: frozenset[tuple[str, ...]] = frozenset(),
) -> bool:
    """A marker starts within `window` tokens after `end`, in the same sentence ("Tom, then Sarah")."""
    crossed_break = False
    for position in range(end, min(end + window, len(text.words))):
        word = text.words[position]
        if text.breaks[position] == SENTENCE or word in CLAUSE_WORDS:
            return False
        crossed_break = crossed_break or bool(text.breaks[position]) or word in LIST_SEPARATORS
        for marker in markers:
            if text.words[position : position + len(marker)] == marker:
                return not crossed_break or marker in across_clauses
    return False


def _denied_after(text: AnalysedText, end: int) -> bool:
    """Denied by what follows in the same clause: "Denver is wrong", "Denver was never mentioned"."""
    position = end
    saw_auxiliary = False
    while position < len(text.words) and not text.breaks[position]:
        word = text.words[position]
        if word in AUXILIARIES and not saw_auxiliary:
            saw_auxiliary = True
            position += 1
            continue
        following = text.words[position + 1] if position + 1 < len(text.words) else ""
        if following in NEGATION_IDIOM_NEXT:
            return False
        return word in CONTRACTED_DENIALS or (saw_auxiliary and word in PREDICATE_DENIALS)
    return False


def is_negated(text: AnalysedText, start: int, end: int) -> bool:
    """Negated, doubted or denied ("not 25", "I doubt it's 25", "25 is wrong", "It is not the case that
    ... 25"), or named only to say it never came up ("I don't recall you mentioning 25", "25 is
    unrelated to your question"): the mention says the value is not the answer."""
    if _marker_before(text, start, NEGATIONS, CONTEXT_WINDOW):
        return True
    if _framed_by(text, start, DENIAL_FRAMES) or _framed_by(text, start, NOT_MENTIONED_FRAMES):
        return True
    if _marker_before(text, start, DOUBTS, DOUBT_WINDOW) or _denied_after(text, end):
        return True
    return any(
        text.words[end : end + len(marker)] == marker and not any(text.breaks[end : end + len(marker)])
        for marker in NOT_MENTIONED_AFTER
    )


def is_denied(text: AnalysedText, start: int, end: int) -> bool:
    """Negated (`is_negated`); for numbers also qualified ("over 25", "25 or more"), a change ("raised
    by 25") or one end of a range ("3-4", "3 to 4")."""
    if is_negated(text, start, end):
        return True
    if not is_number(text.words[start]):
        return False
    return (
        _marker_before(text, start, NUMERIC_QUALIFIERS, 1)
        or any(
            text.words[end : end + len(marker)] == marker and not text.breaks[end]
            for marker in NUMERIC_QUALIFIERS_AFTER
        )
        or _in_range(text, start, end)
    )


def _framed_by(text: AnalysedText, start: int, frames: Sequence[tuple[str, ...]]) -> bool:
    """One of `frames` earlier in the same comma-free clause: "It is not the case that ... Denver",
    "Back then you lived in Denver". Frames govern the clause they open, however long."""
    position = start
    while position > 0 and not text.breaks[position] and text.words[position - 1] not in CLAUSE_WORDS:
        position -= 1
        for frame in frames:
            if (
                tuple(text.words[position : position + len(frame)]) == frame
                and position + len(frame) <= start
            ):
                return True
    return False


def _in_range(text: AnalysedText, start: int, end: int) -> bool:
    """The number is one end of a range: another number joined by a hyphen (read as no break: "3-4")
    or by a range word ("3 to 4"). A range offers no single number. "From 3 to 4" is a change, not a
    range: its later number is the value (and "from" makes the earlier one history)."""
    words, breaks = text.words, text.breaks

    def joined(first: int) -> bool:  # words[first] and a number after it form a range
        if first < 0 or first + 1 >= len(words) or breaks[first + 1] or not is_number(words[first]):
            return False
        if is_number(words[first + 1]):
            return True
        return (
            words[first + 1] in RANGE_WORDS
            and first + 2 < len(words)
            and not breaks[first + 2]
            and is_number(words[first + 2])
            and not (first > 0 and words[first - 1] == "from")
        )

    def between(first: int) -> bool:  # "between 3 and 4"
        return 0 < first and words[first - 1] == "between" and words[first + 1 : first + 2] == ("and",)

    low = start - 2 if start >= 2 and words[start - 1] in {"and", *RANGE_WORDS} else start
    return joined(end - 1) or joined(start - 1) or joined(low) or between(low) or between(start)


def is_context(text: AnalysedText, start: int, end: int, framing: Framing) -> bool:
    """Framed as another time than the one asked about (module doc): history, not the answer."""
    if framing == "past":
        return (
            _framed_by(text, start, PAST_FRAMES)
            or _marker_before(text, start, PAST_BEFORE, CONTEXT_WINDOW, PAST_SCAN_BOUNDARIES)
            or _marker_after(text, end, PAST_AFTER, CONTEXT_WINDOW, PAST_AFTER_ACROSS_CLAUSES)
            or _ended_after(text, end)
        )
    return _marker_before(text, start, FORWARD_BEFORE, CONTEXT_WINDOW) or _marker_after(
        text, end, FORWARD_AFTER, CONTEXT_WINDOW, frozenset(FORWARD_AFTER)
    )


def _ended_after(text: AnalysedText, end: int) -> bool:
    """An ending closes the value's clause within CONTEXT_WINDOW tokens ("things with Theo are over"):
    the value is history. The ending must close the clause, so "Amara is over the moon"
    ends nothing."""
    for position in range(end, min(end + CONTEXT_WINDOW, len(text.words))):
        if text.breaks[position]:
            return False
        for ending in ENDINGS:
            closes = position + len(ending)
            if text.words[position:closes] == ending and (closes == len(text.words) or text.breaks[closes]):
                return True
    return False
