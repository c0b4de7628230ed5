"""The studies behind notebooks 06 (GRPO training) and 07 (transfer evaluation).

`run_training(profile)` trains one LoRA adapter per (curriculum, seed) named in the profile's
`training:` block through `supersede_lib.train.grpo`; `run_transfer(profile)` evaluates the base
model and every saved checkpoint on held-out episodes with the ordinary bounded-memory runner
(`agents.run_condition`), so the harness, prompts and matcher are those of studies 02-05.

Run directories (adapters, optimiser state) live under `outputs/<profile>/06_grpo_unsloth/runs/`,
which git ignores. The small result files (metrics, rollouts, run summaries, tables, figures) are
copied beside them, so they can be committed and read without the checkpoints; a fresh clone that
re-runs 06 trains again instead of "finding" a run whose adapters it does not have.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from supersede_lib.studies import paper_results, profiles
from supersede_lib.studies.common import (
    MATCHER,
    accuracy_row,
    episodes_label,
    mcnemar_dict,
    percent,
    release_model,
    write_summary,
)
from supersede_lib.studies.common import _number as headline_number
from supersede_lib.studies.common import _write_table as write_table
from supersede_lib.train.config import (
    CONFIG_FILE,
    CURRICULUM_MODES,
    METRICS_FILE,
    ROLLOUTS_FILE,
    SUMMARY_FILE,
    TrainingConfig,
)
from supersede_lib.train.run import (
    TrainingResult,
    list_checkpoints,
    load_metrics,
    read_run_summary,
    resolve_base_model,
    run_dir_for,
    train,
)

NOTEBOOK_TRAINING = "06_grpo_unsloth"
NOTEBOOK_TRANSFER = "07_transfer_eval"
RUNS_FOLDER = "runs"  # git-ignored: adapters and optimiser state
PAPER_MODEL = "Qwen2.5-3B-Instruct"


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


def training_block(profile: dict) -> dict[str, Any]:
    """The profile's `training:` block with defaults filled in, checked field by field."""
    block = dict(profile.get("training") or {})
    name = profile["name"]
    if "preset" not in block:
        raise profiles.ProfileError(f"profile {name!r}: training.preset is missing")
    block.setdefault("seeds", [0])
    block.setdefault("curricula", ["fixed"])
    block.setdefault("overrides", {})
    unknown = [mode for mode in block["curricula"] if mode not in CURRICULUM_MODES]
    if unknown or not block["curricula"]:
        raise profiles.ProfileError(
            f"profile {name!r}: training.curricula has {unknown or 'nothing'}; choose from {CURRICULUM_MODES}"
        )
    seeds = block["seeds"]
    if not seeds or not all(
        isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 for seed in seeds
    ):
        raise profiles.ProfileError(
            f"profile {name!r}: training.seeds must be whole numbers >= 0, got {seeds}"
        )
    return block


def runs_root(profile: dict) -> Path:
    return profiles.OUTPUT_ROOT / profile["name"] / NOTEBOOK_TRAINING / RUNS_FOLDER


def training_config_for(profile: dict, curriculum: str) -> TrainingConfig:
    """The `TrainingConfig` of one curriculum arm: the preset, the profile's overrides, its run folder."""
    block = training_block(profile)
    return TrainingConfig.preset(
        block["preset"],
        **block["overrides"],
        curriculum=curriculum,
        output_dir=str(runs_root(profile) / curriculum),
    )


def run_label(curriculum: str, seed: int) -> str:
    """`fixed__seed-0`: the prefix of one run's copied result files."""
    return f"{curriculum}__seed-{seed}"


def model_label(config: TrainingConfig) -> str:
    """A readable name for the trained base model (file stem or hub id)."""
    base = resolve_base_model(config)
    if base.endswith(".gguf"):
        return Path(base).stem
    return Path(base).name if Path(base).exists() else base  # a local folder, else a hub id


def training_data_label(config: TrainingConfig) -> str:
    sessions = config.episode_overrides.get("n_sessions")
    label = f"synthetic, {config.difficulty} preset"
    if sessions is not None:
        low, high = (sessions, sessions) if isinstance(sessions, int) else tuple(sessions)
        label += f", {low}-{high} sessions"
    return label + (", adaptive curriculum" if config.curriculum == "adaptive" else "")


def device_label() -> str:
    """Where training ran, for the records: the CUDA device name, or the CPU with its thread count."""
    import torch

    if torch.cuda.is_available():
        return f"cuda: {torch.cuda.get_device_name(0)}"
    return f"cpu ({torch.get_num_threads()} torch threads)"


# --------------------------------------------------------------------------------------------
# 06 — training
# --------------------------------------------------------------------------------------------


@dataclass
class TrainedRun:
    """One (curriculum, seed) run: its config, result and where its checkpoints are."""

    curriculum: str
    seed: int
    config: TrainingConfig
    result: TrainingResult

    @property
    def label(self) -> str:
        return run_label(self.curriculum, self.seed)

    @property
    def checkpoints(self) -> list[tuple[int, Path]]:
        return list_checkpoints(run_dir_for(self.config, self.seed))


@dataclass
class TrainingStudyResult:
    """Notebook 06: every run, its per-step metrics, Figure 4a and the comparison with the paper."""

    profile: str
    model: str
    runs: list[TrainedRun]
    metrics: pd.DataFrame  # one row per (run, step): training.load_metrics plus curriculum and seed
    runs_table: pd.DataFrame
    paper_table: pd.DataFrame
    figures: dict[str, Path]
    output_dir: Path
    summary: dict[str, Any]


def copy_run_files(run: TrainedRun, directory: Path) -> list[str]:
    """Copy a run's metrics, rollouts, summary and config beside the study (committable, no adapters)."""
    source = run_dir_for(run.config, run.seed)
    copied = []
    for name in (METRICS_FILE, ROLLOUTS_FILE, SUMMARY_FILE, CONFIG_FILE):
        if (source / name).exists():
            target = directory / f"{run.label}.{name}"
            shutil.copyfile(source / name, target)
            copied.append(target.name)
    return copied


def _edge_mean(values: pd.Series, window: int, last: bool) -> float:
    values = values.dropna()
    if values.empty:
        return float("nan")
    part = values.tail(window) if last else values.head(window)
    return float(part.mean())


def runs_table(runs: Sequence[TrainedRun], metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per run: length, why it stopped, reward at the start and end, speed."""
    rows = []
    for run in runs:
        frame = metrics[(metrics["curriculum"] == run.curriculum) & (metrics["seed"] == run.seed)]
        window = max(1, min(10, len(frame) // 2))
        moves = " → ".join([run.config.difficulty, *(move["to"] for move in run.result.curriculum_history)])
        rows.append(
            {
                "run": run.label,
                "steps": run.result.final_step,
                "stopped by": run.result.stop_reason,
                "trajectories": run.result.final_step * run.config.trajectories_per_step,
                f"reward, first {window} steps": _edge_mean(frame["reward"], window, last=False),
                f"reward, last {window} steps": _edge_mean(frame["reward"], window, last=True),
                "zero-advantage steps": int((frame["zero_advantage_fraction"] >= 1.0).sum()),
                "difficulty": moves,
                "checkpoints": ", ".join(str(step) for step, _ in run.checkpoints) or "—",
                "s/step": round(run.result.seconds_per_step, 1),
            }
        )
    return pd.DataFrame(rows)


def paper_comparison_table(
    runs: Sequence[TrainedRun], metrics: pd.DataFrame, ours_header: str
) -> pd.DataFrame:
    """The paper's reported training facts beside ours (one column each, never mixed)."""
    first = [
        _edge_mean(
            metrics[(metrics.curriculum == run.curriculum) & (metrics.seed == run.seed)]["reward"], 1, False
        )
        for run in runs
    ]
    last = [
        _edge_mean(
            metrics[(metrics.curriculum == run.curriculum) & (metrics.seed == run.seed)]["reward"], 1, True
        )
        for run in runs
    ]
    stopped = [f"{run.label}: {run.result.stop_reason} at step {run.result.final_step}" for run in runs]
    return pd.DataFrame(
        [
            ("GRPO reward at the first step", f"{paper_results.TRAINING_REWARD_START:.2f}", _span(first)),
            ("GRPO reward at the last step", f"{paper_results.TRAINING_REWARD_END:.2f}", _span(last)),
            (
                "how the run ended",
                f"10 zero-advantage batches in a row, step {paper_results.TRAINING_STOP_STEP}",
                "; ".join(stopped),
            ),
        ],
        columns=["measure", f"paper ({PAPER_MODEL}, procedural 6-8 sessions, 1 run)", ours_header],
    )


def _span(values: Sequence[float]) -> str:
    finite = [value for value in values if np.isfinite(value)]
    if not finite:
        return "—"
    if len(finite) == 1:
        return f"{finite[0]:.2f}"
    return f"{np.mean(finite):.2f} (runs: {', '.join(f'{value:.2f}' for value in finite)})"


def run_training(profile: str | dict, *, seeds: Sequence[int] | None = None) -> TrainingStudyResult:
    """Paper §5.3 training: one GRPO run per (curriculum, seed) of the profile; resumes, never retrains.

    An interrupted run continues from its last checkpoint when called again; a finished run is read
    back. Results land in outputs/<profile>/06_grpo_unsloth/.
    """
    from supersede_lib.present import plots

    profile = profiles.load_profile(profile) if isinstance(profile, str) else profile
    block = training_block(profile)
    directory = profiles.output_dir(profile, NOTEBOOK_TRAINING)
    runs: list[TrainedRun] = []
    for curriculum in block["curricula"]:
        config = training_config_for(profile, curriculum)
        for seed in seeds if seeds is not None else block["seeds"]:
            runs.append(TrainedRun(curriculum, seed, config, train(config, seed)))
    files = [name for run in runs for name in copy_run_files(run, directory)]
    frames = []
    for run in runs:
        frame = load_metrics(run.result.metrics_path)
        frames.append(frame.assign(curriculum=run.curriculum, seed=run.seed, run=run.label))
    metrics = pd.concat(frames, ignore_index=True)
    metrics.to_csv(directory / "training_metrics.csv", index=False)

    config = runs[0].config
    model = model_label(config)
    data = training_data_label(config.replace(curriculum="fixed"))
    ours_header = f"ours ({model}, {data}, {profile['name']}, {len(runs)} run(s))"
    table = runs_table(runs, metrics)
    paper_table = paper_comparison_table(runs, metrics, ours_header)
    tables = [
        write_table(
            directory,
            "training_runs",
            table,
            f"Model {model}; episodes: {data}; {config.trajectories_per_step} trajectories per step "
            f"({config.episodes_per_step} episodes x group {config.num_generations}); device {device_label()}.",
        ),
        write_table(
            directory,
            "training_vs_paper",
            paper_table,
            "The paper reports its curve's end points and stop step only (Figure 4a); its run trained "
            f"{PAPER_MODEL} on 4 x A10G for 174 steps of 32 trajectories.",
        ),
    ]
    figure = plots.training_curves_figure(
        metrics,
        title=f"ours: {model}, {data}, {profile['name']}",
        paper=(
            paper_results.TRAINING_REWARD_START,
            paper_results.TRAINING_REWARD_END,
            paper_results.TRAINING_STOP_STEP,
        ),
    )
    figures = {"figure4a": plots.save_figure(figure, directory / "figure4a_training_reward.png")}

    numbers = []
    for run in runs:
        frame = metrics[metrics["run"] == run.label]
        meta = {
            "model": model,
            "data": training_data_label(run.config),
            "profile": profile["name"],
            "n": run.result.final_step * run.config.trajectories_per_step,
        }
        numbers += [
            headline_number(f"{run.label} steps", run.result.final_step, **meta),
            headline_number(f"{run.label} reward first step", _edge_mean(frame["reward"], 1, False), **meta),
            headline_number(f"{run.label} reward last step", _edge_mean(frame["reward"], 1, True), **meta),
            headline_number(
                f"{run.label} zero-advantage fraction (mean)",
                float(frame["zero_advantage_fraction"].mean()),
                **meta,
            ),
            headline_number(f"{run.label} seconds per step", run.result.seconds_per_step, **meta),
        ]
    summary = write_summary(
        directory,
        profile,
        NOTEBOOK_TRAINING,
        model=model,
        data=data,
        numbers=numbers,
        tables=tables,
        figures=[path.name for path in figures.values()],
        config={"training": block, "presets": {run.label: run.config for run in runs}},
        extra={
            "device": device_label(),
            "runs": {run.label: run.result.to_dict() for run in runs},
            "files": files,
        },
    )
    return TrainingStudyResult(
        profile=profile["name"],
        model=model,
        runs=runs,
        metrics=metrics,
        runs_table=table,
        paper_table=paper_table,
        figures=figures,
        output_dir=directory,
        summary=summary,
    )


def sample_rollouts(result: TrainingStudyResult, per_run: int = 4, at: str = "last") -> pd.DataFrame:
    """A few training trajectories per run, from its first or last step: what the policy wrote."""
    if at not in ("first", "last"):
        raise ValueError(f"at must be 'first' or 'last', got {at!r}")
    frames = []
    for run in result.runs:
        path = result.output_dir / f"{run.label}.{ROLLOUTS_FILE}"
        if not path.exists():
            continue
        rows = pd.read_json(path, lines=True)
        if rows.empty:
            continue
        step = rows["step"].max() if at == "last" else rows["step"].min()
        chosen = rows[rows["step"] == step].head(per_run).assign(run=run.label)
        frames.append(
            chosen[
                ["run", "step", "difficulty", "reward", "advantage", "gold_answers", "answer", "final_notes"]
            ]
        )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# --------------------------------------------------------------------------------------------
# 07 — transfer evaluation
# --------------------------------------------------------------------------------------------


@dataclass
class TransferResult:
    """Notebook 07: base and every checkpoint on held-out episodes (Table 3, Figure 4b)."""

    profile: str
    model: str
    data_label: str
    n: int
    checkpoints: pd.DataFrame  # one row per evaluated model: run, step, accuracy, McNemar vs base
    by_step: pd.DataFrame  # per curriculum and step: mean over seeds with an interval
    curricula: pd.DataFrame  # fixed vs adaptive at the final checkpoint
    table: pd.DataFrame  # Table 3 (ours)
    paper_table: pd.DataFrame  # Table 3 (paper)
    figures: dict[str, Path]
    output_dir: Path
    summary: dict[str, Any]


def finished_runs(profile: dict) -> list[TrainedRun]:
    """The runs 06 left on disk for this profile (with their checkpoints); raises when there are none."""
    block = training_block(profile)
    runs = []
    for curriculum in block["curricula"]:
        config = training_config_for(profile, curriculum)
        for seed in block["seeds"]:
            summary = run_dir_for(config, seed) / SUMMARY_FILE
            if not summary.exists():
                raise FileNotFoundError(
                    f"no finished training run at {summary.parent}: run notebook 06 (06_grpo_unsloth) for "
                    f"profile {profile['name']!r} first"
                )
            run = TrainedRun(curriculum, seed, config, read_run_summary(summary))
            if not run.checkpoints:
                raise FileNotFoundError(f"{summary.parent} holds no adapter checkpoint: re-run notebook 06")
            runs.append(run)
    return runs


def _checkpoint_model_name(base_name: str, adapter_sha: str) -> str:
    # named by the adapter's content, not its run: a retrained adapter never reuses cached replies,
    # and bit-identical adapters (two arms that never diverged, a resumed run) share them
    return f"{base_name}+lora@{adapter_sha[:16]}"


def _evaluate(
    model: Any, episodes: list, directory: Path, run_name: str, budget: int, progress: bool
) -> pd.DataFrame:
    from supersede_lib.eval.runner import RunSettings, run_condition

    return run_condition(
        episodes,
        "bounded_memory",
        model,
        RunSettings(notes_budget_chars=budget, concurrency=1),  # one local model: calls would only queue
        output_dir=directory,
        run_name=run_name,
        progress=progress,
    ).frame


def checkpoint_row(
    run: str, curriculum: str | None, seed: int | None, step: int, correct: pd.Series, base_correct: pd.Series
) -> dict[str, Any]:
    """Accuracy of one evaluated model, its Wilson interval, and McNemar against the base model."""
    row = accuracy_row(run, "bounded_memory", correct.tolist(), MATCHER)
    test = mcnemar_dict(base_correct.tolist(), correct.tolist())  # b: base right only; c: trained right only
    return {
        "run": run,
        "curriculum": curriculum,
        "seed": seed,
        "step": step,
        "n": row["n"],
        "correct": row["correct"],
        "accuracy": row["accuracy"],
        "ci_low": row["ci_low"],
        "ci_high": row["ci_high"],
        "vs_base_points": 100 * (row["accuracy"] - float(base_correct.mean())),
        "base_only_right": test["b"],
        "trained_only_right": test["c"],
        "p_exact": test["p_exact"],
        "p_chi2_corrected": test["p_chi2_corrected"],
    }


def seed_aggregate(
    correct_by_model: dict[str, pd.Series], checkpoints: pd.DataFrame, n_resamples: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Per curriculum and step: mean accuracy over seeds, with a 95% interval from resampling questions.

    Every seed's run is evaluated on the same questions, so one resample of question indices is
    applied to all seeds at once; with one seed this is a plain bootstrap of that run's accuracy.
    """
    rows = []
    trained = checkpoints[checkpoints["curriculum"].notna()]
    rng = np.random.default_rng(seed)
    for (curriculum, step), group in trained.groupby(["curriculum", "step"], sort=True):
        matrix = np.array([correct_by_model[run].to_numpy(dtype=float) for run in group["run"]])
        per_seed = matrix.mean(axis=1)
        indices = rng.integers(0, matrix.shape[1], size=(n_resamples, matrix.shape[1]))
        resampled = matrix[:, indices].mean(axis=2).mean(axis=0)
        rows.append(
            {
                "curriculum": curriculum,
                "step": int(step),
                "seeds": len(group),
                "mean_accuracy": float(per_seed.mean()),
                "ci_low": float(np.quantile(resampled, 0.025)),
                "ci_high": float(np.quantile(resampled, 0.975)),
                "min_over_seeds": float(per_seed.min()),
                "max_over_seeds": float(per_seed.max()),
            }
        )
    return pd.DataFrame(rows)


def curriculum_comparison(correct_by_model: dict[str, pd.Series], checkpoints: pd.DataFrame) -> pd.DataFrame:
    """Fixed vs adaptive at each run's final checkpoint: per seed McNemar, pooled bootstrap difference."""
    from supersede_lib.eval.stats import paired_bootstrap_diff

    trained = checkpoints[checkpoints["curriculum"].notna()]
    final = trained.loc[trained.groupby("run_group")["step"].idxmax()] if len(trained) else trained
    if set(final.get("curriculum", [])) != set(CURRICULUM_MODES):
        return pd.DataFrame()
    rows, fixed_all, adaptive_all = [], [], []
    for seed, group in final.groupby("seed"):
        by_curriculum = group.set_index("curriculum")
        if not set(CURRICULUM_MODES) <= set(by_curriculum.index):
            continue
        fixed = correct_by_model[by_curriculum.loc["fixed", "run"]]
        adaptive = correct_by_model[by_curriculum.loc["adaptive", "run"]]
        fixed_all += fixed.tolist()
        adaptive_all += adaptive.tolist()
        test = mcnemar_dict(fixed.tolist(), adaptive.tolist())
        rows.append(
            {
                "seed": int(seed),
                "fixed step": int(by_curriculum.loc["fixed", "step"]),
                "adaptive step": int(by_curriculum.loc["adaptive", "step"]),
                "fixed accuracy": float(fixed.mean()),
                "adaptive accuracy": float(adaptive.mean()),
                "fixed only right": test["b"],
                "adaptive only right": test["c"],
                "p_exact": test["p_exact"],
            }
        )
    if rows:
        pooled = paired_bootstrap_diff(adaptive_all, fixed_all)
        rows.append(
            {
                "seed": "all (pooled)",
                "fixed step": "final",
                "adaptive step": "final",
                "fixed accuracy": float(np.mean(fixed_all)),
                "adaptive accuracy": float(np.mean(adaptive_all)),
                "fixed only right": int(
                    sum(f and not a for f, a in zip(fixed_all, adaptive_all, strict=True))
                ),
                "adaptive only right": int(
                    sum(a and not f for f, a in zip(fixed_all, adaptive_all, strict=True))
                ),
                "p_exact": float("nan"),
                "adaptive - fixed (95% CI)": f"{100 * pooled.diff:+.1f} pts "
                f"[{100 * pooled.low:+.1f}, {100 * pooled.high:+.1f}]",
            }
        )
    return pd.DataFrame(rows)


def table3(checkpoints: pd.DataFrame) -> pd.DataFrame:
    """Table 3 (ours): correct/n, accuracy and the change against the base model, McNemar p values."""
    rows = []
    for row in checkpoints.itertuples(index=False):
        is_base = row.run == "base"
        rows.append(
            {
                "checkpoint": "base (untrained)" if is_base else f"{row.run_group} step {row.step}",
                "accuracy": f"{row.correct}/{row.n} = {percent(row.accuracy)}",
                "95% CI": f"{percent(row.ci_low)}-{percent(row.ci_high)}",
                "vs. base": "—" if is_base else f"{row.vs_base_points:+.1f}",
                "McNemar b/c (base only / trained only)": "—"
                if is_base
                else f"{row.base_only_right}/{row.trained_only_right}",
                "p exact": "—" if is_base else f"{row.p_exact:.4f}",
                "p chi2 (corrected)": "—" if is_base else f"{row.p_chi2_corrected:.4f}",
            }
        )
    return pd.DataFrame(rows)


def paper_table3() -> pd.DataFrame:
    base = paper_results.TABLE3_TRANSFER[0]
    return pd.DataFrame(
        [
            {
                "checkpoint (paper)": row["checkpoint"],
                "oracle accuracy": f"{row['correct']}/{row['n']} = {percent(row['correct'] / row['n'])}",
                "vs. baseline": "—"
                if row["step"] == 0
                else f"{100 * (row['correct'] - base['correct']) / row['n']:+.1f}",
            }
            for row in paper_results.TABLE3_TRANSFER
        ]
    )


def run_transfer(profile: str | dict, *, progress: bool = True) -> TransferResult:
    """Paper Table 3 / Figure 4b: base vs every checkpoint, bounded memory, matcher, held-out data.

    Base and checkpoints load the same base weights; each checkpoint is asserted to differ from the
    base only by its adapter (hash of every non-LoRA tensor, hash of the adapter file).
    """
    from supersede_lib.models.hf import HFChatModel, adapter_file_fingerprint
    from supersede_lib.present import plots

    profile = profiles.load_profile(profile) if isinstance(profile, str) else profile
    directory = profiles.output_dir(profile, NOTEBOOK_TRANSFER)
    runs = finished_runs(profile)
    base_path = resolve_base_model(runs[0].config)
    others = {resolve_base_model(run.config) for run in runs}
    if others != {base_path}:
        raise ValueError(
            f"training runs of profile {profile['name']!r} start from different bases: {sorted(others)}"
        )
    block = profile["transfer"]
    episodes = profiles.episodes_for(block["episodes"])
    data = episodes_label(block["episodes"])
    budget = int(block.get("notes_budget_chars") or runs[0].config.notes_budget_chars)
    cache = profiles.cache_path(profile)

    from supersede_lib.models.cache import CachedChatModel, ResponseCache

    base = HFChatModel(base_path)
    base_name = base.name
    base_fingerprint = base.base_fingerprint()
    frame = _evaluate(
        CachedChatModel(base, ResponseCache(cache)), episodes, directory, "base", budget, progress
    )
    release_model(base)
    correct_by_model = {"base": frame["verdict"].eq("correct")}
    rows = [checkpoint_row("base", None, None, 0, correct_by_model["base"], correct_by_model["base"])]
    adapters = {}
    for run in runs:
        for step, adapter in run.checkpoints:
            sha = adapter_file_fingerprint(adapter)
            name = _checkpoint_model_name(base_name, sha)
            trained = HFChatModel(base_path, adapter_path=str(adapter), name=name)
            if trained.base_fingerprint() != base_fingerprint or trained.adapter_fingerprint is None:
                raise AssertionError(
                    f"{run.label} step {step} ({name}): base weights differ from the untrained base, not only the adapter"
                )
            run_name = f"{run.label}__step-{step}"
            frame = _evaluate(
                CachedChatModel(trained, ResponseCache(cache)),
                episodes,
                directory,
                run_name,
                budget,
                progress,
            )
            release_model(trained)
            correct_by_model[run_name] = frame["verdict"].eq("correct")
            row = checkpoint_row(
                run_name, run.curriculum, run.seed, step, correct_by_model[run_name], correct_by_model["base"]
            )
            rows.append(row)
            adapters[run_name] = {"adapter": str(adapter), "sha256": sha, "differs_only_by_adapter": True}
    checkpoints = pd.DataFrame(rows)
    checkpoints["seed"] = checkpoints["seed"].astype("Int64")  # whole numbers, missing for the base row
    checkpoints["run_group"] = [run.split("__step-")[0] for run in checkpoints["run"]]
    checkpoints.to_csv(directory / "checkpoints.csv", index=False)
    by_step = seed_aggregate(correct_by_model, checkpoints)
    by_step.to_csv(directory / "accuracy_by_step.csv", index=False)
    curricula = curriculum_comparison(correct_by_model, checkpoints)

    model = model_label(runs[0].config)
    n = len(episodes)
    ours = table3(checkpoints)
    paper = paper_table3()
    tables = [
        write_table(
            directory,
            "table3_transfer",
            ours,
            f"ours: {model} base and GRPO checkpoints, bounded memory (B = {budget}), {MATCHER}, "
            f"held-out {data}, profile {profile['name']}, n = {n}. McNemar is paired on the same questions; "
            "b = right before training only, c = right after training only.",
        ),
        write_table(
            directory,
            "table3_paper",
            paper,
            f"paper: {PAPER_MODEL}, LongMemEval knowledge-update oracle, n = 78, bounded memory, matcher "
            "(Table 3). Quoted, not measured here.",
        ),
    ]
    if not curricula.empty:
        tables.append(
            write_table(
                directory,
                "curriculum_comparison",
                curricula,
                "Fixed (the paper's curriculum) vs adaptive (climbs the difficulty ladder when groups "
                f"saturate), each run's final checkpoint, same held-out questions (n = {n} per seed).",
            )
        )
    figure = plots.transfer_figure(
        checkpoints,
        by_step,
        title=f"ours: {model}, held-out {data}, {profile['name']}, n={n}",
        paper=paper_results.TABLE3_TRANSFER,
        paper_title=f"paper: {PAPER_MODEL}, LongMemEval oracle, n=78",
    )
    figures = {"figure4b": plots.save_figure(figure, directory / "figure4b_transfer.png")}

    numbers = []
    for row in checkpoints.itertuples(index=False):
        meta = {
            "model": f"{model} ({row.run})",
            "data": data,
            "profile": profile["name"],
            "n": row.n,
            "grader": MATCHER,
        }
        numbers.append(headline_number(f"{row.run} accuracy", row.accuracy, **meta))
        if row.run != "base":
            numbers.append(headline_number(f"{row.run} mcnemar p_exact vs base", row.p_exact, **meta))
    summary = write_summary(
        directory,
        profile,
        NOTEBOOK_TRANSFER,
        model=model,
        data=data,
        numbers=numbers,
        tables=tables,
        figures=[path.name for path in figures.values()],
        config={"transfer": block, "notes_budget_chars": budget, "base_model": base_path},
        extra={"adapters": adapters, "base_fingerprint": base_fingerprint},
    )
    return TransferResult(
        profile=profile["name"],
        model=model,
        data_label=data,
        n=n,
        checkpoints=checkpoints,
        by_step=by_step,
        curricula=curricula,
        table=ours,
        paper_table=paper,
        figures=figures,
        output_dir=directory,
        summary=summary,
    )


def transfer_summary_line(result: TransferResult) -> str:
    """One honest sentence: did held-out accuracy move, and is it distinguishable from noise?"""
    base = result.checkpoints[result.checkpoints["run"] == "base"].iloc[0]
    trained = result.checkpoints[result.checkpoints["run"] != "base"]
    best = trained.loc[trained["accuracy"].idxmax()]
    verdict = (
        "distinguishable from no change at p < 0.05 (exact McNemar)"
        if best["p_exact"] < 0.05
        else "not distinguishable from no change (exact McNemar)"
    )
    return (
        f"Base {percent(base['accuracy'])} ({base['correct']}/{base['n']}); best checkpoint {best['run']} "
        f"{percent(best['accuracy'])} ({best['correct']}/{best['n']}, {best['vs_base_points']:+.1f} points, "
        f"b/c = {best['base_only_right']}/{best['trained_only_right']}, p = {best['p_exact']:.3f}): {verdict}."
    )
