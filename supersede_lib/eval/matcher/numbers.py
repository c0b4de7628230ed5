"""Numbers in canonical spelling: plain digits, and spelled-out numbers read as digits.

"twenty-five" -> "25", "three hundred fifty thousand" -> "350000", "1.5 million" -> "1500000",
"twenty-first" -> "21st"; leading and trailing zeros dropped ("025.50" -> "25.5"), so that every
spelling of an amount compares equal. `text` calls these while it tokenises.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from supersede_lib.eval.matcher.words import LARGE_SCALES, ORDINALS, TENS, UNITS

MAX_NUMBER_DIGITS = 15  # longer digit runs are ids, not amounts: never scaled
PLAIN_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def canonical_number(digits: str) -> str:
    """Digits without leading zeros or trailing decimal zeros: "007" and "7.0" are both "7"."""
    whole, _, fraction = digits.partition(".")
    whole = whole.lstrip("0") or "0"
    fraction = fraction.rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


def format_decimal(value: Decimal) -> str:
    """A computed amount in canonical digits, never in exponent notation ("1.5E+6")."""
    return canonical_number(format(value, "f"))


def _ordinal_suffix(value: int) -> str:
    """The suffix an ordinal is written with in digits: 1st, 2nd, 3rd, 11th, 21st."""
    if value % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(value % 10, "th")


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


def read_number(words: list[str], breaks: list[int], start: int) -> tuple[int, str]:
    """Read one spelled-out number at `start`; return (tokens consumed, digits) or (0, "")."""
    total = Decimal(0)
    current: Decimal | None = None
    last_scale = math.inf
    index = start
    read_a_word = False
    first = words[start]
    if (
        PLAIN_NUMBER.fullmatch(first)
        and len(first) <= MAX_NUMBER_DIGITS
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
    return index - start, format_decimal(total + (current or 0))


def is_number(word: str) -> bool:
    """Whether a (canonical) token is a plain number."""
    return bool(PLAIN_NUMBER.fullmatch(word))
