"""Speed benchmarks of the runner (`make bench`, not part of the test suite).

    python -m supersede_lib bench                  # (or make bench) defaults below; writes outputs/bench/bench.json
    python -m supersede_lib bench --full-sequential --latency 0.1

1. Concurrency, against `models.local_server.LocalOpenAIServer` on 127.0.0.1 with a fixed per-call latency
   (in a child process, so its threads do not share the runner's interpreter lock):
   78 synthetic bounded-memory questions (the size of LongMemEval knowledge-update) run
   sequentially, at `--concurrency` (16) and with every question in flight at once, then a fully
   cached re-run from a fresh temporary cache. The sequential time is measured on a subset and
   extrapolated per call unless `--full-sequential` (the report says which). Each run is compared
   with its lower bound: a question's sessions are strictly sequential, so no schedule beats
   `latency x max(longest per-question call chain, ceil(total calls / concurrency))`.
   Targets: >= 20x over sequential with all questions in flight, within 1.3x of the bound.
2. Harness overhead with the embedded GGUF model (the smallest one found): wall time of
   `run_condition` vs time spent inside model calls on one short episode. Target: <= 5%.
   Skipped with a message when no GGUF file is present.
3. Engines side by side (`supersede_lib.bench.engines`; `--engines-only`, `--quick`): llama.cpp and
   batched transformers on the same synthetic bounded-memory and full-context questions; writes
   outputs/bench/engines.md and engines.json.
4. The prompt-prefix cache against a whole-prompt prefill (`supersede_lib.bench.prefix`;
   `--skip-prefix`): the CPU proof's memory-rewrite calls on the 0.5B, seconds per call and
   identical replies; writes outputs/bench/prefix_cache.md and prefix_cache.json.
5. The shared prompt prefix in GRPO training (`supersede_lib.bench.train_prefix`;
   `--skip-train-prefix`): one accumulation window of a real cpu_proof step through TRL's loss and
   through the shared-prefix loss, seconds and gradient distance; writes
   outputs/bench/train_prefix.md and train_prefix.json.
6. One registered GRPO step, float32 on one thread against the path this CPU chooses
   (`supersede_lib.bench.training`; `--skip-training`, `--training-only`): seconds a step and where
   they go, and the chosen path's gradient distance from float32; writes outputs/bench/training.md
   and training.json. Targets (on a CPU with AMX: a 20-step run in <= 30 min on 2 cores; AVX2 only:
   >= 2x the float32 step) are read against it and `--training-runs`.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from supersede_lib.agent.episode import Episode
from supersede_lib.bench.children import die_with_parent
from supersede_lib.bench.engines import engines_bench, engines_table, find_local_model
from supersede_lib.bench.prefix import prefix_cache_bench, prefix_cache_table
from supersede_lib.bench.train_prefix import train_prefix_bench, train_prefix_table
from supersede_lib.bench.training import training_bench, training_runs_table, training_table
from supersede_lib.data.synthetic import generate_episodes
from supersede_lib.eval.provenance import git_state
from supersede_lib.eval.run_files import package_versions
from supersede_lib.eval.runner import RunSettings, calls_per_question, run_condition
from supersede_lib.models.cache import CachedChatModel, ResponseCache
from supersede_lib.models.cpu_features import cpu_flags, read_cpuinfo
from supersede_lib.models.gguf import EmbeddedGGUFModel
from supersede_lib.models.local_server import LocalOpenAIServer
from supersede_lib.models.openai_api import OpenAIChatModel

DEFAULT_OUTPUT_DIR = Path("outputs") / "bench"
FAKE_KEY_ENV = "SUPERSEDE_BENCH_FAKE_KEY"  # unset on purpose: local servers take a placeholder key
SMALLEST_FIRST = (
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
)
SPEEDUP_TARGET = 20.0
BOUND_RATIO_TARGET = 1.3  # all in flight: within 1.3x of the chain-latency bound
OVERHEAD_TARGET = 0.05


def makespan_bound_s(chains: list[int], concurrency: int, latency_s: float) -> float:
    """No schedule with `concurrency` slots finishes sooner than this (chains run in order)."""
    return latency_s * max(max(chains), math.ceil(sum(chains) / concurrency))


def _serve_fake(latency_s: float, connection: Any, parent_pid: int | None = None) -> None:
    """Child process: run the fake server (its own GIL, off the runner's core) until told to stop,
    or until the parent dies (a killed `make bench` leaves no server behind)."""
    die_with_parent(parent_pid)

    with LocalOpenAIServer(latency_s=latency_s) as server:
        connection.send(server.base_url)
        while connection.recv() != "stop":
            connection.send(server.request_count)
        connection.send(server.request_count)


class FakeServerProcess:
    """`LocalOpenAIServer` in a child process, so the server's threads do not compete with the runner."""

    def __init__(self, latency_s: float) -> None:
        context = multiprocessing.get_context("spawn")
        self._connection, child_end = context.Pipe()
        self._process = context.Process(
            target=_serve_fake, args=(latency_s, child_end, os.getpid()), daemon=True
        )
        self.base_url = ""

    def __enter__(self) -> FakeServerProcess:
        self._process.start()
        self.base_url = self._connection.recv()
        return self

    @property
    def request_count(self) -> int:
        self._connection.send("count")
        return int(self._connection.recv())

    def __exit__(self, *exc_info: object) -> None:
        if self._process.is_alive():
            self._connection.send("stop")
            self._connection.recv()
        self._process.join(timeout=10)


def _timed_run(episodes: list[Episode], model: Any, concurrency: int) -> tuple[float, Any]:
    started = time.perf_counter()
    frame = run_condition(
        episodes, "bounded_memory", model, RunSettings(concurrency=concurrency), progress=False
    ).frame
    return time.perf_counter() - started, frame


def _cache_runs(
    episodes: list[Episode],
    model: OpenAIChatModel,
    server: FakeServerProcess,
    cache_path: Path,
    chains: list[int],
    latency_s: float,
) -> list[dict[str, Any]]:
    """A cache fill with every question in flight, then the same questions again from that cache:
    the re-run must send the server nothing and give the same answers."""
    n_questions, total_calls = len(episodes), sum(chains)
    runs: list[dict[str, Any]] = []
    cache = ResponseCache(cache_path)
    cached_model = CachedChatModel(model, cache)
    fill_wall, first = _timed_run(episodes, cached_model, concurrency=n_questions)
    requests_before = server.request_count
    cached_wall, second = _timed_run(episodes, cached_model, concurrency=n_questions)
    repeated = server.request_count - requests_before
    runs.append(
        {
            "run": "cache fill (all in flight)",
            "concurrency": n_questions,
            "questions": n_questions,
            "calls": total_calls,
            "wall_s": fill_wall,
            "bound_s": makespan_bound_s(chains, n_questions, latency_s),
        }
    )
    runs.append(
        {
            "run": "fully cached re-run",
            "concurrency": n_questions,
            "questions": n_questions,
            "calls": total_calls,
            "wall_s": cached_wall,
            "bound_s": 0.0,
            "server_requests": repeated,
            "cached_calls": int(second["cached_calls"].sum()),
            "same_answers": bool((first["answer"] == second["answer"]).all()),
        }
    )
    return runs


def concurrency_bench(
    n_questions: int,
    latency_s: float,
    concurrency: int,
    sequential_subset: int,
    full_sequential: bool,
    seed: int,
) -> dict[str, Any]:
    """Sequential vs concurrent vs cached wall times against the fake server."""

    episodes = generate_episodes(n_questions, seed=seed, difficulty="medium")
    chains = [calls_per_question(episode) for episode in episodes]
    total_calls = sum(chains)
    runs: list[dict[str, Any]] = []
    with FakeServerProcess(latency_s) as server, tempfile.TemporaryDirectory() as scratch:
        model = OpenAIChatModel("fake-bench", base_url=server.base_url, api_key_env=FAKE_KEY_ENV)

        subset = episodes if full_sequential else episodes[:sequential_subset]
        subset_calls = sum(calls_per_question(episode) for episode in subset)
        wall, _ = _timed_run(subset, model, concurrency=1)
        per_call = wall / subset_calls
        sequential_s = wall if full_sequential else per_call * total_calls
        runs.append(
            {
                "run": "sequential",
                "concurrency": 1,
                "questions": len(subset),
                "calls": subset_calls,
                "wall_s": wall,
                "sequential_estimate_s": sequential_s,
                "how": "measured on all questions"
                if full_sequential
                else f"measured on {len(subset)} questions ({subset_calls} calls), extrapolated per call",
                "bound_s": makespan_bound_s([calls_per_question(e) for e in subset], 1, latency_s),
            }
        )
        for label, slots in ((f"concurrency {concurrency}", concurrency), ("all in flight", n_questions)):
            wall, _ = _timed_run(episodes, model, concurrency=slots)
            runs.append(
                {
                    "run": label,
                    "concurrency": slots,
                    "questions": n_questions,
                    "calls": total_calls,
                    "wall_s": wall,
                    "bound_s": makespan_bound_s(chains, slots, latency_s),
                }
            )
        runs += _cache_runs(episodes, model, server, Path(scratch) / "bench-cache.sqlite", chains, latency_s)
    for run in runs:
        run["speedup_vs_sequential"] = sequential_s / run["wall_s"] if run["wall_s"] > 0 else None
        run["ratio_to_bound"] = run["wall_s"] / run["bound_s"] if run["bound_s"] else None
    runs[0]["speedup_vs_sequential"] = 1.0  # the reference itself (its wall may cover only a subset)
    all_in_flight = next(run for run in runs if run["run"] == "all in flight")
    return {
        "latency_s": latency_s,
        "questions": n_questions,
        "total_calls": total_calls,
        "longest_chain_calls": max(chains),
        "sequential_estimate_s": sequential_s,
        "runs": runs,
        "targets": {
            "speedup_all_in_flight": all_in_flight["speedup_vs_sequential"],
            "speedup_target": SPEEDUP_TARGET,
            "speedup_met": all_in_flight["speedup_vs_sequential"] >= SPEEDUP_TARGET,
            "ratio_to_bound_all_in_flight": all_in_flight["ratio_to_bound"],
            "ratio_target": BOUND_RATIO_TARGET,
            "ratio_met": all_in_flight["ratio_to_bound"] <= BOUND_RATIO_TARGET,
            "note": (
                f"at concurrency {concurrency} the speedup cannot exceed {concurrency}x "
                "(each slot runs one call at a time); the 20x target needs more slots"
            ),
        },
    }


def smallest_gguf() -> Path | None:
    """The smallest provisioned GGUF (for the overhead measurement), or None."""
    return next(filter(None, (find_local_model(filename) for filename in SMALLEST_FIRST)), None)


def embedded_overhead_bench(seed: int) -> dict[str, Any]:
    """Share of `run_condition` wall time spent outside model calls, embedded GGUF, one short episode."""
    path = smallest_gguf()
    if path is None:
        return {"skipped": "no GGUF model file found (run provision-models.sh or set SUPERSEDE_MODEL_DIR)"}

    model = EmbeddedGGUFModel(path, n_ctx=4096)
    model.load()  # loading is a one-off cost, not per-call harness overhead
    episode = min(generate_episodes(4, seed=seed, difficulty="easy"), key=lambda item: len(item.sessions))
    started = time.perf_counter()
    frame = run_condition(
        [episode], "bounded_memory", model, RunSettings(concurrency=1), progress=False
    ).frame
    wall = time.perf_counter() - started
    inside = float(frame["latency_s"].sum())
    overhead = (wall - inside) / wall
    model.close()
    return {
        "model_file": path.name,
        "calls": int(frame["n_calls"].sum()),
        "wall_s": wall,
        "inside_model_calls_s": inside,
        "overhead_s": wall - inside,
        "overhead_share": overhead,
        "overhead_target": OVERHEAD_TARGET,
        "overhead_met": overhead <= OVERHEAD_TARGET,
    }


def bench_report(result: dict[str, Any]) -> str:
    """The concurrency runs (and the overhead line) as a Markdown table."""
    bench = result["concurrency"]
    lines = [
        f"Fake server latency {bench['latency_s']} s/call; {bench['questions']} synthetic bounded-memory "
        f"questions, {bench['total_calls']} calls, longest chain {bench['longest_chain_calls']} calls; "
        f"sequential estimate {bench['sequential_estimate_s']:.1f} s.",
        "",
        "| run | concurrency | wall (s) | speedup vs sequential | lower bound (s) | wall / bound |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for run in bench["runs"]:
        ratio = f"{run['ratio_to_bound']:.2f}" if run["ratio_to_bound"] else "-"
        lines.append(
            f"| {run['run']} | {run['concurrency']} | {run['wall_s']:.2f} | "
            f"{run['speedup_vs_sequential']:.1f}x | {run['bound_s']:.2f} | {ratio} |"
        )
    sequential = bench["runs"][0]
    in_flight = next(run for run in bench["runs"] if run["run"] == "all in flight")
    met = "met" if in_flight["ratio_to_bound"] <= BOUND_RATIO_TARGET else "not met"
    lines += [
        "",
        f"All in flight: {in_flight['ratio_to_bound']:.2f}x the bound (target <= {BOUND_RATIO_TARGET}x: {met}).",
        f"Sequential: {sequential['how']}.",
    ]
    git = result.get("git") or {}
    if git.get("commit"):
        lines.append(
            f"Code: {git['commit'][:12]}{' (dirty tree)' if git.get('dirty') else ''}; CPU: {result.get('cpu_count')} cores, {', '.join(result.get('cpu_simd') or []) or 'no AVX'}."
        )
    cached = bench["runs"][-1]
    lines.append(
        f"Cached re-run: {cached['server_requests']} requests reached the server, "
        f"{cached['cached_calls']}/{cached['calls']} calls from the cache, same answers: {cached['same_answers']}."
    )
    overhead = result["embedded_overhead"]
    if "skipped" in overhead:
        lines.append(f"Embedded overhead: skipped ({overhead['skipped']}).")
    else:
        lines.append(
            f"Embedded overhead ({overhead['model_file']}, {overhead['calls']} calls): "
            f"{overhead['overhead_share']:.1%} of {overhead['wall_s']:.2f} s outside model calls "
            f"(target <= {OVERHEAD_TARGET:.0%})."
        )
    return "\n".join(lines)


def write_engine_results(result: dict[str, Any], output_dir: Path) -> str:
    """outputs/bench/engines.json and engines.md; returns the table."""
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "engines.json").write_text(json.dumps(result, indent=2) + "\n")
    table = engines_table(result)
    (output_dir / "engines.md").write_text(table + "\n")
    return table


def write_part(output_dir: Path, name: str, measured: dict[str, Any], table: str) -> dict[str, Any]:
    """Write one benchmark's `<name>.json` and `<name>.md` (its table), print the table."""
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / f"{name}.json").write_text(json.dumps(measured, indent=2) + "\n")
    (output_dir / f"{name}.md").write_text(table + "\n")
    print(table)
    return measured


def run_benchmarks(args: argparse.Namespace) -> dict[str, Any]:
    """Every benchmark `args` (the `bench` command's options) asks for; each part's files under `args.output_dir`."""
    result: dict[str, Any] = {}
    if not args.engines_only:
        result = {
            "concurrency": concurrency_bench(
                args.questions,
                args.latency,
                args.concurrency,
                args.sequential_subset,
                args.full_sequential,
                args.seed,
            ),
            "embedded_overhead": {"skipped": "--skip-embedded"}
            if args.skip_embedded
            else embedded_overhead_bench(args.seed),
            "packages": package_versions(),
            "git": git_state(),  # a timing is only comparable with the code that made it
            "cpu_count": os.cpu_count(),
            "cpu_simd": sorted(flag for flag in cpu_flags(read_cpuinfo()) if flag.startswith(("avx", "amx"))),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        args.output_dir.mkdir(parents=True, exist_ok=True)
        (args.output_dir / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
        table = bench_report(result)
        (args.output_dir / "bench.md").write_text(table + "\n")
        print(table)
        print(f"\nwrote {args.output_dir / 'bench.json'}")
    if not args.skip_engines:
        quick = args.quick
        result["engines"] = engines_bench(
            model_file=args.engine_model,
            n_questions=2 if quick else args.engine_questions,
            seed=args.seed,
            concurrency=args.engine_concurrency,
            threads=args.threads,
            disagreement_calls=4 if quick else args.disagreement_calls,
        )
        print(write_engine_results(result["engines"], args.output_dir))
        print(f"\nwrote {args.output_dir / 'engines.json'}")
    if not args.skip_prefix:
        prefix = prefix_cache_bench(n_calls=4 if args.quick else args.prefix_calls, threads=args.threads)
        result["prefix_cache"] = write_part(
            args.output_dir, "prefix_cache", prefix, prefix_cache_table(prefix)
        )
    if not args.skip_train_prefix:
        training = train_prefix_bench(threads=args.threads)
        result["train_prefix"] = write_part(
            args.output_dir, "train_prefix", training, train_prefix_table(training)
        )
    if not args.skip_training and not args.engines_only:
        result["training"] = run_training_bench(args)
    return result


def run_training_bench(args: argparse.Namespace) -> dict[str, Any]:
    """One registered step, float32 on 1 thread vs the chosen path, and the runs named by `--training-runs`."""
    llamacpp = getattr(args, "training_llamacpp_rollouts", False)
    measured = training_bench(chosen_threads=args.training_threads, llamacpp_rollouts=llamacpp)
    if "skipped" not in measured:
        measured["runs"] = training_runs_table(args.training_runs)
        measured["git"] = git_state()
    # each setting has its own file, so a bench of another setting never replaces a recorded one
    part = (
        "training"
        + ("-llamacpp-rollouts" if llamacpp else "")
        + ("-isa-capped" if measured.get("isa_caps") else "")
    )
    return write_part(args.output_dir, part, measured, training_table(measured))
