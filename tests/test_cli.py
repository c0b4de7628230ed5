"""Every command line prints its usage on `--help` and exits 0, and they are all listed in one place.

The commands run in-process (their modules import torch and pandas once, not once per command);
`python -m supersede_lib --help` runs as a shell would run it, and so do the older `python -m` paths
the Makefile and notebooks use, through `runpy` (they must keep working).
"""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import supersede_lib
from supersede_lib import cli

PACKAGE_DIR = Path(supersede_lib.__file__).parent
# `python -m` paths outside `cli.COMMANDS` that still run a command's `main` (the Makefile and the
# generated notebooks name them). The CPU proof's own command goes with its module (another branch).
OLDER_PATHS = {
    "supersede_lib.bench": "bench",
    "supersede_lib.reproduce": "reproduce",
    "supersede_lib.studies.report": "report",
    "supersede_lib.train.gpu_check": "gpu-check",
}
BEING_REWRITTEN: set[str] = set()


def _help_text(run, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        run()
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_the_dispatcher_lists_every_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "supersede_lib", "--help"], capture_output=True, text=True, check=True
    )
    assert result.stdout.startswith("usage: python -m supersede_lib <command>")
    for name, command in cli.COMMANDS.items():
        assert f"  {name}" in result.stdout and command.summary in result.stdout


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_command_prints_its_usage(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = _help_text(lambda: cli.main([name, "--help"]), capsys)
    assert text.startswith(f"usage: python -m supersede_lib {name}")
    description = text.split("\n\n")[1].strip()
    assert description and not description.startswith(("options:", "positional")), "no description"


@pytest.mark.parametrize("module", sorted(OLDER_PATHS))
def test_the_older_paths_still_run_their_command(
    module: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", [module, "--help"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # runpy: the module was imported before
        text = _help_text(lambda: runpy.run_module(module, run_name="__main__", alter_sys=True), capsys)
    assert text.startswith("usage:")


def test_no_command_line_outside_the_list() -> None:
    """A module that runs as `python -m` is a command of `cli.COMMANDS` or one of its older paths."""
    runnable = set()
    for path in PACKAGE_DIR.rglob("*.py"):
        if re.search(r'^if __name__ == "__main__":', path.read_text(), flags=re.MULTILINE):
            parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
            runnable.add(".".join(parts[:-1] if parts[-1] == "__main__" else parts))
    listed = {command.module for command in cli.COMMANDS.values()} | set(OLDER_PATHS) | {"supersede_lib"}
    assert runnable - BEING_REWRITTEN <= listed, f"not in supersede_lib.cli.COMMANDS: {runnable - listed}"
