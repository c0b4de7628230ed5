"""Text analysis for the answer matcher: one canonical spelling per value, and where clauses end.

`normalize(text)` gives the canonical spelling the matcher compares: Unicode NFKC, casefold, accents
dropped, apostrophes dropped (``"Rachel's"`` -> ``rachel``), other punctuation -> spaces, articles
a/an/the dropped, thousands separators dropped (``350,000`` -> ``350000``), ``350k`` -> ``350000``,
number words -> digits (``twenty-five`` -> ``25``, ``three hundred fifty thousand`` -> ``350000``,
``1.5 million`` -> ``1500000``), ordinal words -> ``1st``/``2nd``/``21st``, trailing decimal zeros
dropped, ``%`` -> ``percent``. Currency symbols ($ EUR GBP JPY INR KRW) and currency words (dollar(s),
usd, buck(s), euro(s), eur) are dropped: the question fixes the currency, the amount is the value, so
``$350,000`` == ``350000 dollars`` == ``350K`` == ``350 thousand``. Short forms become the long form:
weekday and month abbreviations (``Wed`` -> ``wednesday``, ``Sept`` -> ``september``; the ones that are
also ordinary words, Mon Wed Sat Sun Jan Mar, only when capitalised) and common brand short forms
(``Chevy`` -> ``chevrolet``, ``VW`` -> ``volkswagen``). A short name joined by an ampersand
is one token (``AT&T`` -> ``att``). Idempotent.

`analyse(text)` keeps what the matcher needs besides the words: the punctuation between tokens (so
list items and clauses can be told apart), which tokens were capitalised, and which sit in a question.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from supersede_lib.eval.matcher_words import (
    ARTICLES,
    CURRENCY_WORDS,
    INTERROGATIVES,
    LARGE_SCALES,
    MONTH_NAMES,
    ORDINALS,
    SHORT_FORMS,
    SHORT_FORMS_NEEDING_CAPITAL,
    STOPWORDS,
    TENS,
    UNITS,
)

CLAUSE, LIST, SENTENCE = 1, 2, 3
"""Break levels between two tokens (0: none): comma-like, list-like (; / newline bullet), sentence end."""

_MAX_NUMBER_DIGITS = 15  # longer digit runs are ids, not amounts: never scaled

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'", "\u2032": "'"})
_THOUSANDS_SEPARATOR = re.compile(r"(?<=[0-9]),(?=[0-9]{3}(?![0-9]))")
_CLOCK_OF_A_STAMP = (
    r"(?:at\s+)?[0-2]?[0-9]:(?:[0-5][0-9]\b|[0-5]?$)"  # "21:04", "at 20:0" cut at the end (v5)
)
_NUMERIC_DATE = re.compile(
    r"\b((?:19|20)[0-9]{2})[/-](0?[1-9]|1[0-2])[/-](0?[1-9]|[12][0-9]|3[01])\b"
    rf"(\s*\([A-Za-z]{{3}}\))?(?:\s*{_CLOCK_OF_A_STAMP})?"  # a stamp's weekday, clock time
)
_STAMP_CLOCK = re.compile(rf"(\((?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\))\s*{_CLOCK_OF_A_STAMP}")
"""A time stamp's clock after its weekday, with no date before it or cut at the end ("(Thu) 08:05",
"(Mon) at 20:0"): echoed from the sessions' stamps, it is no value (matcher v5)."""
_WEB_ADDRESS = re.compile(
    r"\b(?:https?://)?(?:www\.)?([A-Za-z][A-Za-z0-9-]*)\.(?:com|org|net|io|co|ai|edu|gov)\b(?:\.[a-z]{2}\b)?(?:/\S*)?"
)
"""A web address reads as the name it is built on ("https://www.pfizer.com" -> "pfizer"): its scheme,
"www" and ending are no words of the answer (matcher v5)."""
_CLOCK_VALUE = re.compile(r"\s*[0-9]{1,3}:[0-5][0-9]\s*")
_CLOCK_WITH_PERIOD = re.compile(r"(?<![0-9.$\u20ac\u00a3])([0-9]{1,3})\.([0-5][0-9])(?![0-9%])")
_CURRENCY_SYMBOLS = re.compile(r"[$\u20ac\u00a3\u00a5\u20b9\u20a9]")
_POSSESSIVE = re.compile(r"'s\b", re.IGNORECASE)
# "'s" before one of these is "is" or "has" ("Nadia's your partner", "Denver's where"), not whose
_CONTRACTION_NEXT = frozenset(
    """the a an your my his her their our in at on from where now still currently not been also here
    there what who how going got just always never moved living working dating seeing called named
    back gone done""".split()
)
_CONTRACTED_WORDS = frozenset(
    """it that what he she there here who where how let this one everything nothing someone
    something today now which""".split()
)  # "it's", "that's": always "is"
_POSSESSOR_MARK = "\ue000"
"""Stands in for a possessive "'s" between tokens: `analyse` flags the token before it."""
_TOKEN = re.compile(r"[0-9]+(?:\.[0-9]+)?[^\W\d_]*|[^\W_]+")
_SENTENCE_BREAK = re.compile(r"[.!?]")
_LIST_BREAK = re.compile(r"[;/|\n\u2022]")
_CLAUSE_BREAK = re.compile(r"[,:()\[\]{}\u2013\u2014\u2026]|\s-\s")
_PLAIN_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


@dataclass(frozen=True)
class AnalysedText:
    """Normalized tokens with, per token: `breaks[i]` the punctuation between token i-1 and i (0,
    CLAUSE, LIST, SENTENCE), `capitals[i]` whether it was written capitalised, `questions[i]` whether
    its sentence is a question, `exclaims[i]` whether its sentence ends in an exclamation mark,
    `colons[i]` whether that punctuation holds a colon."""

    words: tuple[str, ...]
    breaks: tuple[int, ...]
    capitals: tuple[bool, ...]
    questions: tuple[bool, ...]
    exclaims: tuple[bool, ...]
    colons: tuple[bool, ...] = ()  # a colon before token i: what precedes is a label ("gym: Blink")
    possessors: tuple[bool, ...] = ()  # token i owns what follows ("Sara's budget"): whose, not what


def normalize(text: str) -> str:
    """The canonical spelling of `text`: lower-case tokens joined by single spaces (module doc)."""
    return " ".join(analyse(text).words)


def analyse(text: str) -> AnalysedText:
    """Tokens of `text` in canonical spelling, with the breaks, capitals and question marks between."""
    prepared = _prepare(text)
    words: list[str] = []
    breaks: list[int] = []
    capitals: list[bool] = []
    questions: list[bool] = []
    exclaims: list[bool] = []
    colons: list[bool] = []
    possessors: list[bool] = []
    pending_break = 0
    pending_colon = False
    previous_end = 0
    sentence_start = 0
    for match in _TOKEN.finditer(prepared):
        gap = prepared[previous_end : match.start()]
        if _SENTENCE_BREAK.search(gap):
            _mark_sentence(words, breaks, (questions, exclaims), sentence_start, gap)
            sentence_start = len(words)
        pending_break = max(pending_break, _break_level(gap))
        pending_colon = pending_colon or ":" in gap
        if _POSSESSOR_MARK in gap and possessors:
            possessors[-1] = True
        previous_end = match.end()
        raw = match.group()
        word = _canonical_token(raw.casefold(), capitalised=raw[:1].isupper())
        if word in ARTICLES or word in CURRENCY_WORDS:
            continue  # dropped; a break before it still separates what follows
        words.append(word)
        breaks.append(pending_break)
        capitals.append(raw[:1].isupper())
        questions.append(False)
        exclaims.append(False)
        colons.append(pending_colon)
        possessors.append(False)
        pending_break, pending_colon = 0, False
    _mark_sentence(words, breaks, (questions, exclaims), sentence_start, prepared[previous_end:])
    return _merge_number_words(words, breaks, capitals, questions, exclaims, colons, possessors)


def _mark_sentence(
    words: list[str], breaks: list[int], flags: tuple[list[bool], list[bool]], sentence_start: int, gap: str
) -> None:
    """Flag the sentence from `sentence_start` by its end mark (`flags`: questions, exclaims).

    A question ends in "?"; it runs from the last clause that opens like one ("Did you ...?", "You
    asked: 'Is it ...?'", "Denver, is that right?" flags "is that right" only). "Denver?", "It's 4?!"
    and "You live in Denver, right?" are tentative answers, not questions.
    """
    questions, exclaims = flags
    size = len(words) - sentence_start
    if "!" in gap:
        exclaims[sentence_start:] = [True] * size
    if "?" not in gap:
        return
    for position in range(len(words) - 1, sentence_start - 1, -1):
        opens_clause = position == sentence_start or breaks[position] or len(words[position - 1]) == 1
        if opens_clause and words[position] in INTERROGATIVES:
            questions[position:] = [True] * (len(words) - position)
            return


def _break_level(gap: str) -> int:
    if _SENTENCE_BREAK.search(gap):
        return SENTENCE
    if _LIST_BREAK.search(gap):
        return LIST
    return CLAUSE if _CLAUSE_BREAK.search(gap) else 0


_NAME_AMPERSAND = re.compile(r"\b([A-Za-z]{1,4})&([A-Za-z]{1,4})\b")
"""An ampersand inside a short name ("AT&T", "H&M", "at&t"): one token, so its letters are not
read as words ("at", "t") that other values or the question hold (matcher v3)."""

_NUMBER_DASH = re.compile(r"(?<=\d)\s*[\u2010-\u2015\u2212]\s*(?=[$\u20ac\u00a3]?\d)")
"""A dash of any width between two numbers ("3–4", "3 — 4")."""


def _prepare(text: str) -> str:
    """Accents, quotes, separators and currency symbols resolved; case is kept (tokens casefold later)."""
    if not isinstance(text, str):
        raise TypeError(f"expected a string to normalize, got {type(text).__name__}: {text!r}")
    composed = _NAME_AMPERSAND.sub(r"\1\2", unicodedata.normalize("NFKC", text))
    stripped = "".join(ch for ch in unicodedata.normalize("NFKD", composed) if not unicodedata.combining(ch))
    prepared = unicodedata.normalize("NFKC", stripped).translate(_QUOTES)
    prepared = _THOUSANDS_SEPARATOR.sub("", prepared)
    prepared = _WEB_ADDRESS.sub(r"\1", prepared)
    # "2023/05/30" reads as "2023 May 30": a date in words, which the hedge rules know is not a value
    prepared = _NUMERIC_DATE.sub(
        lambda m: f"{m[1]} {MONTH_NAMES[int(m[2]) - 1]} {int(m[3])}{m[4] or ''}", prepared
    )
    prepared = _STAMP_CLOCK.sub(r"\1", prepared)
    prepared = _NUMBER_DASH.sub("-", prepared)  # "3–4" is the range "3-4", not a list of two items
    prepared = _CURRENCY_SYMBOLS.sub(" ", prepared.replace("%", " percent "))
    return _POSSESSIVE.sub(_possessive_or_contraction, prepared).replace("'", "")


def clock_periods_as_colons(text: str, values: Iterable[str]) -> str:
    """`text` with "52.13" read as the clock time 52:13 when one of `values` is a clock time (m:ss).

    Where the asked thing is a time, a period between minutes and seconds is the clock's colon, as
    small models write it (matcher v5); elsewhere "52.13" stays a decimal. Amounts ("$52.13") and
    shares ("5.25%") keep their period."""
    if not any(_CLOCK_VALUE.fullmatch(value) for value in values):
        return text
    return _CLOCK_WITH_PERIOD.sub(r"\1:\2", text)


def _possessive_or_contraction(match: re.Match[str]) -> str:
    before = re.search(r"([A-Za-z]+)$", match.string[: match.start()])
    if before is not None and before[1][:1].isupper() and re.match(r"\s*[0-9]", match.string[match.end() :]):
        # "Kenji's 27:41 record": a name's "'s" before a number is whose, not "is" ("It's 4" is "is")
        return "" if before[1].casefold() in _CONTRACTED_WORDS else _POSSESSOR_MARK
    following = re.match(r"\s*([A-Za-z]+)", match.string[match.end() :])
    contraction = (
        following is None
        or before is None
        or following[1].casefold() in _CONTRACTION_NEXT
        or before[1].casefold() in _CONTRACTED_WORDS
    )
    return "" if contraction else _POSSESSOR_MARK


def _canonical_token(word: str, *, capitalised: bool) -> str:
    """Plain numbers lose leading and trailing zeros; ``350k`` becomes ``350000``; short forms expand."""
    if _PLAIN_NUMBER.fullmatch(word):
        return _canonical_number(word)
    if word.endswith("k") and _PLAIN_NUMBER.fullmatch(word[:-1]) and len(word) <= _MAX_NUMBER_DIGITS:
        return _format_decimal(Decimal(word[:-1]) * 1000)
    if word in SHORT_FORMS and (capitalised or word not in SHORT_FORMS_NEEDING_CAPITAL):
        return SHORT_FORMS[word]
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


def _merge_number_words(
    words: list[str],
    breaks: list[int],
    capitals: list[bool],
    questions: list[bool],
    exclaims: list[bool],
    colons: list[bool],
    possessors: list[bool],
) -> AnalysedText:
    """Spelled-out numbers become one digit token; it keeps the flags of its first word."""
    kept: list[int] = []
    merged_words: list[str] = []
    index = 0
    while index < len(words):
        consumed, number = _read_number(words, breaks, index)
        kept.append(index)
        merged_words.append(number if consumed else words[index])
        index += consumed or 1
    return AnalysedText(
        tuple(merged_words),
        tuple(breaks[i] for i in kept),
        tuple(capitals[i] for i in kept),
        tuple(questions[i] for i in kept),
        tuple(exclaims[i] for i in kept),
        tuple(colons[i] for i in kept),
        tuple(possessors[i] for i in kept),
    )


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
        and (words[start + 1] in LARGE_SCALES or words[start + 1] == "hundred")
    ):
        current = Decimal(first)
        index += 1
    while index < len(words):
        word = words[index]
        if index > start and breaks[index]:
            break
        if word in UNITS or word in TENS:
            value = UNITS.get(word, TENS.get(word, 0))
            if not _small_part_accepts(current, value):
                break
            current = Decimal(value) + (current or 0)
        elif word in ORDINALS:
            value = ORDINALS[word]
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
        elif word in LARGE_SCALES:
            scale = LARGE_SCALES[word]
            if scale >= last_scale:
                break
            total += (current if current is not None else Decimal(1)) * scale
            current, last_scale = None, scale
        elif word == "and" and read_a_word and words[index - 1] in {"hundred", *LARGE_SCALES}:
            following = words[index + 1] if index + 1 < len(words) else ""
            if following not in UNITS and following not in TENS and following not in ORDINALS:
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


def stem(word: str) -> str:
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


AGENT_SUFFIXES = ("er", "or")
"""What turns an activity into the person who does it: "climbing" -> "climber", "acting" -> "actor"."""
MIN_ACTIVITY_CHARS = 6
"""An -ing word this long or longer can name an activity ("hiking"); "king" and "ring" cannot."""


def agent_nouns(activity: str) -> frozenset[str]:
    """The person-nouns of an -ing activity word: "beekeeping" -> {"beekeeper", "beekeepor"}.

    A person who names themselves by the activity ("I'm a knitter") names the activity. The forms are
    spelled from the word's stem without a dictionary: a form nobody writes ("beekeepor") matches
    nothing, so only real words count. Empty for words that are no -ing activity."""
    if not (activity.isalpha() and activity.endswith("ing") and len(activity) >= MIN_ACTIVITY_CHARS):
        return frozenset()
    return frozenset(activity[:-3] + suffix for suffix in AGENT_SUFFIXES)


MIN_ACTIVITY_STEM_CHARS = 4
"""An activity's bare stem this long or longer names it ("woodwork", "garden"); "bak" and "hik" do not."""


def activity_forms(activity: str) -> frozenset[str]:
    """The words besides the activity itself that name it: its person-nouns (`agent_nouns`) and its bare
    stem, the thing the activity works on ("woodworking" -> "woodwork", "gardening" -> "garden"): "Woodwork
    workshops" is woodworking as surely as "woodworker" is (matcher v4). Spelled without a dictionary, so
    a form nobody writes ("swimm") matches nothing."""
    nouns = agent_nouns(activity)
    if not nouns or len(activity) - 3 < MIN_ACTIVITY_STEM_CHARS:
        return nouns
    return nouns | {activity[:-3]}


def content_stems(words: Iterable[str]) -> list[str]:
    """Stems of the words that are not stopwords."""
    return [stem(word) for word in words if word not in STOPWORDS]


def is_number(word: str) -> bool:
    """Whether a (canonical) token is a plain number."""
    return bool(_PLAIN_NUMBER.fullmatch(word))


MIN_SPLIT_PART_CHARS = 3
"""Each half of a word written as two is this long or longer ("any time" for "anytime"): "a part"
is no "apart"."""


def split_word_spans(
    words: Sequence[str], breaks: Sequence[int], value: Sequence[str]
) -> list[tuple[int, int]]:
    """Spans where `value` occurs with some of its words written as two ("any time Fitness" for
    "Anytime Fitness"): the same name, spaced apart (matcher v5). Exact runs are `occurrences`'."""
    spans = []
    for start in range(len(words)):
        position, split = start, False
        for word in value:
            if position < len(words) and stem(words[position]) == stem(word):
                position += 1
            elif _written_as_two(words, breaks, position, word):
                position, split = position + 2, True
            else:
                break
        else:
            if split:
                spans.append((start, position))
    return spans


def _written_as_two(words: Sequence[str], breaks: Sequence[int], position: int, word: str) -> bool:
    if position + 1 >= len(words) or breaks[position + 1]:
        return False
    first, second = words[position], words[position + 1]
    return (
        first.isalpha()
        and second.isalpha()
        and min(len(first), len(second)) >= MIN_SPLIT_PART_CHARS
        and stem(first + second) == stem(word)
    )


def occurrences(words: Sequence[str], value: Sequence[str]) -> list[int]:
    """Start positions where `value` occurs as a contiguous run of whole tokens (plurals aside)."""
    stems = [stem(word) for word in words]
    wanted = [stem(word) for word in value]
    size = len(wanted)
    return [start for start in range(len(stems) - size + 1) if stems[start : start + size] == wanted]
