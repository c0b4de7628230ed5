"""`python -m supersede_lib report --profile X`: write outputs/<profile>/REPORT.md from the files on disk."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from supersede_lib.reproduce.report import write_report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="local", help="configs/<profile>.yaml (default: local)")
    parser.add_argument(
        "--output-root", type=Path, default=None, help="default: outputs/ or SUPERSEDE_OUTPUT_DIR"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    print(f"wrote {write_report(args.profile, args.output_root)}")
    return 0
