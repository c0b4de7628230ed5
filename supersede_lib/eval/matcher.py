"""The programmatic matcher and the supersession reward (paper Section 3, "Reward").

The paper grades answers without a judge model: `r_cur = 1[the answer conveys the current value]`,
`r_stale = -1[the answer asserts a superseded value]` (inert when no superseded values are known),
and `reward = r_cur + lambda * r_stale`. Because the same matcher is the GRPO training signal it has
to be hard to game, so every rule that withholds credit is spelled out next to the code below.
Tokenisation and the canonical spelling of values live in `matcher_text`, the word tables both read
in `matcher_words`.

Layers, each usable alone:

- `conveys_value(text, value)`: does the text mention the value as a value (not negated, not
  qualified)? Used for answers and for "do the notes still hold it".
- `says_unknown(text)`: does the text say the information is not available?
- `score_answer(...)`: the verdict and reward, with the anti-gaming rules.

A mention of a value is one of:

- denied: "not Denver", "no longer in Denver", "I doubt it's Denver", "anything but Denver",
  "Denver is wrong", "Denver was never mentioned"; for numbers also qualified ("over 25", "5 or
  more") or a change rather than a level ("raised by $41,500"). Denied mentions convey nothing.
- asked: in a sentence that ends with a question mark ("Did you move to Denver?"): asserts nothing.
- context: framed as another time than the one asked about. For a question about the current value,
  past framing ("you used to live in Denver", "moved from Detroit", "finally free of T-Mobile",
  "Tom, then Sarah", "things with Theo are over"); for a question about an earlier value
  (`asks_previous_value`), forward framing ("before I moved to Minneapolis", "now $400,000"). Context
  mentions are history, not the answer.
- asserted: anything else.

A statement of the current date ("The current date is 2023/05/26 (Fri) 17:20, and ...") is the answer
noting when it is asked: no value in it rivals the gold or asserts a stale one (`_date_statements`, v7).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from supersede_lib.agent.episode import Episode
from supersede_lib.eval.matcher_attribution import Attribution, attributed_to_another
from supersede_lib.eval.matcher_sessions import other_turn_topics, said_of_another_topic
from supersede_lib.eval.matcher_text import (
    LIST,
    SENTENCE,
    AnalysedText,
    activity_forms,
    agent_nouns,
    analyse,
    clock_periods_as_colons,
    content_stems,
    is_number,
    normalize,
    occurrences,
    split_word_spans,
    stem,
)
from supersede_lib.eval.matcher_words import (
    ADVICE_WORDS,
    AUXILIARIES,
    CLAUSE_WORDS,
    CONTRACTED_DENIALS,
    CURRENT_DATE_FRAMES,
    DATE_STATEMENT_LINKS,
    DENIAL_FRAMES,
    DOUBTS,
    ENDINGS,
    FORWARD_AFTER,
    FORWARD_BEFORE,
    GUESS_MARKERS,
    GUESS_WORDS,
    HEDGE_WORDS,
    LIST_SEPARATORS,
    MARKER_NEXT_EXCEPTIONS,
    MONTHS,
    NEGATION_IDIOM_NEXT,
    NEGATIONS,
    NUMERIC_QUALIFIERS,
    NUMERIC_QUALIFIERS_AFTER,
    OFFER_OPENINGS,
    PAST_AFTER,
    PAST_AFTER_ACROSS_CLAUSES,
    PAST_BEFORE,
    PAST_FRAMES,
    PAST_SCAN_BOUNDARIES,
    PREDICATE_DENIALS,
    RANGE_WORDS,
    REFERENCE_WORDS,
    REGION_WORDS,
    SPEAKER_LABEL,
    STOPWORDS,
    UNKNOWN,
    WEEKDAYS,
)

Verdict = Literal["correct", "stale", "ambiguous", "wrong"]
Framing = Literal["past", "forward"]

MATCHER_VERSION = "v7"
"""The rule round this matcher is (docs/preregistration.md, "Matcher v2" ... "Matcher v7"): each round is
frozen before a fresh blind batch is read and graded once on it (labels/blind_batches.jsonl)."""
MAX_ANSWER_CHARS = 400
"""Answers longer than this (stripped) earn no r_cur: dumping text is not answering."""
OVERLAP_RECALL_THRESHOLD = 0.75
"""Token-overlap fallback: share of the value's content tokens the text must hold."""
OVERLAP_MIN_CONTENT_TOKENS = 2
"""Values with fewer content tokens are matched exactly only (no overlap fallback)."""
MAX_CANDIDATES = 2
"""More distinct candidate values of the gold's kind than this (gold included) is a hedge."""
CONTEXT_WINDOW = 3
"""How many tokens before (or after) a mention a negation or "previously" marker may sit."""
DOUBT_WINDOW = 6
"""How many tokens before a mention a doubt ("I doubt that you moved to Denver") may sit."""
MIN_SLOT_STEM_CHARS = 4
"""A question word this long or longer names the asked kind in the words built on it ("hobbyist")."""
MAX_PROPER_NAME_TOKENS = 4
"""A capitalised rival item up to this long counts as a second candidate ("Denver and Salt Lake City")."""
MAX_RATE_UNIT_TOKENS = 2
"""How many unit words may stand between a number and its "per" ("2.4 minutes per mile")."""
DERIVED_OPENERS = frozenset({"which", "ie"})
"""Words that open a clause describing what was just said (", which is ...", ", i.e. ...")."""
MIN_SHORT_FORM_CHARS = 3
"""A short form's every word is this long or longer: a fragment ("CR") names nothing alone."""


_SENTENCE_END = re.compile(r"[.!?\n]+")
# Inside a sentence, a claim can sit beside the "not sure": "Elena eats buttermilk, but I'm not sure".
_CLAUSE_BREAK = re.compile(r"[;:]|\s(?=but\b)", re.IGNORECASE)


@dataclass(frozen=True)
class Score:
    """One graded answer. `reason` says why credit was withheld ("" when nothing was)."""

    verdict: Verdict
    answered_current: bool
    asserted_stale: bool
    reward: float
    reason: str = ""


@dataclass(frozen=True)
class _Segment:
    """One list item: tokens [start, end), and what separates it from the item before.

    `strong_before`: a list word ("and", "or"), list punctuation (";", "/", a new line) or a sentence
    end; a comma alone is not strong ("Denver, Colorado" is one answer).
    """

    start: int
    end: int
    or_before: bool
    sentence_before: bool
    strong_before: bool
    gives_advice: bool = False  # "but you might want to consider a hybrid": advice, not an answer
    is_label: bool = False  # followed by a colon ("gym: Blink Fitness"): names a thing, offers no value


@dataclass(frozen=True)
class _Hit:
    """Token positions of the answer that one mention of a value occupies."""

    positions: frozenset[int]
    exact: bool


# --------------------------------------------------------------------------- mentions


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


def _is_denied(text: AnalysedText, start: int, end: int) -> bool:
    """Negated, doubted or denied ("not 25", "I doubt it's 25", "25 is wrong", "It is not the case that
    ... 25"); for numbers, qualified ("over 25", "25 or more"), a change ("raised by 25") or one end of
    a range ("3-4", "3 to 4")."""
    if _marker_before(text, start, NEGATIONS, CONTEXT_WINDOW) or _framed_by(text, start, DENIAL_FRAMES):
        return True
    if _marker_before(text, start, DOUBTS, DOUBT_WINDOW) or _denied_after(text, end):
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


def _is_context(text: AnalysedText, start: int, end: int, framing: Framing) -> bool:
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
    the value is history (matcher v5). The ending must close the clause, so "Amara is over the moon"
    ends nothing."""
    for position in range(end, min(end + CONTEXT_WINDOW, len(text.words))):
        if text.breaks[position]:
            return False
        for ending in ENDINGS:
            closes = position + len(ending)
            if text.words[position:closes] == ending and (closes == len(text.words) or text.breaks[closes]):
                return True
    return False


def _is_timestamp_weekday(text: AnalysedText, start: int, end: int) -> bool:
    """A weekday right after a date ("2023/04/17 (Mon) 21:04", read as "2023 April 17 (Mon)"): part of a
    time stamp, not a day given as the answer."""
    before = text.words[max(0, start - 3) : start]
    return (
        all(word in WEEKDAYS for word in text.words[start:end])
        and len(before) == 3
        and all(word.isdigit() or word in MONTHS for word in before)
        and any(_is_calendar_number(word, ()) for word in before)
    )


def _date_statements(text: AnalysedText) -> frozenset[int]:
    """Positions of clauses that state the current date or time ("The current date is 2023/05/26 (Fri)
    17:20", "Today is Friday, 23 February 2023"): a frame from CURRENT_DATE_FRAMES followed only by date
    and time words, within one sentence. The answer notes when it is asked; neither the clause, nor its
    numbers, nor its weekday is a second candidate for the gold (matcher v7). A clause whose words are not
    all date words ("Today is my pottery class") states no date, and one that an "or" joins to what
    follows ("Today is Tuesday or Thursday") offers a choice."""
    words = text.words
    positions: set[int] = set()
    for start in range(len(words)):
        for frame in CURRENT_DATE_FRAMES:
            end = start + len(frame)
            if tuple(words[start:end]) != frame:
                continue
            stop = end
            while stop < len(words) and text.breaks[stop] < SENTENCE and _is_date_part(text, stop):
                stop += 1
            names_a_date = any(map(_names_a_date, words[end:stop]))
            offers_a_choice = stop < len(words) and words[stop] in {"or", "nor"}
            if names_a_date and not offers_a_choice:
                positions.update(range(start, stop))
            break
    return frozenset(positions)


def _is_date_part(text: AnalysedText, position: int) -> bool:
    """A word a date or time is written with: a month, a weekday, a link ("at", "pm"), a year, a day beside
    a month, or a part of a clock time. Other numbers end the statement, so a list of counts cannot hide
    in one ("Today is Friday, 3, 4 and 5")."""
    words = text.words
    word = words[position]
    if word in MONTHS or word in WEEKDAYS or word in DATE_STATEMENT_LINKS:
        return True
    return is_number(word) and (
        _is_calendar_number(word, _neighbours(words, position)) or _clock_time_at(text, position) is not None
    )


def _neighbours(words: Sequence[str], position: int) -> tuple[str, ...]:
    """The words just before and after `position`: a month there makes a small number a day."""
    return tuple(words[max(0, position - 1) : position]) + tuple(words[position + 1 : position + 2])


def _is_day_of_a_date(text: AnalysedText, start: int, end: int) -> bool:
    """A bare number that is the day of a date ("2023/06/04", read as "2023 June 4"): not a count."""
    if end - start != 1 or not text.words[start].isdigit() or int(text.words[start]) > 31:
        return False
    neighbours = text.words[max(0, start - 1) : start] + text.words[end : end + 1]
    return any(word in MONTHS for word in neighbours)


def _is_someone_elses(text: AnalysedText, start: int, end: int, not_others: frozenset[str]) -> bool:
    """The value is given to a named other ("Sara's kitchen budget is $41,000", "the HR's statement
    about research scientist"): said of someone else, it answers nothing about the user. (A value
    that is itself a possessor, "Genentech's work", still names the value: it is not dropped.) `not_others`: words whose possessive is no other
    (the question's own, "Kitten's name is Ziggy" for "my kitten's name"; and the episode's values)."""
    position = start
    while position > 0 and not text.breaks[position]:
        position -= 1
        word = text.words[position]
        if text.possessors[position] and text.capitals[position] and word not in not_others:
            return True
    return False


def _hit_is_someone_elses(text: AnalysedText, hit: _Hit, not_others: frozenset[str]) -> bool:
    return hit.exact and _is_someone_elses(text, min(hit.positions), max(hit.positions) + 1, not_others)


def _attribution(
    text: AnalysedText,
    values: list[tuple[str, ...]],
    not_others: frozenset[str],
    question: str,
    activities: frozenset[tuple[str, ...]],
) -> Attribution:
    """What `attributed_to_another` reads: the words that name no other, the question's stems, and
    the spans where a value is mentioned and not denied."""
    spans = [
        (start, start + len(value))
        for value in values
        for start in occurrences(text.words, value)
        if not _is_denied(text, start, start + len(value))
    ]
    spans += [
        span
        for value in values
        if value in activities
        for span in _agent_noun_spans(text, value)
        if not _is_denied(text, *span)
    ]
    question_stems = frozenset(content_stems(analyse(question).words))
    return Attribution(not_others, question_stems, tuple(sorted(set(spans))))


def _hit_is_attributed(text: AnalysedText, hit: _Hit, attribution: Attribution) -> bool:
    """An exact mention said of another person or thing (`matcher_attribution`)."""
    return hit.exact and attributed_to_another(
        text, (min(hit.positions), max(hit.positions) + 1), attribution
    )


def _hit_is_another_topics(
    text: AnalysedText, hit: _Hit, other_topics: frozenset[str], question_stems: frozenset[str]
) -> bool:
    """An exact mention owned by a thing of another turn of the sessions (`matcher_sessions`, v6)."""
    return hit.exact and said_of_another_topic(
        text, min(hit.positions), max(hit.positions) + 1, other_topics, question_stems
    )


def _is_asked(text: AnalysedText, hit: _Hit) -> bool:
    """The mention sits in a question ("Did you move to Denver?"): it asserts nothing."""
    return all(text.questions[position] for position in hit.positions)


def _overlap_hit(
    text: AnalysedText, value: Sequence[str], avoid_stems: frozenset[str], taken: frozenset[int] = frozenset()
) -> _Hit | None:
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
        if stem(word) in content and not _is_denied(text, position, position + 1)
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
    segments = _segments(text)
    item_of = {
        position: index
        for index, segment in enumerate(segments)
        for position in range(segment.start, segment.end)
    }
    items = {item_of.get(position) for position in distinguishing}
    covered = {position for position in present_positions if item_of.get(position) in items}
    return _Hit(frozenset(covered), exact=False)


def _is_activity(value: str) -> bool:
    """A lower-case value whose last word is an -ing activity ("rock climbing", "beekeeping"): the
    person-noun of that word names it too ("I'm a climber"). Capitalised values are names ("Empire State
    Building" is no building work), and a value whose head is another word ("managing director",
    "engineering manager") is a title, not an activity."""
    analysed = analyse(value)
    return bool(analysed.words) and not any(analysed.capitals) and bool(agent_nouns(analysed.words[-1]))


def _agent_noun_spans(text: AnalysedText, value: Sequence[str]) -> list[tuple[int, int]]:
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


def _value_hits(
    text: AnalysedText,
    value: Sequence[str],
    avoid_stems: frozenset[str],
    framing: Framing | None,
    taken: frozenset[int] = frozenset(),
    activity: bool = False,
) -> list[_Hit]:
    """Mentions of `value`: exact runs (or, for an `activity`, its doer: see `_agent_noun_spans`)
    neither denied nor (with a `framing`) context; else overlap."""
    numbers_only = all(map(is_number, value))  # a time ("20:20") is read as its two numbers
    spans = [
        (start, start + len(value))
        for start in occurrences(text.words, value)
        if not (numbers_only and any(text.breaks[p] >= LIST for p in range(start + 1, start + len(value))))
    ]  # numbers across a list or sentence break are two items ("20:20; 20:00" holds 20:20 once)
    spans += split_word_spans(text.words, text.breaks, value)
    spans += _agent_noun_spans(text, value) if activity else []
    hits = [
        _Hit(frozenset(range(start, end)), exact=True)
        for start, end in spans
        if not _is_denied(text, start, end)
        and not _is_timestamp_weekday(text, start, end)
        and not _is_day_of_a_date(text, start, end)
        and not (framing and _is_context(text, start, end, framing))
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
    hits = _value_hits(
        analyse(text), value_text.words, frozenset(), framing=None, activity=_is_activity(value)
    )
    return bool(hits)


def says_unknown(text: str) -> bool:
    """Whether the text says the asked information is not available.

    Phrase patterns over the normalized text: "I don't know", "you haven't mentioned", "no
    information", "not in my notes", "can't tell", "my notes don't say", "not specified" ...
    """
    return bool(text and text.strip()) and bool(UNKNOWN.search(normalize(text)))


# --------------------------------------------------------------------------- hedges


def _segments(text: AnalysedText) -> list[_Segment]:
    """List items: token runs split at punctuation and at "or"/"and"."""
    segments: list[_Segment] = []
    start: int | None = None
    saw_or = saw_list_word = False
    gap = 0
    for position, word in enumerate(text.words):
        if start is not None and (text.breaks[position] or word in LIST_SEPARATORS):
            segments.append(
                _Segment(
                    start,
                    position,
                    saw_or,
                    gap == SENTENCE,
                    saw_list_word or gap >= LIST,
                    _gives_advice(text.words[start:position]),
                    text.colons[position],
                )
            )
            start, saw_or, saw_list_word, gap = None, False, False, 0
        gap = max(gap, text.breaks[position])
        if word in LIST_SEPARATORS:
            saw_or = saw_or or word in {"or", "nor"}
            saw_list_word = True
        elif start is None:
            start = position
    if start is not None:
        segments.append(
            _Segment(
                start,
                len(text.words),
                saw_or,
                gap == SENTENCE,
                saw_list_word or gap >= LIST,
                _gives_advice(text.words[start:]),
            )
        )
    return segments


def _item_of(segments: list[_Segment], hit: _Hit) -> tuple[int, int] | None:
    """Indices of the first and last segment the hit overlaps."""
    first, last = min(hit.positions), max(hit.positions)
    inside = [
        index for index, segment in enumerate(segments) if segment.start <= last and segment.end > first
    ]
    return (inside[0], inside[-1]) if inside else None


def _walk(
    segments: list[_Segment], item: tuple[int, int], direction: int, words: Sequence[str] = ()
) -> Iterator[tuple[int, bool, bool, bool]]:
    """Segments beside the item, nearest first, with whether an "or" / a sentence end / a strong
    separator lies in between. An item that gives advice ends the walk unless an "or" joins it to the
    answer ("Denver, but consider Boston or Austin" offers one answer; "Denver, or consider Boston" two).
    A label ends the walk too: what lies beyond it is another notes line's ("gym: Blink Fitness\nrest
    days: 7"; "eat: fruits, vegetables, and nuts ... gym: Blink Fitness"). But under a label (given the
    text's `words`) the walk goes on through the lines under the same label and skips the others:
    "partner: Amara\nex: Theo\npartner: Theo" offers two partners."""
    if direction > 0 and segments[item[1]].is_label:
        return  # "staff engineer: promoted": what follows the gold's colon is about the gold
    own_label = _label_before(segments, item[0], words)
    index = item[1] + 1 if direction > 0 else item[0] - 1
    or_between = sentence_between = strong_between = False
    while 0 <= index < len(segments):
        boundary = segments[index if direction > 0 else index + 1]
        or_between = or_between or boundary.or_before
        sentence_between = sentence_between or boundary.sentence_before
        strong_between = strong_between or boundary.strong_before
        if own_label:
            segment = segments[index]
            key = (
                _segment_words(segment, words) if segment.is_label else _label_before(segments, index, words)
            )
            if key != own_label or segment.is_label:
                index += direction  # only lines under the same key offer candidates for the same thing
                continue
        if (segments[index].gives_advice and not or_between) or segments[index].is_label:
            return
        yield index, or_between, sentence_between, strong_between
        index += direction


def _label_before(segments: list[_Segment], first: int, words: Sequence[str]) -> tuple[str, ...]:
    """The words of the nearest label before segment `first` ("partner" in "partner: Amara"), if any:
    the key whose line the segment is on."""
    labels = [segment for segment in segments[:first] if segment.is_label] if words else []
    return _segment_words(labels[-1], words) if labels else ()


def _segment_words(segment: _Segment, words: Sequence[str]) -> tuple[str, ...]:
    return tuple(words[segment.start : segment.end])


def _is_calendar_number(word: str, neighbours: Sequence[str]) -> bool:
    """Years (1900-2099) and days beside a month name: dates, not candidate amounts."""
    if len(word) == 4 and word.isdigit() and 1900 <= int(word) <= 2099:
        return True
    return word.isdigit() and int(word) <= 31 and any(neighbour in MONTHS for neighbour in neighbours)


def _names_a_date(word: str) -> bool:
    """A month, a weekday or a year: a word that makes the words around it a date."""
    return word in MONTHS or word in WEEKDAYS or _is_calendar_number(word, ())


def _is_date_words(words: Sequence[str]) -> bool:
    """Month and weekday names, days and years only, with at least one name or year ("Jun 27, 2023",
    "(Mon)"): a date, not a value."""
    named = [word for word in words if _names_a_date(word)]
    return bool(named) and all(word in named or (word.isdigit() and int(word) <= 31) for word in words)


@dataclass(frozen=True)
class _HedgeContext:
    """What the hedge rules need about one answer: its text, items and the gold's shape."""

    text: AnalysedText
    segments: list[_Segment]
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
    date_statements: frozenset[int] = frozenset()  # positions stating the current date (v7)


def _offered_number(context: _HedgeContext, position: int, dates_count: bool) -> bool:
    """A number the answer offers besides the gold's own (negated or context ones excluded)."""
    text = context.text
    word = text.words[position]
    if not is_number(word) or position in context.covered:
        return False
    clock = _clock_time_at(text, position)
    if word in context.gold_numbers and (clock is None or clock in context.gold_clocks):
        return False  # the gold's own number; not a part of another time ("30:15" beside gold 30:14)
    if word in context.question_numbers or (not context.gold_is_rate and _is_derived_rate(text, position)):
        return False
    if text.questions[position] or position in context.history or position in context.date_statements:
        return False
    if not dates_count and _is_calendar_number(word, _neighbours(text.words, position)):
        return False
    return not (
        _is_denied(text, position, position + 1) or _is_context(text, position, position + 1, context.framing)
    )


def _clock_time_at(text: AnalysedText, position: int) -> tuple[str, str] | None:
    """The clock time ("30:14", read as the numbers 30 and 14 across a colon) that the number at
    `position` is a part of, as a pair; None for a number that is no part of one."""
    words, colons = text.words, text.colons
    if position + 1 < len(words) and colons[position + 1] and is_number(words[position + 1]):
        return words[position], words[position + 1]
    if position > 0 and colons[position] and is_number(words[position - 1]):
        return words[position - 1], words[position]
    return None


def _is_derived_rate(text: AnalysedText, position: int) -> bool:
    """The number is a rate worked out from the answer (", which is 2.4 minutes per mile"): "per"
    follows within MAX_RATE_UNIT_TOKENS tokens, in a clause that opens with a DERIVED_OPENERS word. Such
    a pace or price describes the answer and is no second candidate for it (matcher v5). A rate offered
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


def _date_is_a_rival(context: _HedgeContext, words: Sequence[str]) -> bool:
    """A date item rivals the gold only when the gold is a date of the same kind: for a weekday gold
    another weekday, not the calendar date written beside it ("Wednesday, April 19, 2023")."""
    if not context.dates_count:
        return False
    return not context.weekday_gold or any(word in WEEKDAYS for word in words)


def _not_a_candidate(context: _HedgeContext, segment: _Segment) -> bool:
    """Filler, the gold again, a history value, a negated or asked item, a date beside a non-date, a
    time stamp's weekday ("2023/03/04 (Sat)"), or a statement of the current date (v7)."""
    text = context.text
    positions = set(range(segment.start, segment.end))
    words = text.words[segment.start : segment.end]
    return (
        not content_stems(words)
        or positions <= context.covered
        or bool(positions & context.history)
        or _holds_negation(words)
        or all(text.questions[position] for position in positions)
        or (_is_date_words(words) and not _date_is_a_rival(context, words))
        or _is_timestamp_weekday(text, segment.start, segment.end)
        or _names_the_slot(context, words)
        or positions <= context.date_statements
    )


def _names_the_slot(context: _HedgeContext, words: Sequence[str]) -> bool:
    """Every content word is the question's own or built on it ("a hobbyist" for "which hobby ..."):
    the item names the asked kind, not a second value of it."""
    stems = content_stems(words)
    return bool(stems) and all(
        any(word.startswith(asked) for asked in context.question_stems if len(asked) >= MIN_SLOT_STEM_CHARS)
        for word in stems
    )


def _is_hedged(context: _HedgeContext, gold_hits: list[_Hit]) -> bool:
    """Whether the answer spreads its bet over several candidates of the gold's kind.

    The answer is split into list items (at punctuation, "or", "and"). Hedged when, beside an exact
    gold mention's item:
    - an "or" joins it to another candidate ("Paris or London", "4 or 5");
    - one rival candidate sits across a strong separator ("Denver and Boston", "Denver; Boston", "4 and
      5", "It could be Denver. It could also be Boston."): a rival holds only words the gold's item
      already has, hedge words and a new value no longer than the gold (or a capitalised name up to
      MAX_PROPER_NAME_TOKENS); across a sentence end the later item must hedge ("could also be") or both
      be bare and unexclaimed ("Denver. Boston." but not "Denver! Enjoy."). Across a comma alone the
      later item must hedge ("Denver, maybe Boston"): "Denver, Colorado" is one answer;
    - MAX_CANDIDATES or more other short items surround it ("Paris, London, Berlin or Rome", also as a
      bulleted list). Short = at most one content token more than the gold (the gold's own item may
      have two more: "It could be Paris"). Items in another sentence count only when they are bare
      ("Paris. London. Berlin."), so "The suburbs. She moved in May." is not a list;
    - numeric golds: MAX_CANDIDATES or more other numbers anywhere (years and days beside a month name
      are not candidates unless a gold holds a date).
    Not candidates: negated items ("not London"), another spelling of the gold, items naming a
    superseded value (offering one next to the gold is what the stale penalty, verdict "ambiguous", is
    for), items inside a question, and dates beside a non-date gold ("Olive (renamed July 5, 2023)").
    """
    for hit in gold_hits:
        item = _item_of(context.segments, hit) if hit.exact else None
        if item is not None and (_single_rival(context, item) or _enumerated(context, item)):
            return True
    if not context.gold_numbers:
        return False
    offered = {
        _candidate_number(context.text, position)
        for position in range(len(context.text.words))
        if _offered_number(context, position, context.dates_count)
    }
    return len(offered) >= MAX_CANDIDATES


def _candidate_number(text: AnalysedText, position: int) -> str | tuple[tuple[str, str], int]:
    """What an offered number counts as among the candidates: itself, or its place in the clock time it
    is part of, so that "30:15" beside gold 30:14 counts twice, as "31:02" does."""
    clock = _clock_time_at(text, position)
    if clock is None:
        return text.words[position]
    return clock, 0 if position + 1 < len(text.words) and text.colons[position + 1] else 1


def _single_rival(context: _HedgeContext, item: tuple[int, int]) -> bool:
    """One other candidate across an "or" or a strong separator (see `_is_hedged`)."""
    text, segments = context.text, context.segments
    frame = {
        word
        for segment in segments[item[0] : item[1] + 1]
        for word in text.words[segment.start : segment.end]
    }
    item_is_bare = not (frame & STOPWORDS)
    for direction in (-1, 1):
        for index, or_between, sentence_between, strong_between in _walk(
            segments, item, direction, text.words
        ):
            segment = segments[index]
            if _not_a_candidate(context, segment):
                continue
            words = set(text.words[segment.start : segment.end])
            allowed = frame | HEDGE_WORDS | ({"it", "its", "but"} if words & GUESS_WORDS else set())
            span = range(segment.start, segment.end)
            if direction < 0:  # a rival before the gold may carry the shared lead ("You live in 7 and 4")
                span = range(
                    max([p + 1 for p in span if text.words[p] in STOPWORDS], default=span.start), span.stop
                )
            new = [position for position in span if text.words[position] not in allowed]
            if direction > 0 and strong_between and not sentence_between:
                new = _co_subject(text, segment) or new
            if context.gold_numbers:
                rival = len(new) == 1 and _offered_number(context, new[0], dates_count=True)
            else:
                rival = _is_rival_value(context, new, guessing=bool((words | frame) & GUESS_WORDS))
            if rival and or_between:
                return True
            later_words = words if direction > 0 else frame  # the guess word sits between the two
            if rival and (later_words & GUESS_WORDS or (strong_between and not sentence_between)):
                return True
            # "Denver! Enjoy." is not a second guess
            exclaims = text.exclaims[segment.start] or text.exclaims[segments[item[0]].start]
            if rival and sentence_between and item_is_bare and not exclaims and not (words & STOPWORDS):
                return True
            if rival and not (strong_between or sentence_between) and _comma_rival(context, new):
                return True
            break
    return False


def _co_subject(text: AnalysedText, segment: _Segment) -> list[int]:
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


def _comma_rival(context: _HedgeContext, new: Sequence[int]) -> bool:
    """A second value across a comma alone ("Denver, Chicago"; "3, 4"), not a refinement ("Denver,
    Colorado", "Acme, Inc.") nor history ("moved from Detroit, ..."): a capitalised name that is no
    region or company suffix, or any short item when the whole answer is a bare list (no function
    words at all)."""
    text = context.text
    words = [text.words[position] for position in new]
    start, end = new[0], new[-1] + 1
    if any(word in REGION_WORDS for word in words) or _is_context(text, start, end, context.framing):
        return False
    if _is_denied(text, start, end):
        return False
    if all(text.capitals[position] for position in new) and not _is_date_words(words):
        return True
    return not set(text.words) & STOPWORDS


def _gives_advice(words: Sequence[str]) -> bool:
    """The item recommends something ("but you might want to consider a hybrid"): not a rival answer."""
    return any(word in ADVICE_WORDS for word in words)


def _is_rival_value(context: _HedgeContext, new: Sequence[int], guessing: bool = False) -> bool:
    """New words that look like another value of the gold's kind: content words of the gold's size."""
    words = [context.text.words[position] for position in new]
    if not words or any(word in STOPWORDS for word in words):
        return False
    # in a bare list ("salsa dancing, pottery") or beside a guess word, an item may be a word longer
    bare_list = not set(context.text.words) & STOPWORDS
    if len(words) <= context.gold_size + (bare_list or guessing):
        return True
    return len(words) <= MAX_PROPER_NAME_TOKENS and all(context.text.capitals[position] for position in new)


def _enumerated(context: _HedgeContext, item: tuple[int, int]) -> bool:
    """The gold's item among an "or" or MAX_CANDIDATES or more short items (see `_is_hedged`)."""
    text, segments = context.text, context.segments
    item_words = [
        word
        for segment in segments[item[0] : item[1] + 1]
        for word in text.words[segment.start : segment.end]
    ]
    if context.gold_numbers:
        return _or_joined_number(context, item)
    if len(content_stems(item_words)) > context.gold_size + 2:
        return False
    candidates: set[tuple[str, ...]] = set()
    for direction in (-1, 1):
        for index, or_between, sentence_between, _ in _walk(segments, item, direction, text.words):
            segment = segments[index]
            words = text.words[segment.start : segment.end]
            if _not_a_candidate(context, segment):
                continue
            content = content_stems(words)
            if len(content) > context.gold_size + 1 or (sentence_between and len(content) < len(words)):
                break  # a longer clause, or a sentence that is not a bare item, ends the list
            if or_between:
                return True
            candidates.add(tuple(content))
    return len(candidates) >= MAX_CANDIDATES


def _or_joined_number(context: _HedgeContext, item: tuple[int, int]) -> bool:
    text, segments = context.text, context.segments
    for direction in (-1, 1):
        for index, or_between, _, _ in _walk(segments, item, direction, text.words):
            segment = segments[index]
            if not content_stems(text.words[segment.start : segment.end]):
                continue
            if or_between and any(
                _offered_number(context, position, dates_count=True)
                for position in range(segment.start, segment.end)
            ):
                return True
            break
    return False


def _holds_negation(words: Sequence[str]) -> bool:
    return any(
        tuple(words[index : index + len(marker)]) == marker
        for marker in NEGATIONS
        for index in range(len(words))
    )


def _short_forms(value: str, words: tuple[str, ...]) -> list[tuple[str, ...]]:
    """What a multi-word value is called for short: a name by its first words ("Honda" for "Honda
    CR-V", "Jeep" for "Jeep Wrangler": the make or brand), a lower-case noun phrase by its last words
    ("painting" for "watercolor painting", "data analyst" for "senior data analyst": its head)."""
    if len(words) < 2:
        return []
    if value[:1].isupper():
        return [words[:size] for size in range(1, len(words))]
    if value == value.lower():
        return [words[-size:] for size in range(1, len(words))]
    return []


def _answer_core(text: AnalysedText, question: str) -> list[int]:
    """The positions of what an answer names, once a key ("car:"), function words, dates and the
    question's own words are set aside ("Honda is current on 2023/03/04." is "Honda"); empty for an
    answer that denies or asks (`score_answer` also sets aside any answer with a question mark)."""
    if any(text.questions) or _holds_negation(text.words) or sum(text.colons) > 1:
        return []
    start = max((position for position, colon in enumerate(text.colons) if colon), default=0)
    question_stems = frozenset(content_stems(analyse(question).words))
    return [
        position
        for position in range(start, len(text.words))
        if text.words[position] not in STOPWORDS | MONTHS | WEEKDAYS
        and not is_number(text.words[position])
        and stem(text.words[position]) not in question_stems
    ]


def _short_form_hits(
    text: AnalysedText,
    golds: Sequence[str],
    stales: Sequence[str],
    gold_values: list[tuple[str, ...]],
    stale_values: list[tuple[str, ...]],
    question: str,
) -> tuple[list[_Hit], list[_Hit]]:
    """An answer that names nothing but a short form of one value ("Honda is current.", "jeep",
    "Manager") names that value, when no other value of the episode holds that short form and each
    of its words has MIN_SHORT_FORM_CHARS or more. Only whole answers: inside a longer answer a
    make or a head noun may belong to anything."""
    core = _answer_core(text, question)
    if not core or core != list(range(core[0], core[-1] + 1)):
        return [], []
    named = tuple(stem(word) for word in text.words[core[0] : core[-1] + 1])
    if any(len(word) < MIN_SHORT_FORM_CHARS for word in named):
        return [], []
    values = list(zip([*golds, *stales], [*gold_values, *stale_values], strict=False))
    owners = [
        words
        for value, words in values
        if any(tuple(map(stem, short)) == named for short in _short_forms(value, words))
    ]
    holders = [words for _, words in values if occurrences(list(words), list(named))]
    if len(owners) != 1 or len(holders) != 1:
        return [], []
    hit = _Hit(frozenset(core), exact=False)
    return ([hit], []) if owners[0] in gold_values else ([], [hit])


# --------------------------------------------------------------------------- scoring


def _values(values: Sequence[str], field: str) -> list[str]:
    if isinstance(values, str):
        raise TypeError(f"{field} must be a sequence of strings, not one string: {values!r}")
    checked = []
    for index, value in enumerate(values):
        if not isinstance(value, str):
            raise TypeError(f"{field}[{index}] must be a string, got {type(value).__name__}: {value!r}")
        checked.append(value)
    return checked


def _abstains(answer: str, text: AnalysedText) -> bool:
    """An abstention answer: says the information is unavailable and asserts nothing else.

    Every sentence, and every clause of it split at "but", ":" or ";", must say unknown, refer to
    what was said ("you mentioned X but not Y"), be an offer ("If you tell me ..."), or carry no content word ("Sorry!"); and no guess may follow
    ("I don't know, maybe Paris" and "You live in Austin. I don't know." are not abstentions).
    """
    if not says_unknown(answer) or GUESS_MARKERS.search(" ".join(text.words)):
        return False
    for clause in (
        part for sentence in _SENTENCE_END.split(answer) for part in _CLAUSE_BREAK.split(sentence)
    ):
        words = analyse(clause).words
        if not content_stems(words) or says_unknown(clause):
            continue
        words = words[1:] if words and words[0] == "but" else words
        if REFERENCE_WORDS.intersection(words):
            continue
        if any(words[: len(opening)] == opening for opening in OFFER_OPENINGS):
            continue
        return False
    return True


def _verdict(answered_current: bool, asserted_stale: bool, hedged: bool = False) -> Verdict:
    if hedged and asserted_stale:
        return "ambiguous"  # a list of candidates holding the current and a stale value commits to neither
    if answered_current:
        return "ambiguous" if asserted_stale else "correct"
    return "stale" if asserted_stale else "wrong"


def score_answer(
    answer: str | None,
    gold_answers: Sequence[str],
    superseded_values: Sequence[str] = (),
    *,
    is_abstention: bool = False,
    stale_penalty_weight: float = 1.0,
    max_answer_chars: int = MAX_ANSWER_CHARS,
    asks_previous_value: bool = False,
    question: str = "",
    other_topics: frozenset[str] = frozenset(),
) -> Score:
    """Grade one final answer: `reward = r_cur + stale_penalty_weight * r_stale`, in [-lambda, 1].

    - `answered_current` (r_cur = 1): some gold variant is asserted (module doc: not denied, not asked,
      not context) and none of the rules below withholds it. For abstention items (`is_abstention`)
      the gold is instead an answer that says the information is not available and asserts nothing
      (`_abstains`).
    - `asserted_stale` (r_stale = -1): a superseded value is asserted. "You used to live in Detroit",
      "moved from Detroit", "not Detroit", "Did you mean Detroit?" mention it without asserting it.
      With no superseded values this is always False, so the penalty is inert.
    - Which framing is context depends on the question: pass `asks_previous_value=True` for questions
      that ask for an earlier value ("What was my previous ...?"). Then past framing asserts ("you
      drove a Volvo XC40 before your latest one" asserts the Volvo) and forward framing is context
      ("Boston before I moved to Minneapolis" asserts Boston only). Otherwise the reverse: "you used
      to live in Denver" does not answer "where do I live?".
    - Stale inside gold: a stale mention wholly inside a matched gold mention does not count (stale
      "Detroit" in "the suburbs of Detroit"), nor a gold mention wholly inside a longer stale one (gold
      "Detroit" in stale "downtown Detroit"); a stale value that normalizes to a gold value is ignored.
      In the overlap fallback only the tokens a value does not share with its rivals count.
    - Values given to someone else: see `_is_someone_elses`; `question` names the user's own things
      ("Kitten's name is Ziggy"). A whole answer that is one value's short form names it (v2).
      `other_topics`: words only the sessions' turns without evidence use (`matcher_sessions`, v6);
      a value owned by such a thing ("cousin: Crunch Fitness") is not the user's.
    - Verdict: `correct` (current only), `stale` (stale only), `ambiguous` (both, or a hedged list
      that holds the gold and a stale value), `wrong` (neither). An ambiguous reward is at most 0 at any λ.

    Rules that withhold r_cur (the stale check still runs, so dumping stale values is penalized):
    empty or whitespace answer -> wrong ("empty"); answer longer than `max_answer_chars` once stripped
    ("too_long"); hedged answer, see `_is_hedged` ("hedged"); on abstention items, an answer that says
    unknown but also guesses or asserts something ("asserts_value").
    """
    golds = _values(gold_answers, "gold_answers")
    stales = _values(superseded_values, "superseded_values")
    _check_arguments(answer, golds, is_abstention, stale_penalty_weight)
    if answer is None or not answer.strip():
        return Score("wrong", False, False, 0.0, "empty")

    text = analyse(clock_periods_as_colons(SPEAKER_LABEL.sub("", answer), [*golds, *stales]))
    framing: Framing = "forward" if asks_previous_value else "past"
    # An abstention item's "gold" explains why there is no answer: there is nothing to match.
    gold_values = [] if is_abstention else [words for words in map(_words, golds) if words]
    stale_values = [words for words in map(_words, stales) if words and words not in gold_values]
    activities = frozenset(_words(value) for value in [*golds, *stales] if _is_activity(value))
    gold_hits, stale_hits = _asserted_hits(
        text, gold_values, stale_values, framing, question, activities, other_topics
    )
    if not gold_hits and not stale_hits and "?" not in answer:  # a short form alone, never asked
        gold_hits, stale_hits = _short_form_hits(text, golds, stales, gold_values, stale_values, question)
    gold_positions = {position for hit in gold_hits for position in hit.positions}
    asserted_stale = any(not hit.positions <= gold_positions for hit in stale_hits)

    reason = ""
    if is_abstention:
        answered_current = _abstains(answer, text) and not asserted_stale
        if not answered_current and says_unknown(answer):
            reason = "asserts_value"
    else:
        answered_current = bool(gold_hits)
    if answered_current and len(answer.strip()) > max_answer_chars:
        answered_current, reason = False, "too_long"
    if answered_current and not is_abstention:
        context = _hedge_context(text, gold_values, stale_values, gold_hits, stale_hits, framing, question)
        if _is_hedged(context, gold_hits):
            answered_current, reason = False, "hedged"
    verdict = _verdict(answered_current, asserted_stale, hedged=reason == "hedged")
    reward = float(answered_current) - stale_penalty_weight * float(asserted_stale)
    if verdict == "ambiguous":
        reward = min(reward, 0.0)  # the reward is the evaluation's verdict: naming both values earns nothing
    return Score(verdict, answered_current, asserted_stale, reward, reason)


def _check_arguments(
    answer: str | None, golds: list[str], is_abstention: bool, stale_penalty_weight: float
) -> None:
    if not is_abstention and not golds:
        raise ValueError("gold_answers is empty: a non-abstention item needs at least one gold answer")
    if not (stale_penalty_weight >= 0 and math.isfinite(stale_penalty_weight)):
        raise ValueError(f"stale_penalty_weight must be a finite number >= 0, got {stale_penalty_weight!r}")
    if answer is not None and not isinstance(answer, str):
        raise TypeError(f"answer must be a string or None, got {type(answer).__name__}: {answer!r}")


def _asserted_hits(
    text: AnalysedText,
    gold_values: list[tuple[str, ...]],
    stale_values: list[tuple[str, ...]],
    framing: Framing,
    question: str,
    activities: frozenset[tuple[str, ...]] = frozenset(),
    other_topics: frozenset[str] = frozenset(),
) -> tuple[list[_Hit], list[_Hit]]:
    """The gold and the stale mentions that count: not asked, not someone else's (`_is_someone_elses`),
    no stale mention inside a statement of the current date (`_date_statements`: "The current date is
    Tuesday" offers no old day; a gold mention there still counts), and no gold mention wholly inside an
    exact stale one. In the overlap fallback a value's tokens
    shared with its rivals do not count, and tokens an exact mention of any value already took are not
    reused."""
    not_others = frozenset(analyse(question).words).union(*gold_values, *stale_values)
    attribution = _attribution(text, gold_values + stale_values, not_others, question, activities)
    gold_stems = frozenset(token for value in gold_values for token in content_stems(value))
    stale_stems = frozenset(token for value in stale_values for token in content_stems(value))
    taken = frozenset(
        position
        for value in gold_values + stale_values
        for start in occurrences(text.words, value)
        for position in range(start, start + len(value))
    )
    date_statements = _date_statements(text)
    stale_hits = [
        hit
        for value in stale_values
        for hit in _value_hits(text, value, gold_stems, framing, taken, value in activities)
        if not _is_asked(text, hit)
        and not hit.positions <= date_statements
        and not _hit_is_someone_elses(text, hit, not_others)
        and not _hit_is_attributed(text, hit, attribution)
        and not _is_key_echo(text, hit, value)
        and not _hit_is_another_topics(text, hit, other_topics, attribution.question_stems)
    ]
    gold_hits = [
        hit
        for value in gold_values
        for hit in _value_hits(text, value, stale_stems, framing, taken, value in activities)
        if not _is_asked(text, hit)
        and not _hit_is_someone_elses(text, hit, not_others)
        and not _hit_is_attributed(text, hit, attribution)
        and not _is_key_echo(text, hit, value)
        and not _hit_is_another_topics(text, hit, other_topics, attribution.question_stems)
        and not any(hit.positions < stale.positions for stale in stale_hits if stale.exact)
    ]
    return gold_hits, stale_hits


def _is_key_echo(text: AnalysedText, hit: _Hit, value: Sequence[str]) -> bool:
    """The mention is in a notes line's key and the line's text names the value again ("Theo: things
    with Theo are over"): the key only labels the line, whose own mention decides (matcher v5)."""
    if not hit.exact:
        return False
    start, end = min(hit.positions), max(hit.positions) + 1
    line_start = start
    while line_start > 0 and text.breaks[line_start] < LIST:
        if text.colons[line_start]:
            return False  # after the line's colon: the mention is in its text, not its key
        line_start -= 1
    colon = next((p for p in range(end, len(text.words)) if text.colons[p] or text.breaks[p] >= LIST), None)
    if colon is None or not text.colons[colon] or text.breaks[colon] >= LIST:
        return False
    line_end = next((p for p in range(colon + 1, len(text.words)) if text.breaks[p] >= LIST), len(text.words))
    return any(colon <= other and other + len(value) <= line_end for other in occurrences(text.words, value))


def _hedge_context(
    text: AnalysedText,
    gold_values: list[tuple[str, ...]],
    stale_values: list[tuple[str, ...]],
    gold_hits: list[_Hit],
    stale_hits: list[_Hit],
    framing: Framing,
    question: str = "",
) -> _HedgeContext:
    gold_positions = {position for hit in gold_hits for position in hit.positions}
    question_words = analyse(question).words
    history = {
        position
        for value in stale_values
        for start in occurrences(text.words, value)
        for position in range(start, start + len(value))
    } - gold_positions
    covered = gold_positions | {position for hit in stale_hits for position in hit.positions}
    return _HedgeContext(
        text=text,
        segments=_segments(text),
        covered=frozenset(covered),
        history=frozenset(history),
        gold_numbers=frozenset(word for value in gold_values for word in value if is_number(word)),
        gold_size=max(1, min(len(content_stems(value)) for value in gold_values)),
        dates_count=any(_names_a_date(word) for value in gold_values for word in value),
        weekday_gold=all(
            not (word in MONTHS or _is_calendar_number(word, ())) for value in gold_values for word in value
        )
        and any(word in WEEKDAYS for value in gold_values for word in value),
        framing=framing,
        question_stems=frozenset(content_stems(question_words)),
        question_numbers=frozenset(word for word in question_words if is_number(word)),
        gold_is_rate=any("per" in value for value in gold_values),
        gold_clocks=frozenset(
            (value[0], value[1]) for value in gold_values if len(value) == 2 and all(map(is_number, value))
        ),  # "30:14" is read as the two numbers 30 and 14
        date_statements=_date_statements(text),
    )


def _words(value: str) -> tuple[str, ...]:
    return analyse(value).words


def score_episode_answer(episode: Episode, answer: str, *, stale_penalty_weight: float = 1.0) -> Score:
    """Score an answer against an Episode: the one rubric evaluation, environment and training share."""
    return score_answer(
        answer,
        episode.gold_answers,
        episode.superseded_values,
        is_abstention=episode.is_abstention,
        stale_penalty_weight=stale_penalty_weight,
        asks_previous_value=episode.asks_previous_value,
        question=episode.question,
        other_topics=other_turn_topics(episode),
    )
