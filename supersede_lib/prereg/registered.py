"""Run a pre-registered proof one piece at a time, in the order it was registered.

A CPU session is too short for the whole proof, and adapters are not committed, so each trained run
must be judged in the session that trained it. `--baselines` judges the base (plain, format-controlled,
full context) on every set that names it; `--next` trains the next run of `preregistration.order`
that has no test result yet and judges its final checkpoint on every set that names it, before the
session ends. Each piece writes its per-model files under `outputs/<profile>/07_transfer_eval/` and
its recorded replies, ready to commit; notebook 07 makes the tables once every piece is there.

    python -m supersede_lib preregistered --profile cpu_proof_prereg --baselines
    python -m supersede_lib preregistered --profile cpu_proof_prereg --next
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from supersede_lib import profiles
from supersede_lib.prereg.analysis import FINAL_STEP, final_label, registered_order
from supersede_lib.profiles import EvaluationSet, Profile, ProfileError
from supersede_lib.reproduce.record import adopt_run, adopt_table
from supersede_lib.reproduce.verify import compare_csv
from supersede_lib.results.headings import NOTEBOOK_TRAINING, NOTEBOOK_TRANSFER
from supersede_lib.studies.evaluation_sets import BASE, SetModel, judge_models, recorded_model, set_folder
from supersede_lib.studies.training import TrainedRun, copy_run_files, planned_arms, train_arm_seed
from supersede_lib.train.config import TrainingConfig


def _sets_naming(profile: Profile, label: str) -> list:
    return [item for item in profile.require("transfer").evaluations if item.models and label in item.models]


def _judged(profile: Profile, label: str) -> bool:
    """Whether every set that names the model has its files (a real-records set absent here aside)."""
    return all(
        (set_folder(profile, item) / f"{label}.csv").exists()
        for item in _sets_naming(profile, label)
        if not item.real_records
    )


def next_run(profile: Profile) -> tuple[str, int] | None:
    """The first registered run whose final checkpoint is not judged yet."""
    return next((run for run in registered_order(profile) if not _judged(profile, final_label(*run))), None)


def judge_baselines(profile: Profile, only: Sequence[str] | None = None) -> None:
    """The base on every set that names it (or the sets `only` names, in that order), with the agent
    the arms train."""
    config = planned_arms(profile)[0].config
    sets = {item.name: item for item in _sets_naming(profile, BASE)}
    unknown = sorted(set(only or ()) - set(sets))
    if unknown:
        raise ProfileError(
            f"{profile.source}: no set naming the base called {', '.join(unknown)} ({', '.join(sets)})"
        )
    for evaluation in [sets[name] for name in only] if only else sets.values():
        print(
            f"base on {evaluation.name} ({evaluation.condition}, agent {evaluation.prompt_variant or config.prompt_variant})"
        )
        judge_models(profile, evaluation, config, [SetModel(BASE, None)])


def train_and_judge(profile: Profile, arm: str, seed: int) -> TrainedRun:
    """Train one registered run (or resume it) and judge its final checkpoint on every set naming it."""
    run = train_arm_seed(profile, arm, seed)
    final = dict(run.checkpoints).get(FINAL_STEP)
    if final is None:
        raise RuntimeError(
            f"{run.label}: no step-{FINAL_STEP} checkpoint (stopped at {run.result.final_step})"
        )
    copy_run_files(run, profiles.output_dir(profile, NOTEBOOK_TRAINING))  # metrics, rollouts, summary
    _judge_with_every_core()
    label = final_label(arm, seed)
    for evaluation in _sets_naming(profile, label):
        print(f"{label} on {evaluation.name}")
        judge_models(profile, evaluation, run.config, [SetModel(label, Path(final))], settings_runs=[run])
    return run


def _judge_with_every_core() -> None:
    """Training on CPU holds torch to `cpu_threads` (1 in the CPU presets); the judging that follows in the
    same process would inherit it and leave the other cores idle (`verdict` s12's test set, 2026-11-27)."""
    import torch

    if not torch.cuda.is_available():
        torch.set_num_threads(os.cpu_count() or 1)


def parse_run(text: str, profile: Profile) -> tuple[str, int]:
    arm, _, seed = text.partition(":")
    if (arm, int(seed or -1)) not in registered_order(profile):
        raise SystemExit(f"{text}: not a registered run of {profile.name} ({registered_order(profile)})")
    return arm, int(seed)


# --------------------------------------------------------------------------- replay check


def verify_record(profile: Profile, scratch: Path, *, regrade: bool = False) -> list[str]:
    """Replay every committed per-model file of the proof from its recorded replies into `scratch`
    and compare the tables: the pieces run so far, checked the way `make verify` checks a whole
    profile (which cannot run this one until every registered run is in). Returns what differs.

    `regrade` adopts each differing replay into the committed files, the live measurements kept
    (latency, the manifest's run facts): the matcher changed, and amendment 1 of the
    pre-registration grades every piece with one matcher version."""
    problems: list[str] = []
    config = planned_arms(profile)[0].config
    for evaluation in profile.require("transfer").evaluations:
        folder = set_folder(profile, evaluation)
        if evaluation.real_records or not folder.exists():
            continue
        for manifest in sorted(folder.glob("*.manifest.json")):
            label = manifest.name.removesuffix(".manifest.json")
            difference = _replay_one(profile, evaluation, config, scratch, label)
            if difference and regrade:
                stem = Path(NOTEBOOK_TRANSFER) / evaluation.name / label
                adopt_table(f"{stem}.csv", scratch / profile.name, profiles.OUTPUT_ROOT / profile.name)
                adopt_run(stem, scratch / profile.name, profiles.OUTPUT_ROOT / profile.name, run_changed=True)
            problems += difference
    return problems


def _replay_one(
    profile: Profile,
    evaluation: EvaluationSet,
    config: TrainingConfig,
    scratch: Path,
    label: str,
) -> list[str]:
    """One committed model file replayed into `scratch` and compared (`verify_record`)."""
    committed_folder = set_folder(profile, evaluation)
    recorded = recorded_model(committed_folder, label)
    replay_folder = set_folder(profile, evaluation, root=scratch)
    replay_folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(committed_folder / f"{label}.manifest.json", replay_folder)
    (replay_folder / f"{label}.csv").unlink(missing_ok=True)
    judge_models(
        profile, evaluation, config, [SetModel(label, None)], replay=True, progress=False, root=scratch
    )
    difference = compare_csv(committed_folder / f"{label}.csv", replay_folder / f"{label}.csv")
    where = f"{evaluation.name}/{label} ({recorded[0] if recorded else '?'})"
    return [] if difference is None else [f"{where}: {difference}"]
