"""Whose value a clause gives: the user's, or another person's or thing's.

"Kenji is currently dating Sofia", "The phone carrier Rafael uses is US Mobile", "The trainer is a
member of CorePower Yoga": each names a value of the asked kind but says it of someone else, so it
answers nothing about the user. Possessives ("Sara's budget is $41,000") are `owners`' own rule; this
module reads clauses built on a copula ("is", "are", "was"), which split into a subject (whose thing)
and a predicate (what it is). Without a parser the rules stay structural:

- A clause that holds a user word ("you", "your", "my") is the user's: nothing is dropped.
- Another in the subject: a role noun ("the trainer", "of the violin teacher") or a named agent
  ("the carrier Rafael uses", "the employer of Kenji", "Kenji is dating ...") that is neither a value
  nor a word of the question. The predicate's values are that other's. A role noun that heads the
  subject with the value right after the copula only names the value ("The partner is Sofia").
- A value as the subject and another in the predicate: another live value of the episode ("Kenji is
  dating Sofia", "Elena is Isaac's partner"), another owner ("Atlassian is Kenji's employer") or an
  "of" phrase naming another ("... the employer of the violin teacher"). The clause relates two
  others to each other; neither value is the user's. Compared values ("27:01 is faster than 27:41")
  and denied ones ("Monday, not Thursday") are no other.
- A value that owns the subject's thing ("Jonah's gift is thoughtful", "Hannah's partner's name is
  ..."): the clause says what that thing is; the value only whose it is.
- A value as the subject of the question's own verb ("Deloitte works for Kansas City" for "Which
  company do I work for?"): it stands where the user stands, so the object is what the clause
  offers.
- A value opening an apposition to another value ("Chewy, a Salesforce company"): it only describes
  the value before it, which is what the answer gives.
- A value as the subject of a relation to a named person ("Elena is dating Dev"): the clause pairs the
  value with someone else, not with the user.
"""

from __future__ import annotations

from dataclasses import dataclass

from supersede_lib.eval.matcher.numbers import is_number
from supersede_lib.eval.matcher.stems import stem
from supersede_lib.eval.matcher.text import CLAUSE, AnalysedText
from supersede_lib.eval.matcher.words import (
    CLAUSE_JOINERS,
    COPULAS,
    INDEFINITES,
    MONTHS,
    NAME_WORDS,
    REGION_WORDS,
    ROLE_NOUNS,
    STOPWORDS,
    USER_WORDS,
    WEEKDAYS,
)

Span = tuple[int, int]
ADVERBS_BEFORE_A_VERB = frozenset("currently now still also".split())
MAX_APPOSITION_TAIL = 2  # words after the value that close an apposition: "a Salesforce (subsidiary) company"
RELATION_WORDS = frozenset("dating seeing marrying married engaged".split())  # "is dating Dev"
VERB_PREPOSITIONS = frozenset("for at in on with to by from".split())  # "works for", "lives in"


@dataclass(frozen=True)
class Clause:
    """A clause [start, end) split at its first copula: subject [start, copula), predicate after it."""

    start: int
    copula: int
    end: int


@dataclass(frozen=True)
class Attribution:
    """What the rules need besides the text: the words that are not another's (the question's and the
    values'), and where the episode's values are asserted (not denied)."""

    not_others: frozenset[str]
    question_stems: frozenset[str]
    value_spans: tuple[Span, ...]


def copular_clause(text: AnalysedText, position: int) -> Clause | None:
    """The clause around `position`, bounded by punctuation and joining words ("Kenji is current and
    Sofia was before" is two clauses), if a copula splits it."""
    start = position
    while start > 0 and not text.breaks[start] and text.words[start - 1] not in CLAUSE_JOINERS:
        start -= 1
    end = position + 1
    while end < len(text.words) and not text.breaks[end] and text.words[end] not in CLAUSE_JOINERS:
        end += 1
    copula = next((index for index in range(start, end) if text.words[index] in COPULAS), None)
    return Clause(start, copula, end) if copula is not None and copula > start else None


def attributed_to_another(text: AnalysedText, span: Span, attribution: Attribution) -> bool:
    """Whether the value at `span` is said of someone or something other than the user (module doc)."""
    if _does_the_asked_act(text, span, attribution) or _describes_another_value(text, span, attribution):
        return True
    clause = copular_clause(text, span[0])
    if clause is None or span[1] > clause.end or span[0] < clause.copula < span[1]:
        return False
    if USER_WORDS.intersection(text.words[clause.start : clause.end]):
        return False
    if span[1] <= clause.copula and _owns_the_subject(text, clause, span):
        return True
    if span[1] <= clause.copula and _in_a_relation_with_another(text, clause, span, attribution):
        return True
    if _other_value_across(text, clause, span, attribution):
        return True
    if span[0] > clause.copula:
        return _subject_is_another(text, clause, span, attribution)
    return _predicate_holds_another(text, clause, span, attribution)


def _owns_the_subject(text: AnalysedText, clause: Clause, span: Span) -> bool:
    """The value owns the subject's thing ("Jonah's gift is thoughtful", "Hannah's partner's name is
    ..."): the clause says what that thing is, and the value only whose it is. A value that owns its
    own name ("Ziggy's name is ...") still names itself."""
    if not text.possessors[span[1] - 1]:
        return False
    owned = [word for word in text.words[span[1] : clause.copula] if word not in STOPWORDS]
    return bool(owned) and owned[0] not in NAME_WORDS


def _in_a_relation_with_another(
    text: AnalysedText, clause: Clause, span: Span, attribution: Attribution
) -> bool:
    """The value is the whole subject of a relation to a named person who is no value ("Elena is dating
    Dev", "Elena is married to Dev"): it says whom the value is with, and that is not the user. "Elena is
    dating me" keeps the user (a user word, see `attributed_to_another`); "Elena is dating" names no one."""
    subject = [index for index in range(clause.start, clause.copula) if text.words[index] not in STOPWORDS]
    if not subject or not all(span[0] <= index < span[1] for index in subject):
        return False
    predicate = [
        index for index in range(clause.copula + 1, clause.end) if text.words[index] not in STOPWORDS
    ]
    if not predicate or text.words[predicate[0]] not in RELATION_WORDS:
        return False
    return any(_could_be_a_name(text, index, attribution) for index in predicate[1:])


def _does_the_asked_act(text: AnalysedText, span: Span, attribution: Attribution) -> bool:
    """The value is the subject of the question's own verb (present tense, then a preposition: "Deloitte
    works for Kansas City" for "Which company do I work for?"): the value stands where the user stands in
    the question, so the clause gives its object, not the value, as the answer. A user word in the
    sentence puts the user back ("Deloitte is where I work")."""
    position = span[1]
    while position < len(text.words) and text.words[position] in ADVERBS_BEFORE_A_VERB:
        position += 1
    if position + 1 >= len(text.words) or text.breaks[position] or text.breaks[position + 1]:
        return False
    verb, following = text.words[position], text.words[position + 1]
    acts = verb.endswith("s") and not verb.endswith("ss") and verb not in COPULAS | STOPWORDS
    if not (acts and stem(verb) in attribution.question_stems and following in VERB_PREPOSITIONS):
        return False
    sentence_start = span[0]
    while sentence_start > 0 and not text.breaks[sentence_start]:
        sentence_start -= 1
    sentence_end = position + 1
    while sentence_end < len(text.words) and not text.breaks[sentence_end]:
        sentence_end += 1
    return not USER_WORDS.intersection(text.words[sentence_start:sentence_end])


def _describes_another_value(text: AnalysedText, span: Span, attribution: Attribution) -> bool:
    """The value opens an apposition to the value right before the comma, and a short noun phrase ends
    it ("Chewy, a Salesforce company", "Rivian, an Amazon-backed maker."): it says what the first value
    is or belongs to, so it is not offered as the answer. A bare list ("Chewy, Salesforce") has no
    noun after the value and is left to the list rules."""
    start, end = span
    if start == 0 or text.breaks[start] != CLAUSE or text.colons[start]:
        return False
    described = any(
        other[1] == start and not _same_value(text, span, other) for other in attribution.value_spans
    )
    if not described:
        return False
    tail = end
    while tail < len(text.words) and not text.breaks[tail]:
        tail += 1
    nouns = [word for word in text.words[end:tail] if word not in STOPWORDS]
    return 1 <= tail - end <= MAX_APPOSITION_TAIL and len(nouns) == tail - end


def _subject_is_another(text: AnalysedText, clause: Clause, span: Span, attribution: Attribution) -> bool:
    """Another in the subject owns the predicate's value, unless a role noun heading the subject is
    only named by the value right after the copula ("The partner is Sofia")."""
    others = [
        position
        for position in range(clause.start, clause.copula)
        if _is_other(text, clause, position, attribution)
    ]
    if not others:
        return False
    head = _head(text, clause)
    between = text.words[clause.copula + 1 : span[0]]
    names_the_head = (
        others == [head] and _is_role(text.words[head], attribution) and set(between) <= STOPWORDS
    )
    return not names_the_head


def _head(text: AnalysedText, clause: Clause) -> int:
    """The subject's last word, unless an "of" phrase follows the head ("employer of the teacher"). A
    name is its owner ("the partner's name" is the partner)."""
    words = text.words[clause.start : clause.copula]
    head = clause.start + (words.index("of") - 1 if "of" in words[1:] else len(words) - 1)
    if text.words[head] in NAME_WORDS and head > clause.start and text.possessors[head - 1]:
        return head - 1
    return head


def _is_other(text: AnalysedText, clause: Clause, position: int, attribution: Attribution) -> bool:
    """A role noun, or a name acting in the subject: after "of", before a verb ("Rafael uses"), or the
    whole subject of a progressive ("Kenji is dating ...")."""
    word = text.words[position]
    if _is_role(word, attribution):
        return True
    if not _could_be_a_name(text, position, attribution):
        return False
    after_of = _owns_an_of_phrase(text, clause.start, position, clause.copula)
    following = text.words[position + 1] if position + 1 < clause.copula else ""
    verb_next = (
        following.endswith(("s", "ed")) and not following.endswith("ss") and following not in STOPWORDS
    )
    content = [index for index in range(clause.start, clause.copula) if text.words[index] not in STOPWORDS]
    progressive = content == [position] and _predicate_opens_with_ing(text, clause)
    return after_of or verb_next or progressive


def _owns_an_of_phrase(text: AnalysedText, start: int, position: int, end: int) -> bool:
    """The word ends an "of" phrase within [start, end): "the employer of Kenji", "of the violin
    teacher" name the owner. Followed by more ("one of the Sydney firms", "a member of the personal
    trainer group") it only describes the phrase's head."""
    following = text.words[position + 1] if position + 1 < end else ""
    return "of" in text.words[start:position] and (not following or following in STOPWORDS)


def _is_role(word: str, attribution: Attribution) -> bool:
    """A role noun that is neither asked about ("Who is my manager?") nor one of the episode's values
    (a job title "teacher" is the user's own)."""
    return (
        stem(word) in ROLE_NOUNS
        and stem(word) not in attribution.question_stems
        and word not in attribution.not_others
    )


def _could_be_a_name(text: AnalysedText, position: int, attribution: Attribution) -> bool:
    """Capitalised and none of: a value's or the question's word, a function word, a place, a date."""
    word = text.words[position]
    ordinary = STOPWORDS | INDEFINITES | REGION_WORDS | MONTHS | WEEKDAYS
    return (
        text.capitals[position]
        and word not in attribution.not_others
        and word not in ordinary
        and not is_number(word)
    )


def _predicate_opens_with_ing(text: AnalysedText, clause: Clause) -> bool:
    """ "... is (currently) dating Sofia": the subject does something, so it is someone."""
    for word in text.words[clause.copula + 1 : clause.end]:
        if word not in STOPWORDS:
            return word.endswith("ing")
    return False


def _other_value_across(text: AnalysedText, clause: Clause, span: Span, attribution: Attribution) -> bool:
    """Another live value on the other side of the copula, tied to it by more than the copula ("Kenji
    is dating Sofia", "Elena is Isaac's partner"): the clause relates two candidates to each other.
    Not when one is only set equal to the other ("QA engineer is now a content strategist" tells of a
    change, as the old and the new value), nor when compared ("faster than 27:41")."""
    in_subject = span[0] < clause.copula
    for other in attribution.value_spans:
        subject, predicate = (span, other) if in_subject else (other, span)
        across = clause.start <= subject[0] and subject[1] <= clause.copula < predicate[0] <= clause.end
        if not across or predicate[1] > clause.end or _same_value(text, span, other):
            continue
        if text.words[predicate[0] - 1] != "than" and not _equated(text, clause, subject, predicate):
            return True
    return False


def _equated(text: AnalysedText, clause: Clause, subject: Span, predicate: Span) -> bool:
    """Only function words between the copula and the second value, and neither value owns anything:
    "X is (now) Y", not "Elena's partner is Isaac" nor "Elena is Isaac's partner"."""
    between = text.words[clause.copula + 1 : predicate[0]]
    owners = text.possessors[subject[1] - 1] or text.possessors[predicate[1] - 1]
    return set(between) <= STOPWORDS and not owners


def _predicate_holds_another(
    text: AnalysedText, clause: Clause, span: Span, attribution: Attribution
) -> bool:
    """A value in the subject, and in the predicate another owner or an "of" phrase naming another
    ("Atlassian is Kenji's employer", "... the employer of Kenji", "... of the violin teacher")."""
    for position in range(clause.copula + 1, clause.end):
        word = text.words[position]
        if not (_is_role(word, attribution) or _could_be_a_name(text, position, attribution)):
            continue
        if text.possessors[position] or _owns_an_of_phrase(text, clause.copula + 1, position, clause.end):
            return True
    return False


def _same_value(text: AnalysedText, first: Span, second: Span) -> bool:
    """Two spans spell one value (plurals aside): a value never rivals or describes itself."""
    return [stem(word) for word in text.words[first[0] : first[1]]] == [
        stem(word) for word in text.words[second[0] : second[1]]
    ]
