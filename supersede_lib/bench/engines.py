"""The local engines side by side (part of `make bench`): llama.cpp vs batched transformers.

Both engines answer the same synthetic questions (bounded memory and full context, same
episodes) through `run_condition` at the same concurrency and thread count. Each engine runs in
its own spawned process, so its peak RSS is its own. Reported per engine and condition: wall per
question, prompt and generated tokens/s, peak memory; across engines: the speed-up over
llama.cpp against the targets, and how often the matcher's verdicts agree on shared questions.
For the transformers engine a sample of its calls is re-run alone (batch size 1) to measure how
often batching changed a greedy reply. The table names the CPU, its bf16 flags and the threads.
"""

from __future__ import annotations

import os
import platform
import resource
import time
from pathlib import Path
from typing import Any

from supersede_lib.agent.rollout import CONDITIONS
from supersede_lib.agent.settings import DEFAULT_MAX_TOKENS_ANSWER
from supersede_lib.bench.children import child_pool
from supersede_lib.data.synthetic import generate_episodes
from supersede_lib.eval.run_files import package_versions
from supersede_lib.eval.runner import (
    RunSettings,
    notes_max_tokens_for,
    run_condition,
)
from supersede_lib.models.cpu_features import BF16_NATIVE_FLAGS, cpu_flags, read_cpuinfo
from supersede_lib.models.engine import detect_engine, make_embedded_model
from supersede_lib.models.gguf import MODEL_DIR_ENV, default_model_dir

ENGINE_ORDER = ("llamacpp", "transformers")

SPEEDUP_TARGETS = {"bounded_memory": 3.5, "full_context": 5.0}  # transformers over llama.cpp, wall/question
DEFAULT_ENGINE_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
SHOWN_FLAGS = (*BF16_NATIVE_FLAGS, "amx_tile", "avx512f", "avx2")
N_CTX = 32768


def local_model_folders() -> list[Path]:
    """Where benchmarks look for GGUF files (never downloading): $SUPERSEDE_MODEL_DIR, then the home cache."""
    folders = [Path(os.environ[MODEL_DIR_ENV])] if os.environ.get(MODEL_DIR_ENV) else []
    return [*folders, default_model_dir()]


def find_local_model(filename: str) -> Path | None:
    """`filename` in the first of `local_model_folders()` that holds it, else None."""
    return next(
        (folder / filename for folder in local_model_folders() if (folder / filename).is_file()), None
    )


def machine_summary(threads: int | None = None) -> dict[str, Any]:
    """CPU model, the flags that decide the engine, core count and load (no paths, no host names)."""
    text = read_cpuinfo()
    model_name = next(
        (line.partition(":")[2].strip() for line in text.splitlines() if line.startswith("model name")),
        platform.processor() or "unknown",
    )
    flags = cpu_flags(text)
    return {
        "cpu": model_name,
        "flags": {flag: flag in flags for flag in SHOWN_FLAGS},
        "cpu_count": os.cpu_count(),
        "threads": threads,  # of each engine; the load beyond them is other work
        "load_average": [round(value, 2) for value in os.getloadavg()],
        "auto_choice": detect_engine("auto", threads).describe(),
    }


def _call_sample(trajectories: list[dict[str, Any]], count: int) -> list[tuple[list[dict], int, str]]:
    """Up to `count` recorded calls (messages, max_tokens, reply): answer turns first, then notes."""
    calls = []
    for trajectory in trajectories:
        budget = trajectory["notes_budget_chars"]
        for turn in trajectory["turns"]:
            limit = DEFAULT_MAX_TOKENS_ANSWER if turn["kind"] == "answer" else notes_max_tokens_for(budget)
            calls.append((turn["kind"] != "answer", turn["messages"], limit, turn["reply"]))
    calls.sort(key=lambda call: call[0])
    return [(messages, limit, reply) for _, messages, limit, reply in calls[:count]]


def run_engine(
    engine: str,
    model_path: str,
    n_questions: int,
    seed: int,
    concurrency: int,
    threads: int,
    disagreement_calls: int,
) -> dict[str, Any]:
    """One engine on both conditions (run in a fresh process; returns plain data)."""

    episodes = generate_episodes(n_questions, seed=seed, difficulty="medium")
    choice = detect_engine(engine, threads)
    model = make_embedded_model(model_path, engine=engine, n_ctx=N_CTX, n_threads=threads, announce=False)
    started = time.perf_counter()
    model.load()
    record: dict[str, Any] = {
        "engine": engine,
        "dtype": choice.dtype,
        "device": choice.device,
        "threads": threads,
        "why": choice.reason,
        "load_s": time.perf_counter() - started,
        "conditions": {},
    }
    batched = engine == "transformers"
    bounded_trajectories: list[dict[str, Any]] = []
    for condition in CONDITIONS:
        settings = RunSettings(concurrency=concurrency, seed=seed, store_messages=batched)
        batches_before = len(getattr(model, "batch_sizes", []))
        started = time.perf_counter()
        result = run_condition(episodes, condition, model, settings)
        wall = time.perf_counter() - started
        frame = result.frame
        if condition == "bounded_memory":
            bounded_trajectories = result.trajectories
        batch_sizes = getattr(model, "batch_sizes", [])[batches_before:]
        record["conditions"][condition] = {
            "questions": len(frame),
            "calls": int(frame["n_calls"].sum()),
            "wall_s": wall,
            "wall_per_question_s": wall / len(frame),
            "prompt_tokens": int(frame["prompt_tokens"].sum()),
            "completion_tokens": int(frame["completion_tokens"].sum()),
            "prompt_tok_s": float(frame["prompt_tokens"].sum()) / wall,
            "generated_tok_s": float(frame["completion_tokens"].sum()) / wall,
            "mean_batch_size": sum(batch_sizes) / len(batch_sizes) if batch_sizes else None,
            "correct": int((frame["verdict"] == "correct").sum()),
            "errors": int(frame["error"].notna().sum()),
            "verdicts": dict(zip(frame["episode_id"], frame["verdict"], strict=True)),
            "answers": dict(zip(frame["episode_id"], frame["answer"], strict=True)),
        }
    if batched and disagreement_calls > 0:
        sample = _call_sample(bounded_trajectories, disagreement_calls)
        differ = sum(
            model.chat(messages, max_tokens=limit).text != reply for messages, limit, reply in sample
        )
        record["batch_disagreement"] = {"calls": len(sample), "differ": differ}
    record["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return record


def _in_child(function: Any, *args: Any) -> Any:
    """Run `function(*args)` in a fresh spawned process (own memory peak, own torch threads)."""
    with child_pool() as pool:
        return pool.submit(function, *args).result()


def _materialize(model_path: str) -> float:
    from supersede_lib.models.hf import materialize_gguf

    started = time.perf_counter()
    path = Path(model_path)
    materialize_gguf(path.parent, path.name)
    return time.perf_counter() - started


def compare(records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Speed-ups of transformers over llama.cpp and the agreement of their matcher verdicts."""
    base, fast = records["llamacpp"]["conditions"], records["transformers"]["conditions"]
    speedups, agreement = {}, {}
    for condition in CONDITIONS:
        ratio = base[condition]["wall_per_question_s"] / fast[condition]["wall_per_question_s"]
        speedups[condition] = {
            "speedup": ratio,
            "target": SPEEDUP_TARGETS[condition],
            "met": ratio >= SPEEDUP_TARGETS[condition],
        }
        shared = sorted(set(base[condition]["verdicts"]) & set(fast[condition]["verdicts"]))
        agreement[condition] = {
            "shared": len(shared),
            "same_verdict": sum(
                base[condition]["verdicts"][key] == fast[condition]["verdicts"][key] for key in shared
            ),
            "same_answer": sum(
                base[condition]["answers"][key] == fast[condition]["answers"][key] for key in shared
            ),
        }
    shared = sum(item["shared"] for item in agreement.values())
    same = sum(item["same_verdict"] for item in agreement.values())
    return {
        "speedups": speedups,
        "agreement": agreement,
        "verdict_agreement": same / shared if shared else None,
        "shared_questions": shared,
    }


def engines_bench(
    model_file: str = DEFAULT_ENGINE_MODEL,
    n_questions: int = 8,
    seed: int = 0,
    concurrency: int = 8,
    threads: int | None = None,
    disagreement_calls: int = 16,
) -> dict[str, Any]:
    """Both engines on `n_questions` bounded-memory and `n_questions` full-context questions."""
    found = find_local_model(model_file)
    if found is None:
        searched = ", ".join(folder.name or str(folder) for folder in local_model_folders())
        return {
            "skipped": f"{model_file} not found (looked in {MODEL_DIR_ENV} and the model cache: {searched})"
        }
    model_path = str(found)
    threads = threads or os.cpu_count() or 1
    machine = machine_summary(threads)
    materialize_s = _in_child(_materialize, model_path)
    records = {}
    for engine in ENGINE_ORDER:
        records[engine] = _in_child(
            run_engine, engine, model_path, n_questions, seed, concurrency, threads, disagreement_calls
        )
    machine["load_average_after"] = [round(value, 2) for value in os.getloadavg()]
    return {
        "model_file": Path(model_path).name,
        "preset": "medium",
        "questions_per_condition": n_questions,
        "seed": seed,
        "concurrency": concurrency,
        "materialize_s": materialize_s,
        "machine": machine,
        "engines": records,
        "comparison": compare(records),
        "packages": package_versions(("torch", "transformers", "xllamacpp")),
    }


def engines_table(result: dict[str, Any]) -> str:
    """The engine comparison as Markdown (what outputs/bench/engines.md holds)."""
    if "skipped" in result:
        return f"Engine comparison skipped: {result['skipped']}"
    machine = result["machine"]
    flags = ", ".join(f"{flag} {'yes' if present else 'no'}" for flag, present in machine["flags"].items())
    lines = [
        f"# Local engines side by side: {result['model_file']}",
        "",
        f"CPU: {machine['cpu']}, {machine['cpu_count']} cores; flags: {flags}.",
        f"Automatic choice here: {machine['auto_choice']}.",
        f"Load average (1/5/15 min, as `uptime` shows it) before: {machine['load_average']}, after: "
        f"{machine['load_average_after']}"
        + (
            " - taken under load: other processes shared these cores."
            if max(machine["load_average"][0], machine["load_average_after"][0])
            > (machine.get("threads") or 1) + 0.5
            else "."
        ),
        f"{result['questions_per_condition']} synthetic `{result['preset']}` questions per condition "
        f"(seed {result['seed']}), the same episodes for both engines, concurrency {result['concurrency']}.",
        "",
        "| engine | dtype | threads | condition | questions | calls | wall/question (s) | prompt tok/s "
        "| generated tok/s | mean batch | correct | errors | peak RSS (GiB) |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for engine, record in result["engines"].items():
        for condition, row in record["conditions"].items():
            batch = "-" if row["mean_batch_size"] is None else f"{row['mean_batch_size']:.1f}"
            lines.append(
                f"| {engine} | {record['dtype']} | {record['threads']} | {condition} | {row['questions']} "
                f"| {row['calls']} | {row['wall_per_question_s']:.1f} | {row['prompt_tok_s']:.1f} "
                f"| {row['generated_tok_s']:.2f} | {batch} | {row['correct']} | {row['errors']} "
                f"| {record['peak_rss_gib']:.2f} |"
            )
    comparison = result["comparison"]
    lines.append("")
    for condition, speed in comparison["speedups"].items():
        agreement = comparison["agreement"][condition]
        lines.append(
            f"- {condition}: transformers is {speed['speedup']:.2f}x llama.cpp per question "
            f"(target >= {speed['target']}x: {'met' if speed['met'] else 'NOT met'}); matcher verdicts agree on "
            f"{agreement['same_verdict']}/{agreement['shared']} questions, identical answers on "
            f"{agreement['same_answer']}/{agreement['shared']}."
        )
    disagreement = result["engines"]["transformers"].get("batch_disagreement")
    if disagreement:
        lines.append(
            f"- Batch-size disagreement (transformers, {result['engines']['transformers']['dtype']}): "
            f"{disagreement['differ']}/{disagreement['calls']} recorded bounded-memory calls gave a different "
            "reply when re-run alone (batch size 1)."
        )
    for engine, record in result["engines"].items():
        lines.append(f"- {engine}: load {record['load_s']:.1f} s; {record['why']}.")
    lines.append(
        f"- Dequantising the GGUF for transformers (cached after the first run): {result['materialize_s']:.1f} s."
    )
    lines.append(
        f"- Packages: {', '.join(f'{name} {version}' for name, version in result['packages'].items())}."
    )
    return "\n".join(lines)
