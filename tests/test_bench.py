"""`make bench` machinery on a tiny setting: the figures it reports are consistent (no timing targets here)."""

from __future__ import annotations

import pytest

from supersede_lib.bench import engines as bench_engines
from supersede_lib.bench import runner as bench


def test_makespan_bound_is_the_longest_chain_or_the_work_per_slot() -> None:
    assert bench.makespan_bound_s([3, 3, 3, 3], concurrency=1, latency_s=0.5) == 6.0
    assert bench.makespan_bound_s([3, 3, 3, 3], concurrency=4, latency_s=0.5) == 1.5  # chains in parallel
    assert bench.makespan_bound_s([9, 1, 1, 1], concurrency=4, latency_s=1.0) == 9.0  # one long chain


def test_concurrency_bench_reports_reference_bounds_and_a_free_cached_rerun() -> None:
    result = bench.concurrency_bench(
        n_questions=4, latency_s=0.02, concurrency=2, sequential_subset=2, full_sequential=False, seed=0
    )
    runs = {run["run"]: run for run in result["runs"]}
    assert runs["sequential"]["speedup_vs_sequential"] == 1.0
    assert runs["sequential"]["questions"] == 2 and "extrapolated" in runs["sequential"]["how"]
    for label in ("concurrency 2", "all in flight", "cache fill (all in flight)"):
        assert runs[label]["ratio_to_bound"] >= 0.99, label  # nothing beats the bound
    cached = runs["fully cached re-run"]
    assert cached["server_requests"] == 0 and cached["same_answers"]
    assert cached["cached_calls"] == result["total_calls"]
    assert "needs more slots" in result["targets"]["note"]
    table = bench.bench_report({"concurrency": result, "embedded_overhead": {"skipped": "no GGUF"}})
    assert "| sequential | 1 |" in table and "1.0x" in table and "skipped (no GGUF)" in table


def _engine_record(engine: str, wall_per_question: float, verdicts: dict[str, str]) -> dict:
    condition = {
        "questions": len(verdicts),
        "calls": 3 * len(verdicts),
        "wall_s": wall_per_question * len(verdicts),
        "wall_per_question_s": wall_per_question,
        "prompt_tokens": 1000,
        "completion_tokens": 100,
        "prompt_tok_s": 1000 / (wall_per_question * len(verdicts)),
        "generated_tok_s": 100 / (wall_per_question * len(verdicts)),
        "mean_batch_size": 2.0 if engine == "transformers" else None,
        "correct": sum(verdict == "correct" for verdict in verdicts.values()),
        "errors": 0,
        "verdicts": verdicts,
        "answers": {key: f"{engine}-{value}" for key, value in verdicts.items()},
    }
    return {
        "engine": engine,
        "dtype": "bfloat16" if engine == "transformers" else "gguf",
        "device": "cpu",
        "threads": 2,
        "why": "test",
        "load_s": 1.0,
        "conditions": {"bounded_memory": condition, "full_context": dict(condition)},
        "peak_rss_gib": 1.5,
    }


def test_engine_comparison_reports_speedups_against_targets_and_verdict_agreement() -> None:
    records = {
        "llamacpp": _engine_record("llamacpp", 40.0, {"a": "correct", "b": "stale"}),
        "transformers": _engine_record("transformers", 10.0, {"a": "correct", "b": "wrong"}),
    }
    records["transformers"]["batch_disagreement"] = {"calls": 4, "differ": 1}
    comparison = bench_engines.compare(records)
    assert comparison["speedups"]["bounded_memory"] == {"speedup": 4.0, "target": 3.5, "met": True}
    assert comparison["speedups"]["full_context"]["met"] is False  # 4x < 5x
    assert comparison["agreement"]["bounded_memory"] == {"shared": 2, "same_verdict": 1, "same_answer": 0}
    assert comparison["verdict_agreement"] == 0.5 and comparison["shared_questions"] == 4
    result = {
        "model_file": "m.gguf",
        "preset": "medium",
        "questions_per_condition": 2,
        "seed": 0,
        "concurrency": 8,
        "materialize_s": 0.1,
        "machine": {
            **{key: value for key, value in bench_engines.machine_summary().items()},
            "load_average_after": [0.0, 0.0, 0.0],
        },
        "engines": records,
        "comparison": comparison,
        "packages": {"torch": "x"},
    }
    table = bench_engines.engines_table(result)
    assert "amx_bf16" in table and "Automatic choice here: engine:" in table
    assert "| transformers | bfloat16 | 2 | bounded_memory | 2 | 6 | 10.0 |" in table
    assert "4.00x llama.cpp" in table and "NOT met" in table and "1/4 recorded" in table
    assert "/" not in result["model_file"] and "/work" not in table  # no absolute paths


def test_engine_bench_skips_cleanly_without_the_model_file(empty_home) -> None:
    result = bench_engines.engines_bench(model_file="no-such-model.gguf", n_questions=1)
    assert "skipped" in result and "no-such-model.gguf" in result["skipped"]
    assert bench_engines.engines_table(result).startswith("Engine comparison skipped")


def test_prefix_cache_bench_times_both_ways_on_the_same_calls(tiny_path) -> None:
    from supersede_lib.bench import prefix as bench_prefix

    calls = bench_prefix.rewrite_calls(3)
    assert len(calls) == 3 and all(call[-1]["role"] == "user" for call in calls)
    result = bench_prefix.prefix_cache_bench(tiny_path, n_calls=3, threads=1)
    assert result["calls"] == 3 and 0 <= result["identical_replies"] <= 3
    assert 0 < result["prefix_tokens"] < result["mean_prompt_tokens"]  # the shared part, not the whole
    assert result["seconds_per_call_whole"] > 0 and result["seconds_per_call_prefix"] > 0
    table = bench_prefix.prefix_cache_table(result)
    assert "| prefix cache |" in table and f"/{result['calls']} |" in table


def test_prefix_cache_bench_skips_cleanly_without_the_model_file(empty_home) -> None:
    from supersede_lib.bench import prefix as bench_prefix

    result = bench_prefix.prefix_cache_bench(n_calls=2)
    assert "skipped" in result and bench_prefix.DEFAULT_PREFIX_MODEL in result["skipped"]
    assert bench_prefix.prefix_cache_table(result).startswith("Prompt-prefix cache comparison skipped")


def test_train_prefix_bench_times_trls_loss_and_the_shared_prefix_on_one_window(tiny_path) -> None:
    from supersede_lib.bench import train_prefix as bench_train_prefix

    result = bench_train_prefix.train_prefix_bench(tiny_path, micro_batches=2, threads=1)
    assert result["rows"] > 0 and result["micro_batches"] == 2
    assert all(seconds > 0 for seconds in result["seconds"].values())
    # float32 here (no bf16 units in tests): both ways are the same gradient to float noise
    assert result["gradient_distance_from_trl"]["shared"] < 1e-3
    assert result["loss_sum"]["shared"] == pytest.approx(result["loss_sum"]["trl"], rel=1e-4, abs=1e-6)
    table = bench_train_prefix.train_prefix_table(result)
    assert "| shared prefix, once per window |" in table and "Speed-up" in table


def test_train_prefix_bench_skips_cleanly_without_the_model_file(tmp_path) -> None:
    from supersede_lib.bench import train_prefix as bench_train_prefix

    result = bench_train_prefix.train_prefix_bench(tmp_path / "absent.gguf")
    assert "absent.gguf" in result["skipped"]
    assert bench_train_prefix.train_prefix_table(result).startswith("Skipped")
