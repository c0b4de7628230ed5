"""A failed run is never a result: its table cells say "failed n/n", the study stops, the report says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_episode

from supersede_lib import profiles
from supersede_lib.eval.runner import RunSettings
from supersede_lib.models.local_server import LocalOpenAIServer
from supersede_lib.models.openai_api import OpenAIChatModel
from supersede_lib.reproduce import report
from supersede_lib.results.comparison import accuracy_cell, accuracy_row, compare_conditions
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


def test_a_partial_failure_is_named_beside_the_number() -> None:
    row = accuracy_row("m", "full_context", [True, False, False, False], "matcher", failed=1)
    assert accuracy_cell(row) == "25.0% [4.6%, 69.9%] (1 of 4 failed, scored wrong)"
    assert accuracy_cell({**row, "failed": 4}) == "failed 4/4"
    assert "failed" not in accuracy_row("m", "c", [True], "matcher")  # other tables keep their columns
