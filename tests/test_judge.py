"""The LongMemEval judge protocol and matcher/judge agreement."""

import asyncio

import pandas as pd
import pytest

from supersede_lib.agent.episode import Episode, Session, Turn
from supersede_lib.eval.judge import (
    ABSTENTION_TEMPLATE,
    KNOWLEDGE_UPDATE_TEMPLATE,
    LongMemEvalJudge,
    agreement_from_pairs,
    matcher_judge_agreement,
    reply_says_yes,
)
from supersede_lib.models.chat import ChatResult


class RecordingJudgeModel:
    """Replies with a fixed text and records every call's arguments."""

    name = "judge-fake"

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.calls: list[dict] = []

    async def achat(self, messages, *, max_tokens=None, temperature=0.0, seed=0):
        self.calls.append({"messages": messages, "max_tokens": max_tokens, "temperature": temperature})
        return ChatResult(text=self.reply, prompt_tokens=50, completion_tokens=1, model=self.name)


def _episode(is_abstention: bool = False, gold_text: str = "") -> Episode:
    session = Session("s0", "2023/05/01 (Mon) 10:00", (Turn("user", "I moved to Lisbon."),))
    return Episode(
        episode_id="ku_abs" if is_abstention else "ku",
        sessions=(session,),
        question="Where do I live now?",
        question_date="2023/06/01 (Thu) 10:00",
        gold_answers=("Lisbon",),
        superseded_values=("Porto",),
        is_abstention=is_abstention,
        gold_text=gold_text,
    )


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("yes", True), ("Yes.", True), ("YES, correct", True), ("no", False), ("No.", False), ("", False)],
)
def test_yes_rule_is_lowercase_substring(reply: str, expected: bool) -> None:
    assert reply_says_yes(reply) is expected


def test_protocol_one_user_message_temperature_zero_ten_tokens() -> None:
    model = RecordingJudgeModel("Yes")
    judge = LongMemEvalJudge(model)
    assert asyncio.run(judge.ajudge(_episode(), "You live in Lisbon (before: Porto).")) is True
    (call,) = model.calls
    assert call["max_tokens"] == 10 and call["temperature"] == 0.0
    (message,) = call["messages"]
    assert message["role"] == "user"
    assert "Where do I live now?" in message["content"]
    assert "Lisbon" in message["content"] and "You live in Lisbon (before: Porto)." in message["content"]


def test_knowledge_update_and_abstention_use_different_criteria() -> None:
    judge = LongMemEvalJudge(RecordingJudgeModel("no"))
    ku_prompt = judge.judge_prompt(_episode(), "Porto")[0]["content"]
    abs_prompt = judge.judge_prompt(_episode(is_abstention=True, gold_text="You never said where."), "?")[0]
    assert ku_prompt.split("Question:")[0] == KNOWLEDGE_UPDATE_TEMPLATE.split("Question:")[0]
    assert abs_prompt["content"].split("Question:")[0] == ABSTENTION_TEMPLATE.split("Question:")[0]
    assert "You never said where." in abs_prompt["content"]
    assert "outdated" in ku_prompt and "unanswerable" in abs_prompt["content"]


def test_gold_text_preferred_over_variants() -> None:
    judge = LongMemEvalJudge(RecordingJudgeModel("no"))
    content = judge.judge_prompt(_episode(gold_text="Lisbon, Portugal"), "x")[0]["content"]
    assert "Correct answer: Lisbon, Portugal" in content


def test_no_reply_is_incorrect_and_result_carries_tokens() -> None:
    judge = LongMemEvalJudge(RecordingJudgeModel("No"))
    verdict = asyncio.run(judge.ajudge_result(_episode(), "Porto"))
    assert verdict.correct is False and verdict.reply == "No"
    assert (verdict.prompt_tokens, verdict.completion_tokens) == (50, 1)


def test_agreement_counts_and_kappa() -> None:
    frame = pd.DataFrame(
        {
            "verdict": ["correct", "correct", "wrong", "stale", "correct", "wrong"],
            "judge_correct": [True, False, False, False, True, None],
        }
    )
    result = matcher_judge_agreement(frame)
    assert result["n"] == 5
    assert (result["both_correct"], result["matcher_only_correct"]) == (2, 1)
    assert (result["judge_only_correct"], result["both_wrong"]) == (0, 2)
    assert result["agreement"] == pytest.approx(0.8)
    # p_o = .8; p_matcher = .6, p_judge = .4 -> p_e = .24 + .24 = .48; kappa = .32 / .52
    assert result["cohen_kappa"] == pytest.approx(0.32 / 0.52)


def test_kappa_undefined_for_constant_identical_graders_and_empty_input() -> None:
    assert agreement_from_pairs([True, True], [True, True])["cohen_kappa"] is None
    assert agreement_from_pairs([], [])["agreement"] is None


def test_agreement_missing_column_is_named() -> None:
    with pytest.raises(KeyError, match="judge_correct"):
        matcher_judge_agreement(pd.DataFrame({"verdict": ["correct"]}))
