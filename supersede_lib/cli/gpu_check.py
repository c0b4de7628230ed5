"""`python -m supersede_lib gpu-check`: check the GPU training path on this machine's CUDA GPU (~2 min).

Two GRPO steps of the tiny model with Unsloth (bf16, and fp16 as on a T4) and with plain PEFT, then
the adapter's generation; the report goes to --out (`train.gpu_check` says what each check asserts).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from supersede_lib.train.gpu_check import CHECKS, environment, run_gpu_check


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="The checks: " + ", ".join(CHECKS) + ".",
    )
    parser.add_argument("--out", type=Path, default=Path("outputs/gpu_check"), help="where the report goes")
    parser.add_argument(
        "--checks", nargs="+", default=list(CHECKS), choices=CHECKS, help="which checks to run (default: all)"
    )
    parser.add_argument(
        "--allow-cpu", action="store_true", help="run without CUDA (tests; no Unsloth checks)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the tiny model and runs (printed path)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.allow_cpu and not environment()["cuda"]:
        parser.error(
            "no CUDA GPU is visible to torch; this checks the GPU training path (see docs/training.md)"
        )
    return run_gpu_check(args.out, args.checks, keep=args.keep)
