"""A failed run is never a result: its table cells say "failed n/n", the study stops, the report says so;
a failed question is neither right nor wrong: it leaves every table and names how many are missing."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import make_episode

from supersede_lib import profiles
from supersede_lib.eval.runner import RunResult, RunSettings
from supersede_lib.models.local_server import LocalOpenAIServer
from supersede_lib.models.openai_api import OpenAIChatModel
from supersede_lib.reproduce import report
from supersede_lib.results.comparison import (
    accuracy_cell,
    accuracy_incomplete_line,
    accuracy_row,
    compare_conditions,
    pair_conditions,
    run_accuracy_row,
)
from supersede_lib.results.headings import NOTEBOOK_ISOLATION
from supersede_lib.results.outputs import StudyFailedError
from supersede_lib.studies import isolation


def test_a_server_that_fails_every_call_gives_no_number_and_stops_the_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    profile = profiles.load_profile("smoke")
    directory = profiles.output_dir(profile, NOTEBOOK_ISOLATION)
    episodes = [make_episode(f"e{index}") for index in range(3)]
    with LocalOpenAIServer(failures=[("status", 503)] * 200) as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, max_retries=0)
        comparison = compare_conditions(
            episodes, model, RunSettings(notes_budget_chars=300), directory=directory, progress=False
        )
    result = isolation.analyse_isolation(profile, comparison)
    shown = result.table.set_index("measure").iloc[:, 1]

    assert shown["full context accuracy [95% Wilson]"] == "failed 3/3"
    assert shown["gap (points)"] == "—"
    with pytest.raises(StudyFailedError, match="every question failed"):
        isolation.write_isolation(result)
    assert (directory / "table1_isolation.md").exists()  # written first: nothing already paid for is lost
    assert "failed 3/3" in (directory / "table1_isolation.md").read_text()
    text = report.study_section(directory, "02", tmp_path / "smoke")
    assert "**FAILED: every question failed in" in text


def test_a_partial_failure_is_left_out_and_named_beside_the_number() -> None:
    row = accuracy_row("m", "full_context", [True, False, False, False], "matcher", failed=1)
    assert (row["n"], row["correct"]) == (4, 1)  # the failed question is in neither count
    assert accuracy_cell(row) == "25.0% [4.6%, 69.9%] (1 of 5 failed, left out)"
    assert accuracy_cell(accuracy_row("m", "full_context", [], "matcher", failed=4)) == "failed 4/4"
    assert "failed" not in accuracy_row("m", "c", [True], "matcher")  # other tables keep their columns


def _run(condition: str, rows: list[tuple[str, bool, bool]]) -> RunResult:
    """A run whose rows are (episode_id, correct, failed)."""
    frame = pd.DataFrame(
        {
            "episode_id": [episode for episode, _, _ in rows],
            "question": "q",
            "gold": "g",
            "answer": ["" if failed else "g" for _, _, failed in rows],
            "verdict": ["correct" if correct else "wrong" for _, correct, _ in rows],
            "failed": [failed for _, _, failed in rows],
            "final_notes": "",
        }
    )
    return RunResult(run_name=condition, frame=frame, trajectories=[], manifest={}, paths={})


def test_a_question_failed_in_either_condition_leaves_the_paired_comparison() -> None:
    runs = {
        "full_context": _run("full_context", [("a", True, False), ("b", True, False), ("c", True, False)]),
        "bounded_memory": _run(
            "bounded_memory", [("a", True, False), ("b", False, True), ("c", False, True)]
        ),
    }
    comparison = pair_conditions(
        runs, model_name="m", use_judge=False, grader="matcher", notes_budget_chars=300
    )
    accuracy = comparison.accuracy.set_index("condition")
    assert comparison.n == 1 and comparison.left_out == ["b", "c"] and comparison.questions == 3
    assert list(accuracy["accuracy"]) == [1.0, 1.0] and list(accuracy["failed"]) == [2, 2]
    assert comparison.mcnemar["b"] == 0 and comparison.mcnemar["n"] == 1  # not b = 2 from a dead server
    assert accuracy_cell(accuracy.loc["bounded_memory"]) == "100.0% [20.7%, 100.0%] (2 of 3 failed, left out)"
    assert list(comparison.per_question["episode_id"]) == ["a"]


def test_a_single_runs_row_leaves_out_failed_questions_and_keeps_its_columns_without_them() -> None:
    run = _run("long_fixed", [("a", True, False), ("b", False, True)]).frame
    row = run_accuracy_row("m", "long_fixed", run, "matcher")
    assert (row["n"], row["accuracy"], row["failed"]) == (1, 1.0, 1)
    assert "failed" not in run_accuracy_row("m", "long_fixed", run.iloc[:1], "matcher")


def test_a_study_table_with_failed_questions_opens_with_the_incomplete_line() -> None:
    runs = {
        "full_context": _run("full_context", [("a", True, False), ("b", True, False), ("c", True, False)]),
        "bounded_memory": _run(
            "bounded_memory", [("a", True, False), ("b", False, True), ("c", True, False)]
        ),
    }
    comparison = pair_conditions(
        runs, model_name="m", use_judge=False, grader="matcher", notes_budget_chars=300
    )
    line = accuracy_incomplete_line(comparison.accuracy)
    assert line is not None and "incomplete: 1 of 3 failed" in line
    runs["bounded_memory"] = _run(
        "bounded_memory", [("a", True, False), ("b", False, False), ("c", True, False)]
    )
    complete = pair_conditions(
        runs, model_name="m", use_judge=False, grader="matcher", notes_budget_chars=300
    )
    assert accuracy_incomplete_line(complete.accuracy) is None


def test_notebook_02s_table_1_opens_with_the_incomplete_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    profile = profiles.load_profile("smoke")
    directory = profiles.output_dir(profile, NOTEBOOK_ISOLATION)
    episodes = [make_episode(f"e{index}") for index in range(3)]
    with LocalOpenAIServer(failures=[("status", 503)] * 2) as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, max_retries=0)
        comparison = compare_conditions(
            episodes, model, RunSettings(notes_budget_chars=300), directory=directory, progress=False
        )
    assert comparison.left_out  # the first calls failed: those questions are out
    isolation.write_isolation(isolation.analyse_isolation(profile, comparison))
    first_line = (directory / "table1_isolation.md").read_text().splitlines()[0]
    assert f"incomplete: {len(comparison.left_out)} of 3 failed" in first_line
