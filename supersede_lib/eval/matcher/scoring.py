"""The verdict and the reward of one answer: which mentions count, and the rules that withhold credit.

`score_answer` finds the asserted mentions of the gold and the superseded values (`values`), drops the
ones that are asked, given to someone else (`owners`) or part of a statement of the current date
(`dates`), falls back to a short form when nothing else is named (`short_forms`), and then withholds
r_cur from empty, over-long and hedged answers (`hedges`) and, on abstention items, from answers that
assert something besides "I don't know" (`abstention`). `score_episode_answer` is the same for an
`Episode`: the one rubric evaluation, environment and training share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from supersede_lib.agent.episode import Episode
from supersede_lib.eval.matcher.abstention import abstains, says_unknown
from supersede_lib.eval.matcher.candidates import hedge_context
from supersede_lib.eval.matcher.coherence import is_contradicted, is_garbled_owner
from supersede_lib.eval.matcher.dates import current_date_statements
from supersede_lib.eval.matcher.hedges import is_hedged
from supersede_lib.eval.matcher.mentions import Framing, Hit, is_asked
from supersede_lib.eval.matcher.owners import (
    hit_is_another_topics,
    hit_is_attributed,
    hit_is_someone_elses,
    is_key_echo,
    read_attribution,
)
from supersede_lib.eval.matcher.sessions import other_turn_topics
from supersede_lib.eval.matcher.short_forms import short_form_hits
from supersede_lib.eval.matcher.stems import content_stems, occurrences
from supersede_lib.eval.matcher.text import AnalysedText, analyse, clock_periods_as_colons
from supersede_lib.eval.matcher.values import is_activity, value_hits, value_words
from supersede_lib.eval.matcher.words import SPEAKER_LABEL

Verdict = Literal["correct", "stale", "ambiguous", "wrong"]
MATCHER_VERSION = "v8"
"""The name of these rules as the blind batches record it (labels/blind_batches.jsonl): a batch graded
under this name measured this matcher, so a rule change takes a new name (docs/preregistration.md)."""
MAX_ANSWER_CHARS = 400
"""Answers longer than this (stripped) earn no r_cur: dumping text is not answering."""


@dataclass(frozen=True)
class Score:
    """One graded answer. `reason` says why credit was withheld ("" when nothing was)."""

    verdict: Verdict
    answered_current: bool
    asserted_stale: bool
    reward: float
    reason: str = ""


def _checked_values(values: Sequence[str], field: str) -> list[str]:
    """`values` as a list, refusing one bare string: "Denver" would otherwise read as six values."""
    if isinstance(values, str):
        raise TypeError(f"{field} must be a sequence of strings, not one string: {values!r}")
    checked = []
    for index, value in enumerate(values):
        if not isinstance(value, str):
            raise TypeError(f"{field}[{index}] must be a string, got {type(value).__name__}: {value!r}")
        checked.append(value)
    return checked


def _verdict(answered_current: bool, asserted_stale: bool, hedged: bool = False) -> Verdict:
    """The verdict of the two rewards' signs; a hedge naming a stale value commits to neither."""
    if hedged and asserted_stale:
        return "ambiguous"  # a list of candidates holding the current and a stale value commits to neither
    if answered_current:
        return "ambiguous" if asserted_stale else "correct"
    return "stale" if asserted_stale else "wrong"


def score_answer(
    answer: str | None,
    gold_answers: Sequence[str],
    superseded_values: Sequence[str] = (),
    *,
    is_abstention: bool = False,
    stale_penalty_weight: float = 1.0,
    max_answer_chars: int = MAX_ANSWER_CHARS,
    asks_previous_value: bool = False,
    question: str = "",
    other_topics: frozenset[str] = frozenset(),
) -> Score:
    """Grade one final answer: `reward = r_cur + stale_penalty_weight * r_stale`, in [-lambda, 1].

    - `answered_current` (r_cur = 1): some gold variant is asserted (module doc: not denied, not asked,
      not context) and none of the rules below withholds it. For abstention items (`is_abstention`)
      the gold is instead an answer that says the information is not available and asserts nothing
      (`abstains`).
    - `asserted_stale` (r_stale = -1): a superseded value is asserted. "You used to live in Detroit",
      "moved from Detroit", "not Detroit", "Did you mean Detroit?" mention it without asserting it.
      With no superseded values this is always False, so the penalty is inert.
    - Which framing is context depends on the question: pass `asks_previous_value=True` for questions
      that ask for an earlier value ("What was my previous ...?"). Then past framing asserts ("you
      drove a Volvo XC40 before your latest one" asserts the Volvo) and forward framing is context
      ("Boston before I moved to Minneapolis" asserts Boston only). Otherwise the reverse: "you used
      to live in Denver" does not answer "where do I live?".
    - Stale inside gold: a stale mention wholly inside a matched gold mention does not count (stale
      "Detroit" in "the suburbs of Detroit"), nor a gold mention wholly inside a longer stale one (gold
      "Detroit" in stale "downtown Detroit"); a stale value that normalizes to a gold value is ignored.
      In the overlap fallback only the tokens a value does not share with its rivals count.
    - Values given to someone else: see `owners`; `question` names the user's own things
      ("Kitten's name is Ziggy"). A whole answer that is one value's short form names it
      (`short_forms`). `other_topics`: words only the sessions' turns without evidence use
      (`sessions`); a value owned by such a thing ("cousin: Crunch Fitness") is not the user's.
    - Verdict: `correct` (current only), `stale` (stale only), `ambiguous` (both, or a hedged list
      that holds the gold and a stale value), `wrong` (neither). An ambiguous reward is at most 0 at any λ.

    Rules that withhold r_cur (the stale check still runs, so dumping stale values is penalized):
    empty or whitespace answer -> wrong ("empty"); answer longer than `max_answer_chars` once stripped
    ("too_long"); the gold denied or retracted too ("contradicted") or made its own owner's value
    ("garbled"), see `coherence`; hedged, see `is_hedged` ("hedged"); on abstention items, an answer
    that says unknown but also guesses or asserts something ("asserts_value").
    """
    golds = _checked_values(gold_answers, "gold_answers")
    stales = _checked_values(superseded_values, "superseded_values")
    _check_arguments(answer, golds, is_abstention, stale_penalty_weight)
    if answer is None or not answer.strip():
        return Score("wrong", False, False, 0.0, "empty")

    text = analyse(clock_periods_as_colons(SPEAKER_LABEL.sub("", answer), [*golds, *stales]))
    framing: Framing = "forward" if asks_previous_value else "past"
    # An abstention item's "gold" explains why there is no answer: there is nothing to match.
    gold_values = [] if is_abstention else [words for words in map(value_words, golds) if words]
    stale_values = [words for words in map(value_words, stales) if words and words not in gold_values]
    activities = frozenset(value_words(value) for value in [*golds, *stales] if is_activity(value))
    gold_hits, stale_hits = _asserted_hits(
        text, gold_values, stale_values, framing, question, activities, other_topics
    )
    if not gold_hits and not stale_hits and "?" not in answer:  # a short form alone, never asked
        gold_hits, stale_hits = short_form_hits(text, golds, stales, gold_values, stale_values, question)
    gold_positions = {position for hit in gold_hits for position in hit.positions}
    asserted_stale = any(not hit.positions <= gold_positions for hit in stale_hits)

    reason = ""
    if is_abstention:
        answered_current = abstains(answer, text) and not asserted_stale
        if not answered_current and says_unknown(answer):
            reason = "asserts_value"
    else:
        answered_current = bool(gold_hits)
    if answered_current and len(answer.strip()) > max_answer_chars:
        answered_current, reason = False, "too_long"
    if answered_current and not is_abstention:
        reason = _withheld(text, gold_values, stale_values, gold_hits, stale_hits, framing, question)
        answered_current = not reason
    verdict = _verdict(answered_current, asserted_stale, hedged=reason == "hedged")
    reward = float(answered_current) - stale_penalty_weight * float(asserted_stale)
    if verdict == "ambiguous":
        reward = min(reward, 0.0)  # the reward is the evaluation's verdict: naming both values earns nothing
    return Score(verdict, answered_current, asserted_stale, reward, reason)


def _withheld(
    text: AnalysedText,
    gold_values: list[tuple[str, ...]],
    stale_values: list[tuple[str, ...]],
    gold_hits: list[Hit],
    stale_hits: list[Hit],
    framing: Framing,
    question: str,
) -> str:
    """Why an asserted gold earns no credit ("" when it does): the answer takes it back or garbles its
    owner (`coherence`), or spreads its bet (`hedges`)."""
    if is_contradicted(text, gold_values, stale_values, gold_hits):
        return "contradicted"
    if is_garbled_owner(text, gold_hits):
        return "garbled"
    context = hedge_context(text, gold_values, stale_values, gold_hits, stale_hits, framing, question)
    return "hedged" if is_hedged(context, gold_hits) else ""


def _check_arguments(
    answer: str | None, golds: list[str], is_abstention: bool, stale_penalty_weight: float
) -> None:
    """Refuse arguments that would grade silently wrong: no gold to find, a negative or NaN weight."""
    if not is_abstention and not golds:
        raise ValueError("gold_answers is empty: a non-abstention item needs at least one gold answer")
    if not (stale_penalty_weight >= 0 and math.isfinite(stale_penalty_weight)):
        raise ValueError(f"stale_penalty_weight must be a finite number >= 0, got {stale_penalty_weight!r}")
    if answer is not None and not isinstance(answer, str):
        raise TypeError(f"answer must be a string or None, got {type(answer).__name__}: {answer!r}")


def _asserted_hits(
    text: AnalysedText,
    gold_values: list[tuple[str, ...]],
    stale_values: list[tuple[str, ...]],
    framing: Framing,
    question: str,
    activities: frozenset[tuple[str, ...]] = frozenset(),
    other_topics: frozenset[str] = frozenset(),
) -> tuple[list[Hit], list[Hit]]:
    """The gold and the stale mentions that count: not asked, not someone else's (`owners`), no stale
    mention inside a statement of the current date (`current_date_statements`: "The current date is
    Tuesday" offers no old day; a gold mention there still counts), and no gold mention wholly inside
    an exact stale one. In the overlap fallback a value's tokens shared with its rivals do not count,
    and tokens an exact mention of any value already took are not reused."""
    not_others = frozenset(analyse(question).words).union(*gold_values, *stale_values)
    attribution = read_attribution(text, gold_values + stale_values, not_others, question, activities)
    gold_stems = frozenset(token for value in gold_values for token in content_stems(value))
    stale_stems = frozenset(token for value in stale_values for token in content_stems(value))
    taken = frozenset(
        position
        for value in gold_values + stale_values
        for start in occurrences(text.words, value)
        for position in range(start, start + len(value))
    )
    date_statements = current_date_statements(text)
    stale_hits = [
        hit
        for value in stale_values
        for hit in value_hits(text, value, gold_stems, framing, taken, value in activities)
        if not is_asked(text, hit)
        and not hit.positions <= date_statements
        and not hit_is_someone_elses(text, hit, not_others)
        and not hit_is_attributed(text, hit, attribution)
        and not is_key_echo(text, hit, value)
        and not hit_is_another_topics(text, hit, other_topics, attribution.question_stems)
    ]
    gold_hits = [
        hit
        for value in gold_values
        for hit in value_hits(text, value, stale_stems, framing, taken, value in activities)
        if not is_asked(text, hit)
        and not hit_is_someone_elses(text, hit, not_others)
        and not hit_is_attributed(text, hit, attribution)
        and not is_key_echo(text, hit, value)
        and not hit_is_another_topics(text, hit, other_topics, attribution.question_stems)
        and not any(hit.positions < stale.positions for stale in stale_hits if stale.exact)
    ]
    return gold_hits, stale_hits


def score_episode_answer(episode: Episode, answer: str, *, stale_penalty_weight: float = 1.0) -> Score:
    """Score an answer against an Episode: the one rubric evaluation, environment and training share."""
    return score_answer(
        answer,
        episode.gold_answers,
        episode.superseded_values,
        is_abstention=episode.is_abstention,
        stale_penalty_weight=stale_penalty_weight,
        asks_previous_value=episode.asks_previous_value,
        question=episode.question,
        other_topics=other_turn_topics(episode),
    )
