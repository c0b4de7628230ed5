"""Notebooks: committed clean, one `parameters` cell, in sync with their generator; and they run.

The slow test executes notebooks 01-09 under the `smoke` profile with papermill (through
`supersede_lib.reproduce`, as `make reproduce` does) into a temporary output root, then reads
back what they wrote.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import nbformat
import papermill
import pytest

from supersede_lib import profiles
from supersede_lib.cli import reproduce as reproduce_command
from supersede_lib.reproduce import notebooks as reproduce

NOTEBOOK_DIR = profiles.REPO_ROOT / "notebooks"
STUDY_NOTEBOOKS = (
    "01_data",
    "02_isolation",
    "03_frontier",
    "04_scale",
    "05_environment_validation",
    "06_grpo_training",
    "07_transfer_eval",
    "08_memory_systems",
    "09_robustness",
)
# no smoke block (it reads a pre-registered proof's files): checked against its generator here, run
# end to end by tests/test_fast_slow.py
GENERATED_ONLY = ("10_fast_slow",)


def _all_notebooks() -> list[Path]:
    return sorted(NOTEBOOK_DIR.glob("*.ipynb"))


def test_study_notebooks_exist() -> None:
    names = {path.stem for path in _all_notebooks()}
    assert set(STUDY_NOTEBOOKS) <= names


@pytest.mark.parametrize("path", _all_notebooks(), ids=lambda path: path.name)
def test_notebook_is_committed_clean_with_one_parameters_cell(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for index, cell in enumerate(code_cells):
        assert cell.get("outputs") == [], f"{path.name}: code cell {index} has outputs"
        assert cell.get("execution_count") is None, f"{path.name}: code cell {index} has an execution count"
    tagged = [cell for cell in notebook.cells if "parameters" in cell.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: {len(tagged)} cells tagged 'parameters'"
    assert tagged[0].cell_type == "code" and "profile = " in tagged[0].source
    # papermill reads the default it overrides (a call there warns "Passed unknown parameter: profile")
    assert "profile" in papermill.inspect_notebook(str(path)), f"{path.name}: papermill cannot read `profile`"


@pytest.mark.parametrize("name", STUDY_NOTEBOOKS + GENERATED_ONLY)
def test_study_notebooks_match_their_generator(name: str) -> None:
    spec = importlib.util.spec_from_file_location(
        "make_study_notebooks", NOTEBOOK_DIR / "make_study_notebooks.py"
    )
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    built = generator.NOTEBOOKS[f"{name}.ipynb"]()
    committed = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
    assert [cell.source for cell in committed.cells] == [cell.source for cell in built.cells], (
        f"{name}.ipynb differs from notebooks/make_study_notebooks.py: re-run the generator"
    )
    assert committed.cells[0].cell_type == "markdown" and committed.cells[0].source.startswith("# ")  # title
    install = committed.cells[1]
    assert "google.colab" in install.source and "KAGGLE" in install.source and "pip" in install.source
    assert install.metadata["jupyter"]["source_hidden"] and install.metadata["cellView"] == "form"
    assert install.source.count("REPO_URL = ") == 1  # the one line a Colab/Kaggle user edits


@pytest.mark.parametrize("path", sorted(NOTEBOOK_DIR.glob("0*.ipynb")), ids=lambda path: path.name)
def test_install_cell_never_imports_torch_and_asks_for_a_restart(path: Path) -> None:
    """pip swaps packages under the running kernel: torch must not be loaded first, and the user restarts."""
    install = nbformat.read(path, as_version=4).cells[1].source  # under the title
    assert "import torch" not in install and "torch." not in install
    assert "Restart the runtime" in install
    assert 'find_spec("supersede_lib")' in install  # installs once, not on every run
    if path.name.startswith(("06", "07")):
        assert "nvidia-smi" in install and "requirements-gpu.txt" in install


def test_notebook_paths_filters_by_prefix_and_rejects_unknown() -> None:
    paths = reproduce.notebook_paths(["02", "04"])
    assert [path.stem for path in paths] == ["02_isolation", "04_scale"]
    assert [path.name for path in reproduce.notebook_paths()] == sorted(
        path.name for path in _all_notebooks()
    )
    with pytest.raises(ValueError, match="--only 99 matches no notebook"):
        reproduce.notebook_paths(["99"])


class _ExecutionError(Exception):
    """Shaped like papermill's PapermillExecutionError (ename/evalue)."""

    def __init__(self, ename: str, evalue: str) -> None:
        super().__init__(evalue)
        self.ename, self.evalue = ename, evalue


def test_failure_message_names_the_notebook_its_copy_and_the_offline_profile(tmp_path: Path) -> None:
    notebook, copy = Path("notebooks/01_data.ipynb"), tmp_path / "executed" / "01_data.ipynb"
    failure = reproduce.NotebookFailed(
        notebook, copy, _ExecutionError("DataUnavailableError", "no hub access")
    )
    message = str(failure)
    assert "01_data.ipynb failed: DataUnavailableError: no hub access" in message
    assert str(copy) in message and "PROFILE=offline" in message
    other = str(reproduce.NotebookFailed(notebook, copy, _ExecutionError("ZeroDivisionError", "x")))
    assert "PROFILE=offline" not in other


def test_reproduce_stops_at_the_first_failing_notebook(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    calls = []

    def fake_execute(notebook: Path, profile: str, output: Path, *, kernel_name: str) -> Path:
        calls.append(notebook.name)
        if notebook.name.startswith("02"):
            raise reproduce.NotebookFailed(
                notebook, output, _ExecutionError("DataUnavailableError", "offline")
            )
        return output

    monkeypatch.setattr(reproduce, "execute_notebook", fake_execute)
    assert reproduce_command.main(["--profile", "smoke", "--only", "01,02,03"]) == 1
    assert calls == ["01_data.ipynb", "02_isolation.ipynb"]
    err = capsys.readouterr().err
    assert "STOPPED: 02_isolation.ipynb failed" in err and "PROFILE=offline" in err
    assert str(tmp_path / "smoke" / "executed" / "02_isolation.ipynb") in err
    assert reproduce_command.main(["--profile", "nope"]) == 2


def _assert_it_shows(path: Path, executed: nbformat.NotebookNode) -> None:
    """At least one figure, the profile banner, and an HTML render (nbconvert) with images and tables."""
    from nbconvert import HTMLExporter

    outputs = [output for cell in executed.cells for output in cell.get("outputs", [])]
    assert any("image/png" in output.get("data", {}) for output in outputs), f"{path.name}: no figure"
    assert any("Profile: smoke" in output.get("data", {}).get("text/html", "") for output in outputs), (
        path.name
    )
    page, _ = HTMLExporter().from_notebook_node(executed)
    assert "<img" in page and "<table" in page, f"{path.name}: its HTML render lacks a figure or a table"
    if path.name.startswith("01"):
        assert (
            "static HTML" in page and "Answer step" in page
        )  # the explorer's copy for readers without a kernel


@pytest.mark.slow
def test_study_notebooks_execute_under_smoke(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SUPERSEDE_OUTPUT_DIR", str(tmp_path))  # the kernels inherit it
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    lines: list[str] = []
    run = reproduce.reproduce("smoke", [name[:2] for name in STUDY_NOTEBOOKS], log=lines.append)

    assert [path.stem for path in run.executed] == list(STUDY_NOTEBOOKS)
    assert any(re.search(r"\[7/\d+\] 07_transfer_eval\.ipynb done", line) for line in lines)
    for path in run.executed:
        executed = nbformat.read(path, as_version=4)
        for cell in executed.cells:
            for output in cell.get("outputs", []):
                assert output.get("output_type") != "error", f"{path.name}: {output.get('ename')}"
        tagged = [cell for cell in executed.cells if "injected-parameters" in cell.metadata.get("tags", [])]
        assert tagged and 'profile = "smoke"' in tagged[0].source
        _assert_it_shows(path, executed)

    root = tmp_path / "smoke"
    for name in STUDY_NOTEBOOKS:
        summary = json.loads((root / name / "summary.json").read_text())
        assert summary["profile"] == "smoke" and summary["numbers"], name
        for number in summary["numbers"]:
            if "accuracy" in number["name"]:
                assert 0.0 <= number["value"] <= 1.0, (name, number)
    isolation = json.loads((root / "02_isolation" / "summary.json").read_text())
    n = profiles.load_profile("smoke").isolation.episodes.n
    assert {number["n"] for number in isolation["numbers"] if "accuracy" in number["name"]} == {n}
    environment = json.loads((root / "05_environment_validation" / "summary.json").read_text())
    assert environment["all_terminated"] is True
    smoke = profiles.load_profile("smoke")
    runs = len(smoke.training.seeds) * len(smoke.training.curricula) * len(smoke.training.rewards)
    training = json.loads((root / "06_grpo_training" / "summary.json").read_text())
    assert len(training["runs"]) == runs
    for trained in training["runs"].values():
        assert trained["final_step"] >= 1 and trained["stop_reason"] in ("max_steps", "zero_advantage")
        assert trained["checkpoints"], "every run saves at least its final adapter"
    transfer = json.loads((root / "07_transfer_eval" / "summary.json").read_text())
    checkpoints = sum(len(trained["checkpoints"]) for trained in training["runs"].values())
    assert len(transfer["adapters"]) == checkpoints
    assert all(adapter["differs_only_by_adapter"] for adapter in transfer["adapters"].values())
    accuracies = [number for number in transfer["numbers"] if number["name"].endswith("accuracy")]
    assert len(accuracies) == checkpoints + 1  # base + every checkpoint
    assert {number["n"] for number in accuracies} == {smoke.transfer.episodes.n}
    assert all(0.0 <= number["value"] <= 1.0 for number in accuracies)
    for figure in ("06_grpo_training/figure4a_training_reward.png", "07_transfer_eval/figure4b_transfer.png"):
        assert (root / figure).stat().st_size > 0
    report = (root / "REPORT.md").read_text()
    assert run.report == root / "REPORT.md"
    for heading in (
        "01 · Data",
        "02 · Isolation",
        "03 · Frontier",
        "04 · Scale",
        "05 · Environment",
        "06 · GRPO",
        "07 · Transfer",
    ):
        assert heading in report
    assert "paper (gpt-4.1-mini, LongMemEval, n=78)" in report


@pytest.mark.slow
def test_06_runs_07_in_its_runtime_and_07_reads_the_save_dir(tmp_path: Path, monkeypatch) -> None:
    """Colab/Kaggle: 06 evaluates its checkpoints in the same runtime, and 07 opened in a fresh runtime
    (a new kernel) finds them in the `save_dir` both name, as a Drive folder would keep them."""
    monkeypatch.delenv("SUPERSEDE_OUTPUT_DIR", raising=False)
    save_dir = tmp_path / "drive"
    parameters = {"profile": "smoke", "save_dir": str(save_dir)}
    trained = tmp_path / "06.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOK_DIR / "06_grpo_training.ipynb"),
        str(trained),
        parameters={**parameters, "run_07_here": True},
        kernel_name=reproduce.KERNEL_NAME,
        cwd=str(NOTEBOOK_DIR),
        progress_bar=False,
        config=reproduce.KERNEL_CONFIG,
    )
    transfer = json.loads((save_dir / "smoke" / "07_transfer_eval" / "summary.json").read_text())
    assert transfer["adapters"], "06 ran 07's evaluation of its checkpoints"
    figures = [o for c in nbformat.read(trained, as_version=4).cells for o in c.get("outputs", [])]
    assert sum("image/png" in output.get("data", {}) for output in figures) >= 2  # 4a and 4b
    (save_dir / "smoke" / "07_transfer_eval" / "summary.json").unlink()
    papermill.execute_notebook(
        str(NOTEBOOK_DIR / "07_transfer_eval.ipynb"),
        str(tmp_path / "07.ipynb"),
        parameters=parameters,
        kernel_name=reproduce.KERNEL_NAME,
        cwd=str(NOTEBOOK_DIR),
        progress_bar=False,
        config=reproduce.KERNEL_CONFIG,
    )
    assert json.loads((save_dir / "smoke" / "07_transfer_eval" / "summary.json").read_text())["adapters"]


def test_run_finishes_a_stopped_live_recording_by_reading_the_cache_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--run` writes into outputs/ like `--live` but replays what the local cache already holds, so a
    live recording a session's end stopped is finished without paying for its calls twice."""
    modes = []

    def fake_reproduce(profile, only, *, mode, **kwargs):
        modes.append(mode)
        return reproduce.ReproduceRun(profile=profile, mode=mode, output_root=Path("."))

    monkeypatch.setattr(reproduce_command.reachability, "unreachable_message", lambda *args, **kwargs: None)
    monkeypatch.setattr(reproduce_command.notebooks, "reproduce", fake_reproduce)
    assert reproduce_command.main(["--profile", "smoke", "--only", "09", "--run"]) == 0
    assert reproduce_command.main(["--profile", "smoke", "--only", "09", "--live"]) == 0
    assert modes == ["run", "live"]
    with pytest.raises(SystemExit):  # one mode at a time
        reproduce_command.main(["--profile", "smoke", "--run", "--live"])


def test_a_partial_replay_keeps_the_run_results_of_the_notebooks_it_does_not_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--only 10` replays 10 alone: 07's run results are 10's inputs (its registered rows), so they are
    copied; 10's own are left out for the replay to make again. A full replay leaves out every run's."""
    outputs = tmp_path / "outputs"
    for folder in ("07_transfer_eval/test", "10_fast_slow/test"):
        run = outputs / "p" / folder
        run.mkdir(parents=True)
        for suffix in (".csv", ".trajectories.jsonl", ".manifest.json"):
            (run / f"base{suffix}").write_text("x")
    (outputs / "p" / "cache").mkdir()
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", outputs)

    def copied(replayed: list[Path] | None) -> set[str]:
        root = reproduce.prepare_replay_tree("p", tmp_path / "replay", replayed) / "p"
        return {path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file()}

    partial = copied([Path("notebooks/10_fast_slow.ipynb")])
    assert {"07_transfer_eval/test/base.csv", "07_transfer_eval/test/base.trajectories.jsonl"} <= partial
    assert "10_fast_slow/test/base.manifest.json" in partial and "10_fast_slow/test/base.csv" not in partial
    assert not any(name.startswith("cache") for name in partial)
    assert copied(None) == {
        "07_transfer_eval/test/base.manifest.json",
        "10_fast_slow/test/base.manifest.json",
    }
