"""The programmatic matcher and the supersession reward (paper Section 3, "Reward").

The paper grades answers without a judge model: `r_cur = 1[the answer conveys the current value]`,
`r_stale = -1[the answer asserts a superseded value]` (inert when no superseded values are known),
and `reward = r_cur + lambda * r_stale`. Because the same matcher is the GRPO training signal it has
to be hard to game, so every rule that withholds credit is spelled out next to the code below.

Layers, each usable alone:

- `normalize(text)`: one spelling per value. Unicode NFKC, casefold, accents dropped, apostrophes
  dropped (``"Rachel's"`` -> ``rachel``), other punctuation -> spaces, articles a/an/the dropped,
  thousands separators dropped (``350,000`` -> ``350000``), ``350k`` -> ``350000``, number words ->
  digits (``twenty-five`` -> ``25``, ``three hundred fifty thousand`` -> ``350000``, ``1.5 million``
  -> ``1500000``), ordinal words -> ``1st``/``2nd``/``21st``, trailing decimal zeros dropped, ``%`` ->
  ``percent``. Currency symbols ($ EUR GBP JPY INR KRW) and currency words (dollar(s), usd, buck(s),
  euro(s), eur) are dropped: the question fixes the currency, the amount is the value, so
  ``$350,000`` == ``350000 dollars`` == ``350K`` == ``350 thousand``. Idempotent.
- `conveys_value(text, value)`: does the text mention the value as a value (not negated, not
  qualified)? Used for answers and for "do the notes still hold it".
- `says_unknown(text)`: does the text say the information is not available?
- `score_answer(...)`: the verdict and reward, with the anti-gaming rules.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from supersede_lib.episode import Episode

Verdict = Literal["correct", "stale", "ambiguous", "wrong"]

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


def _phrases(alternatives: str) -> tuple[tuple[str, ...], ...]:
    """'no longer|not' -> (("no", "longer"), ("not",)): multi-word markers as token tuples."""
    return tuple(tuple(phrase.split()) for phrase in alternatives.split("|"))


_ARTICLES = frozenset({"a", "an", "the"})
_CURRENCY_WORDS = frozenset({"dollar", "dollars", "usd", "buck", "bucks", "euro", "euros", "eur"})
_UNITS = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {
    word: 10 * (index + 2)
    for index, word in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())
}
_ORDINALS = {
    word: value
    for value, word in enumerate(
        "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
        "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth".split()
    )
} | {
    word: 10 * (index + 2)
    for index, word in enumerate(
        "twentieth thirtieth fortieth fiftieth sixtieth seventieth eightieth ninetieth".split()
    )
}
_LARGE_SCALES = {"thousand": 1000, "million": 10**6, "billion": 10**9}
_MAX_NUMBER_DIGITS = 15  # longer digit runs are ids, not amounts: never scaled

_STOPWORDS = frozenset(
    """
    i me my mine myself you your yours yourself we our ours us he him his she her hers it its they
    them their theirs this that these those is am are was were be been being have has had having do
    does did doing will would shall should can could may might must to of in on at for with by from
    about as into onto over under up down out off than then so and or but if because while also just
    very too still now currently current there here what which who whom whose when where why how all
    any some such only own same other each both few more most im ive youve youre youd id theyre
    thats whats theres lets maybe perhaps possibly probably likely either think guess believe seems
    seem sorry please unfortunately well yes okay ok according based notes note answer
    """.split()
)
_NEGATIONS = _phrases(
    "not|never|isnt|wasnt|arent|werent|dont|doesnt|didnt|havent|hasnt|nor|neither|no longer|rather than|instead of"
)
_NEGATION_IDIOM_NEXT = frozenset({"sure", "certain", "only", "just", "know", "remember", "recall"})
_DISAVOWALS_BEFORE = _phrases(
    "previously|formerly|originally|initially|earlier|before|from|old|former|prior|used to"
)
_DISAVOWALS_AFTER = _phrases(
    "previously|formerly|originally|initially|earlier|before|anymore|later|then|until|at 1st|no longer"
)
_NUMERIC_QUALIFIERS = _phrases(
    "over|above|under|below|nearly|almost|beyond|exceeding|more than|less than|fewer than|greater than|"
    "higher than|lower than|at least"
)
_CLAUSE_WORDS = frozenset({"but", "however", "though", "although", "now", "currently", "actually", "today"})
_LIST_SEPARATORS = frozenset({"or", "and", "nor", "versus", "vs"})
_MONTHS = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_GUESS_MARKERS = re.compile(
    r"\b(?:maybe|perhaps|probably|possibly|likely|my guess|i guess|best guess|might be|could be|"
    r"i think it|i believe it|i would say|id say|if i had to)\b"
)
_REFERENCE_WORDS = frozenset(
    "mentioned mention told said shared discussed talked recorded record records noted notes note "
    "conversation conversations information info details history memory".split()
)
_OFFER_OPENINGS = _phrases(
    "if you|let me know|feel free|please|could you|can you|would you|i can|i would be happy"
)

_UNKNOWN = re.compile(
    "|".join(
        [
            r"\b(?:dont|do not|didnt|did not|cant|cannot|can not|couldnt|could not|unable to|not able to|"
            r"no way to|no way of) (?:know|knowing|tell|telling|say|determine|find|recall|remember|answer|"
            r"confirm|be sure|be certain|see)\b",
            r"\b(?:havent|have not|hasnt|has not|didnt|did not|never) (?:yet |actually |explicitly |"
            r"specifically |ever )?(?:mentioned|mention|told|tell|said|say|shared|share|specified|specify|"
            r"provided|provide|stated|state|discussed|discuss|given|noted|talked|brought up)\b",
            r"\b(?:not|never|wasnt|isnt) (?:been |yet )?(?:mentioned|specified|provided|available|recorded|"
            r"stated|known|given|included|listed|noted|shared|documented|clear)\b",
            r"\bno (?:information|info|record|records|mention|details|data|indication|evidence|knowledge|"
            r"notes)\b",
            r"\b(?:dont|do not|doesnt|does not|didnt|did not) (?:have|contain|include|hold)(?: \w+){0,3} "
            r"(?:information|info|details?|records?|data|knowledge|notes?)\b",
            r"\bnotes? (?:dont|do not|doesnt|does not|didnt|did not) (?:have|contain|include|hold|mention|"
            r"say|specify|show|record|list|cover)\b",
            r"\b(?:unknown|unclear|not sure|uncertain|no idea|not enough|insufficient|cannot be determined|"
            r"cant be determined)\b",
            r"\bnot (?:in|part of) (?:my |your |our )?(?:notes|memory|records|conversation|conversations)\b",
            r"\bnothing (?:about|on|regarding|in)\b",
            r"\bbut not (?:where|what|which|when|who|whom|how|why|whether|if|your|any|its|their)\b",
        ]
    )
)

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'", "\u2032": "'"})
_THOUSANDS_SEPARATOR = re.compile(r"(?<=[0-9]),(?=[0-9]{3}(?![0-9]))")
_CURRENCY_SYMBOLS = re.compile(r"[$\u20ac\u00a3\u00a5\u20b9\u20a9]")
_POSSESSIVE = re.compile(r"'s\b")
_TOKEN = re.compile(r"[0-9]+(?:\.[0-9]+)?[^\W\d_]*|[^\W_]+")
_CLAUSE_BREAK = re.compile(r"[,;:()\[\]{}/|\n\u2022\u2013\u2014\u2026]|\s-\s")
_SENTENCE_BREAK = re.compile(r"[.!?]")
_CLAUSE, _SENTENCE = 1, 2  # break levels between two tokens (0: none)
_PLAIN_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_SENTENCE_END = re.compile(r"[.!?\n]+")


@dataclass(frozen=True)
class Score:
    """One graded answer. `reason` says why credit was withheld ("" when nothing was)."""

    verdict: Verdict
    answered_current: bool
    asserted_stale: bool
    reward: float
    reason: str = ""


@dataclass(frozen=True)
class _Text:
    """Normalized tokens; `breaks[i]`: punctuation between token i-1 and token i (0, _CLAUSE, _SENTENCE)."""

    words: tuple[str, ...]
    breaks: tuple[int, ...]


@dataclass(frozen=True)
class _Segment:
    """One list item: tokens [start, end), and what separates it from the item before."""

    start: int
    end: int
    or_before: bool
    sentence_before: bool


@dataclass(frozen=True)
class _Hit:
    """Token positions of the answer that one mention of a value occupies."""

    positions: frozenset[int]
    exact: bool


# --------------------------------------------------------------------------- normalization


def normalize(text: str) -> str:
    """The canonical spelling of `text`: lower-case tokens joined by single spaces (module doc)."""
    return " ".join(_analyse(text).words)


def _analyse(text: str) -> _Text:
    prepared = _prepare(text)
    words: list[str] = []
    breaks: list[int] = []
    pending_break = 0
    previous_end = 0
    for match in _TOKEN.finditer(prepared):
        pending_break = max(pending_break, _break_level(prepared[previous_end : match.start()]))
        previous_end = match.end()
        word = _canonical_token(match.group())
        if word in _ARTICLES or word in _CURRENCY_WORDS:
            continue  # dropped; a break before it still separates what follows
        words.append(word)
        breaks.append(pending_break)
        pending_break = 0
    return _merge_number_words(words, breaks)


def _break_level(gap: str) -> int:
    if _SENTENCE_BREAK.search(gap):
        return _SENTENCE
    return _CLAUSE if _CLAUSE_BREAK.search(gap) else 0


def _prepare(text: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"expected a string to normalize, got {type(text).__name__}: {text!r}")
    folded = unicodedata.normalize("NFKC", text).casefold()
    stripped = "".join(ch for ch in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(ch))
    prepared = unicodedata.normalize("NFKC", stripped).casefold().translate(_QUOTES)
    prepared = _THOUSANDS_SEPARATOR.sub("", prepared)
    prepared = _CURRENCY_SYMBOLS.sub(" ", prepared.replace("%", " percent "))
    return _POSSESSIVE.sub("", prepared).replace("'", "")


def _canonical_token(word: str) -> str:
    """Plain numbers lose leading and trailing zeros; ``350k`` becomes ``350000``."""
    if _PLAIN_NUMBER.fullmatch(word):
        return _canonical_number(word)
    if word.endswith("k") and _PLAIN_NUMBER.fullmatch(word[:-1]) and len(word) <= _MAX_NUMBER_DIGITS:
        return _format_decimal(Decimal(word[:-1]) * 1000)
    return word


def _canonical_number(digits: str) -> str:
    whole, _, fraction = digits.partition(".")
    whole = whole.lstrip("0") or "0"
    fraction = fraction.rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


def _format_decimal(value: Decimal) -> str:
    return _canonical_number(format(value, "f"))


def _ordinal_suffix(value: int) -> str:
    if value % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(value % 10, "th")


def _merge_number_words(words: list[str], breaks: list[int]) -> _Text:
    merged_words: list[str] = []
    merged_breaks: list[int] = []
    index = 0
    while index < len(words):
        consumed, number = _read_number(words, breaks, index)
        if consumed:
            merged_words.append(number)
            index += consumed
        else:
            merged_words.append(words[index])
            index += 1
        merged_breaks.append(breaks[index - (consumed or 1)])
    return _Text(tuple(merged_words), tuple(merged_breaks))


def _small_part_accepts(current: Decimal | None, value: int) -> bool:
    """Whether a units/teens/tens word may extend the number read so far ("twenty" + "five")."""
    if current is None:
        return True
    if value == 0 or current == 0:
        return False
    small = int(current) % 100 if current == current.to_integral_value() else -1
    if value < 10:
        return small == 0 or (small >= 20 and small % 10 == 0)
    return small == 0


def _read_number(words: list[str], breaks: list[int], start: int) -> tuple[int, str]:
    """Read one spelled-out number at `start`; return (tokens consumed, digits) or (0, "")."""
    total = Decimal(0)
    current: Decimal | None = None
    last_scale = math.inf
    index = start
    read_a_word = False
    first = words[start]
    if (
        _PLAIN_NUMBER.fullmatch(first)
        and len(first) <= _MAX_NUMBER_DIGITS
        and start + 1 < len(words)
        and not breaks[start + 1]
        and (words[start + 1] in _LARGE_SCALES or words[start + 1] == "hundred")
    ):
        current = Decimal(first)
        index += 1
    while index < len(words):
        word = words[index]
        if index > start and breaks[index]:
            break
        if word in _UNITS or word in _TENS:
            value = _UNITS.get(word, _TENS.get(word, 0))
            if not _small_part_accepts(current, value):
                break
            current = Decimal(value) + (current or 0)
        elif word in _ORDINALS:
            value = _ORDINALS[word]
            if not _small_part_accepts(current, value):
                break
            number = int(total + (current or 0) + value)
            return index + 1 - start, f"{number}{_ordinal_suffix(number)}"
        elif word == "hundred":
            if current is None:
                current = Decimal(100)
            elif 0 < current < 100 or (index == start + 1 and current > 0):
                current *= 100
            else:
                break
        elif word in _LARGE_SCALES:
            scale = _LARGE_SCALES[word]
            if scale >= last_scale:
                break
            total += (current if current is not None else Decimal(1)) * scale
            current, last_scale = None, scale
        elif word == "and" and read_a_word and words[index - 1] in {"hundred", *_LARGE_SCALES}:
            following = words[index + 1] if index + 1 < len(words) else ""
            if following not in _UNITS and following not in _TENS and following not in _ORDINALS:
                break
            if following == "zero" or (index + 1 < len(words) and breaks[index + 1]):
                break
        else:
            break
        read_a_word = True
        index += 1
        if word == "zero":
            break
    if not read_a_word:
        return 0, ""
    return index - start, _format_decimal(total + (current or 0))


# --------------------------------------------------------------------------- matching


def _stem(word: str) -> str:
    """A crude plural strip so "suburb" and "suburbs" count as one token ("1990s" keeps its s)."""
    if not word.isalpha():
        return word
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "xes", "ses", "zes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _content_stems(words: Iterable[str]) -> list[str]:
    return [_stem(word) for word in words if word not in _STOPWORDS]


def _is_number(word: str) -> bool:
    return bool(_PLAIN_NUMBER.fullmatch(word))


def _occurrences(words: Sequence[str], value: Sequence[str]) -> list[int]:
    """Start positions where `value` occurs as a contiguous run of whole tokens (plurals aside)."""
    stems = [_stem(word) for word in words]
    wanted = [_stem(word) for word in value]
    size = len(wanted)
    return [start for start in range(len(stems) - size + 1) if stems[start : start + size] == wanted]


def _marker_before(text: _Text, start: int, markers: Sequence[tuple[str, ...]], window: int) -> bool:
    """A marker ends within `window` tokens before `start`, in the same clause."""
    position = start
    for _ in range(window):
        if position == 0 or text.breaks[position]:
            return False
        position -= 1
        if text.words[position] in _CLAUSE_WORDS:
            return False
        for marker in markers:
            begin = position - len(marker) + 1
            if begin >= 0 and text.words[begin : position + 1] == marker:
                following = text.words[position + 1] if position + 1 < len(text.words) else ""
                if following not in _NEGATION_IDIOM_NEXT:
                    return True
    return False


def _marker_after(text: _Text, end: int, markers: Sequence[tuple[str, ...]], window: int) -> bool:
    """A marker starts within `window` tokens after `end`, in the same sentence ("Tom, then Sarah")."""
    for position in range(end, min(end + window, len(text.words))):
        if text.breaks[position] == _SENTENCE or text.words[position] in _CLAUSE_WORDS:
            return False
        if any(text.words[position : position + len(marker)] == marker for marker in markers):
            return True
    return False


def _is_denied(text: _Text, start: int, value: Sequence[str]) -> bool:
    """Negated ("not 25", "no longer in Detroit") or, for numbers, qualified ("over 25")."""
    if _marker_before(text, start, _NEGATIONS, CONTEXT_WINDOW):
        return True
    return _is_number(value[0]) and _marker_before(text, start, _NUMERIC_QUALIFIERS, 1)


def _is_disavowed(text: _Text, start: int, end: int) -> bool:
    """Named as a past value ("previously X", "moved from X", "X before"): mentioned, not asserted."""
    return _marker_before(text, start, _DISAVOWALS_BEFORE, CONTEXT_WINDOW) or _marker_after(
        text, end, _DISAVOWALS_AFTER, CONTEXT_WINDOW
    )


def _overlap_hit(text: _Text, value: Sequence[str], avoid_stems: frozenset[str]) -> _Hit | None:
    """Token-overlap fallback for sentence-long values.

    Eligible when the value has >= OVERLAP_MIN_CONTENT_TOKENS content tokens (stopwords ignored,
    plurals stripped). Only its distinguishing tokens count (those not in `avoid_stems`, i.e. not shared
    with the competing gold or stale values), every distinguishing number must be present, and the
    share of distinguishing content tokens present must reach OVERLAP_RECALL_THRESHOLD. Negated tokens
    ("not the suburbs") are not present. The hit covers the present distinguishing tokens and the
    value's shared tokens in the same list item ("Detroit suburbs": both; "Detroit, or the suburbs": not
    "Detroit").
    """
    content = set(_content_stems(value))
    if len(content) < OVERLAP_MIN_CONTENT_TOKENS:
        return None
    needed = {stem for stem in content if stem not in avoid_stems}
    if not needed:
        return None
    present_positions = {
        position
        for position, word in enumerate(text.words)
        if _stem(word) in content and not _is_denied(text, position, [word])
    }
    distinguishing = {position for position in present_positions if _stem(text.words[position]) in needed}
    present = {_stem(text.words[position]) for position in distinguishing}
    if any(_is_number(stem) and stem not in present for stem in needed):
        return None
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


def _value_hits(
    text: _Text, value: Sequence[str], avoid_stems: frozenset[str], *, disavow: bool
) -> list[_Hit]:
    """Mentions of `value`: exact runs that are neither denied nor (if `disavow`) disavowed; else overlap."""
    starts = _occurrences(text.words, value)
    hits = [
        _Hit(frozenset(range(start, start + len(value))), exact=True)
        for start in starts
        if not _is_denied(text, start, value)
        and not (disavow and _is_disavowed(text, start, start + len(value)))
    ]
    if starts:
        return hits  # an exact mention that was denied must not come back through the overlap fallback
    fallback = _overlap_hit(text, value, avoid_stems)
    return [fallback] if fallback else []


def conveys_value(text: str, value: str) -> bool:
    """Whether `text` mentions `value` as a value.

    Rule 1 (variant match): the normalized value occurs as a contiguous run of whole tokens, so
    "4" does not match "14" or "400" and "$400,000" does not match "$4,000", not preceded in the
    same clause by a negation ("not", "no longer", "instead of" ...) and, for numbers, not directly by
    a comparative ("over 25", "more than 25" do not convey 25; "about 25" does).
    Rule 2 (overlap fallback, only when rule 1 finds no occurrence at all): see `_overlap_hit`;
    e.g. gold "You have tried four Korean restaurants" is conveyed by "You've tried 4 Korean
    restaurants" but not by "You have tried five Korean restaurants".
    A value that normalizes to nothing (only articles or punctuation) is never conveyed.
    A past-tense mention ("moved from Detroit") still conveys Detroit: notes that say so hold it.
    """
    value_text = _analyse(value)
    if not value_text.words:
        return False
    return bool(_value_hits(_analyse(text), value_text.words, frozenset(), disavow=False))


def says_unknown(text: str) -> bool:
    """Whether the text says the asked information is not available.

    Phrase patterns over the normalized text: "I don't know", "you haven't mentioned", "no
    information", "not in my notes", "can't tell", "my notes don't say", "not specified" ...
    """
    return bool(text and text.strip()) and bool(_UNKNOWN.search(normalize(text)))


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


def _segments(text: _Text) -> list[_Segment]:
    """List items: token runs split at punctuation and at "or"/"and"."""
    segments: list[_Segment] = []
    start: int | None = None
    saw_or, gap = False, 0
    for position, word in enumerate(text.words):
        if start is not None and (text.breaks[position] or word in _LIST_SEPARATORS):
            segments.append(_Segment(start, position, saw_or, gap == _SENTENCE))
            start, saw_or, gap = None, False, 0
        gap = max(gap, text.breaks[position])
        if word in _LIST_SEPARATORS:
            saw_or = saw_or or word in {"or", "nor"}
        elif start is None:
            start = position
    if start is not None:
        segments.append(_Segment(start, len(text.words), saw_or, gap == _SENTENCE))
    return segments


def _item_of(segments: list[_Segment], hit: _Hit) -> tuple[int, int] | None:
    """Indices of the first and last segment the hit overlaps."""
    first, last = min(hit.positions), max(hit.positions)
    inside = [
        index for index, segment in enumerate(segments) if segment.start <= last and segment.end > first
    ]
    return (inside[0], inside[-1]) if inside else None


def _walk(
    segments: list[_Segment], item: tuple[int, int], direction: int
) -> Iterator[tuple[int, bool, bool]]:
    """Segments beside the item, nearest first, with whether an "or" / a sentence end lies in between."""
    index = item[1] + 1 if direction > 0 else item[0] - 1
    or_between = sentence_between = False
    while 0 <= index < len(segments):
        boundary = segments[index if direction > 0 else index + 1]
        or_between = or_between or boundary.or_before
        sentence_between = sentence_between or boundary.sentence_before
        yield index, or_between, sentence_between
        index += direction


def _is_calendar_number(word: str, neighbours: Sequence[str]) -> bool:
    """Years (1900-2099) and days beside a month name: dates, not candidate amounts."""
    if len(word) == 4 and word.isdigit() and 1900 <= int(word) <= 2099:
        return True
    return word.isdigit() and int(word) <= 31 and any(neighbour in _MONTHS for neighbour in neighbours)


def _offered_number(
    text: _Text, position: int, gold_numbers: set[str], covered: set[int], dates_count: bool
) -> bool:
    """A number the answer offers besides the gold's own (negated or disavowed ones excluded)."""
    word = text.words[position]
    if not _is_number(word) or word in gold_numbers or position in covered:
        return False
    neighbours = text.words[max(0, position - 1) : position] + text.words[position + 1 : position + 2]
    if not dates_count and _is_calendar_number(word, neighbours):
        return False
    return not (_is_denied(text, position, [word]) or _is_disavowed(text, position, position + 1))


def _is_hedged(
    text: _Text, gold_hits: list[_Hit], gold_values: list[tuple[str, ...]], stale_hits: list[_Hit]
) -> bool:
    """Whether the answer spreads its bet over several candidates of the gold's kind.

    Numeric golds: hedged when the answer offers MAX_CANDIDATES or more other numbers (years and
    days beside a month name are not candidates unless a gold holds a date), or an "or" joins the
    gold's item to another number ("4 or 5"). Other golds: the answer is split into list items (at
    punctuation, "or", "and"); hedged when the gold's item sits among MAX_CANDIDATES or more other
    short items ("Paris, London, Berlin or Rome", also as a bulleted list), or an "or" joins it to one
    ("Paris or London"). Short = at most one content token more than the gold (the gold's own item
    may have two more: "It could be Paris"). Items in another sentence count only when they are bare
    ("Paris. London. Berlin."), so "The suburbs. She moved in May." is not a list. Negated items
    ("not London") and items that are another spelling of the gold are not candidates. Nor are
    superseded values: offering one next to the gold is what the stale penalty (verdict "ambiguous")
    is for.
    """
    covered = {position for hit in [*gold_hits, *stale_hits] for position in hit.positions}
    gold_numbers = {word for value in gold_values for word in value if _is_number(word)}
    segments = _segments(text)
    for hit in gold_hits:
        item = _item_of(segments, hit) if hit.exact else None
        if gold_numbers:
            if item is not None and _or_joined_number(text, segments, item, gold_numbers, covered):
                return True
        elif item is not None and _enumerated(text, segments, item, gold_values, covered):
            return True
    if not gold_numbers:
        return False
    dates_count = any(
        word in _MONTHS or _is_calendar_number(word, ()) for value in gold_values for word in value
    )
    offered = {
        text.words[position]
        for position in range(len(text.words))
        if _offered_number(text, position, gold_numbers, covered, dates_count)
    }
    return len(offered) >= MAX_CANDIDATES


def _or_joined_number(
    text: _Text, segments: list[_Segment], item: tuple[int, int], gold_numbers: set[str], covered: set[int]
) -> bool:
    for direction in (-1, 1):
        for index, or_between, _ in _walk(segments, item, direction):
            segment = segments[index]
            if not _content_stems(text.words[segment.start : segment.end]):
                continue
            if or_between and any(
                _offered_number(text, position, gold_numbers, covered, dates_count=True)
                for position in range(segment.start, segment.end)
            ):
                return True
            break
    return False


def _enumerated(
    text: _Text,
    segments: list[_Segment],
    item: tuple[int, int],
    gold_values: list[tuple[str, ...]],
    covered: set[int],
) -> bool:
    gold_size = max(1, min(len(_content_stems(value)) for value in gold_values))
    item_words = [
        word
        for segment in segments[item[0] : item[1] + 1]
        for word in text.words[segment.start : segment.end]
    ]
    if len(_content_stems(item_words)) > gold_size + 2:
        return False
    candidates: set[tuple[str, ...]] = set()
    for direction in (-1, 1):
        for index, or_between, sentence_between in _walk(segments, item, direction):
            segment = segments[index]
            words = text.words[segment.start : segment.end]
            content = _content_stems(words)
            if not content or set(range(segment.start, segment.end)) <= covered:
                continue  # filler ("it could be") or another spelling of the gold
            if _holds_negation(words):
                continue  # "not London" is not offered as a candidate
            if len(content) > gold_size + 1 or (sentence_between and len(content) < len(words)):
                break  # a longer clause, or a sentence that is not a bare item, ends the list
            if or_between:
                return True
            candidates.add(tuple(content))
    return len(candidates) >= MAX_CANDIDATES


def _holds_negation(words: Sequence[str]) -> bool:
    return any(
        tuple(words[index : index + len(marker)]) == marker
        for marker in _NEGATIONS
        for index in range(len(words))
    )


def _abstains(answer: str, text: _Text) -> bool:
    """An abstention answer: says the information is unavailable and asserts nothing else.

    Every sentence must say unknown, refer to what was said ("you mentioned X but not Y"), be an
    offer ("If you tell me ..."), or carry no content word ("Sorry!"); and no guess may follow
    ("I don't know, maybe Paris" and "You live in Austin. I don't know." are not abstentions).
    """
    if not says_unknown(answer) or _GUESS_MARKERS.search(" ".join(text.words)):
        return False
    for sentence in _SENTENCE_END.split(answer):
        words = _analyse(sentence).words
        if not _content_stems(words) or says_unknown(sentence):
            continue
        if _REFERENCE_WORDS.intersection(words):
            continue
        if any(words[: len(opening)] == opening for opening in _OFFER_OPENINGS):
            continue
        return False
    return True


def _verdict(answered_current: bool, asserted_stale: bool) -> Verdict:
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
) -> Score:
    """Grade one final answer: `reward = r_cur + stale_penalty_weight * r_stale`, in [-lambda, 1].

    - `answered_current` (r_cur = 1): some gold variant is conveyed (`conveys_value` rules) and none
      of the rules below withholds it. For abstention items (`is_abstention`) the gold is instead an
      answer that says the information is not available and asserts nothing (`_abstains`).
    - `asserted_stale` (r_stale = -1): a superseded value is conveyed and not disavowed ("you used
      to live in Detroit", "moved from Detroit", "not Detroit" mention it without asserting it).
      With no superseded values this is always False, so the penalty is inert.
    - Stale inside gold: a stale mention that lies wholly inside a matched gold mention does not
      count (stale "Detroit" in "the suburbs of Detroit"); a gold mention wholly inside a longer
      stale mention does not count either (gold "Detroit" in stale "downtown Detroit"). A stale
      value that normalizes to the same text as a gold value is ignored. In the overlap fallback only
      the tokens a value does not share with its rivals count.
    - Both values, one framed as past: when the answer asserts a stale value, a gold mention it frames
      as past ("previously $350,000, now $400,000" with gold $350,000) is not the answer given, so
      the verdict is `stale`, not `ambiguous`; otherwise "previously A, now B" would beat committing
      to B. Pass `asks_previous_value=True` for questions that ask for the old value ("What was my
      previous ...?"), where the past framing is the right one and this rule is off.
    - Verdict: `correct` (current only), `stale` (stale only), `ambiguous` (both), `wrong` (neither).

    Rules that withhold r_cur (the stale check still runs, so dumping stale values is penalized):
    empty or whitespace answer -> wrong ("empty"); answer longer than `max_answer_chars` once stripped
    ("too_long"); hedged enumeration, see `_is_hedged` ("hedged"); on abstention items, an answer
    that says unknown but also guesses or asserts something ("asserts_value").
    """
    golds = _values(gold_answers, "gold_answers")
    stales = _values(superseded_values, "superseded_values")
    if not is_abstention and not golds:
        raise ValueError("gold_answers is empty: a non-abstention item needs at least one gold answer")
    if not (stale_penalty_weight >= 0 and math.isfinite(stale_penalty_weight)):
        raise ValueError(f"stale_penalty_weight must be a finite number >= 0, got {stale_penalty_weight!r}")
    if answer is not None and not isinstance(answer, str):
        raise TypeError(f"answer must be a string or None, got {type(answer).__name__}: {answer!r}")
    if answer is None or not answer.strip():
        return Score("wrong", False, False, 0.0, "empty")

    text = _analyse(answer)
    # An abstention item's "gold" explains why there is no answer: there is nothing to match.
    gold_values = [] if is_abstention else [words for words in map(_words, golds) if words]
    stale_values = [words for words in map(_words, stales) if words and words not in gold_values]
    gold_stems = frozenset(stem for value in gold_values for stem in _content_stems(value))
    stale_stems = frozenset(stem for value in stale_values for stem in _content_stems(value))

    stale_hits = [hit for value in stale_values for hit in _value_hits(text, value, gold_stems, disavow=True)]
    gold_hits = [
        hit
        for value in gold_values
        for hit in _value_hits(text, value, stale_stems, disavow=False)
        if not any(hit.positions < stale.positions for stale in stale_hits if stale.exact)
    ]
    gold_positions = {position for hit in gold_hits for position in hit.positions}
    asserted_stale = any(not hit.positions <= gold_positions for hit in stale_hits)
    if asserted_stale and not asks_previous_value:
        gold_hits = [
            hit
            for hit in gold_hits
            if not (hit.exact and _is_disavowed(text, min(hit.positions), max(hit.positions) + 1))
        ]

    reason = ""
    if is_abstention:
        answered_current = _abstains(answer, text) and not asserted_stale
        if not answered_current and says_unknown(answer):
            reason = "asserts_value"
    else:
        answered_current = bool(gold_hits)
        if answered_current and _is_hedged(text, gold_hits, gold_values, stale_hits):
            answered_current, reason = False, "hedged"
    if answered_current and len(answer.strip()) > max_answer_chars:
        answered_current, reason = False, "too_long"
    reward = float(answered_current) - stale_penalty_weight * float(asserted_stale)
    return Score(_verdict(answered_current, asserted_stale), answered_current, asserted_stale, reward, reason)


def _words(value: str) -> tuple[str, ...]:
    return _analyse(value).words


def score_episode_answer(episode: Episode, answer: str, *, stale_penalty_weight: float = 1.0) -> Score:
    """Score an answer against an Episode: the one rubric evaluation, environment and training share."""
    return score_answer(
        answer,
        episode.gold_answers,
        episode.superseded_values,
        is_abstention=episode.is_abstention,
        stale_penalty_weight=stale_penalty_weight,
        asks_previous_value=episode.asks_previous_value,
    )
