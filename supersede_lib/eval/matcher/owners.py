"""Whose value a mention gives: drop the mentions said of someone or something other than the user.

Four readings of the answer, each for exact mentions only: a named possessor before the value ("Sara's
budget is $41,000"); a copular clause that gives the value to another (`attribution`); an owner that
only other turns of the sessions talk about (`sessions`); and a notes line's key that its own text
names again ("Theo: things with Theo are over", where the text, not the key, decides).
"""

from __future__ import annotations

from collections.abc import Sequence

from supersede_lib.eval.matcher.attribution import Attribution, attributed_to_another
from supersede_lib.eval.matcher.mentions import Hit, is_denied
from supersede_lib.eval.matcher.sessions import said_of_another_topic
from supersede_lib.eval.matcher.stems import content_stems, occurrences
from supersede_lib.eval.matcher.text import LIST, AnalysedText, analyse
from supersede_lib.eval.matcher.values import agent_noun_spans


def _is_someone_elses(text: AnalysedText, start: int, end: int, not_others: frozenset[str]) -> bool:
    """The value is given to a named other ("Sara's kitchen budget is $41,000", "the HR's statement
    about research scientist"): said of someone else, it answers nothing about the user. (A value
    that is itself a possessor, "Genentech's work", still names the value: it is not dropped.)
    `not_others`: words whose possessive is no other (the question's own, "Kitten's name is Ziggy" for
    "my kitten's name"; and the episode's values)."""
    position = start
    while position > 0 and not text.breaks[position]:
        position -= 1
        word = text.words[position]
        if text.possessors[position] and text.capitals[position] and word not in not_others:
            return True
    return False


def hit_is_someone_elses(text: AnalysedText, hit: Hit, not_others: frozenset[str]) -> bool:
    """An exact mention given to a named possessor (`_is_someone_elses`)."""
    return hit.exact and _is_someone_elses(text, min(hit.positions), max(hit.positions) + 1, not_others)


def read_attribution(
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
        if not is_denied(text, start, start + len(value))
    ]
    spans += [
        span
        for value in values
        if value in activities
        for span in agent_noun_spans(text, value)
        if not is_denied(text, *span)
    ]
    question_stems = frozenset(content_stems(analyse(question).words))
    return Attribution(not_others, question_stems, tuple(sorted(set(spans))))


def hit_is_attributed(text: AnalysedText, hit: Hit, attribution: Attribution) -> bool:
    """An exact mention said of another person or thing (`attribution`)."""
    return hit.exact and attributed_to_another(
        text, (min(hit.positions), max(hit.positions) + 1), attribution
    )


def hit_is_another_topics(
    text: AnalysedText, hit: Hit, other_topics: frozenset[str], question_stems: frozenset[str]
) -> bool:
    """An exact mention owned by a thing of another turn of the sessions (`sessions`)."""
    return hit.exact and said_of_another_topic(
        text, min(hit.positions), max(hit.positions) + 1, other_topics, question_stems
    )


def is_key_echo(text: AnalysedText, hit: Hit, value: Sequence[str]) -> bool:
    """The mention is in a notes line's key and the line's text names the value again ("Theo: things
    with Theo are over"): the key only labels the line, whose own mention decides."""
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
