"""What counts as a second candidate beside the gold: the pieces the hedge rules (`hedges`) weigh.

A hedge is an answer that spreads its bet over several values of the gold's kind. Much in an answer
looks like a second value and is not one: filler, the gold spelled again, a superseded value (the stale
penalty's business), a negated or asked item, a date beside a non-date gold, a time stamp, a statement
of the current date, a rate worked out from the answer, a place that refines the value ("Denver,
Colorado"), a word that only names the asked kind ("a hobbyist"). `HedgeContext` holds what these
rules need about one answer, built once by `hedge_context`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from supersede_lib.eval.matcher.dates import (
    clock_time_at,
    current_date_statements,
    is_calendar_number,
    is_date_words,
    is_timestamp_weekday,
    makes_a_date,
    neighbour_words,
)
from supersede_lib.eval.matcher.mentions import Framing, Hit, is_context, is_denied
from supersede_lib.eval.matcher.numbers import is_number
from supersede_lib.eval.matcher.segments import Segment, list_items
from supersede_lib.eval.matcher.stems import content_stems, occurrences
from supersede_lib.eval.matcher.text import AnalysedText, analyse
from supersede_lib.eval.matcher.words import MONTHS, NEGATIONS, REGION_WORDS, STOPWORDS, WEEKDAYS

MIN_SLOT_STEM_CHARS = 4
"""A question word this long or longer names the asked kind in the words built on it ("hobbyist")."""
MAX_PROPER_NAME_TOKENS = 4
"""A capitalised rival item up to this long counts as a second candidate ("Denver and Salt Lake City")."""
MAX_RATE_UNIT_TOKENS = 2
"""How many unit words may stand between a number and its "per" ("2.4 minutes per mile")."""
DERIVED_OPENERS = frozenset({"which", "ie"})
"""Words that open a clause describing what was just said (", which is ...", ", i.e. ...")."""


@dataclass(frozen=True)
class HedgeContext:
    """What the hedge rules need about one answer: its text, items and the gold's shape."""

    text: AnalysedText
    segments: list[Segment]
    covered: frozenset[int]
    history: frozenset[int]
    gold_numbers: frozenset[str]
    gold_size: int
    dates_count: bool
    weekday_gold: bool  # the gold's only date part is a day of the week ("Wednesday")
    framing: Framing
    question_stems: frozenset[str] = frozenset()  # the asked slot's own words ("hobby")
    question_numbers: frozenset[str] = frozenset()  # numbers the question names ("my best 10K")
    gold_is_rate: bool = False  # the gold is itself a rate ("9 minutes per mile")
    gold_clocks: frozenset[tuple[str, str]] = frozenset()  # the gold's clock times as number pairs
    date_statements: frozenset[int] = frozenset()  # positions stating the current date


def hedge_context(
    text: AnalysedText,
    gold_values: list[tuple[str, ...]],
    stale_values: list[tuple[str, ...]],
    gold_hits: list[Hit],
    stale_hits: list[Hit],
    framing: Framing,
    question: str = "",
) -> HedgeContext:
    """What the hedge rules read about this answer: its items, the positions the gold and the stale
    mentions already cover, where superseded values stand (history), and the gold's shape (numbers,
    size in content words, date, weekday, rate, clock times)."""
    gold_positions = {position for hit in gold_hits for position in hit.positions}
    question_words = analyse(question).words
    history = {
        position
        for value in stale_values
        for start in occurrences(text.words, value)
        for position in range(start, start + len(value))
    } - gold_positions
    covered = gold_positions | {position for hit in stale_hits for position in hit.positions}
    return HedgeContext(
        text=text,
        segments=list_items(text),
        covered=frozenset(covered),
        history=frozenset(history),
        gold_numbers=frozenset(word for value in gold_values for word in value if is_number(word)),
        gold_size=max(1, min(len(content_stems(value)) for value in gold_values)),
        dates_count=any(makes_a_date(word) for value in gold_values for word in value),
        weekday_gold=all(
            not (word in MONTHS or is_calendar_number(word, ())) for value in gold_values for word in value
        )
        and any(word in WEEKDAYS for value in gold_values for word in value),
        framing=framing,
        question_stems=frozenset(content_stems(question_words)),
        question_numbers=frozenset(word for word in question_words if is_number(word)),
        gold_is_rate=any("per" in value for value in gold_values),
        gold_clocks=frozenset(
            (value[0], value[1]) for value in gold_values if len(value) == 2 and all(map(is_number, value))
        ),  # "30:14" is read as the two numbers 30 and 14
        date_statements=current_date_statements(text),
    )


def offered_number(context: HedgeContext, position: int, dates_count: bool) -> bool:
    """A number the answer offers besides the gold's own (negated or context ones excluded)."""
    text = context.text
    word = text.words[position]
    if not is_number(word) or position in context.covered:
        return False
    clock = clock_time_at(text, position)
    if word in context.gold_numbers and (clock is None or clock in context.gold_clocks):
        return False  # the gold's own number; not a part of another time ("30:15" beside gold 30:14)
    if word in context.question_numbers or (not context.gold_is_rate and _is_derived_rate(text, position)):
        return False
    if text.questions[position] or position in context.history or position in context.date_statements:
        return False
    if not dates_count and is_calendar_number(word, neighbour_words(text.words, position)):
        return False
    return not (
        is_denied(text, position, position + 1) or is_context(text, position, position + 1, context.framing)
    )


def candidate_number(text: AnalysedText, position: int) -> str | tuple[tuple[str, str], int]:
    """What an offered number counts as among the candidates: itself, or its place in the clock time it
    is part of, so that "30:15" beside gold 30:14 counts twice, as "31:02" does."""
    clock = clock_time_at(text, position)
    if clock is None:
        return text.words[position]
    return clock, 0 if position + 1 < len(text.words) and text.colons[position + 1] else 1


def _is_derived_rate(text: AnalysedText, position: int) -> bool:
    """The number is a rate worked out from the answer (", which is 2.4 minutes per mile"): "per"
    follows within MAX_RATE_UNIT_TOKENS tokens, in a clause that opens with a DERIVED_OPENERS word. Such
    a pace or price describes the answer and is no second candidate for it. A rate offered
    as an alternative ("30:14 per race or 31:02 per race") is still a candidate: a rule that dropped
    every rate would let a policy hedge by adding "per race" to each guess."""
    clause_start = position
    while clause_start > 0 and not text.breaks[clause_start]:
        clause_start -= 1
    if text.words[clause_start] not in DERIVED_OPENERS:
        return False
    following = text.words[position + 1 : position + 2 + MAX_RATE_UNIT_TOKENS]
    for offset, word in enumerate(following, start=position + 1):
        if text.breaks[offset]:
            return False
        if word == "per":
            return True
    return False


def _date_is_a_rival(context: HedgeContext, words: Sequence[str]) -> bool:
    """A date item rivals the gold only when the gold is a date of the same kind: for a weekday gold
    another weekday, not the calendar date written beside it ("Wednesday, April 19, 2023")."""
    if not context.dates_count:
        return False
    return not context.weekday_gold or any(word in WEEKDAYS for word in words)


def not_a_candidate(context: HedgeContext, segment: Segment) -> bool:
    """Filler, the gold again, a history value, a negated or asked item, a date beside a non-date, a
    time stamp's weekday ("2023/03/04 (Sat)"), or a statement of the current date."""
    text = context.text
    positions = set(range(segment.start, segment.end))
    words = text.words[segment.start : segment.end]
    return (
        not content_stems(words)
        or positions <= context.covered
        or bool(positions & context.history)
        or holds_negation(words)
        or all(text.questions[position] for position in positions)
        or (is_date_words(words) and not _date_is_a_rival(context, words))
        or is_timestamp_weekday(text, segment.start, segment.end)
        or _names_the_slot(context, words)
        or positions <= context.date_statements
    )


def _names_the_slot(context: HedgeContext, words: Sequence[str]) -> bool:
    """Every content word is the question's own or built on it ("a hobbyist" for "which hobby ..."):
    the item names the asked kind, not a second value of it."""
    stems = content_stems(words)
    return bool(stems) and all(
        any(word.startswith(asked) for asked in context.question_stems if len(asked) >= MIN_SLOT_STEM_CHARS)
        for word in stems
    )


def holds_negation(words: Sequence[str]) -> bool:
    """Some negation marker stands among `words`: the item denies, so it offers no candidate."""
    return any(
        tuple(words[index : index + len(marker)]) == marker
        for marker in NEGATIONS
        for index in range(len(words))
    )


def is_rival_value(context: HedgeContext, new: Sequence[int], guessing: bool = False) -> bool:
    """New words that look like another value of the gold's kind: content words of the gold's size."""
    words = [context.text.words[position] for position in new]
    if not words or any(word in STOPWORDS for word in words):
        return False
    # in a bare list ("salsa dancing, pottery") or beside a guess word, an item may be a word longer
    bare_list = not set(context.text.words) & STOPWORDS
    if len(words) <= context.gold_size + (bare_list or guessing):
        return True
    return len(words) <= MAX_PROPER_NAME_TOKENS and all(context.text.capitals[position] for position in new)


def comma_rival(context: HedgeContext, new: Sequence[int]) -> bool:
    """A second value across a comma alone ("Denver, Chicago"; "3, 4"), not a refinement ("Denver,
    Colorado", "Acme, Inc.") nor history ("moved from Detroit, ..."): a capitalised name that is no
    region or company suffix, or any short item when the whole answer is a bare list (no function
    words at all)."""
    text = context.text
    words = [text.words[position] for position in new]
    start, end = new[0], new[-1] + 1
    if any(word in REGION_WORDS for word in words) or is_context(text, start, end, context.framing):
        return False
    if is_denied(text, start, end):
        return False
    if all(text.capitals[position] for position in new) and not is_date_words(words):
        return True
    return not set(text.words) & STOPWORDS


def co_subject(text: AnalysedText, segment: Segment) -> list[int]:
    """The words a segment opens with when a plural verb follows them and a bare "and"/"or" joins it
    to the gold: "Salsa dancing and cycling are my hobbies" offers "cycling" beside the gold, whatever
    the rest says ("The employer is Spotify, and the raise is small" offers nothing)."""
    joined = segment.start > 0 and text.words[segment.start - 1] in {"and", "or"}
    if not joined or text.breaks[segment.start - 1]:
        return []
    lead: list[int] = []
    for position in range(segment.start, segment.end):
        if text.words[position] in {"are", "were"}:
            return lead
        if text.words[position] in STOPWORDS:
            return []
        lead.append(position)
    return []
