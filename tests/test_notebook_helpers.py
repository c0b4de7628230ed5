"""What the notebooks display (present.display, studies.notebook): rounded, labelled tables, the
profile a notebook runs and where it writes, and the CPU proof redrawn from its committed record."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from supersede_lib import profiles
from supersede_lib.present.display import cell_text, table_html
from supersede_lib.studies import notebook


def test_cells_read_as_a_person_writes_them() -> None:
    assert cell_text(0.5666666666666667) == "0.567"
    assert cell_text(3.3e-06) == "3.3e-06" and cell_text(0.0007) == "0.0007"
    assert cell_text(25.0) == "25" and cell_text(None) == "—" and cell_text(True) == "True"
    assert cell_text({"b": 19, "p": 0.000912}) == "b: 19\np: 0.00091"


def test_tables_keep_line_breaks_escape_text_and_carry_their_title() -> None:
    frame = pd.DataFrame({"final notes": ["home: Denver\ngym: <Blink>"], "accuracy": [0.30000000000000004]})
    page = table_html(frame, "Notes & answers")
    assert "<caption" in page and "Notes &amp; answers" in page
    assert "home: Denver\ngym: &lt;Blink&gt;" in page and "white-space:pre-wrap" in page
    assert ">0.3<" in page


def test_the_profile_comes_from_the_cell_then_the_environment_then_offline(monkeypatch) -> None:
    monkeypatch.delenv(notebook.PROFILE_ENV, raising=False)
    assert notebook.profile_name(None) == "offline"
    monkeypatch.setenv(notebook.PROFILE_ENV, "smoke")
    assert notebook.profile_name(None) == "smoke"
    assert notebook.profile_name("local") == "local"


def test_a_recorded_profile_opened_interactively_works_in_a_scratch_copy(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", profiles.OUTPUT_ROOT)  # restored afterwards
    monkeypatch.setenv(notebook.OUTPUT_DIR_ENV, "set-by-make-reproduce")
    assert notebook.scratch_copy("offline", tmp_path) is None  # under make reproduce: its folder
    monkeypatch.delenv(notebook.OUTPUT_DIR_ENV)
    assert notebook.scratch_copy("smoke", tmp_path) is None  # no record: writes outputs/smoke
    try:
        copy = notebook.scratch_copy("offline", tmp_path)
        assert copy == tmp_path / "offline" and (copy / "02_isolation" / "summary.json").exists()
        assert not (copy / "cache").exists() and profiles.OUTPUT_ROOT == tmp_path
        assert os.environ[notebook.OUTPUT_DIR_ENV] == str(tmp_path)  # kernels and workers follow
    finally:
        os.environ.pop(notebook.OUTPUT_DIR_ENV, None)


def test_the_cpu_proof_is_redrawn_coloured_by_arm_and_styled_by_seed() -> None:
    if not (notebook.CPU_PROOF / "07_transfer_eval" / "heldout.csv").exists():
        pytest.skip("the cpu_proof record is not in this checkout")
    figure = notebook._cpu_proof_figure(notebook.CPU_PROOF)
    held_out = figure.axes[1]
    lines = {bars.get_label(): bars.lines[0] for bars in held_out.containers if "seed" in bars.get_label()}
    by_arm = {}
    for label, line in lines.items():
        by_arm.setdefault(label.split(", seed")[0], set()).add(str(line.get_color()))
    assert by_arm and all(len(colors) == 1 for colors in by_arm.values())  # one colour per arm
    memory = [line.get_linestyle() for label, line in lines.items() if label.startswith("memory, seed")]
    assert len(set(memory)) > 1  # the seeds of one arm differ by line style


def test_run_warnings_get_a_box_of_their_own_sets_included(tmp_path: Path, monkeypatch) -> None:
    """Retries and timeouts (a set's run in a sub-folder, as 07 writes them) and a run in which every
    question failed are shown beside the tables; a clean study says so in one line."""
    import json
    from types import SimpleNamespace

    shown: list = []
    monkeypatch.setattr("IPython.display.display", lambda item: shown.append(item))
    (tmp_path / "hard").mkdir()
    retried = "model m: 3 retries this run (2 after a timeout, 1 after 429/5xx)"
    (tmp_path / "hard" / "base.manifest.json").write_text(json.dumps({"warnings": [retried]}))
    all_failed = {"warnings": [], "totals": {"questions": 4, "failed_questions": 4}}
    (tmp_path / "bounded_memory.manifest.json").write_text(json.dumps(all_failed))
    notebook.show_warnings(SimpleNamespace(output_dir=tmp_path))
    text, page = repr(shown[-1]), shown[-1]._repr_html_()
    assert "every question failed in bounded_memory" in text and retried in text
    assert "Run warnings (2)" in page
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "run.manifest.json").write_text(json.dumps({"warnings": []}))
    notebook.show_warnings(SimpleNamespace(output_dir=clean))
    assert repr(shown[-1]) == "Run warnings: none"


def test_every_study_notebook_that_calls_a_model_shows_its_run_warnings() -> None:
    import nbformat

    for name in ("02_isolation", "03_frontier", "04_scale", "05_environment_validation", "07_transfer_eval"):
        cells = nbformat.read(Path("notebooks") / f"{name}.ipynb", as_version=4).cells
        assert any("show_warnings(result)" in cell.source for cell in cells if cell.cell_type == "code"), name
