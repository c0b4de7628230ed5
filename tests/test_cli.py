"""Every command line prints its usage on `--help` and exits 0, and they are all listed in one place.

The commands run in-process (their modules import torch and pandas once, not once per command);
`python -m supersede_lib --help` runs as a shell would run it. Every option of every command has help
text, and every command is a thin module of `cli/`.
"""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import supersede_lib
from supersede_lib import cli

PACKAGE_DIR = Path(supersede_lib.__file__).parent


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


def test_the_command_list_is_readable() -> None:
    """Each command's summary starts after its name and a gap, never run into it."""
    listing = cli.build_parser().format_help().split("commands:\n", 1)[1]
    for name, command in cli.COMMANDS.items():
        line = next(line for line in listing.splitlines() if line.strip().startswith(name + " "))
        assert re.match(rf"^  {re.escape(name)} {{2,}}{re.escape(command.summary)}$", line), line


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """A parser and every subcommand parser below it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _parsers(sub)
    return found


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_option_of_every_command_has_help(name: str) -> None:
    module = importlib.import_module(cli.COMMANDS[name].module)
    missing = [
        f"{parser.prog}: {'/'.join(action.option_strings) or action.dest}"
        for parser in _parsers(module.build_parser())
        for action in parser._actions
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) and not action.help
    ]
    assert not missing, f"options without help: {missing}"


def test_every_command_is_a_thin_module_of_cli() -> None:
    """Every command's `main` lives in `cli/`; no other module of the library defines one."""
    assert all(command.module.startswith("supersede_lib.cli.") for command in cli.COMMANDS.values())
    elsewhere = [
        str(path.relative_to(PACKAGE_DIR))
        for path in PACKAGE_DIR.rglob("*.py")
        if path.parent.name != "cli" and re.search(r"^def main\(", path.read_text(), flags=re.MULTILINE)
    ]
    assert not elsewhere, f"main() outside cli/: {elsewhere}"


def test_no_command_line_outside_the_list() -> None:
    """Only `python -m supersede_lib` runs as a program; each command is reached through it."""
    runnable = set()
    for path in PACKAGE_DIR.rglob("*.py"):
        if re.search(r'^if __name__ == "__main__":', path.read_text(), flags=re.MULTILINE):
            parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
            runnable.add(".".join(parts[:-1] if parts[-1] == "__main__" else parts))
    assert runnable <= {"supersede_lib"}, f"run as `python -m supersede_lib <command>` instead: {runnable}"
