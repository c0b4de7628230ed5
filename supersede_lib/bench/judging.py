"""Judge one kept adapter on a registered evaluation set with the engine this CPU picks, against the record.

Notebook 07 judged the registered adapters with float32 transformers (the prompt-prefix engine) on
an AVX2-only CPU: about 26 minutes for the 200-episode test set. On a CPU with native bf16 the same
engine loads the base in bf16 (`models.hf.fast_dtype`), which is faster but not the same
arithmetic. This bench judges a kept adapter (`train.kept_adapters`) on one set of a profile, in a
scratch folder with its own empty cache (nothing committed is read or written), times it, and
compares every episode's verdict and answer with the committed judgement of the same adapter: the
agreement says whether the faster engine can stand in for the recorded one.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib import profiles
from supersede_lib.bench.engines import machine_summary
from supersede_lib.data.episodes import load_episodes
from supersede_lib.eval.runner import run_condition
from supersede_lib.models.batched import BatchedHFChatModel
from supersede_lib.models.cache import CachedChatModel, ResponseCache
from supersede_lib.models.gguf import EmbeddedGGUFModel
from supersede_lib.models.hf import HFChatModel, dtype_label, fast_dtype
from supersede_lib.studies.evaluation_sets import ConfigOnly, set_folder, set_settings
from supersede_lib.studies.robustness import LLAMACPP_CONTEXT
from supersede_lib.studies.training import arm_config
from supersede_lib.train.kept_adapters import restore_adapter
from supersede_lib.train.run import resolve_base_model


def compare_judgements(fresh: pd.DataFrame, recorded: pd.DataFrame) -> dict[str, Any]:
    """Per-episode agreement of two judgements of the same model on the same set."""
    both = fresh.merge(recorded, on="episode_id", suffixes=("_fresh", "_recorded"))
    if len(both) != len(recorded):
        raise ValueError(f"{len(both)} of {len(recorded)} recorded episodes were judged again")
    fresh_correct = both["verdict_fresh"] == "correct"
    recorded_correct = both["verdict_recorded"] == "correct"
    return {
        "episodes": len(both),
        "correct_fresh": int(fresh_correct.sum()),
        "correct_recorded": int(recorded_correct.sum()),
        "same_verdict": int((both["verdict_fresh"] == both["verdict_recorded"]).sum()),
        "same_answer": int((both["answer_fresh"].fillna("") == both["answer_recorded"].fillna("")).sum()),
        "correct_only_fresh": int((fresh_correct & ~recorded_correct).sum()),
        "correct_only_recorded": int((~fresh_correct & recorded_correct).sum()),
    }


JUDGE_ENGINES = ("prefix_cache", "batched", "llamacpp")


def _judge_model(
    engine: str,
    base_path: str,
    record: Path,
    adapter: Path,
    threads: int,
    in_flight: int,
    dtype: str | None,
) -> Any:
    """The judged policy on `engine`: transformers weights in `dtype` (None: this CPU's fast dtype),
    merged with the adapter as 07 merges it; llama.cpp with the adapter as a GGUF LoRA."""
    import torch

    torch_dtype = getattr(torch, dtype) if dtype else fast_dtype("cpu")
    if engine == "prefix_cache":
        return HFChatModel(
            base_path, adapter_path=str(adapter), dtype=torch_dtype, merge_adapter=True, prefix_cache=True
        )
    if engine == "batched":
        model = BatchedHFChatModel(
            base_path, adapter_path=adapter, dtype=torch_dtype, max_batch_size=in_flight, n_threads=threads
        )
        model.load()
        return model
    return EmbeddedGGUFModel(
        base_path, n_ctx=LLAMACPP_CONTEXT, n_threads=threads, lora_adapter=record, n_parallel=in_flight
    )


def _dtype_of(model: Any) -> str:
    dtype = getattr(model, "dtype", None)
    if dtype is None:
        return "GGUF (Q4_K_M)"
    return dtype if isinstance(dtype, str) else dtype_label(dtype)


def judging_bench(
    adapter_record: Path,
    recorded_label: str,
    *,
    profile_name: str = "cpu_proof_prereg",
    set_name: str = "test",
    arm: str = "verdict",
    threads: int | None = None,
    limit: int | None = None,
    engine: str = "prefix_cache",
    in_flight: int = 1,
    dtype: str | None = None,
    run_dir: Path | None = None,
) -> dict[str, Any]:
    """Judge `adapter_record` on `set_name` (its first `limit` episodes, default all) with this CPU's
    engine; compare with `recorded_label`'s committed CSV on the same episodes. With `run_dir` the
    judged run's CSV, trajectories and manifest are written there (the rows a number comes from).

    `engine`: `prefix_cache` (07's transformers engine; weights in `dtype`, default this CPU's fast one), `batched`
    (transformers serving `in_flight` episodes' calls in one generate) or `llamacpp` (the Q4 GGUF with
    the adapter converted to a GGUF LoRA, `models.lora_gguf`; `in_flight` slots decoded together)."""
    if engine not in JUDGE_ENGINES:
        raise ValueError(f"engine {engine!r}: expected one of {', '.join(JUDGE_ENGINES)}")
    import torch

    profile = profiles.load_profile(profile_name)
    evaluation = profile.evaluation(set_name)
    recorded_csv = set_folder(profile, evaluation) / f"{recorded_label}.csv"
    if not recorded_csv.exists():
        return {"skipped": f"{recorded_csv} not found (the committed judgement to compare with)"}
    config = arm_config(profile, arm)
    base_path = resolve_base_model(config)
    if not Path(base_path).exists():
        return {"skipped": f"{Path(base_path).name} not found (the adapters' base model)"}
    threads = threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    settings = set_settings(profile, evaluation, [ConfigOnly(config)])
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        adapter = restore_adapter(adapter_record, folder / "adapter")
        loaded = time.perf_counter()
        model = _judge_model(engine, base_path, adapter_record, adapter, threads, in_flight, dtype)
        settings = replace(settings, concurrency=in_flight)
        started = time.perf_counter()
        cache = ResponseCache(folder / "cache.sqlite")
        wrapped = CachedChatModel(model, cache, replay=False, commit=profiles.commit_label())
        episodes = load_episodes(evaluation.episodes)[:limit]
        result = run_condition(
            episodes,
            evaluation.condition,
            wrapped,
            settings,
            output_dir=run_dir,
            run_name=Path(adapter_record).stem if run_dir is not None else None,
            progress=True,
        )
        seconds = time.perf_counter() - started
        described = {
            "engine": engine,
            "model": model.name,
            "dtype": _dtype_of(model),
            "cache_namespace": model.cache_namespace,
            "in_flight": in_flight,
        }
        getattr(model, "close", lambda: None)()
    recorded = pd.read_csv(recorded_csv)
    judged_ids = {episode.episode_id for episode in episodes}
    agreement = compare_judgements(result.frame, recorded[recorded["episode_id"].isin(judged_ids)])
    return {
        "profile": profile_name,
        "set": set_name,
        "adapter": Path(adapter_record).name,
        "recorded": recorded_label,
        "engine": described,
        "load_s": round(started - loaded, 1),
        "judge_s": round(seconds, 1),
        "seconds_per_episode": round(seconds / max(1, len(episodes)), 2),
        "agreement": agreement,
        "machine": machine_summary(threads),
    }


def judging_table(result: dict[str, Any]) -> str:
    """The judging bench as Markdown."""
    if "skipped" in result:
        return f"Skipped: {result['skipped']}"
    machine, agreement, engine = result["machine"], result["agreement"], result["engine"]
    n = agreement["episodes"]
    return "\n".join(
        [
            f"Kept adapter {result['adapter']} judged on {result['profile']}'s `{result['set']}` set "
            f"(n = {n}) with engine `{engine['engine']}` ({engine['cache_namespace']}, {engine['dtype']} base, "
            f"{engine['in_flight']} in flight), "
            f"{machine['threads']} threads on {machine['cpu']} (load {machine['load_average']}); compared "
            f"with the committed judgement `{result['recorded']}`.",
            "",
            "| measure | value |",
            "| --- | --- |",
            f"| wall time to judge the set | {result['judge_s'] / 60:.1f} min ({result['seconds_per_episode']} s "
            "an episode; model load not counted) |",
            f"| model load | {result['load_s']} s |",
            f"| correct: this engine / recorded | {agreement['correct_fresh']} / {agreement['correct_recorded']} |",
            f"| same verdict | {agreement['same_verdict']} of {n} |",
            f"| same answer text | {agreement['same_answer']} of {n} |",
            f"| correct only here / only in the record | {agreement['correct_only_fresh']} / "
            f"{agreement['correct_only_recorded']} |",
        ]
    )
