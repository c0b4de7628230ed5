"""The LongMemEval LLM-judge protocol (the paper's Section 5.1 grading), and judge/matcher agreement.

Protocol (from the benchmark's description): one user message, temperature 0, at most 10 reply
tokens; the item counts as correct when "yes" occurs in the lower-cased reply. Knowledge-update
items use a criterion that accepts an answer which also mentions earlier values as long as the
updated value is the one given; abstention items (ids with `_abs`) ask whether the response
recognises the question as unanswerable. The prompt wording below is our own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from supersede_lib.agent.episode import Episode
from supersede_lib.models.chat import ChatModel

JUDGE_MAX_TOKENS = 10
JUDGE_TEMPERATURE = 0.0

KNOWLEDGE_UPDATE_TEMPLATE = (
    "You are grading a chat assistant's answer about a user whose circumstances changed over time.\n"
    "Below are the question, the correct (most recent) answer, and the assistant's response.\n"
    "Say yes if the response contains the correct answer. A response that also mentions older, "
    "outdated information still counts as correct, provided the updated value is the one it gives as "
    "its answer. Otherwise say no.\n\n"
    "Question: {question}\n\n"
    "Correct answer: {gold}\n\n"
    "Assistant's response: {answer}\n\n"
    "Is the response correct? Reply with yes or no only."
)

ABSTENTION_TEMPLATE = (
    "You are grading a chat assistant's answer to a question that cannot be answered from what the "
    "user has said. Below are the question, a note on why it is unanswerable, and the assistant's "
    "response.\n"
    "Say yes if the response recognises that the question cannot be answered, for example by saying "
    "the information is missing or incomplete, or that related information was mentioned but not the "
    "thing asked about. Say no if it gives a definite answer.\n\n"
    "Question: {question}\n\n"
    "Why it is unanswerable: {gold}\n\n"
    "Assistant's response: {answer}\n\n"
    "Does the response recognise the question as unanswerable? Reply with yes or no only."
)


@dataclass(frozen=True)
class JudgeVerdict:
    """The judge's decision plus its raw reply and cost."""

    correct: bool
    reply: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False


def reply_says_yes(reply: str) -> bool:
    """The protocol's rule: correct when 'yes' occurs anywhere in the lower-cased reply."""
    return "yes" in (reply or "").lower()


class LongMemEvalJudge:
    """Grades one answer per call with the LongMemEval yes/no protocol."""

    def __init__(self, model: ChatModel, *, max_tokens: int = JUDGE_MAX_TOKENS, seed: int = 0) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.seed = seed

    @property
    def name(self) -> str:
        return self.model.name

    def judge_prompt(self, episode: Episode, answer: str) -> list[dict[str, str]]:
        """The single user message sent to the judge model."""
        template = ABSTENTION_TEMPLATE if episode.is_abstention else KNOWLEDGE_UPDATE_TEMPLATE
        gold = episode.gold_text or " / ".join(episode.gold_answers)
        if not gold:
            raise ValueError(
                f"episode {episode.episode_id!r}: fields 'gold_text' and 'gold_answers' are empty"
            )
        content = template.format(question=episode.question, gold=gold, answer=answer or "")
        return [{"role": "user", "content": content}]

    async def ajudge_result(self, episode: Episode, answer: str) -> JudgeVerdict:
        """Ask the judge model; return its verdict with the raw reply and token counts."""
        result = await self.model.achat(
            self.judge_prompt(episode, answer),
            max_tokens=self.max_tokens,
            temperature=JUDGE_TEMPERATURE,
            seed=self.seed,
        )
        return JudgeVerdict(
            correct=reply_says_yes(result.text),
            reply=result.text,
            prompt_tokens=int(result.prompt_tokens or 0),
            completion_tokens=int(result.completion_tokens or 0),
            cached=bool(result.cached),
        )

    async def ajudge(self, episode: Episode, answer: str) -> bool:
        """True when the judge says the answer is correct."""
        return (await self.ajudge_result(episode, answer)).correct


def matcher_judge_agreement(
    frame: pd.DataFrame, matcher_column: str = "verdict", judge_column: str = "judge_correct"
) -> dict[str, Any]:
    """How often the programmatic matcher and the LLM judge agree, with Cohen's kappa.

    The matcher counts as correct when `verdict == "correct"` (or when `matcher_column` is a
    boolean column). Rows without a judge verdict are left out.
    """
    for column in (matcher_column, judge_column):
        if column not in frame.columns:
            raise KeyError(f"agreement needs a {column!r} column; got {list(frame.columns)}")
    judged = frame[frame[judge_column].notna()]
    matcher = judged[matcher_column]
    matcher_correct = [
        (value == "correct") if isinstance(value, str) else bool(value) for value in matcher.tolist()
    ]
    judge_correct = [bool(value) for value in judged[judge_column].tolist()]
    return agreement_from_pairs(matcher_correct, judge_correct)


def agreement_from_pairs(matcher_correct: list[bool], judge_correct: list[bool]) -> dict[str, Any]:
    """The 2x2 table of two binary graders, raw agreement and Cohen's kappa."""
    if len(matcher_correct) != len(judge_correct):
        raise ValueError("matcher and judge verdict lists differ in length")
    pairs: Mapping[tuple[bool, bool], int] = {
        key: sum(1 for pair in zip(matcher_correct, judge_correct, strict=True) if pair == key)
        for key in ((True, True), (True, False), (False, True), (False, False))
    }
    n = len(matcher_correct)
    both_correct, matcher_only = pairs[(True, True)], pairs[(True, False)]
    judge_only, both_wrong = pairs[(False, True)], pairs[(False, False)]
    result: dict[str, Any] = {
        "n": n,
        "both_correct": both_correct,
        "both_wrong": both_wrong,
        "matcher_only_correct": matcher_only,
        "judge_only_correct": judge_only,
        "matcher_accuracy": None,
        "judge_accuracy": None,
        "agreement": None,
        "cohen_kappa": None,
    }
    if n == 0:
        return result
    observed = (both_correct + both_wrong) / n
    matcher_rate = (both_correct + matcher_only) / n
    judge_rate = (both_correct + judge_only) / n
    expected = matcher_rate * judge_rate + (1 - matcher_rate) * (1 - judge_rate)
    # kappa is undefined (0/0) when both graders give one constant, identical verdict
    kappa = None if expected == 1.0 else (observed - expected) / (1 - expected)
    result.update(
        matcher_accuracy=matcher_rate, judge_accuracy=judge_rate, agreement=observed, cohen_kappa=kappa
    )
    return result
