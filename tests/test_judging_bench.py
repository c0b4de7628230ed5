"""Judging a kept adapter with this CPU's engine against its committed judgement (`bench.judging`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from supersede_lib.bench.judging import compare_judgements, judging_bench, judging_table
from supersede_lib.train.config import model_dir

KEPT = Path("outputs/cpu_proof_prereg/06_grpo_training/adapters/verdict__seed-11__twin.json")


def _judged(verdicts: list[str], answers: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "episode_id": [f"e{index}" for index in range(len(verdicts))],
            "verdict": verdicts,
            "answer": answers,
        }
    )


def test_agreement_counts_verdicts_answers_and_each_sides_extra_credit() -> None:
    recorded = _judged(["correct", "wrong", "correct", "wrong"], ["a", "b", "c", "d"])
    fresh = _judged(["correct", "correct", "wrong", "wrong"], ["a", "B", "c", "d"])
    agreement = compare_judgements(fresh, recorded)
    assert agreement == {
        "episodes": 4,
        "correct_fresh": 2,
        "correct_recorded": 2,
        "same_verdict": 2,
        "same_answer": 3,
        "correct_only_fresh": 1,
        "correct_only_recorded": 1,
    }


def test_a_judgement_missing_recorded_episodes_is_refused() -> None:
    recorded = _judged(["correct", "wrong"], ["a", "b"])
    with pytest.raises(ValueError, match="1 of 2 recorded episodes"):
        compare_judgements(recorded.head(1), recorded)


@pytest.mark.skipif(
    not (model_dir() / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf").exists(), reason="the 0.5B GGUF is not here"
)
def test_the_kept_twin_is_judged_on_the_first_test_episode_and_compared(one_torch_thread, tmp_path) -> None:
    result = judging_bench(KEPT, "verdict__seed-11__step-20", limit=1, threads=1, run_dir=tmp_path)
    assert (tmp_path / f"{KEPT.stem}.csv").exists()  # the rows the numbers come from are kept
    assert result["agreement"]["episodes"] == 1
    assert "@" in result["engine"]["model"]  # the adapter's hash: its replies never pass for the base's
    assert result["judge_s"] > 0
    assert "| same verdict |" in judging_table(result)


def test_an_unknown_set_is_named() -> None:
    with pytest.raises(ValueError, match="no evaluation set 'nope'"):
        judging_bench(KEPT, "verdict__seed-11__step-20", set_name="nope")
