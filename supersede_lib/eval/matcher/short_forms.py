"""An answer that names a value by its short form: "Honda" for "Honda CR-V", "Manager" for "Store Manager".

Tried only when no value is mentioned otherwise and the answer asks nothing, and only for a whole
answer whose short form belongs to exactly one value of the episode: inside a longer answer a make or
a head noun may belong to anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from supersede_lib.eval.matcher.candidates import holds_negation
from supersede_lib.eval.matcher.mentions import Hit
from supersede_lib.eval.matcher.numbers import is_number
from supersede_lib.eval.matcher.stems import content_stems, occurrences, stem
from supersede_lib.eval.matcher.text import AnalysedText, analyse
from supersede_lib.eval.matcher.words import MONTHS, STOPWORDS, WEEKDAYS

MIN_SHORT_FORM_CHARS = 3
"""A short form's every word is this long or longer: a fragment ("CR") names nothing alone."""


def _short_forms(value: str, words: tuple[str, ...]) -> list[tuple[str, ...]]:
    """What a multi-word value is called for short: a name by its first words ("Honda" for "Honda
    CR-V", "Jeep" for "Jeep Wrangler": the make or brand), a lower-case noun phrase by its last words
    ("painting" for "watercolor painting", "data analyst" for "senior data analyst": its head)."""
    if len(words) < 2:
        return []
    if value[:1].isupper():
        return [words[:size] for size in range(1, len(words))]
    if value == value.lower():
        return [words[-size:] for size in range(1, len(words))]
    return []


def _answer_core(text: AnalysedText, question: str) -> list[int]:
    """The positions of what an answer names, once a key ("car:"), function words, dates and the
    question's own words are set aside ("Honda is current on 2023/03/04." is "Honda"); empty for an
    answer that denies or asks (`score_answer` also sets aside any answer with a question mark)."""
    if any(text.questions) or holds_negation(text.words) or sum(text.colons) > 1:
        return []
    start = max((position for position, colon in enumerate(text.colons) if colon), default=0)
    question_stems = frozenset(content_stems(analyse(question).words))
    return [
        position
        for position in range(start, len(text.words))
        if text.words[position] not in STOPWORDS | MONTHS | WEEKDAYS
        and not is_number(text.words[position])
        and stem(text.words[position]) not in question_stems
    ]


def short_form_hits(
    text: AnalysedText,
    golds: Sequence[str],
    stales: Sequence[str],
    gold_values: list[tuple[str, ...]],
    stale_values: list[tuple[str, ...]],
    question: str,
) -> tuple[list[Hit], list[Hit]]:
    """An answer that names nothing but a short form of one value ("Honda is current.", "jeep",
    "Manager") names that value, when no other value of the episode holds that short form and each
    of its words has MIN_SHORT_FORM_CHARS or more. Only whole answers: inside a longer answer a
    make or a head noun may belong to anything."""
    core = _answer_core(text, question)
    if not core or core != list(range(core[0], core[-1] + 1)):
        return [], []
    named = tuple(stem(word) for word in text.words[core[0] : core[-1] + 1])
    if any(len(word) < MIN_SHORT_FORM_CHARS for word in named):
        return [], []
    values = list(zip([*golds, *stales], [*gold_values, *stale_values], strict=False))
    owners = [
        words
        for value, words in values
        if any(tuple(map(stem, short)) == named for short in _short_forms(value, words))
    ]
    holders = [words for _, words in values if occurrences(list(words), list(named))]
    if len(owners) != 1 or len(holders) != 1:
        return [], []
    hit = Hit(frozenset(core), exact=False)
    return ([hit], []) if owners[0] in gold_values else ([], [hit])
