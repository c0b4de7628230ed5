"""`make bench` machinery on a tiny setting: the figures it reports are consistent (no timing targets here)."""

from __future__ import annotations

from supersede_lib import bench


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
    table = bench.markdown_table({"concurrency": result, "embedded_overhead": {"skipped": "no GGUF"}})
    assert "| sequential | 1 |" in table and "1.0x" in table and "skipped (no GGUF)" in table
