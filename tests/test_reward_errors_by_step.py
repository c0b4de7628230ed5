"""The matcher's credit errors on training rollouts, by step (issue 26, item 5: a policy optimised
against a grader finds its holes). A rollout's verdict was its reward, so reward paid for an answer the
labels do not call correct (over-credit) is what training would learn to seek."""

import pandas as pd
import pytest

from supersede_lib.labelling.agreement import (
    LABELLED_ANSWERS,
    grade_labelled_answers,
    read_labelled_answers,
    reward_errors_by_step,
    rollout_condition,
    rollout_step,
)
from supersede_lib.labelling.labelled_episodes import labelled_episodes

OVER = "over-credit (paid, labels: not correct)"
UNDER = "under-credit (labels: correct, not paid)"


@pytest.mark.parametrize(
    ("source", "step"),
    [
        ({"model": "verdict__seed-11", "condition": "training rollout, step 11"}, 11),
        (
            {
                "model": "qwen2.5-coder-0.5b-instruct (GRPO training policy, step 3)",
                "condition": "bounded_memory",
            },
            3,
        ),
        ({"model": "verdict__seed-11__step-20", "condition": "bounded_memory"}, None),  # a finished adapter
        ({}, None),
    ],
)
def test_rollout_step_reads_the_step_a_rollout_was_sampled_at(source, step) -> None:
    assert rollout_step({"source": source}) == step


def _row(ident: str, step: int | None, label: str) -> dict:
    condition = rollout_condition(step) if step else "bounded_memory"
    return {"id": ident, "label": label, "source": {"model": "arm__seed-1", "condition": condition}}


def test_over_and_under_credit_are_counted_in_their_step_bins() -> None:
    rows = [
        _row("a", 2, "wrong"),
        _row("b", 4, "correct"),
        _row("c", 12, "correct"),
        _row("d", None, "wrong"),
    ]
    verdicts = {"a": "correct", "b": "correct", "c": "stale", "d": "correct"}
    graded = pd.DataFrame([{"id": r["id"], "label": r["label"], "verdict": verdicts[r["id"]]} for r in rows])
    table = reward_errors_by_step(rows, graded).set_index("steps")
    assert list(table.index) == ["1-5", "11-15", "all"]  # a finished model's answer is no rollout
    assert table.loc["1-5", OVER] == 1 and table.loc["1-5", UNDER] == 0
    assert table.loc["11-15", UNDER] == 1 and table.loc["11-15", "correct by matcher"] == 0
    assert table.loc["all", "rollouts"] == 3 and table.loc["all", "correct by labels"] == 2


def test_a_step_past_the_last_bin_widens_it_rather_than_being_dropped() -> None:
    rows = [_row("a", 3, "correct"), _row("b", 27, "wrong")]
    graded = pd.DataFrame(
        [
            {"id": "a", "label": "correct", "verdict": "correct"},
            {"id": "b", "label": "wrong", "verdict": "correct"},
        ]
    )
    table = reward_errors_by_step(rows, graded).set_index("steps")
    assert list(table.index) == ["1-5", "16-27", "all"]
    assert table.loc["all", "rollouts"] == 2 and table.loc["16-27", OVER] == 1


def test_training_did_not_learn_to_seek_the_matchers_over_credit() -> None:
    """Measured on the labelled rollouts (1,871, most of them from the fresh blind batches S2-S7): over
    -credit is 5, 9, 4 and 5 in steps 1-5, 6-10, 11-15 and 16-20, so the later half of training is paid no
    more often for answers the labels reject than the earlier half. New labels that showed otherwise
    would fail here, and the reward could no longer be read as the evaluation's verdict."""
    rows = read_labelled_answers(LABELLED_ANSWERS)
    table = reward_errors_by_step(rows, grade_labelled_answers(rows, labelled_episodes(rows))).set_index(
        "steps"
    )
    early = table.loc[["1-5", "6-10"]].sum()
    late = table.loc[["11-15", "16-20"]].sum()
    assert late[OVER] / late["rollouts"] <= early[OVER] / early["rollouts"], table.to_string()
