"""`diagnose --memory POLICY|all`: every memory policy beside Table 1 on one page, against the fake
server; the estimate counts each policy's calls as a probe question measured them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supersede_lib import diagnosis, profiles
from supersede_lib.agent.memory import DEFAULT_MEMORY, MEMORY_POLICIES
from supersede_lib.cli import diagnose
from supersede_lib.models.local_server import LocalOpenAIServer


@pytest.fixture(autouse=True)
def _restore_output_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", profiles.OUTPUT_ROOT)  # diagnose sets it for its process


def _live_calls(out: Path) -> int:
    """Live calls the runs' manifests counted (the probes' calls are the runs' first, cached there)."""
    totals = [json.loads(path.read_text())["totals"] for path in sorted(out.rglob("*.manifest.json"))]
    return sum(int(item["calls"]) - int(item["cached_calls"]) for item in totals)


def test_memory_all_gives_a_row_per_policy_and_an_estimate_that_counts_every_call(
    tmp_path: Path, capsys
) -> None:
    arguments = ["--model", "fake-model", "--n", "2", "--difficulty", "easy", "--out", str(tmp_path)]
    with LocalOpenAIServer() as server:
        assert diagnose.main(["--base-url", server.base_url, *arguments, "--memory", "all"]) == 0
        requests = server.request_count + len(server.embedding_requests)
    printed = capsys.readouterr().out
    line = next(text for text in printed.splitlines() if text.startswith("estimate: "))
    policies = [name for name in MEMORY_POLICIES if name != DEFAULT_MEMORY]
    for name in policies:  # each policy's calls measured on the probe question, not assumed
        assert f"memory policy {name}: about " in line and "measured: a probe question" in line
    total = int(line.split("in all about ")[1].split(" calls")[0])
    # every call the diagnosis made is in the estimate (the fake server's replies are deterministic,
    # so the probe question's calls per session hold for the others): within a factor of 1.5
    assert requests / 1.5 <= total <= requests * 1.5, (total, requests)
    report = next(tmp_path.rglob("DIAGNOSIS.md")).read_text()
    table = report.split("## Memory policies")[1].split("## What it took")[0]
    rows = [row for row in table.splitlines() if row.startswith("| fake-model |")]
    assert [row.split(" | ")[1] for row in rows] == [DEFAULT_MEMORY, *policies]
    took = report.split("## What it took")[1]
    assert "memory policy " in took  # the estimate line on the page
    # the totals table names every run it counts (the policies' runs included), none left blank
    names = [row.split(" | ")[0].removeprefix("| ") for row in took.splitlines() if row.startswith("| ")][2:]
    assert len(names) == 2 + 1 + len(policies) and "—" not in names, names
    assert all(any(name.endswith(f"__{policy}") for name in names) for policy in policies), names


def test_a_policy_the_server_cannot_serve_is_refused_in_its_row_and_in_the_estimate(
    tmp_path: Path, capsys
) -> None:
    arguments = ["--model", "fake-model", "--n", "1", "--difficulty", "easy", "--out", str(tmp_path)]
    with LocalOpenAIServer(tools=False) as server:
        code = diagnose.main(["--base-url", server.base_url, *arguments, "--memory", "core_memory"])
    assert code == 0
    line = next(text for text in capsys.readouterr().out.splitlines() if text.startswith("estimate: "))
    assert "memory policy core_memory: refused" in line and "tools" in line
    report = next(tmp_path.rglob("DIAGNOSIS.md")).read_text()
    row = next(row for row in report.splitlines() if row.startswith("| fake-model | core_memory |"))
    assert "refused: memory policy 'core_memory' needs tools" in row


def test_estimate_only_counts_each_policy_at_its_floor_and_says_it_was_not_measured(capsys) -> None:
    arguments = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--n", "2", "--estimate-only"]
    assert diagnose.main([*arguments, "--memory", "latest_value,append_truncate"]) == 0
    line = capsys.readouterr().out
    assert "memory policy latest_value: about" in line and "memory policy append_truncate: about" in line
    assert "not measured (--estimate-only makes no call)" in line


def test_memory_names_are_checked_and_all_expands_to_every_policy_but_the_notes() -> None:
    assert diagnosis.memory_policy_names(["all"]) == [n for n in MEMORY_POLICIES if n != DEFAULT_MEMORY]
    assert diagnosis.memory_policy_names(["notes,latest_value", "latest_value"]) == ["latest_value"]
    with pytest.raises(ValueError, match="unknown memory policy 'nope'"):
        diagnosis.memory_policy_names(["nope"])


def test_memory_with_the_robustness_suite_is_refused_before_any_call(tmp_path: Path, capsys) -> None:
    arguments = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--n", "1", "--out", str(tmp_path)]
    assert diagnose.main([*arguments, "--suite", "robustness", "--memory", "latest_value"]) == 2
    error = capsys.readouterr().err
    assert "STOPPED: --memory latest_value with --suite robustness" in error
    assert "robustness.memory_policies" in error
    assert not any(tmp_path.iterdir())  # refused before the folder lock and the probe: nothing written
    # the notes alone are no policy to add: the suite runs as without --memory
    assert diagnosis.diagnosis_profile(
        base_url="http://127.0.0.1:9/v1",
        model="m",
        api_key_env="NONE",
        episodes=diagnosis.episodes_block("synthetic", 1, "easy"),
        memory_policies=diagnosis.memory_policy_names(["notes"]),
        suite="robustness",
    ).robustness
