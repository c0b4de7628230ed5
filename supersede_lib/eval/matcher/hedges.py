"""Hedged answers: the gold offered among other candidates of its kind earns no r_cur.

Listing values until one is right ("Paris or London", "Paris, London, Berlin", "4 or 5") would game a
reward that only asks whether the gold is present, so `is_hedged` withholds r_cur from such answers.
What counts as a candidate is `candidates`' business; this module walks the list items beside the
gold's (`segments`) and decides whether they make a hedge.
"""

from __future__ import annotations

from supersede_lib.eval.matcher.candidates import (
    HedgeContext,
    candidate_number,
    co_subject,
    comma_rival,
    is_rival_value,
    not_a_candidate,
    offered_number,
)
from supersede_lib.eval.matcher.mentions import Hit
from supersede_lib.eval.matcher.segments import items_of_hit, walk_beside
from supersede_lib.eval.matcher.stems import content_stems
from supersede_lib.eval.matcher.words import GUESS_WORDS, HEDGE_WORDS, STOPWORDS

MAX_CANDIDATES = 2
"""More distinct candidate values of the gold's kind than this (gold included) is a hedge."""


def is_hedged(context: HedgeContext, gold_hits: list[Hit]) -> bool:
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
        item = items_of_hit(context.segments, hit) if hit.exact else None
        if item is not None and (_single_rival(context, item) or _enumerated(context, item)):
            return True
    if not context.gold_numbers:
        return False
    offered = {
        candidate_number(context.text, position)
        for position in range(len(context.text.words))
        if offered_number(context, position, context.dates_count)
    }
    return len(offered) >= MAX_CANDIDATES


def _single_rival(context: HedgeContext, item: tuple[int, int]) -> bool:
    """One other candidate across an "or" or a strong separator (see `is_hedged`)."""
    text, segments = context.text, context.segments
    frame = {
        word
        for segment in segments[item[0] : item[1] + 1]
        for word in text.words[segment.start : segment.end]
    }
    item_is_bare = not (frame & STOPWORDS)
    for direction in (-1, 1):
        for index, or_between, sentence_between, strong_between in walk_beside(
            segments, item, direction, text.words
        ):
            segment = segments[index]
            if not_a_candidate(context, segment):
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
                new = co_subject(text, segment) or new
            if context.gold_numbers:
                rival = len(new) == 1 and offered_number(context, new[0], dates_count=True)
            else:
                rival = is_rival_value(context, new, guessing=bool((words | frame) & GUESS_WORDS))
            if rival and or_between:
                return True
            later_words = words if direction > 0 else frame  # the guess word sits between the two
            if rival and (later_words & GUESS_WORDS or (strong_between and not sentence_between)):
                return True
            # "Denver! Enjoy." is not a second guess
            exclaims = text.exclaims[segment.start] or text.exclaims[segments[item[0]].start]
            if rival and sentence_between and item_is_bare and not exclaims and not (words & STOPWORDS):
                return True
            if rival and not (strong_between or sentence_between) and comma_rival(context, new):
                return True
            break
    return False


def _enumerated(context: HedgeContext, item: tuple[int, int]) -> bool:
    """The gold's item among an "or" or MAX_CANDIDATES or more short items (see `is_hedged`)."""
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
        for index, or_between, sentence_between, _ in walk_beside(segments, item, direction, text.words):
            segment = segments[index]
            words = text.words[segment.start : segment.end]
            if not_a_candidate(context, segment):
                continue
            content = content_stems(words)
            if len(content) > context.gold_size + 1 or (sentence_between and len(content) < len(words)):
                break  # a longer clause, or a sentence that is not a bare item, ends the list
            if or_between:
                return True
            candidates.add(tuple(content))
    return len(candidates) >= MAX_CANDIDATES


def _or_joined_number(context: HedgeContext, item: tuple[int, int]) -> bool:
    """A numeric gold's item joined by an "or" to the nearest item that offers another number ("4 or 5")."""
    text, segments = context.text, context.segments
    for direction in (-1, 1):
        for index, or_between, _, _ in walk_beside(segments, item, direction, text.words):
            segment = segments[index]
            if not content_stems(text.words[segment.start : segment.end]):
                continue
            if or_between and any(
                offered_number(context, position, dates_count=True)
                for position in range(segment.start, segment.end)
            ):
                return True
            break
    return False
