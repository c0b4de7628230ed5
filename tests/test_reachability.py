"""Offline, a profile that needs the hub stops before any long work with one line saying what to run.

`make reproduce` runs the check by path with any python3 before it installs, so it must stay
standard-library only; the hub is made unreachable with HF_HUB_OFFLINE (no network in tests).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from supersede_lib.cli import reproduce as reproduce_command
from supersede_lib.data import reachability
from supersede_lib.reproduce import notebooks as reproduce

MODULE = Path(reachability.__file__)
REPO_ROOT = MODULE.parents[2]


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No hub, no LongMemEval copy, and an empty model folder (a home with no cache)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("SUPERSEDE_LONGMEMEVAL_DIR", raising=False)
    monkeypatch.setenv("SUPERSEDE_MODEL_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(reachability, "_longmemeval_is_local", lambda: False)
    return tmp_path


def test_the_module_imports_the_standard_library_only() -> None:
    tree = ast.parse(MODULE.read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_local_offline_is_one_line_naming_the_offline_profile(offline: Path) -> None:
    message = reachability.unreachable_message("local")
    assert message is not None and "\n" not in message and len(message) < 200
    assert "LongMemEval" in message and message.endswith("make reproduce PROFILE=offline")


def test_a_local_copy_and_provisioned_models_need_no_hub(
    offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reachability, "_longmemeval_is_local", lambda: True)
    models = offline / "models"
    models.mkdir()
    for name in ("SmolLM2-135M-Instruct.Q4_1.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"):
        (models / name).write_bytes(b"")
    (models / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf").write_bytes(b"")
    assert reachability.hub_downloads("local") == []
    assert reachability.unreachable_message("local") is None


def test_recorded_and_synthetic_profiles_need_nothing_unless_live(offline: Path) -> None:
    assert reachability.unreachable_message("offline") is None  # replays its committed record
    assert reachability.unreachable_message("smoke") is None  # fake server, tiny model
    live = reachability.unreachable_message("offline", live=True)
    assert live is not None and live.endswith("make reproduce PROFILE=offline (replays its record)")


def test_the_command_runs_without_site_packages_and_exits_3(offline: Path) -> None:
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-S", "-m", "supersede_lib", "reachable", "local"],
        capture_output=True,
        text=True,
        cwd=offline,
        env=environment,
    )  # -S: no site-packages, as a bare python3 before `make setup`
    assert result.returncode == reachability.UNREACHABLE_EXIT
    assert result.stdout == "" and result.stderr.count("\n") == 1


def test_reproduce_stops_before_any_notebook(
    offline: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    def no_notebooks(*args, **kwargs):
        raise AssertionError("reproduce started although the data cannot be reached")

    monkeypatch.setattr(reproduce, "reproduce", no_notebooks)
    assert reproduce_command.main(["--profile", "local"]) == 2
    assert capsys.readouterr().err.strip().endswith("make reproduce PROFILE=offline")


def test_make_checks_before_it_installs(offline: Path) -> None:
    result = subprocess.run(
        ["make", "-n", "reproduce", "PROFILE=local"], capture_output=True, text=True, cwd=REPO_ROOT
    )
    commands = result.stdout.splitlines()
    check = next(index for index, line in enumerate(commands) if "supersede_lib reachable local" in line)
    install = next((index for index, line in enumerate(commands) if "pip install" in line), len(commands))
    assert check < install
