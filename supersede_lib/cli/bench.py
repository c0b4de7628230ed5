"""`python -m supersede_lib bench`: speed, overhead and engine benchmarks (`make bench`, not part of the tests).

Concurrency against a local fake server, the harness's overhead with an embedded model, llama.cpp
and batched transformers side by side, the prompt-prefix cache and the shared-prefix training loss
(`bench.runner` says what each measures and its target). Results under --output-dir.
`--training-only` times one registered GRPO step in float32 against the chosen path (`bench.training`);
`--judge-adapter` judges a kept adapter on a registered set with this CPU's engine (`bench.judging`);
`--lora-adapter` instead checks a trained adapter on llama.cpp against transformers (`bench.adapters`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from supersede_lib.bench.adapters import DEFAULT_LORA_BASE, adapter_agreement, agreement_report
from supersede_lib.bench.engines import DEFAULT_ENGINE_MODEL, find_local_model
from supersede_lib.bench.judging import JUDGE_ENGINES, judging_bench, judging_table
from supersede_lib.bench.runner import DEFAULT_OUTPUT_DIR, run_benchmarks, run_training_bench, write_part
from supersede_lib.bench.training import chosen_path_run
from supersede_lib.models.gguf import threads_from_env


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
    _add_training_and_judging_options(parser)
    adapters = parser.add_argument_group("a trained LoRA adapter on llama.cpp vs transformers")
    adapters.add_argument(
        "--lora-adapter",
        type=Path,
        default=None,
        help="PEFT folder or kept record .json: run only this check",
    )
    adapters.add_argument(
        "--lora-base", default=DEFAULT_LORA_BASE, help="the adapter's base GGUF (path or file name)"
    )
    adapters.add_argument(
        "--lora-calls", type=int, default=20, help="bounded-memory calls compared (default: 20)"
    )
    adapters.add_argument("--lora-output", type=Path, default=None, help="write the result as JSON here")
    return parser


def _add_training_and_judging_options(parser: argparse.ArgumentParser) -> None:
    """The training bench's and the adapter judging's options (`bench.training`, `bench.judging`)."""
    training = parser.add_argument_group("one registered GRPO step: float32 on 1 thread vs the chosen path")
    training.add_argument("--skip-training", action="store_true", help="skip the training step comparison")
    training.add_argument("--training-only", action="store_true", help="run only the training comparison")
    training.add_argument(
        "--training-threads", type=int, default=None, help="threads of the chosen path (default: every core)"
    )
    training.add_argument(
        "--training-llamacpp-rollouts",
        action="store_true",
        help="also time the chosen path with llama.cpp sampling the rollouts (rollout_engine: llamacpp)",
    )
    training.add_argument(
        "--training-runs",
        type=Path,
        nargs="*",
        default=[],
        metavar="RUN_DIR",
        help="finished run folders whose 20-step timings go beside the table (their run_summary.json)",
    )
    judging = parser.add_argument_group("a kept adapter judged on a registered set with this CPU's engine")
    judging.add_argument(
        "--judge-adapter", type=Path, default=None, help="kept adapter record .json: run only this check"
    )
    judging.add_argument(
        "--judge-recorded",
        default="verdict__seed-11__step-20",
        help="the committed judgement to compare with (default: verdict__seed-11__step-20)",
    )
    judging.add_argument("--judge-profile", default="cpu_proof_prereg", help="profile of the set")
    judging.add_argument("--judge-set", default="test", help="evaluation set name (default: test)")
    judging.add_argument("--judge-limit", type=int, default=None, help="judge only the first N episodes")
    judging.add_argument(
        "--judge-engine",
        choices=JUDGE_ENGINES,
        default="prefix_cache",
        help="prefix_cache (07's, this CPU's dtype), batched (transformers) or llamacpp (GGUF LoRA)",
    )
    judging.add_argument(
        "--judge-in-flight",
        type=int,
        default=1,
        help="episodes in flight: a transformers batch or llama.cpp slots (default: 1)",
    )
    judging.add_argument(
        "--judge-dtype",
        choices=("bfloat16", "float32"),
        default=None,
        help="transformers weights' dtype (default: this CPU's fast one; float32 = the registered judging)",
    )
    training.add_argument(
        "--training-run-seed",
        type=int,
        default=None,
        metavar="SEED",
        help="train the registered config's whole run on the chosen path with this seed (resumes), then stop",
    )
    training.add_argument(
        "--training-run-dir",
        type=Path,
        default=Path("outputs") / "bench" / "runs",
        help="where --training-run-seed's run folder goes (default: outputs/bench/runs, git-ignored)",
    )


def run_adapter_agreement(args: argparse.Namespace) -> dict:
    """The adapter check alone: one thread per engine (`SUPERSEDE_N_THREADS` or --threads, else 1)."""
    base = Path(args.lora_base)
    if not base.is_file():
        found = find_local_model(args.lora_base)
        if found is None:
            raise SystemExit(f"--lora-base {args.lora_base}: no such file here or in the model folders")
        base = found
    threads = args.threads or threads_from_env() or 1
    result = adapter_agreement(base, args.lora_adapter, n_calls=args.lora_calls, threads=threads)
    print(agreement_report(result))
    if args.lora_output is not None:
        args.lora_output.parent.mkdir(parents=True, exist_ok=True)
        args.lora_output.write_text(json.dumps(result, indent=2) + "\n")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.lora_adapter is not None:
        run_adapter_agreement(args)
        return 0
    if args.judge_adapter is not None:
        name = f"judging-{args.judge_adapter.stem}-{args.judge_set}-{args.judge_engine}-{args.judge_dtype or 'fast'}"
        name += (
            f"-{args.judge_in_flight}-in-flight" if args.judge_in_flight > 1 else ""
        )  # one file per setting
        result = judging_bench(
            args.judge_adapter,
            args.judge_recorded,
            profile_name=args.judge_profile,
            set_name=args.judge_set,
            threads=args.threads,
            limit=args.judge_limit,
            engine=args.judge_engine,
            in_flight=args.judge_in_flight,
            dtype=args.judge_dtype,
            run_dir=args.output_dir / name,
        )
        write_part(args.output_dir, name, result, judging_table(result))
        return 0
    if args.training_run_seed is not None:
        run_dir = chosen_path_run(
            args.training_run_dir, seed=args.training_run_seed, threads=args.training_threads
        )
        print(f"run folder: {run_dir}")
        return 0
    if args.training_only:
        run_training_bench(args)
        return 0
    run_benchmarks(args)
    return 0
