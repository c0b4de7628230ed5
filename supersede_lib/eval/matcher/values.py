"""Where an answer mentions a value: exact runs of its tokens, else a token-overlap fallback.

A value is found as a whole run of tokens (`stems.occurrences`), with its words written apart
("any time Fitness") or, for an activity, by its doer ("climber" for "rock climbing"). Mentions that
are denied, that are a time stamp's weekday or a date's day, or (with a framing) context are dropped.
Only a value with no exact run at all falls back to token overlap, so a denied mention cannot come back
that way. `conveys_value` is this search alone, without the scoring rules.
"""

from __future__ import annotations

from collections.abc import Sequence

from supersede_lib.eval.matcher.dates import is_day_of_a_date, is_timestamp_weekday
from supersede_lib.eval.matcher.mentions import Framing, Hit, is_context, is_denied
from supersede_lib.eval.matcher.numbers import is_number
from supersede_lib.eval.matcher.segments import list_items
from supersede_lib.eval.matcher.stems import (
    activity_forms,
    agent_nouns,
    content_stems,
    occurrences,
    split_word_spans,
    stem,
)
from supersede_lib.eval.matcher.text import LIST, AnalysedText, analyse

OVERLAP_RECALL_THRESHOLD = 0.75
"""Token-overlap fallback: share of the value's content tokens the text must hold."""
OVERLAP_MIN_CONTENT_TOKENS = 2
"""Values with fewer content tokens are matched exactly only (no overlap fallback)."""


def value_words(value: str) -> tuple[str, ...]:
    """A value's tokens in canonical spelling: the form every rule compares."""
    return analyse(value).words


def _overlap_hit(
    text: AnalysedText, value: Sequence[str], avoid_stems: frozenset[str], taken: frozenset[int] = frozenset()
) -> Hit | None:
    """Token-overlap fallback for sentence-long values.

    Eligible when the value has >= OVERLAP_MIN_CONTENT_TOKENS content tokens (stopwords ignored,
    plurals stripped). Only its distinguishing tokens count (those not in `avoid_stems`, i.e. not shared
    with the competing gold or stale values), every number of the value must be present, and the
    share of distinguishing content tokens present must reach OVERLAP_RECALL_THRESHOLD. Negated tokens
    ("not the suburbs") are not present. The hit covers the present distinguishing tokens and the
    value's shared tokens in the same list item ("Detroit suburbs": both; "Detroit, or the suburbs": not
    "Detroit"). Words inside an exact mention of any listed value (`taken`) are that mention's: another
    spelling of it must not find them again ("down from 30:32" is not "30 minutes 32 seconds" anew).
    """
    content = set(content_stems(value))
    if len(content) < OVERLAP_MIN_CONTENT_TOKENS:
        return None
    needed = {token for token in content if token not in avoid_stems}
    if not needed:
        return None
    present_positions = {
        position
        for position, word in enumerate(text.words)
        if stem(word) in content and not is_denied(text, position, position + 1)
    }
    distinguishing = {
        position for position in present_positions - taken if stem(text.words[position]) in needed
    }
    present = {stem(text.words[position]) for position in distinguishing}
    all_present = {stem(word) for word in text.words}
    if any(is_number(token) and token not in all_present for token in content):
        return None  # "48 minutes" is not "31 minutes 48 seconds": every number of the value is needed
    if len(present) / len(needed) < OVERLAP_RECALL_THRESHOLD:
        return None
    segments = list_items(text)
    item_of = {
        position: index
        for index, segment in enumerate(segments)
        for position in range(segment.start, segment.end)
    }
    items = {item_of.get(position) for position in distinguishing}
    covered = {position for position in present_positions if item_of.get(position) in items}
    return Hit(frozenset(covered), exact=False)


def is_activity(value: str) -> bool:
    """A lower-case value whose last word is an -ing activity ("rock climbing", "beekeeping"): the
    person-noun of that word names it too ("I'm a climber"). Capitalised values are names ("Empire State
    Building" is no building work), and a value whose head is another word ("managing director",
    "engineering manager") is a title, not an activity."""
    analysed = analyse(value)
    return bool(analysed.words) and not any(analysed.capitals) and bool(agent_nouns(analysed.words[-1]))


def agent_noun_spans(text: AnalysedText, value: Sequence[str]) -> list[tuple[int, int]]:
    """Where the text names the activity `value` by its doer or its bare stem: "climber" or "rock
    climber" for "rock climbing" (plurals too), "woodwork" for "woodworking" (`activity_forms`). The
    value's other words may stand before the form or be left out: a climber climbs, whatever the rock."""
    forms = activity_forms(value[-1])
    spans = []
    for position, word in enumerate(text.words):
        if stem(word) not in forms:
            continue
        start = position
        for modifier in reversed(value[:-1]):
            if start == 0 or text.breaks[start] or stem(text.words[start - 1]) != stem(modifier):
                break
            start -= 1
        spans.append((start, position + 1))
    return spans


def value_hits(
    text: AnalysedText,
    value: Sequence[str],
    avoid_stems: frozenset[str],
    framing: Framing | None,
    taken: frozenset[int] = frozenset(),
    activity: bool = False,
) -> list[Hit]:
    """Mentions of `value`: exact runs (or, for an `activity`, its doer: see `agent_noun_spans`)
    neither denied nor (with a `framing`) context; else overlap."""
    numbers_only = all(map(is_number, value))  # a time ("20:20") is read as its two numbers
    spans = [
        (start, start + len(value))
        for start in occurrences(text.words, value)
        if not (numbers_only and any(text.breaks[p] >= LIST for p in range(start + 1, start + len(value))))
    ]  # numbers across a list or sentence break are two items ("20:20; 20:00" holds 20:20 once)
    spans += split_word_spans(text.words, text.breaks, value)
    spans += agent_noun_spans(text, value) if activity else []
    hits = [
        Hit(frozenset(range(start, end)), exact=True)
        for start, end in spans
        if not is_denied(text, start, end)
        and not is_timestamp_weekday(text, start, end)
        and not is_day_of_a_date(text, start, end)
        and not (framing and is_context(text, start, end, framing))
    ]
    if spans:
        return hits  # an exact mention that was denied must not come back through the overlap fallback
    fallback = _overlap_hit(text, value, avoid_stems, taken)
    return [fallback] if fallback else []


def conveys_value(text: str, value: str) -> bool:
    """Whether `text` mentions `value` as a value.

    Rule 1 (variant match): the normalized value occurs as a contiguous run of whole tokens, so
    "4" does not match "14" or "400" and "$400,000" does not match "$4,000", and is not denied (module
    doc: "not Detroit", "Detroit is wrong", and for numbers "over 25", "25 or more" do not convey it;
    "about 25" does).
    Rule 2 (overlap fallback, only when rule 1 finds no occurrence at all): see `_overlap_hit`;
    e.g. gold "You have tried four Korean restaurants" is conveyed by "You've tried 4 Korean
    restaurants" but not by "You have tried five Korean restaurants".
    A value that normalizes to nothing (only articles or punctuation) is never conveyed.
    A past-tense mention ("moved from Detroit") still conveys Detroit: notes that say so hold it.
    """
    value_text = analyse(value)
    if not value_text.words:
        return False
    hits = value_hits(analyse(text), value_text.words, frozenset(), framing=None, activity=is_activity(value))
    return bool(hits)
