"""Tokens of an answer or a value: one canonical spelling per value, and where clauses end.

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
is one token (``AT&T`` -> ``att``). Idempotent. Numbers are read by `numbers`.

`analyse(text)` keeps what the matcher needs besides the words: the punctuation between tokens (so
list items and clauses can be told apart), which tokens were capitalised, and which sit in a question.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from supersede_lib.eval.matcher.numbers import (
    MAX_NUMBER_DIGITS,
    PLAIN_NUMBER,
    canonical_number,
    format_decimal,
    read_number,
)
from supersede_lib.eval.matcher.words import (
    ARTICLES,
    CURRENCY_WORDS,
    INTERROGATIVES,
    MONTH_NAMES,
    SHORT_FORMS,
    SHORT_FORMS_NEEDING_CAPITAL,
)

CLAUSE, LIST, SENTENCE = 1, 2, 3
"""Break levels between two tokens (0: none): comma-like, list-like (; / newline bullet), sentence end."""
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'", "\u2032": "'"})
_THOUSANDS_SEPARATOR = re.compile(r"(?<=[0-9]),(?=[0-9]{3}(?![0-9]))")
_CLOCK_OF_A_STAMP = r"(?:at\s+)?[0-2]?[0-9]:(?:[0-5][0-9]\b|[0-5]?$)"  # "21:04", or "at 20:0" cut at the end
_NUMERIC_DATE = re.compile(
    r"\b((?:19|20)[0-9]{2})[/-](0?[1-9]|1[0-2])[/-](0?[1-9]|[12][0-9]|3[01])\b"
    rf"(\s*\([A-Za-z]{{3}}\))?(?:\s*{_CLOCK_OF_A_STAMP})?"  # a stamp's weekday, clock time
)
_STAMP_CLOCK = re.compile(rf"(\((?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\))\s*{_CLOCK_OF_A_STAMP}")
"""A time stamp's clock after its weekday, with no date before it or cut at the end ("(Thu) 08:05",
"(Mon) at 20:0"): echoed from the sessions' stamps, it is no value."""
_WEB_ADDRESS = re.compile(
    r"\b(?:https?://)?(?:www\.)?([A-Za-z][A-Za-z0-9-]*)\.(?:com|org|net|io|co|ai|edu|gov)\b(?:\.[a-z]{2}\b)?(?:/\S*)?"
)
"""A web address reads as the name it is built on ("https://www.pfizer.com" -> "pfizer"): its scheme,
"www" and ending are no words of the answer."""
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
    """The strongest break the punctuation in `gap` makes: a sentence end over a list mark over a comma."""
    if _SENTENCE_BREAK.search(gap):
        return SENTENCE
    if _LIST_BREAK.search(gap):
        return LIST
    return CLAUSE if _CLAUSE_BREAK.search(gap) else 0


_NAME_AMPERSAND = re.compile(r"\b([A-Za-z]{1,4})&([A-Za-z]{1,4})\b")
"""An ampersand inside a short name ("AT&T", "H&M", "at&t"): one token, so its letters are not
read as words ("at", "t") that other values or the question hold."""
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
    small models write it; elsewhere "52.13" stays a decimal. Amounts ("$52.13") and
    shares ("5.25%") keep their period."""
    if not any(_CLOCK_VALUE.fullmatch(value) for value in values):
        return text
    return _CLOCK_WITH_PERIOD.sub(r"\1:\2", text)


def _possessive_or_contraction(match: re.Match[str]) -> str:
    """An "'s" as "is"/"has" (dropped: "it's", "Denver's where") or as whose (`_POSSESSOR_MARK`)."""
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
    if PLAIN_NUMBER.fullmatch(word):
        return canonical_number(word)
    if word.endswith("k") and PLAIN_NUMBER.fullmatch(word[:-1]) and len(word) <= MAX_NUMBER_DIGITS:
        return format_decimal(Decimal(word[:-1]) * 1000)
    if word in SHORT_FORMS and (capitalised or word not in SHORT_FORMS_NEEDING_CAPITAL):
        return SHORT_FORMS[word]
    return word


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
        consumed, number = read_number(words, breaks, index)
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
