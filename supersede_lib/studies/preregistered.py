"""Run a pre-registered proof one piece at a time, in the order it was registered.

A CPU session is too short for the whole proof, and adapters are not committed, so each trained run
must be judged in the session that trained it. `--baselines` judges the base (plain, format-controlled,
full context) on every set that names it; `--next` trains the next run of `preregistration.order`
that has no test result yet and judges its final checkpoint on every set that names it, before the
session ends. Each piece writes its per-model files under `outputs/<profile>/07_transfer_eval/` and
its recorded replies, ready to commit; notebook 07 makes the tables once every piece is there.

    python -m supersede_lib.studies.preregistered --profile cpu_proof_prereg --baselines
    python -m supersede_lib.studies.preregistered --profile cpu_proof_prereg --next
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from supersede_lib.studies import profiles
from supersede_lib.studies.evaluation_sets import BASE, SetModel, judge_models, set_folder
from supersede_lib.studies.profiles import Profile, ProfileError
from supersede_lib.studies.training import TrainedRun, planned_arms, train_arm_seed

FINAL_STEP = 20  # the stopping rule: every run's final checkpoint
_ORDER_ITEM = re.compile(r"^\s*(?P<arm>[A-Za-z0-9_-]+)\s+s(?P<seed>\d+)\s*$")


def registered_order(profile: Profile) -> list[tuple[str, int]]:
    """The (arm, seed) runs in `preregistration.order` ("verdict s11, format s11, ...")."""
    order = profile.require("preregistration").order
    runs = []
    for item in order.split(","):
        match = _ORDER_ITEM.match(item)
        if match is None:
            raise ProfileError(
                f"{profile.source}: preregistration.order: {item.strip()!r} is not '<arm> s<seed>'"
            )
        runs.append((match["arm"], int(match["seed"])))
    return runs


def final_label(arm: str, seed: int) -> str:
    return f"{arm}__seed-{seed}__step-{FINAL_STEP}"


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


def judge_baselines(profile: Profile) -> None:
    """The base on every set that names it, with the agent the arms train."""
    config = planned_arms(profile)[0].config
    for evaluation in _sets_naming(profile, BASE):
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
    label = final_label(arm, seed)
    for evaluation in _sets_naming(profile, label):
        print(f"{label} on {evaluation.name}")
        judge_models(profile, evaluation, run.config, [SetModel(label, Path(final))], settings_runs=[run])
    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m supersede_lib.studies.preregistered", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--profile", required=True)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--baselines", action="store_true", help="judge the base on every set that names it")
    group.add_argument("--next", action="store_true", help="train and judge the next registered run")
    group.add_argument("--run", metavar="ARM:SEED", help="train and judge this registered run")
    args = parser.parse_args(argv)
    profile = profiles.load_profile(args.profile)
    if args.baselines:
        judge_baselines(profile)
        return 0
    run = next_run(profile) if args.next else _parse_run(args.run, profile)
    if run is None:
        print("every registered run is trained and judged")
        return 0
    train_and_judge(profile, *run)
    return 0


def _parse_run(text: str, profile: Profile) -> tuple[str, int]:
    arm, _, seed = text.partition(":")
    if (arm, int(seed or -1)) not in registered_order(profile):
        raise SystemExit(f"{text}: not a registered run of {profile.name} ({registered_order(profile)})")
    return arm, int(seed)


if __name__ == "__main__":
    sys.exit(main())
