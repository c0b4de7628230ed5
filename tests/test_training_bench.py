"""The training bench (`bench.training`) on the tiny model: both paths step, the gradients compare."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from supersede_lib.bench.training import training_bench, training_runs_table, training_table
from supersede_lib.train.config import SUMMARY_FILE, tiny_smoke_config
from supersede_lib.train.precision import CPU_DTYPE_ENV


def _recorded_config(tiny_path: Path, folder: Path) -> Path:
    config = tiny_smoke_config(tiny_path, folder / "run", max_completion_length=6, cpu_threads=1)
    path = folder / "training_config.json"
    path.write_text(json.dumps({**dataclasses.asdict(config), "seed": 3}))
    return path


def test_two_identical_paths_give_the_same_gradient(tiny_path, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(CPU_DTYPE_ENV, "float32")  # the chosen path is then float32 too, on one thread
    result = training_bench(
        tiny_path, config_path=_recorded_config(tiny_path, tmp_path), seed=3, chosen_threads=1
    )
    reference, chosen = result["paths"].values()
    assert "float32" in reference["device"] and "float32" in chosen["device"]
    assert reference["step_s"] > 0 and chosen["rollouts_s"] > 0
    assert result["rows"] > 0
    # same rows, same weights, same arithmetic: the chosen path's gradient is the float32 one
    assert result["gradient_distance"] == 0.0 and result["gradient_cosine"] == pytest.approx(1.0)
    assert "float32" in result["chosen_because"]
    table = training_table(result)
    assert "| float32, 1 thread (as recorded) |" in table and "relative L2 distance from float32 0.0" in table


def test_bf16_moves_the_gradient_a_little(tiny_path, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(CPU_DTYPE_ENV, "bfloat16")
    result = training_bench(
        tiny_path, config_path=_recorded_config(tiny_path, tmp_path), seed=3, chosen_threads=1
    )
    chosen = list(result["paths"].values())[1]
    assert "bfloat16" in chosen["device"]
    assert 0.0 < result["gradient_distance"] < 0.5 and result["gradient_cosine"] > 0.85


def test_a_missing_config_or_model_is_a_skip_that_says_which(tmp_path, tiny_path) -> None:
    assert "not found" in training_bench(tiny_path, config_path=tmp_path / "none.json")["skipped"]
    config = _recorded_config(tiny_path, tmp_path)
    assert "not found" in training_bench(tmp_path / "no-model", config_path=config)["skipped"]


def test_finished_runs_are_listed_with_their_own_timing(tmp_path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / SUMMARY_FILE).write_text(
        json.dumps({"final_step": 20, "wall_time_s": 1800.0, "seconds_per_step": 90.0, "device": "cpu (x)"})
    )
    rows = training_runs_table([run, tmp_path / "unfinished"])
    assert rows[0]["wall_min"] == 30.0 and rows[0]["seconds_per_step"] == 90.0
    assert "no run_summary.json" in rows[1]["missing"]


def test_the_chosen_path_trains_the_recorded_runs_length_measuring_the_samplers_gap(
    tiny_path, tmp_path, monkeypatch
) -> None:
    from supersede_lib.bench.training import chosen_path_run
    from supersede_lib.train.precision import PRECISION_FILE

    monkeypatch.setenv(CPU_DTYPE_ENV, "float32")
    config_path = _recorded_config(tiny_path, tmp_path)
    run_dir = chosen_path_run(
        tmp_path / "runs", config_path=config_path, seed=3, threads=1, model_path=tiny_path
    )
    summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    assert summary["final_step"] == json.loads(config_path.read_text())["max_steps"]
    assert json.loads((run_dir / PRECISION_FILE).read_text())["why"] == f"{CPU_DTYPE_ENV}=float32"
    # the gap is measured every step on the rows that train (tests/test_training_sampling_gap.py)
    assert json.loads((run_dir / "training_config.json").read_text())["sampling_gap_every"] == 1
    assert training_runs_table([run_dir])[0]["steps"] == summary["final_step"]


def test_the_llamacpp_rollouts_row_and_capped_instruction_sets_are_named_and_filed_apart(
    tmp_path, monkeypatch
) -> None:
    """A bench of another setting writes its own file (a recorded `training.md` is never replaced), and
    an AMX machine with torch's instruction sets capped says it is standing in for a smaller CPU."""
    import argparse

    from supersede_lib.bench import runner

    row = {"device": "cpu float32", "step_s": 10.0, "rollouts_s": 4.0, "logps_s": 2.0}
    row |= {"loss_backward_optimiser_s": 4.0, "window_s": 3.0, "peak_rss_gb": 1.0}
    result = {
        "config": "c.json",
        "model": "m.gguf",
        "seed": 12,
        "chosen_because": "SUPERSEDE_CPU_DTYPE=float32",
        "rows": 8,
        "paths": {"float32, 1 thread (as recorded)": row, "chosen": row, "llama": row | {"window_s": None}},
        "speedup_step": 1.0,
        "speedup_llamacpp_rollouts": 2.5,
        "gradient_distance": 0.0,
        "gradient_cosine": 1.0,
        "isa_caps": {"ATEN_CPU_CAPABILITY": "avx2"},
        "machine": {"cpu": "Xeon", "cpu_count": 2, "flags": {"amx_bf16": True}, "load_average": [0, 0, 0]},
    }
    table = training_table(result)
    assert "ATEN_CPU_CAPABILITY=avx2" in table and "an emulation of a smaller CPU" in table
    assert "| llama | cpu float32 | 10.0 | 4.0 | 2.0 | 4.0 | — | 1.0 |" in table
    assert "with llama.cpp's rollouts 2.5x" in table
    monkeypatch.setattr(runner, "training_bench", lambda **kwargs: dict(result))
    monkeypatch.setattr(runner, "git_state", lambda: {"commit": "x", "dirty": False})
    args = argparse.Namespace(
        training_threads=2, training_llamacpp_rollouts=True, training_runs=[], output_dir=tmp_path
    )
    runner.run_training_bench(args)
    assert (tmp_path / "training-llamacpp-rollouts-isa-capped.md").exists()
    assert not (tmp_path / "training.md").exists()
