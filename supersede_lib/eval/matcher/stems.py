"""Tokens compared loosely: plurals stripped, activities named by their doers, runs of tokens found.

Values and answers meet here after `text` has spelled both canonically: "suburbs" is "suburb", a
"climber" names "rock climbing", "any time Fitness" is "Anytime Fitness", and `occurrences` finds a
value as a whole run of tokens, so "4" never matches inside "14".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from supersede_lib.eval.matcher.words import STOPWORDS


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
    workshops" is woodworking as surely as "woodworker" is. Spelled without a dictionary, so
    a form nobody writes ("swimm") matches nothing."""
    nouns = agent_nouns(activity)
    if not nouns or len(activity) - 3 < MIN_ACTIVITY_STEM_CHARS:
        return nouns
    return nouns | {activity[:-3]}


def content_stems(words: Iterable[str]) -> list[str]:
    """Stems of the words that are not stopwords."""
    return [stem(word) for word in words if word not in STOPWORDS]


MIN_SPLIT_PART_CHARS = 3
"""Each half of a word written as two is this long or longer ("any time" for "anytime"): "a part"
is no "apart"."""


def split_word_spans(
    words: Sequence[str], breaks: Sequence[int], value: Sequence[str]
) -> list[tuple[int, int]]:
    """Spans where `value` occurs with some of its words written as two ("any time Fitness" for
    "Anytime Fitness"): the same name, spaced apart. Exact runs are `occurrences`'."""
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
    """The two tokens at `position`, joined, spell `word` ("any" + "time" for "anytime")."""
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
