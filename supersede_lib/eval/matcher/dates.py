"""Dates and times in an answer: words that date a value rather than offer one.

Answers echo the sessions' time stamps ("2023/04/17 (Mon) 21:04", which `text` reads as "2023 April 17
(Mon)") and state when they are asked ("The current date is 2023/05/26 (Fri) 17:20"). Neither the
stamp's weekday, nor a year, nor a day beside a month is a candidate value, unless the gold itself is
a date; these helpers tell such words apart from counts and amounts.
"""

from __future__ import annotations

from collections.abc import Sequence

from supersede_lib.eval.matcher.numbers import is_number
from supersede_lib.eval.matcher.text import SENTENCE, AnalysedText
from supersede_lib.eval.matcher.words import CURRENT_DATE_FRAMES, DATE_STATEMENT_LINKS, MONTHS, WEEKDAYS


def is_timestamp_weekday(text: AnalysedText, start: int, end: int) -> bool:
    """A weekday right after a date ("2023/04/17 (Mon) 21:04", read as "2023 April 17 (Mon)"): part of a
    time stamp, not a day given as the answer."""
    before = text.words[max(0, start - 3) : start]
    return (
        all(word in WEEKDAYS for word in text.words[start:end])
        and len(before) == 3
        and all(word.isdigit() or word in MONTHS for word in before)
        and any(is_calendar_number(word, ()) for word in before)
    )


def current_date_statements(text: AnalysedText) -> frozenset[int]:
    """Positions of clauses that state the current date or time ("The current date is 2023/05/26 (Fri)
    17:20", "Today is Friday, 23 February 2023"): a frame from CURRENT_DATE_FRAMES followed only by date
    and time words, within one sentence. The answer notes when it is asked; neither the clause, nor its
    numbers, nor its weekday is a second candidate for the gold. A clause whose words are not
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
            names_a_date = any(map(makes_a_date, words[end:stop]))
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
        is_calendar_number(word, neighbour_words(words, position))
        or clock_time_at(text, position) is not None
    )


def neighbour_words(words: Sequence[str], position: int) -> tuple[str, ...]:
    """The words just before and after `position`: a month there makes a small number a day."""
    return tuple(words[max(0, position - 1) : position]) + tuple(words[position + 1 : position + 2])


def is_day_of_a_date(text: AnalysedText, start: int, end: int) -> bool:
    """A bare number that is the day of a date ("2023/06/04", read as "2023 June 4"): not a count."""
    if end - start != 1 or not text.words[start].isdigit() or int(text.words[start]) > 31:
        return False
    neighbours = text.words[max(0, start - 1) : start] + text.words[end : end + 1]
    return any(word in MONTHS for word in neighbours)


def is_calendar_number(word: str, neighbours: Sequence[str]) -> bool:
    """Years (1900-2099) and days beside a month name: dates, not candidate amounts."""
    if len(word) == 4 and word.isdigit() and 1900 <= int(word) <= 2099:
        return True
    return word.isdigit() and int(word) <= 31 and any(neighbour in MONTHS for neighbour in neighbours)


def makes_a_date(word: str) -> bool:
    """A month, a weekday or a year: a word that makes the words around it a date."""
    return word in MONTHS or word in WEEKDAYS or is_calendar_number(word, ())


def is_date_words(words: Sequence[str]) -> bool:
    """Month and weekday names, days and years only, with at least one name or year ("Jun 27, 2023",
    "(Mon)"): a date, not a value."""
    named = [word for word in words if makes_a_date(word)]
    return bool(named) and all(word in named or (word.isdigit() and int(word) <= 31) for word in words)


def clock_time_at(text: AnalysedText, position: int) -> tuple[str, str] | None:
    """The clock time ("30:14", read as the numbers 30 and 14 across a colon) that the number at
    `position` is a part of, as a pair; None for a number that is no part of one."""
    words, colons = text.words, text.colons
    if position + 1 < len(words) and colons[position + 1] and is_number(words[position + 1]):
        return words[position], words[position + 1]
    if position > 0 and colons[position] and is_number(words[position - 1]):
        return words[position - 1], words[position]
    return None
