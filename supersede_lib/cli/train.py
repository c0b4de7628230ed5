"""Train a profile's GRPO runs from a shell, on one GPU or data-parallel on several.

    python -m supersede_lib train --profile offline
    accelerate launch --num_processes 4 -m supersede_lib train --profile paper
    torchrun --nproc-per-node 4 -m supersede_lib train --profile paper --curriculum fixed --seed 0
    python -m supersede_lib train --profile offline --reward sparse memory --dry-run

The runs, their configs and their folders are notebook 06's (`studies.training.train_runs`): an
interrupted run resumes, a finished one is read back, and 06 run afterwards reads these runs back
instead of training them again. `episodes_per_step` counts per process, so N processes train on N
times the trajectories per step of one (docs/training.md, "Several GPUs").

An entry point above the library: it reads profiles through `studies`, and no library module imports it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import yaml

from supersede_lib import profiles
from supersede_lib.studies.training import TrainedRun, arm_configs, planned_arms, train_runs
from supersede_lib.train.config import CURRICULUM_MODES, REWARDS, TrainingConfig
from supersede_lib.train.processes import is_main_process, leave_process_group, process_count
from supersede_lib.train.run import (
    check_run_config,
    check_run_processes,
    finished_run,
    list_checkpoints,
    run_dir_for,
)

# Fields the profile and these flags decide: `--curriculum` and `--reward` pick the arm, the run
# folders are 06's.
FIELDS_SET_ELSEWHERE = {
    "curriculum": "--curriculum",
    "reward": "--reward",
    "output_dir": "the profile (06 reads its run folders)",
}


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m supersede_lib train",
        description=(
            "Train the GRPO runs of a profile's `training:` block (one per reward, curriculum and seed), "
            "exactly as notebook 06 does: same configs, same run folders under outputs/<profile>/"
            "06_grpo_training/runs/, an interrupted run resumes, a finished one is read back. Launch it with "
            "`accelerate launch --num_processes N -m supersede_lib train ...` (or `torchrun --nproc-per-node "
            "N -m ...`) to train each run data-parallel on N GPUs; afterwards notebook 06 reads the runs "
            "back."
        ),
        epilog=(
            "episodes_per_step counts per process: N processes train on N x episodes_per_step x "
            "num_generations trajectories per step. The paper's 32 per step on 4 GPUs: "
            "--set episodes_per_step=1 --set gradient_accumulation_steps=4 (better: put them in the "
            "profile's training.overrides, so notebook 06 sees the same config)."
        ),
    )
    parser.add_argument(
        "--profile",
        required=True,
        help=f"profile name in configs/ ({', '.join(profiles.PROFILES)}) or a path to a profile YAML file",
    )
    parser.add_argument(
        "--curriculum",
        nargs="+",
        choices=CURRICULUM_MODES,
        metavar="{" + ",".join(CURRICULUM_MODES) + "}",
        help="curriculum arm(s) to train (default: the profile's training.curricula)",
    )
    parser.add_argument(
        "--reward",
        nargs="+",
        choices=REWARDS,
        metavar="{" + ",".join(REWARDS) + "}",
        help=(
            "reward(s) to train with: sparse = the paper's (the answer alone), memory = plus credit when "
            "the notes hold the current value (default: the profile's training.rewards)"
        ),
    )
    parser.add_argument(
        "--seed",
        nargs="+",
        type=_seed,
        metavar="N",
        help="seed(s) to train (default: the profile's training.seeds; notebook 06 reads only those)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help=(
            "override one TrainingConfig field on top of the profile's training.overrides; VALUE is read "
            "as YAML, e.g. --set max_steps=20 --set 'episode_overrides={n_sessions: [2, 3]}'. Notebook 06 "
            "does not see them (it refuses a run trained under other learning settings, and trains one on "
            "to its own max_steps): put lasting changes in the profile's training.overrides"
        ),
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help=(
            "print each run's folder, reward, state and batch under this launch, and exit without loading "
            "a model"
        ),
    )
    return parser


def parse_overrides(parser: argparse.ArgumentParser, assignments: Sequence[str]) -> dict[str, Any]:
    """`--set FIELD=VALUE` flags as TrainingConfig overrides; a bad one ends the command naming it."""
    fields = TrainingConfig.__dataclass_fields__
    overrides: dict[str, Any] = {}
    for assignment in assignments:
        field, separator, text = assignment.partition("=")
        field = field.strip()
        if not separator or not field:
            parser.error(f"argument --set: expected FIELD=VALUE, got {assignment!r}")
        if field in FIELDS_SET_ELSEWHERE:
            parser.error(f"argument --set {field}: set by {FIELDS_SET_ELSEWHERE[field]}, not by --set")
        if field not in fields:
            parser.error(
                f"argument --set {field}: not a TrainingConfig field (fields: {', '.join(sorted(fields))})"
            )
        try:
            overrides[field] = yaml.safe_load(text)
        except yaml.YAMLError as error:
            parser.error(f"argument --set {field}: VALUE is not valid YAML ({str(error).splitlines()[0]})")
    return overrides


def load_training_profile(parser: argparse.ArgumentParser, args: argparse.Namespace) -> profiles.Profile:
    """The profile with the `--set` overrides, every selected arm's config checked; errors name the argument."""
    overrides = parse_overrides(parser, args.set)
    try:  # the profile as written first: a --set mistake is then named as the argument it is
        block = profiles.load_profile(args.profile).require("training")
    except profiles.ProfileError as error:
        parser.error(f"argument --profile {args.profile}: {error}")
    preset = TrainingConfig.preset(block.preset)
    for field, value in overrides.items():
        if not _same_kind(value, getattr(preset, field)):
            parser.error(
                f"argument --set {field}: expected a value like {getattr(preset, field)!r}, got {value!r}"
            )
    flag = "--set" if overrides else f"--profile {args.profile}"
    try:
        profile = profiles.load_profile(
            args.profile, {"training": {"overrides": overrides}} if overrides else None
        )
    except profiles.ProfileError as error:
        parser.error(f"argument {flag}: {error}")
    try:  # TrainingConfig checks how its fields fit together
        arm_configs(profile, curricula=args.curriculum, rewards=args.reward)
    except (TypeError, ValueError) as error:
        parser.error(f"argument {flag}: {error}")
    return profile


def _same_kind(value: Any, expected: Any) -> bool:
    """Whether a `--set` value has the type of the preset's value (None fields take anything)."""
    if expected is None or value is None:
        return True
    if isinstance(expected, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(expected, bool)
    if isinstance(expected, float):
        return isinstance(value, int | float)
    if isinstance(expected, tuple | list):
        return isinstance(value, tuple | list)
    return isinstance(value, type(expected))


def describe_plan(
    profile: profiles.Profile,
    curricula: Sequence[str] | None,
    seeds: Sequence[int] | None,
    rewards: Sequence[str] | None,
) -> list[str]:
    """One entry per run: its folder, arm, what `train` would do with it, and its batch under this launch."""
    processes = process_count()
    lines = []
    for arm in planned_arms(profile, curricula=curricula, rewards=rewards):
        curriculum, config = arm.curriculum, arm.config
        for seed in seeds or arm.seeds:
            run_dir = run_dir_for(config, seed)
            finished, checkpoints = finished_run(config, seed), list_checkpoints(run_dir)
            try:
                check_run_config(run_dir, config, seed)
                if finished is None and checkpoints:
                    check_run_processes(run_dir, processes, checkpoints[-1][0])
            except ValueError as error:
                state = f"refused: {error}"
            else:
                if finished is not None:
                    state = f"finished at step {finished.final_step} ({finished.stop_reason}): read back"
                elif checkpoints:
                    state = f"resumes from checkpoint {checkpoints[-1][0]} up to step {config.max_steps}"
                else:
                    state = f"new, up to step {config.max_steps}"
            batch = (
                f"{config.trajectories_per_step * processes} trajectories per step = {processes} process(es)"
                f" x {config.episodes_per_step} episode(s) x group {config.num_generations}"
            )
            described = f"{config.reward} reward, {curriculum} curriculum"
            lines.append(f"{arm.name}__seed-{seed}: {run_dir}\n  {described}\n  {state}\n  {batch}")
    return lines


def describe_runs(runs: Sequence[TrainedRun]) -> list[str]:
    return [
        f"{run.label}: step {run.result.final_step} ({run.result.stop_reason}), "
        f"{run.trajectories_per_step} trajectories per step, {run.result.processes} process(es), "
        f"{run.reward} reward: "
        f"{run.result.output_dir}"
        for run in runs
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    profile = load_training_profile(parser, args)
    named_arms = profile.training.arms is not None  # each named arm keeps its own seeds
    curricula = args.curriculum or (None if named_arms else profile.training.curricula)
    rewards = args.reward or (None if named_arms else profile.training.rewards)
    seeds = args.seed or (None if named_arms else profile.training.seeds)
    try:
        if args.dry_run:
            lines = [f"profile {profile.name} ({profile.source}), {process_count()} process(es):"]
            lines += describe_plan(profile, curricula, seeds, rewards)
        else:
            runs = train_runs(profile, seeds=seeds, curricula=curricula, rewards=rewards)
            lines = [f"profile {profile.name}: {len(runs)} run(s)", *describe_runs(runs)]
            lines.append("Notebook 06 (studies.training.run_training) reads them back: tables and Figure 4a.")
        main_process = is_main_process()
    finally:
        leave_process_group()
    if main_process:
        print("\n".join(lines))
    return 0
