"""Notebook 06 (paper §5.3, Figure 4a): GRPO training of the bounded-memory agent.

`run_training(profile)` = `train_runs` (one LoRA adapter per (reward, curriculum, seed) named in
the profile's `training:` block, through `supersede_lib.train`; an interrupted run resumes, a finished
one is read back) → `analyse_training` (per-step metrics, one row per run, the paper's facts beside
ours) → `write_training` (copied run files, tables, Figure 4a, summary.json).
`python -m supersede_lib train --profile P` runs `train_runs` from a shell, data-parallel under
`accelerate launch`; 06 then reads the finished runs back.

Run directories (adapters, optimiser state) live under `outputs/<profile>/06_grpo_training/runs/`,
which git ignores: `runs/<arm>/seed-N`, labelled `<arm>__seed-N`, where the arm is the curriculum
for the paper's sparse reward (`fixed`) and names any other reward (`fixed__memory-reward`). The
small result files (metrics, rollouts, run summaries, configs, tables, figures) are copied beside
them and committed. A fresh clone without the run folder reads a run back from those copies
(`recorded_run`) when their config is the one the profile would train, so 06 re-derives its
tables in seconds; `reproduce --live` (or a changed config) trains again.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from supersede_lib import profiles
from supersede_lib.eval.run_files import portable_paths
from supersede_lib.profiles import Profile, ProfileError, TrainingArm, TrainingBlock
from supersede_lib.results import evidence, paper_results
from supersede_lib.results.headings import NOTEBOOK_TRAINING, headline_number
from supersede_lib.results.outputs import StudyResult, record_summary, write_table
from supersede_lib.train.config import (
    CONFIG_FILE,
    DEFAULT_REWARD,
    METRICS_FILE,
    ROLLOUTS_FILE,
    SUMMARY_FILE,
    TrainingConfig,
)
from supersede_lib.train.kept_adapters import PEFT_WEIGHTS_FILE, keep_adapter
from supersede_lib.train.precision import check_recorded_precision
from supersede_lib.train.run import (
    TrainingResult,
    config_changes,
    list_checkpoints,
    load_metrics,
    read_run_summary,
    resolve_base_model,
    run_dir_for,
    train,
)

RUNS_FOLDER = "runs"  # git-ignored: adapters and optimiser state
PAPER_MODEL = "Qwen2.5-3B-Instruct"
# an adapter kept in git (float16): the 0.5B's rank-32 LoRA is ~35 MB; about 100 MB of adapters in all
KEPT_ADAPTER_LIMIT_BYTES = 40_000_000


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


def runs_root(profile: Profile) -> Path:
    """outputs/<profile>/06_grpo_training/runs/: one folder per (curriculum, reward) arm."""
    return profiles.OUTPUT_ROOT / profile.name / NOTEBOOK_TRAINING / RUNS_FOLDER


def run_arm(curriculum: str, reward: str = DEFAULT_REWARD) -> str:
    """`fixed`, or `fixed__memory-reward`: the folder of one (curriculum, reward) arm.

    The paper's sparse reward adds nothing, so those runs keep the folders and labels they had
    before the reward was an axis, and their committed run files are still read back.
    """
    return curriculum if reward == DEFAULT_REWARD else f"{curriculum}__{reward}-reward"


def training_config_for(profile: Profile, curriculum: str, reward: str = DEFAULT_REWARD) -> TrainingConfig:
    """The `TrainingConfig` of one arm: the preset, the profile's prompt and overrides, its run folder."""
    block: TrainingBlock = profile.require("training")
    return TrainingConfig.preset(
        block.preset,
        **{"prompt_variant": profile.prompt_variant, **block.overrides},
        curriculum=curriculum,
        reward=reward,
        output_dir=str(runs_root(profile) / run_arm(curriculum, reward)),
    )


@dataclass(frozen=True)
class Arm:
    """One arm to train: its name (run folder, prefix of its run labels), curriculum, config, seeds."""

    name: str
    curriculum: str
    config: TrainingConfig
    seeds: tuple[int, ...]


def named_arm_config(profile: Profile, arm: TrainingArm) -> TrainingConfig:
    """The `TrainingConfig` of a named arm: the preset, the block's overrides, then the arm's own."""
    block: TrainingBlock = profile.require("training")
    return TrainingConfig.preset(
        block.preset,
        **{"prompt_variant": profile.prompt_variant, **block.overrides, **arm.overrides},
        curriculum=arm.curriculum,
        reward=arm.reward,
        output_dir=str(runs_root(profile) / arm.name),
    )


def planned_arms(
    profile: Profile, *, curricula: Sequence[str] | None = None, rewards: Sequence[str] | None = None
) -> list[Arm]:
    """Every arm to train: the block's named `arms`, else rewards x curricula (rewards outermost).

    `curricula` and `rewards` keep only the arms with those values (all of the block's when None).
    """
    block: TrainingBlock = profile.require("training")
    if block.arms is None:
        return [
            Arm(
                run_arm(curriculum, reward),
                curriculum,
                training_config_for(profile, curriculum, reward),
                tuple(block.seeds),
            )
            for reward in (rewards if rewards is not None else block.rewards)
            for curriculum in (curricula if curricula is not None else block.curricula)
        ]
    return [
        Arm(arm.name, arm.curriculum, named_arm_config(profile, arm), tuple(arm.seeds or block.seeds))
        for arm in block.arms
        if (rewards is None or arm.reward in rewards) and (curricula is None or arm.curriculum in curricula)
    ]


def arm_config(profile: Profile, arm_name: str) -> TrainingConfig:
    """The training config of the planned arm called `arm_name` (its agent: prompt variant, budget, caps)."""
    arms = {arm.name: arm.config for arm in planned_arms(profile)}
    if arm_name not in arms:
        raise ProfileError(f"{profile.source}: no training arm {arm_name!r} (arms: {', '.join(arms)})")
    return arms[arm_name]


def arm_configs(
    profile: Profile, *, curricula: Sequence[str] | None = None, rewards: Sequence[str] | None = None
) -> list[tuple[str, TrainingConfig]]:
    """(curriculum, config) of every arm to train (`planned_arms`)."""
    return [
        (arm.curriculum, arm.config) for arm in planned_arms(profile, curricula=curricula, rewards=rewards)
    ]


def run_label(curriculum: str, seed: int, reward: str = DEFAULT_REWARD) -> str:
    """`fixed__seed-0` (`fixed__memory-reward__seed-0`): the prefix of one run's copied result files."""
    return f"{run_arm(curriculum, reward)}__seed-{seed}"


def checkpoint_model_name(base_name: str, adapter_sha: str) -> str:
    """The name a checkpoint's replies are cached and reported under: `<base>+lora@<sha16>`.

    Named by the adapter's content, not its run: a retrained adapter never reuses cached replies,
    and bit-identical adapters (two arms that never diverged, a resumed run) share them.
    """
    return f"{base_name}+lora@{adapter_sha[:16]}"


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


@dataclass
class TrainedRun:
    """One (reward, curriculum, seed) run: its config, result and where its checkpoints are."""

    curriculum: str
    seed: int
    config: TrainingConfig
    result: TrainingResult
    recorded: bool = False  # read back from the committed copies: no run folder, no adapters here
    arm: str | None = None  # a named arm (`training.arms`); else run_arm(curriculum, reward)

    @property
    def reward(self) -> str:
        """The reward it trained with (`TrainingConfig.reward`: sparse or memory)."""
        return self.config.reward

    @property
    def label(self) -> str:
        if self.arm is not None:
            return f"{self.arm}__seed-{self.seed}"
        return run_label(self.curriculum, self.seed, self.reward)

    @property
    def trajectories_per_step(self) -> int:
        """Trajectories per optimiser step over all the processes that trained the run."""
        return self.config.trajectories_per_step * self.result.processes

    @property
    def checkpoints(self) -> list[tuple[int, Path]]:
        """(step, adapter folder) on disk; for a recorded run, the ones its summary names (absent here)."""
        if self.recorded:
            return list(self.result.checkpoints)
        return list_checkpoints(run_dir_for(self.config, self.seed))


@dataclass
class TrainingStudyResult(StudyResult):
    """Notebook 06: every run, its per-step metrics, Figure 4a and the comparison with the paper."""

    profile: Profile
    model: str
    data_label: str
    runs: list[TrainedRun]
    metrics: pd.DataFrame  # one row per (run, step): load_metrics plus curriculum, reward_type, seed, run
    runs_table: pd.DataFrame
    paper_table: pd.DataFrame


def copy_run_files(run: TrainedRun, directory: Path) -> list[str]:
    """Copy a run's metrics, rollouts, summary and config beside the study, and keep its final adapter
    in float16 under `adapters/` (`keep_final_adapter`), so a fresh clone can load what it scored."""
    if run.recorded:  # the copies are the source: nothing to copy
        return [name for name in _recorded_file_names(run.label) if (directory / name).exists()]
    run_dir = run_dir_for(run.config, run.seed)
    return copy_run_folder_files(run_dir, run.label, directory) + keep_final_adapter(
        run_dir, run.label, directory
    )


def keep_final_adapter(run_dir: Path, label: str, directory: Path) -> list[str]:
    """The run's last checkpoint kept as `adapters/<label>.safetensors` + `.json` (float16, hashes and
    provenance in the record); nothing when the run has no checkpoint, or when the kept file would pass
    `KEPT_ADAPTER_LIMIT_BYTES` (a clone stays fast: the record then says why it was not kept)."""
    checkpoints = list_checkpoints(run_dir)
    if not checkpoints:
        return []
    step, checkpoint = checkpoints[-1]
    adapters = directory / "adapters"
    weights = checkpoint / PEFT_WEIGHTS_FILE
    if weights.is_file() and weights.stat().st_size // 2 > KEPT_ADAPTER_LIMIT_BYTES:  # fp32 -> fp16 halves it
        adapters.mkdir(parents=True, exist_ok=True)
        note = {
            "name": label,
            "kept": False,
            "why": f"{weights.stat().st_size // 2:,} bytes in float16 pass the "
            f"{KEPT_ADAPTER_LIMIT_BYTES:,}-byte limit of an adapter kept in git",
            "source_checkpoint": str(checkpoint),
        }
        (adapters / f"{label}.json").write_text(json.dumps(note, indent=2) + "\n", encoding="utf-8")
        return [f"adapters/{label}.json"]
    summary = run_dir / SUMMARY_FILE
    provenance = (
        json.loads(summary.read_text(encoding="utf-8")).get("provenance", {}) if summary.exists() else {}
    )
    kept = keep_adapter(checkpoint, adapters, label, provenance={"step": step, **portable_paths(provenance)})
    return [f"adapters/{kept.weights_path.name}", f"adapters/{kept.record_path.name}"]


def copy_run_folder_files(source: Path, label: str, directory: Path) -> list[str]:
    """Copy a run folder's metrics, rollouts, summary and config to `directory` as `<label>.<file>`."""
    directory.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in (METRICS_FILE, ROLLOUTS_FILE, SUMMARY_FILE, CONFIG_FILE):
        if (source / name).exists():
            target = directory / f"{label}.{name}"
            if name in (
                SUMMARY_FILE,
                CONFIG_FILE,
            ):  # they name run folders and model files: keep them portable
                record = portable_paths(json.loads((source / name).read_text(encoding="utf-8")))
                target.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
            else:
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
        frame = metrics[metrics["run"] == run.label]
        window = max(1, min(10, len(frame) // 2))
        moves = " → ".join([run.config.difficulty, *(move["to"] for move in run.result.curriculum_history)])
        rows.append(
            {
                "run": run.label,
                "reward_type": run.reward,
                "steps": run.result.final_step,
                "stopped by": run.result.stop_reason,
                "trajectories": run.result.final_step * run.trajectories_per_step,
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
    first = [_edge_mean(metrics[metrics["run"] == run.label]["reward"], 1, False) for run in runs]
    last = [_edge_mean(metrics[metrics["run"] == run.label]["reward"], 1, True) for run in runs]
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


def _recorded_file_names(label: str) -> list[str]:
    return [f"{label}.{name}" for name in (METRICS_FILE, ROLLOUTS_FILE, SUMMARY_FILE, CONFIG_FILE)]


def recorded_run(
    profile: Profile,
    curriculum: str,
    seed: int,
    config: TrainingConfig,
    directory: Path | None = None,
    arm: str | None = None,
) -> TrainedRun | None:
    """The run read back from the copies committed beside study 06, or None.

    None when a copy is missing or its config is not `config` (another model file name, prompt,
    learning rate, ...): that run would not be the one this profile trains. The metrics, rollouts
    and summary are the committed ones; the adapters are not in the checkout.
    """
    directory = directory or profiles.OUTPUT_ROOT / profile.name / NOTEBOOK_TRAINING
    label = f"{arm}__seed-{seed}" if arm is not None else run_label(curriculum, seed, config.reward)
    metrics, _, summary, saved_config = (directory / name for name in _recorded_file_names(label))
    if not (metrics.exists() and summary.exists() and saved_config.exists()):
        return None
    changes = config_changes(json.loads(saved_config.read_text()), config, seed, same_model_file=True)
    if changes:
        print(f"{label}: the committed run was trained with another config ({changes}); training anew")
        return None
    result = read_run_summary(summary)
    result = dataclasses.replace(result, output_dir=directory, metrics_path=metrics)
    return TrainedRun(curriculum, seed, config, result, recorded=True, arm=arm)


def check_committed_precision(
    profile: Profile, config: TrainingConfig, seed: int, arm: str | None = None, directory: Path | None = None
) -> None:
    """Before training a run anew: where its run is committed beside study 06, refuse to train it in
    another base dtype than the recorded one (`train.precision.check_recorded_precision`)."""
    directory = directory or profiles.OUTPUT_ROOT / profile.name / NOTEBOOK_TRAINING
    label = f"{arm}__seed-{seed}" if arm is not None else run_label(config.curriculum, seed, config.reward)
    summary = directory / f"{label}.{SUMMARY_FILE}"
    if summary.exists():
        device = str(json.loads(summary.read_text()).get("device", ""))
        check_recorded_precision(summary, config.cpu_dtype, device)


def train_arm_seed(profile: Profile, arm_name: str, seed: int) -> TrainedRun:
    """Train (or resume) one run of a named arm, whatever the block's seeds: a pre-registered proof
    trains its runs one at a time, in its registered order (`studies.preregistered`)."""
    arms = {arm.name: arm for arm in planned_arms(profile)}
    if arm_name not in arms:
        raise ProfileError(f"{profile.source}: no training arm named {arm_name!r} (arms: {', '.join(arms)})")
    arm = arms[arm_name]
    if not (run_dir_for(arm.config, seed) / CONFIG_FILE).exists():
        check_committed_precision(profile, arm.config, seed, arm.name)
    return TrainedRun(arm.curriculum, seed, arm.config, train(arm.config, seed), arm=arm.name)


def train_runs(
    profile: Profile,
    *,
    seeds: Sequence[int] | None = None,
    curricula: Sequence[str] | None = None,
    rewards: Sequence[str] | None = None,
) -> list[TrainedRun]:
    """Train (or resume, or read back) one run per (reward, curriculum, seed) of the `training:` block.

    A run with no folder here is read back from its committed copies (`recorded_run`) unless
    live calls are forced (`reproduce --live`). `seeds`, `curricula` and `rewards` pick other runs
    than the block's. Under a data-parallel launch (`python -m supersede_lib train`) every process
    calls this and trains the same runs together.
    """
    runs = []
    for arm in planned_arms(profile, curricula=curricula, rewards=rewards):
        for seed in seeds if seeds is not None else arm.seeds:
            started = (run_dir_for(arm.config, seed) / CONFIG_FILE).exists()
            recorded = None
            if not started and not profiles.live_calls_forced():
                recorded = recorded_run(profile, arm.curriculum, seed, arm.config, arm=arm.name)
            if recorded is not None:
                print(f"{recorded.label}: read back from the committed run files (no adapters here)")
                runs.append(recorded)
            else:
                if not started:
                    check_committed_precision(profile, arm.config, seed, arm.name)
                trained = train(arm.config, seed)
                runs.append(TrainedRun(arm.curriculum, seed, arm.config, trained, arm=arm.name))
    return runs


def analyse_training(profile: Profile, runs: Sequence[TrainedRun]) -> TrainingStudyResult:
    """Per-step metrics of every run, one row per run, and the paper's training facts beside ours."""
    frames = [
        load_metrics(run.result.metrics_path).assign(
            curriculum=run.curriculum, reward_type=run.reward, seed=run.seed, run=run.label
        )
        for run in runs
    ]
    metrics = pd.concat(frames, ignore_index=True)
    config = runs[0].config
    model = model_label(config)
    data = training_data_label(config.replace(curriculum="fixed"))
    ours_header = f"ours ({model}, {data}, {profile.name}, {len(runs)} run(s))"
    return TrainingStudyResult(
        profile=profile,
        model=model,
        data_label=data,
        runs=list(runs),
        metrics=metrics,
        runs_table=runs_table(runs, metrics),
        paper_table=paper_comparison_table(runs, metrics, ours_header),
    )


def _training_numbers(result: TrainingStudyResult) -> list[dict]:
    numbers = []
    for run in result.runs:
        frame = result.metrics[result.metrics["run"] == run.label]
        meta = {
            "model": result.model,
            "data": training_data_label(run.config),
            "profile": result.profile.name,
            "n": run.result.final_step * run.trajectories_per_step,
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
    return numbers


def _batch_label(run: TrainedRun) -> str:
    """`32 trajectories per step (4 episodes x group 8)`, naming the processes of a data-parallel run."""
    config, processes = run.config, run.result.processes
    per_process = f" on each of {processes} processes" if processes > 1 else ""
    return (
        f"{run.trajectories_per_step} trajectories per step "
        f"({config.episodes_per_step} episodes x group {config.num_generations}{per_process})"
    )


def write_training(result: TrainingStudyResult, directory: Path | None = None) -> TrainingStudyResult:
    """Copy the runs' small files, write the tables, Figure 4a and summary.json; returns `result`."""
    from supersede_lib.present import plots

    profile, runs, model, data = result.profile, result.runs, result.model, result.data_label
    directory = directory or profiles.output_dir(profile, NOTEBOOK_TRAINING)
    files = [name for run in runs for name in copy_run_files(run, directory)]
    result.metrics.to_csv(directory / "training_metrics.csv", index=False)
    # where the runs trained (recorded in their summaries since it was kept); else this process
    device = (
        "; ".join(dict.fromkeys(run.result.device for run in runs if run.result.device)) or device_label()
    )
    batches = "; ".join(dict.fromkeys(_batch_label(run) for run in runs))
    tables = [
        write_table(
            directory,
            "training_runs",
            result.runs_table,
            f"Model {model}; episodes: {data}; {batches}; device {device}.",
        ),
        write_table(
            directory,
            "training_vs_paper",
            result.paper_table,
            "The paper reports its curve's end points and stop step only (Figure 4a); its run trained "
            f"{PAPER_MODEL} on 4 x A10G for 174 steps of 32 trajectories.",
        ),
    ]
    figure = plots.training_curves_figure(
        result.metrics,
        title=f"ours: {model}, {data}, {profile.name}",
        paper=(
            paper_results.TRAINING_REWARD_START,
            paper_results.TRAINING_REWARD_END,
            paper_results.TRAINING_STOP_STEP,
        ),
    )
    result.figures["figure4a"] = plots.save_figure(figure, directory / "figure4a_training_reward.png")
    tables += evidence.write_training_evidence(directory)  # trend and notes payoff, from the rollouts
    numbers = _training_numbers(result)
    config = {
        "training": profile.require("training").model_dump(mode="json"),
        "presets": {run.label: run.config for run in runs},
    }
    extra = {
        "device": device,
        "runs": {run.label: run.result.to_dict() for run in runs},
        "files": files,
    }
    return record_summary(result, directory, NOTEBOOK_TRAINING, numbers, tables, config, extra)


def run_training(profile: Profile, *, seeds: Sequence[int] | None = None) -> TrainingStudyResult:
    """Paper §5.3 training: one GRPO run per (reward, curriculum, seed); resumes, never retrains.

    An interrupted run continues from its last checkpoint when called again; a finished run is read
    back. Results land in outputs/<profile>/06_grpo_training/.
    """
    return write_training(analyse_training(profile, train_runs(profile, seeds=seeds)))


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
