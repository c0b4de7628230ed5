"""`python -m supersede_lib bench`: speed, overhead and engine benchmarks (`make bench`, not part of the tests).

Concurrency against a local fake server, the harness's overhead with an embedded model, llama.cpp
and batched transformers side by side, the prompt-prefix cache and the shared-prefix training loss
(`bench.runner` says what each measures and its target). Results under --output-dir.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from supersede_lib.bench.engines import DEFAULT_ENGINE_MODEL
from supersede_lib.bench.runner import DEFAULT_OUTPUT_DIR, run_benchmarks


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--questions", type=int, default=78, help="questions of the concurrency run (default: 78)"
    )
    parser.add_argument("--latency", type=float, default=0.2, help="fake server seconds per call")
    parser.add_argument("--concurrency", type=int, default=16, help="questions in flight (default: 16)")
    parser.add_argument("--sequential-subset", type=int, default=8, help="questions timed sequentially")
    parser.add_argument("--full-sequential", action="store_true", help="time all questions sequentially")
    parser.add_argument("--skip-embedded", action="store_true", help="skip the embedded-model overhead run")
    parser.add_argument("--seed", type=int, default=0, help="synthetic episodes' seed (default: 0)")
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=DEFAULT_OUTPUT_DIR,
        help=f"where the results go (default: {DEFAULT_OUTPUT_DIR})",
    )
    engines = parser.add_argument_group("engines side by side")
    engines.add_argument("--engines-only", action="store_true", help="only the engine comparison")
    engines.add_argument("--skip-engines", action="store_true", help="skip the engine comparison")
    engines.add_argument("--quick", action="store_true", help="a short engine run: 2 questions per condition")
    engines.add_argument("--engine-questions", type=int, default=8, help="questions per condition")
    engines.add_argument(
        "--engine-model", default=DEFAULT_ENGINE_MODEL, help="GGUF file name in the model dir"
    )
    engines.add_argument("--engine-concurrency", type=int, default=8, help="questions in flight")
    engines.add_argument("--threads", type=int, default=None, help="CPU threads of both engines (all cores)")
    engines.add_argument("--disagreement-calls", type=int, default=16, help="batched calls re-run alone")
    parser.add_argument("--skip-prefix", action="store_true", help="skip the prompt-prefix cache comparison")
    parser.add_argument("--prefix-calls", type=int, default=16, help="calls of the prefix cache comparison")
    parser.add_argument(
        "--skip-train-prefix", action="store_true", help="skip the shared-prefix training loss comparison"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    run_benchmarks(build_parser().parse_args(argv))
    return 0
