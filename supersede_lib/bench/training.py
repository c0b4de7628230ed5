"""One registered GRPO step in float32 on one thread against the path this CPU chooses (`make bench`).

The registered `verdict` run's own config (its committed `training_config.json`: the 0.5B, 8
rollouts, groups of 8) trains one step twice: as recorded (float32 base weights, 1 torch thread)
and on the chosen path (`cpu_dtype: auto`, which is bf16 where the CPU has native bf16, on every
core). Reported per path: the step's wall time, split into rollouts, log-probs and the rest (loss,
backward, optimiser), and peak memory. Then the gradient of one accumulation window over the
float32 step's own rows, at the float32 step's weights, is computed on both paths: its distance
from the float32 gradient (relative L2, cosine) says how far the cheaper arithmetic moves what the
step learns. Twenty-step runs are not run here (an hour or more each): `training_runs_table` puts
finished run folders' own timings beside this table.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from supersede_lib.bench.engines import machine_summary
from supersede_lib.bench.train_prefix import window_gradient, with_advantages

REGISTERED_CONFIG = (
    Path(__file__).resolve().parents[2]
    / "outputs"
    / "cpu_proof_prereg"
    / "06_grpo_training"
    / "verdict__seed-12.training_config.json"
)
REGISTERED_SEED = 12
FIELDS_NOT_FROM_RECORD = ("output_dir", "model_name_or_path", "seed")
# environment variables that cap the instruction sets torch's kernels use: set, they let an AMX machine
# stand in for an AVX2-only one (an emulation the table names, never a measurement of such a CPU)
ISA_CAP_VARIABLES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
LLAMACPP_ROLLOUTS = "chosen path, rollouts by llama.cpp"


def registered_config(path: Path, model_path: Path, output_dir: str, **changes: Any) -> Any:
    """The `TrainingConfig` a committed `training_config.json` records, with this machine's model
    file, a scratch folder, one step and no checkpoints, plus `changes`."""
    from supersede_lib.data.synthetic.tables import as_tuples
    from supersede_lib.train.config import TrainingConfig

    recorded = json.loads(Path(path).read_text())
    fields = {key: as_tuples(value) for key, value in recorded.items() if key not in FIELDS_NOT_FROM_RECORD}
    fields.update(
        model_name_or_path=str(model_path),
        output_dir=output_dir,
        max_steps=1,
        save_steps=1000,
        log_rollouts=False,
        disable_tqdm=True,
    )
    fields.update(changes)
    return TrainingConfig(**fields)


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def timed_step(config: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """(trainer, timings) of one step of `config`: wall, rollouts, log-probs, and the rest."""
    from supersede_lib.train.run import build_trainer, training_device

    loaded = time.perf_counter()
    trainer = build_trainer(config, seed=seed)
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    metrics = trainer.state.log_history[0] if trainer.state.log_history else {}
    rollouts = float(metrics.get("timing/rollouts_s", 0.0))
    logps = float(metrics.get("timing/logps_s", 0.0))
    return trainer, {
        "device": training_device(trainer.model),
        "load_s": round(started - loaded, 1),
        "step_s": round(wall, 1),
        "rollouts_s": round(rollouts, 1),
        "logps_s": round(logps, 1),
        "loss_backward_optimiser_s": round(wall - rollouts - logps, 1),
        "reward": metrics.get("reward"),
    }


def _trainable_state(trainer: Any) -> dict[str, Any]:
    return {
        name: parameter.detach().clone()
        for name, parameter in trainer.model.named_parameters()
        if parameter.requires_grad
    }


def _load_trainable_state(trainer: Any, state: dict[str, Any]) -> None:
    import torch

    with torch.no_grad():
        for name, parameter in trainer.model.named_parameters():
            if parameter.requires_grad:
                parameter.copy_(state[name].to(parameter.dtype))


def _bench_paths(threads: int, chosen_dtype: str, llamacpp_rollouts: bool) -> dict[str, dict[str, Any]]:
    """The timed paths, each a name and its config changes: float32 on one thread first (the reference)."""
    paths: dict[str, dict[str, Any]] = {
        "float32, 1 thread (as recorded)": {"cpu_dtype": "float32", "cpu_threads": 1},
        f"chosen: {chosen_dtype}, {threads} threads": {"cpu_dtype": "auto", "cpu_threads": threads},
    }
    if llamacpp_rollouts:
        paths[f"{LLAMACPP_ROLLOUTS}: {chosen_dtype}, {threads} threads"] = {
            "cpu_dtype": "auto",
            "cpu_threads": threads,
            "rollout_engine": "llamacpp",
        }
    return paths


def training_bench(
    model_path: str | Path | None = None,
    *,
    config_path: Path = REGISTERED_CONFIG,
    seed: int = REGISTERED_SEED,
    chosen_threads: int | None = None,
    llamacpp_rollouts: bool = False,
) -> dict[str, Any]:
    """Time one registered step in float32 on 1 thread and on the chosen path (`cpu_dtype` auto, every
    core or `chosen_threads`), and the chosen path's gradient distance from the float32 one. With
    `llamacpp_rollouts`, a third step: the chosen path with llama.cpp sampling the rollouts
    (`rollout_engine: llamacpp`; its gradient is the chosen path's arithmetic, so not taken again)."""
    import torch

    from supersede_lib.train.config import TrainingConfig
    from supersede_lib.train.precision import dtype_for_auto
    from supersede_lib.train.samples import expand_to_turn_samples

    if not Path(config_path).exists():
        return {"skipped": f"{config_path} not found (the registered run's committed config)"}
    model_file = json.loads(Path(config_path).read_text())["model_name_or_path"]
    model = Path(model_path or TrainingConfig.preset("cpu_proof").model_name_or_path)
    if not model.exists():
        return {"skipped": f"{model.name} not found (the registered run's model, {Path(model_file).name})"}
    threads = chosen_threads or os.cpu_count() or 1
    chosen_dtype, why = dtype_for_auto()
    paths = _bench_paths(threads, chosen_dtype, llamacpp_rollouts)
    rows: dict[str, dict[str, Any]] = {}
    gradients: dict[str, Any] = {}
    samples: list = []
    weights: dict[str, Any] = {}
    micro_batches = 0
    with tempfile.TemporaryDirectory() as folder:
        for index, (name, changes) in enumerate(paths.items()):
            config = registered_config(config_path, model, str(Path(folder) / f"path-{index}"), **changes)
            trainer, rows[name] = timed_step(config, seed)
            if index == 0:  # the float32 step's rows and weights are the point both gradients are taken at
                samples = with_advantages(expand_to_turn_samples(trainer.last_trajectories))
                weights = _trainable_state(trainer)
                micro_batches = config.gradient_accumulation_steps
            else:
                _load_trainable_state(trainer, weights)
            if config.rollout_engine == "llamacpp":
                rows[name]["window_s"] = None
                trainer.rollout_sampler.close()
            else:
                _, gradients[name], rows[name]["window_s"] = window_gradient(
                    trainer, samples, micro_batches, share=config.share_prompt_prefix
                )
            rows[name]["peak_rss_gb"] = round(_peak_rss_gb(), 1)
            del trainer  # the next path loads its own model: free this one's first
            gc.collect()
    reference, chosen = gradients.values()
    names = list(paths)
    return {
        "config": Path(config_path).name,
        "model": model.name,
        "seed": seed,
        "chosen_because": why,
        "rows": len(samples),
        "paths": rows,
        "speedup_step": round(rows[names[0]]["step_s"] / max(rows[names[1]]["step_s"], 1e-9), 2),
        "speedup_llamacpp_rollouts": (
            round(rows[names[0]]["step_s"] / max(rows[names[2]]["step_s"], 1e-9), 2)
            if llamacpp_rollouts
            else None
        ),
        "isa_caps": {name: os.environ[name] for name in ISA_CAP_VARIABLES if os.environ.get(name)},
        "gradient_distance": round(float((chosen - reference).norm() / reference.norm()), 4),
        "gradient_cosine": round(float(torch.nn.functional.cosine_similarity(chosen, reference, dim=0)), 4),
        "machine": machine_summary(threads),
    }


def chosen_path_run(
    output_dir: Path,
    *,
    config_path: Path = REGISTERED_CONFIG,
    seed: int = REGISTERED_SEED,
    threads: int | None = None,
    model_path: str | Path | None = None,
) -> Path:
    """Train the registered config's whole run (its steps and checkpoints) on the chosen path (`cpu_dtype`
    auto, `threads` or every core), the sampler's log-prob gap logged every step, into
    `output_dir/seed-<seed>`; resumes like any run. Returns the run folder (its summary has the timing)."""
    from supersede_lib.train.config import TrainingConfig
    from supersede_lib.train.run import run_dir_for, train

    recorded = json.loads(Path(config_path).read_text())
    model = Path(model_path or TrainingConfig.preset("cpu_proof").model_name_or_path)
    config = registered_config(
        config_path,
        model,
        str(output_dir),
        max_steps=recorded["max_steps"],
        save_steps=recorded["save_steps"],
        log_rollouts=True,
        cpu_dtype="auto",
        cpu_threads=threads or os.cpu_count() or 1,
        sampling_gap_every=1,
    )
    train(config, seed=seed)
    return run_dir_for(config, seed)


def training_runs_table(run_dirs: Sequence[Path]) -> list[dict[str, Any]]:
    """Each finished run folder's own timing (its `run_summary.json`): steps, wall, seconds a step, device."""
    from supersede_lib.train.config import SUMMARY_FILE

    rows = []
    for run_dir in run_dirs:
        summary_path = Path(run_dir) / SUMMARY_FILE
        if not summary_path.exists():
            rows.append({"run": str(run_dir), "missing": f"no {SUMMARY_FILE}"})
            continue
        summary = json.loads(summary_path.read_text())
        rows.append(
            {
                "run": str(run_dir),
                "steps": summary.get("final_step"),
                "wall_min": round(float(summary.get("wall_time_s", 0.0)) / 60, 1),
                "seconds_per_step": round(float(summary.get("seconds_per_step", 0.0)), 1),
                "device": summary.get("device", ""),
            }
        )
    return rows


def training_table(result: dict[str, Any]) -> str:
    """The bench as a Markdown table (or the reason it was skipped)."""
    if "skipped" in result:
        return f"Skipped: {result['skipped']}"
    machine = result["machine"]
    flags = ", ".join(flag for flag, present in machine["flags"].items() if present) or "none of note"
    lines = [
        f"One step of the registered run's config ({result['config']}, {result['model']}, seed "
        f"{result['seed']}) on {machine['cpu']} ({machine['cpu_count']} cores; flags: {flags}; load "
        f"{machine['load_average']}). Chosen path: {result['chosen_because']}.",
        "",
        "| path | device | step s | rollouts s | log-probs s | loss, backward, optimiser s | "
        "one window's gradient s | process peak RSS so far, GB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    caps = result.get("isa_caps") or {}
    if caps:
        settings = ", ".join(f"{name}={value}" for name, value in caps.items())
        lines[0] += (
            f" Instruction sets capped for torch ({settings}): an emulation of a smaller CPU on this one, "
            "not a measurement of such a CPU."
        )
    for name, row in result["paths"].items():
        window = "—" if row["window_s"] is None else f"{row['window_s']:.1f}"
        lines.append(
            f"| {name} | {row['device']} | {row['step_s']} | {row['rollouts_s']} | {row['logps_s']} | "
            f"{row['loss_backward_optimiser_s']} | {window} | {row['peak_rss_gb']} |"
        )
    lines += [
        "",
        f"Step speed-up: {result['speedup_step']}x (each path samples its own rollouts, so the step's "
        "token counts differ; the window's gradient is on the same rows)"
        + (
            f"; with llama.cpp's rollouts {result['speedup_llamacpp_rollouts']}x."
            if result.get("speedup_llamacpp_rollouts")
            else "."
        ),
        f"Gradient of one accumulation window over the float32 step's {result['rows']} rows, at its "
        f"weights: relative L2 distance from float32 {result['gradient_distance']}, cosine "
        f"{result['gradient_cosine']}.",
    ]
    for row in result.get("runs", []):
        if "missing" in row:
            lines.append(f"- {row['run']}: {row['missing']}")
        else:
            lines.append(
                f"- 20-step run {row['run']}: {row['steps']} steps, {row['wall_min']} min, "
                f"{row['seconds_per_step']} s a step, {row['device']}"
            )
    return "\n".join(lines)
