"""`python -m supersede_lib validation`: the matcher (and embedded judges) against the human labels.

Writes outputs/validation/agreement.md and .json; with --judge-model, each embedded judge's table too.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from supersede_lib.labelling.agreement import LABELLED_ANSWERS
from supersede_lib.labelling.validation import write_validation


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--labels",
        type=Path,
        default=LABELLED_ANSWERS,
        help="the labelled answers (default: the shipped set)",
    )
    parser.add_argument(
        "--judge-model", action="append", default=[], help="a GGUF file name to judge with too (repeatable)"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="CPU threads of an embedded judge (default: all)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    print("\n".join(write_validation(args.labels, args.judge_model, args.threads)))
    return 0
