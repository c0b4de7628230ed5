"""Whose value it is, by the sessions: a value said of a thing from another turn of the history.

A trained policy writes notes lines and sentences whose owner is a thing the history talks about in
turns that have nothing to do with the question: "cousin: Crunch Fitness", "speed workout: 50:21",
"My laptop is with Verizon.", "the renter's name Hannah". The value is the asked kind (a gym, a time,
a carrier, a name) but the answer gives it to that other thing, so it answers nothing about the user.
From the answer alone such an owner cannot be told from a harmless label ("gym: Crunch Fitness");
the sessions tell them apart. A word the sessions use only in turns that hold nothing of the asked
fact (each turn's evidence flag, `Turn.has_answer`, set by the generator and by LongMemEval; see
`SOURCES_FLAGGING_EXCHANGES`), and that neither the question nor a value uses, names another topic.

The owner of a value mention is read structurally, without a parser:
- a notes line's key: the words before the colon on the value's line ("cousin: Crunch Fitness");
- a possessor in the value's clause ("the renter's name Hannah");
- the subject of the copular clause whose predicate holds the value ("My laptop is with Verizon").
The value is said of another topic when every content word of that owner is such a word: one word of
the asked topic ("gym class: Crunch") keeps it the user's.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from supersede_lib.agent.episode import Episode
from supersede_lib.eval.matcher.attribution import copular_clause
from supersede_lib.eval.matcher.numbers import is_number
from supersede_lib.eval.matcher.stems import content_stems
from supersede_lib.eval.matcher.text import LIST, AnalysedText, analyse
from supersede_lib.eval.matcher.words import KIND_WORDS, USER_WORDS

MIN_TOPIC_WORD_CHARS = 3  # shorter tokens ("ok", "pm") name no topic
SOURCES_FLAGGING_EXCHANGES = ("synthetic",)
"""Sources whose evidence flag marks the whole exchange that carries the fact, so an unflagged turn is
another request even inside an evidence session (the generator's "in passing" requests). LongMemEval
flags only the turns that hold the answer; the rest of its evidence sessions is mostly the same topic
(a mortgage chat around the pre-approval amount), so there a whole session with evidence is the asked
topic and only sessions without evidence name other things."""


@lru_cache(maxsize=1024)  # an episode is graded once per rollout or answer: analyse its sessions once
def other_turn_topics(episode: Episode) -> frozenset[str]:
    """The word stems the episode's sessions use only in turns without evidence, and that neither the
    question nor a value uses. Empty when no turn is flagged as evidence: then the turns cannot be told
    apart, and no value is said of another topic."""
    exchange_flags = episode.source.startswith(SOURCES_FLAGGING_EXCHANGES)
    evidence: set[str] = set()
    elsewhere: set[str] = set()
    for session in episode.sessions:
        session_holds_evidence = any(turn.has_answer for turn in session.turns)
        for turn in session.turns:
            # An unflagged turn (None) might hold the fact: its words never name another topic.
            other = turn.has_answer is False and (exchange_flags or not session_holds_evidence)
            (elsewhere if other else evidence).update(_stems(turn.content))
    if not evidence:
        return frozenset()
    asked = _stems(episode.question).union(*map(_stems, [*episode.gold_answers, *episode.superseded_values]))
    return frozenset(
        word
        for word in elsewhere - evidence - asked - KIND_WORDS
        if word.isalpha() and len(word) >= MIN_TOPIC_WORD_CHARS
    )


def said_of_another_topic(
    text: AnalysedText, start: int, end: int, topics: frozenset[str], question_stems: frozenset[str]
) -> bool:
    """Whether the value at [start, end) belongs, by the answer's own structure, to an owner whose every
    content word names another topic of the sessions (module doc). A line whose own text names the asked
    thing ("Road trip: 4 half marathons" for "how many half marathons") is about it, whatever its key."""
    if not topics:
        return False
    return any(
        _names_another_topic(text.words[first:last], topics)
        for first, last in _owners(text, start, end, question_stems)
    )


def _stems(content: str) -> set[str]:
    """The content stems of a turn, question or value: the words topics are compared by."""
    return set(content_stems(analyse(content).words))


def _names_another_topic(words: Iterable[str], topics: frozenset[str]) -> bool:
    """Every content word of the owner (user words and numbers aside) is another topic's."""
    owner = [word for word in content_stems(words) if word not in USER_WORDS and not is_number(word)]
    return bool(owner) and all(word in topics for word in owner)


def _owners(
    text: AnalysedText, start: int, end: int, question_stems: frozenset[str]
) -> list[tuple[int, int]]:
    """The spans that may own the value at [start, end): its line's key (unless the line's text names
    the asked thing), a possessor before it in its clause, and the subject of its copular clause."""
    owners = []
    key = _line_key(text, start)
    if key is not None and not question_stems.intersection(
        content_stems(text.words[key[1] : _line_end(text, key[1])])
    ):
        owners.append(key)
    if (possessor := _possessor_before(text, start)) is not None:
        owners.append(possessor)
    clause = copular_clause(text, start)
    if clause is not None and start > clause.copula and end <= clause.end:
        owners.append((clause.start, clause.copula))
    return owners


def _line_key(text: AnalysedText, start: int) -> tuple[int, int] | None:
    """The words before the colon nearest before `start` on its line ("cousin" in "cousin: Crunch")."""
    colon = start
    while not text.colons[colon]:
        if colon == 0 or text.breaks[colon] >= LIST:
            return None
        colon -= 1
    if colon == 0:
        return None  # a colon before the first word labels nothing
    line_start = colon - 1
    while line_start > 0 and text.breaks[line_start] < LIST:
        line_start -= 1
    return (line_start, colon) if line_start < colon else None


def _line_end(text: AnalysedText, position: int) -> int:
    """Where the line holding `position` ends (the next list or sentence break)."""
    end = position + 1
    while end < len(text.words) and text.breaks[end] < LIST:
        end += 1
    return end


def _possessor_before(text: AnalysedText, start: int) -> tuple[int, int] | None:
    """The possessor nearest before `start` in its clause, with the words that qualify it ("renter" in
    "the renter's name Hannah", "cat food" in "cat food's brand")."""
    position = start
    while position > 0 and not text.breaks[position]:
        position -= 1
        if text.possessors[position]:
            first = position
            while first > 0 and not text.breaks[first] and not text.possessors[first - 1]:
                first -= 1
            return first, position + 1
    return None
