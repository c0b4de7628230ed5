"""REPORT.md is assembled from files on disk: tables, numbers with their provenance, config, 06/07."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from supersede_lib.cli import report as report_command
from supersede_lib.reproduce import report


def _write_study(root: Path, notebook: str, *, tables: dict[str, str], numbers: list[dict]) -> Path:
    directory = root / notebook
    directory.mkdir(parents=True)
    for name, text in tables.items():
        (directory / name).write_text(text)
    summary = {
        "notebook": notebook,
        "profile": "smoke",
        "model": "model-x",
        "data_label": "synthetic, hard preset",
        "created_at": "2026-01-01T00:00:00+00:00",
        "git": {"commit": "abc123", "dirty": False},
        "numbers": numbers,
        "tables": list(tables),
    }
    (directory / "summary.json").write_text(json.dumps(summary))
    return directory


def test_markdown_table_escapes_pipes_and_shows_missing_as_dash() -> None:
    frame = pd.DataFrame({"a": ["x|y", None], "b": [1.5, float("nan")]})
    lines = report.markdown_table(frame).splitlines()
    assert lines[0] == "| a | b |"
    assert lines[1] == "| --- | --- |"
    assert lines[2] == "| x\\|y | 1.5 |"
    assert lines[3] == "| — | — |"


def test_report_holds_tables_numbers_config_and_training_sections(tmp_path: Path) -> None:
    root = tmp_path / "smoke"
    table = "| measure | paper (gpt-4.1-mini, LongMemEval, n=78) | ours (model-x, synthetic, smoke, n=4) |\n"
    number = {
        "name": "accuracy full_context",
        "value": 0.75,
        "model": "model-x",
        "data": "synthetic",
        "profile": "smoke",
        "n": 4,
    }
    isolation = _write_study(root, "02_isolation", tables={"table1_isolation.md": table}, numbers=[number])
    manifest = {
        "run_name": "full_context__model-x",
        "model": {"name": "model-x"},
        "episodes": {"n": 4},
        "git": {"commit": "0123456789abcdef", "dirty": True},
        "wall_s": 1.25,
        "totals": {"calls": 8, "cached_calls": 3},
    }
    (isolation / "full_context__model-x.manifest.json").write_text(json.dumps(manifest))
    (isolation / "accuracy.png").write_bytes(b"png")
    training = root / "06_grpo_training"
    training.mkdir()
    (training / "reward_curve.md").write_text("| step | reward |\n| --- | --- |\n| 1 | 0.5 |\n")

    text = report.build_report("smoke", output_root=tmp_path)

    assert "paper (gpt-4.1-mini, LongMemEval, n=78)" in text
    assert "ours (model-x, synthetic, smoke, n=4)" in text
    assert "| accuracy full_context | 0.75 | model-x | synthetic | smoke | 4 |" in text
    assert "full_context__model-x" in text and "0123456789+dirty" in text and "| 8 (3) |" in text
    assert "![accuracy](02_isolation/accuracy.png)" in text
    assert "| 1 | 0.5 |" in text  # the 06 table, included as found
    assert "Not run for this profile (no `07_transfer_eval/` folder)" in text
    assert "name: smoke" in text  # the profile YAML
    assert text.index("02 · Isolation") < text.index("06 · GRPO")


def test_write_report_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_study(tmp_path / "smoke", "01_data", tables={}, numbers=[])
    assert report_command.main(["--profile", "smoke", "--output-root", str(tmp_path)]) == 0
    path = tmp_path / "smoke" / "REPORT.md"
    assert path.exists() and str(path) in capsys.readouterr().out
    assert "01 · Data" in path.read_text()


def test_report_rejects_unknown_profile(tmp_path: Path) -> None:
    from supersede_lib.profiles import ProfileError

    with pytest.raises(ProfileError, match="no profile 'nope'"):
        report.build_report("nope", output_root=tmp_path)


def test_a_preregistered_profile_reports_its_design_and_registered_analysis_first() -> None:
    """The registered design (primary arm, test, success rule, stopping rule, amendments) and the
    registered analysis of what has run open the report; a profile without one has no such section."""
    from supersede_lib.reproduce.report import build_report

    text = build_report("cpu_proof_prereg")
    section = text[text.index("## Pre-registered design") : text.index("## The instrument")]
    assert "arm `verdict`" in section and "**Success:**" in section and "**Amendment** 1" in section
    assert "primary arm `verdict`:" in section and "### Test set" in section
    assert "## Pre-registered design" not in build_report("offline")


def test_every_committed_report_is_what_its_committed_files_give() -> None:
    """A change to shared inputs (the labels, the paper's numbers) moves every profile's REPORT.md;
    this catches a stale report in `make test`, before `make verify` fails on it in CI."""
    committed = sorted(report.profiles.OUTPUT_ROOT.glob("*/REPORT.md"))
    assert committed, "no committed REPORT.md found under outputs/"
    stale = [
        path.parent.name
        for path in committed
        if report.build_report(path.parent.name) != path.read_text(encoding="utf-8")
    ]
    assert not stale, (
        f"REPORT.md out of date for {stale}: run `make report PROFILE=<name>` for each, then commit"
    )
