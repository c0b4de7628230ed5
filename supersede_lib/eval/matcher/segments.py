"""An answer as list items: where one candidate ends and the next begins.

The hedge rules (`hedges`) and the overlap fallback (`values`) ask which item a mention sits in and
what lies beside it. Items split at punctuation and at "or"/"and"; each remembers what separates it
from the item before (an "or", a sentence end, a strong separator) and whether it gives advice or is
a notes line's label ("gym:"), which offers no value of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from supersede_lib.eval.matcher.mentions import Hit
from supersede_lib.eval.matcher.text import LIST, SENTENCE, AnalysedText
from supersede_lib.eval.matcher.words import ADVICE_WORDS, LIST_SEPARATORS


@dataclass(frozen=True)
class Segment:
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


def list_items(text: AnalysedText) -> list[Segment]:
    """List items: token runs split at punctuation and at "or"/"and"."""
    segments: list[Segment] = []
    start: int | None = None
    saw_or = saw_list_word = False
    gap = 0
    for position, word in enumerate(text.words):
        if start is not None and (text.breaks[position] or word in LIST_SEPARATORS):
            segments.append(
                Segment(
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
            Segment(
                start,
                len(text.words),
                saw_or,
                gap == SENTENCE,
                saw_list_word or gap >= LIST,
                _gives_advice(text.words[start:]),
            )
        )
    return segments


def _gives_advice(words: Sequence[str]) -> bool:
    """The item recommends something ("but you might want to consider a hybrid"): not a rival answer."""
    return any(word in ADVICE_WORDS for word in words)


def items_of_hit(segments: list[Segment], hit: Hit) -> tuple[int, int] | None:
    """Indices of the first and last segment the hit overlaps."""
    first, last = min(hit.positions), max(hit.positions)
    inside = [
        index for index, segment in enumerate(segments) if segment.start <= last and segment.end > first
    ]
    return (inside[0], inside[-1]) if inside else None


def walk_beside(
    segments: list[Segment], item: tuple[int, int], direction: int, words: Sequence[str] = ()
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


def _label_before(segments: list[Segment], first: int, words: Sequence[str]) -> tuple[str, ...]:
    """The words of the nearest label before segment `first` ("partner" in "partner: Amara"), if any:
    the key whose line the segment is on."""
    labels = [segment for segment in segments[:first] if segment.is_label] if words else []
    return _segment_words(labels[-1], words) if labels else ()


def _segment_words(segment: Segment, words: Sequence[str]) -> tuple[str, ...]:
    """The words of one item, as a key two labels can be compared by."""
    return tuple(words[segment.start : segment.end])
