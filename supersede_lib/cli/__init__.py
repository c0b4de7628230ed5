"""One command line for the project: `python -m supersede_lib <command> [options]`.

Each command is a module of this package with `build_parser()` and `main(argv) -> int`, a thin
wrapper over the library function that does the work; `COMMANDS` is the one list of them (the test
of the command lines runs `--help` on every entry and checks that every option has help), so a new
command line is added here, not as a `python -m` path of its own. This package is the top layer: it
may import anything, nothing imports it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from supersede_lib.eval.provenance import pin_checkout_state

PROG = "python -m supersede_lib"


@dataclass(frozen=True)
class Command:
    """A subcommand: the module whose `main(argv)` runs it and the line `--help` shows for it."""

    module: str
    summary: str


COMMANDS: dict[str, Command] = {
    "reproduce": Command(
        "supersede_lib.cli.reproduce", "run notebooks 01-07 headless for a profile, then write its report"
    ),
    "verify": Command(
        "supersede_lib.cli.verify", "replay every committed record (or --profile X) and check each table"
    ),
    "report": Command("supersede_lib.cli.report", "write outputs/<profile>/REPORT.md from the files on disk"),
    "train": Command("supersede_lib.cli.train", "train a profile's GRPO runs, on one GPU or data-parallel"),
    "validation": Command(
        "supersede_lib.cli.validation", "the matcher (and embedded judges) against the human labels"
    ),
    "bench": Command("supersede_lib.cli.bench", "speed, overhead and engine benchmarks (`make bench`)"),
    "diagnose": Command(
        "supersede_lib.cli.diagnose",
        "Table 1 for any OpenAI-compatible model on one page, cost estimated first",
    ),
    "optimise-instruction": Command(
        "supersede_lib.cli.optimise_instruction",
        "optimise the memory instruction of any served model with GEPA; before/after on held-out episodes",
    ),
    "reachable": Command(
        "supersede_lib.cli.reachable",
        "can a profile's downloads be fetched? one line saying what to run if not",
    ),
    "serve": Command(
        "supersede_lib.cli.serve", "serve a GGUF model over OpenAI-compatible HTTP (a free port by default)"
    ),
    "preregistered": Command(
        "supersede_lib.cli.preregistered",
        "a pre-registered proof one piece per session: --baselines, --next, --report, --verify",
    ),
    "label-batch": Command(
        "supersede_lib.cli.label_batch",
        "blind label packets of a judged model's new answers; merge the labels; grade them once",
    ),
    "gpu-check": Command(
        "supersede_lib.cli.gpu_check", "check the GPU training path on this machine's CUDA GPU (~2 min)"
    ),
}


def build_parser() -> argparse.ArgumentParser:
    """The dispatcher's parser; its help lists every command with its one-line summary."""
    width = max(len(name) for name in COMMANDS) + 2
    listing = "\n".join(f"  {name:<{width}}{command.summary}" for name, command in COMMANDS.items())
    return argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} <command> [options]",
        description=__doc__.splitlines()[0],
        epilog=f"commands:\n{listing}\n\n`{PROG} <command> --help` shows a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run `<command>` with the remaining arguments; `--help` (or nothing) prints the command list."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not arguments or arguments[0].startswith("-"):
        parser.parse_args(arguments)  # --help prints the list and exits 0; any other option is an error
        parser.error("name a command")
    name, rest = arguments[0], arguments[1:]
    if name not in COMMANDS:
        parser.error(f"unknown command {name!r} (choose from {', '.join(COMMANDS)})")
    command_main = importlib.import_module(COMMANDS[name].module).main
    pin_checkout_state()  # every result of this command, in any child process, names the code it started from
    program = sys.argv[0]
    sys.argv[0] = f"{PROG} {name}"  # the `prog` of commands whose parser takes it from argv[0]
    try:
        status = command_main(rest)
    finally:
        sys.argv[0] = program
    return status
