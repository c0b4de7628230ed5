"""Abstention: an answer that says the information is not available, and nothing more.

On an abstention item the right answer is "I don't know"; an answer that says so but also guesses
("I don't know, maybe Paris") or asserts something ("You live in Austin. I don't know.") is not an
abstention, so a policy cannot collect the credit of both. The phrasings of "unknown" live in
`words.UNKNOWN`.
"""

from __future__ import annotations

import re

from supersede_lib.eval.matcher.stems import content_stems
from supersede_lib.eval.matcher.text import AnalysedText, analyse, normalize
from supersede_lib.eval.matcher.words import GUESS_MARKERS, OFFER_OPENINGS, REFERENCE_WORDS, UNKNOWN

_SENTENCE_END = re.compile(r"[.!?\n]+")
# Inside a sentence, a claim can sit beside the "not sure": "Elena eats buttermilk, but I'm not sure".
_CLAUSE_BREAK = re.compile(r"[;:]|\s(?=but\b)", re.IGNORECASE)


def says_unknown(text: str) -> bool:
    """Whether the text says the asked information is not available.

    Phrase patterns over the normalized text: "I don't know", "you haven't mentioned", "no
    information", "not in my notes", "can't tell", "my notes don't say", "not specified" ...
    """
    return bool(text and text.strip()) and bool(UNKNOWN.search(normalize(text)))


def abstains(answer: str, text: AnalysedText) -> bool:
    """An abstention answer: says the information is unavailable and asserts nothing else.

    Every sentence, and every clause of it split at "but", ":" or ";", must say unknown, refer to
    what was said ("you mentioned X but not Y"), be an offer ("If you tell me ..."), or carry no content word ("Sorry!"); and no guess may follow
    ("I don't know, maybe Paris" and "You live in Austin. I don't know." are not abstentions).
    """
    if not says_unknown(answer) or GUESS_MARKERS.search(" ".join(text.words)):
        return False
    for clause in (
        part for sentence in _SENTENCE_END.split(answer) for part in _CLAUSE_BREAK.split(sentence)
    ):
        words = analyse(clause).words
        if not content_stems(words) or says_unknown(clause):
            continue
        words = words[1:] if words and words[0] == "but" else words
        if REFERENCE_WORDS.intersection(words):
            continue
        if any(words[: len(opening)] == opening for opening in OFFER_OPENINGS):
            continue
        return False
    return True
