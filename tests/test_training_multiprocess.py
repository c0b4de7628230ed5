"""Data-parallel GRPO: 2 CPU processes (gloo) on the tiny model agree with one process on the same batch.

Each process rolls out its own episode group; the rewards are scripted per episode and rollout
order (not read from the sampled text), so one process given both groups sees the same rewards.
One group saturates and the other does not, so the processes' local groups differ: advantages
(also under batch-wide reward scaling), the curriculum's move, the zero-advantage counter, the
logged metrics and the rollouts file must still be those of the single process.

This file is also the worker: `python tests/test_training_multiprocess.py <tiny model> <out dir>`
with torch.distributed's environment (RANK, WORLD_SIZE, MASTER_ADDR, ...) set.

The command line (`python -m supersede_lib train`) is run the same way, as a launcher would start it:
2 processes train one smoke run, a second launch trains it on from its checkpoint, and one process
then reads the finished run back as notebook 06 does.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("trl")
pytest.importorskip("peft")

from transformers import TrainerCallback  # noqa: E402

from supersede_lib import profiles
from supersede_lib.agent.episode import Episode  # noqa: E402
from supersede_lib.agent.rollout import BoundedMemoryRollout  # noqa: E402
from supersede_lib.cli.train import main as training_command  # noqa: E402
from supersede_lib.models.hf import GGUF_CACHE_ENV  # noqa: E402
from supersede_lib.studies import training as training_study  # noqa: E402
from supersede_lib.train import run as training_run  # noqa: E402
from supersede_lib.train.config import (  # noqa: E402
    CONFIG_FILE,
    METRICS_FILE,
    ROLLOUTS_FILE,
    STATE_FILE,
    SUMMARY_FILE,
    TrainingConfig,
    tiny_smoke_config,
)
from supersede_lib.train.precision import PRECISION_FILE
from supersede_lib.train.processes import leave_process_group, wait_for_everyone  # noqa: E402
from supersede_lib.train.run import build_trainer, resolve_base_model, run_dir_for  # noqa: E402

GROUP_SIZE = 4
EPISODES = 2  # one group per process, or both in one process
MIXED_REWARDS = (1.0, 0.0, 0.5, 0.0)  # one success in four: the group does not saturate
SCALINGS = ("group", "batch")
AGREED_METRICS = (  # the batch's statistics: what one process on the same batch logs
    "reward",
    "reward_std",
    "success_rate",
    "frac_reward_zero_std",
    "zero_advantage_fraction",
    "curriculum/level",
    "turns_per_trajectory",
)
GATHERED_METRICS = ("num_tokens", "completions/mean_length", "completions/clipped_ratio", "kl")
WORKER_TIMEOUT_S = 240


def _config(tiny_path: Path, output_dir: Path, scale_rewards: str, processes: int) -> TrainingConfig:
    return tiny_smoke_config(
        tiny_path,
        output_dir,
        episodes_per_step=EPISODES // processes,
        num_generations=GROUP_SIZE,
        gradient_accumulation_steps=2,
        max_steps=1,
        save_steps=10,
        max_completion_length=6,
        episode_overrides={"n_sessions": (2, 2), "n_updates": (1, 1), "trailing_distractors": (0, 0)},
        scale_rewards=scale_rewards,
        curriculum="adaptive",
        curriculum_patience=1,
        saturated_group_fraction=0.5,  # one saturated group of two moves the curriculum up
        kl_log_every=1,
    )


def _scripted_scorer(saturated_episode_id: str) -> Callable[[Episode, BoundedMemoryRollout], float]:
    """Every rollout of one episode succeeds; the other episode's k-th rollout gets MIXED_REWARDS[k]."""
    calls: Counter[str] = Counter()

    def score(episode: Episode, rollout: BoundedMemoryRollout) -> float:
        index = calls[episode.episode_id]
        calls[episode.episode_id] += 1
        return 1.0 if episode.episode_id == saturated_episode_id else MIXED_REWARDS[index]

    return score


class _KeepLogs(TrainerCallback):
    """Collects this process's training logs (the metrics file holds the main process's only)."""

    def __init__(self) -> None:
        self.logs: list[dict[str, Any]] = []

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001 - TrainerCallback signature
        if logs and "train_runtime" not in logs:
            self.logs.append(dict(logs))
        return control


def _one_step(tiny_path: Path, output_dir: Path, scale_rewards: str, processes: int) -> dict[str, Any]:
    """Train one step; what this process saw and decided."""
    config = _config(tiny_path, output_dir, scale_rewards, processes)
    logs = _KeepLogs()
    trainer = build_trainer(config, seed=0, scorer=lambda episode, rollout: 0.0, callbacks=[logs])
    trainer.scorer = _scripted_scorer(trainer.episode_source.episode(0, 0, config.difficulty).episode_id)
    trainer.train()
    return {
        "trajectories": [
            [trajectory.episode.episode_id, trajectory.slot, trajectory.reward, trajectory.advantage]
            for trajectory in trainer.last_trajectories
        ],
        "curriculum": trainer.curriculum.state_dict(),
        "zero_advantage_streak": trainer.zero_advantage_stop.streak,
        "logs": logs.logs,
        "rollouts_file": str(run_dir_for(config, 0) / ROLLOUTS_FILE),
    }


def _worker(tiny_path: Path, out: Path) -> None:
    """Both steps, then the group is closed as the command line closes it.

    Leaving it open let a process abort at exit ("terminate called without an active exception")
    when the other had already gone: the barrier keeps both until each is done.
    """
    rank = int(os.environ["RANK"])
    results = {scale: _one_step(tiny_path, out / scale, scale, processes=2) for scale in SCALINGS}
    (out / f"rank-{rank}.json").write_text(json.dumps(results))
    wait_for_everyone()
    leave_process_group()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run_two_processes(command: list[str], logs: Path, env: dict[str, str] | None = None) -> list[str]:
    """Run `command` as ranks 0 and 1 of a gloo launch (the environment torchrun gives); their output.

    Fails the test, with the log's tail, when a process exits non-zero or runs past WORKER_TIMEOUT_S.
    """
    repo = Path(__file__).resolve().parents[1]
    launch_env = {
        **os.environ,
        **(env or {}),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2",
        "OMP_NUM_THREADS": "1",
        "TRL_EXPERIMENTAL_SILENCE": "1",
    }
    logs.mkdir(parents=True, exist_ok=True)
    workers = []
    for rank in range(2):
        log = (logs / f"rank-{rank}.log").open("w")
        workers.append(
            subprocess.Popen(
                command,
                env={**launch_env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=repo,
            )
        )
        log.close()
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    try:
        for worker in workers:
            worker.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    outputs = [(logs / f"rank-{rank}.log").read_text() for rank in range(2)]
    for rank, worker in enumerate(workers):
        if worker.returncode != 0:
            pytest.fail(
                f"rank {rank} exited with {worker.returncode} (a hang is killed):\n{outputs[rank][-3000:]}"
            )
    return outputs


def _launch_two_processes(tiny_path: Path, out: Path) -> list[dict[str, Any]]:
    """Run `_worker` in 2 gloo processes; their results in rank order."""
    _run_two_processes([sys.executable, __file__, str(tiny_path), str(out)], out)
    return [json.loads((out / f"rank-{rank}.json").read_text()) for rank in range(2)]


@pytest.fixture(scope="module")
def two_processes(tiny_path: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return _launch_two_processes(tiny_path, tmp_path_factory.mktemp("two-processes"))


@pytest.mark.parametrize("scale_rewards", SCALINGS)
def test_two_processes_match_one_process_on_the_same_batch(
    scale_rewards: str,
    two_processes: list[dict[str, Any]],
    tiny_path: Path,
    tmp_path: Path,
    one_torch_thread: None,
) -> None:
    single = _one_step(tiny_path, tmp_path, scale_rewards, processes=1)
    ranks = [result[scale_rewards] for result in two_processes]

    local_episodes = [{row[0] for row in rank["trajectories"]} for rank in ranks]
    assert all(len(episodes) == 1 for episodes in local_episodes)  # each group whole on one process
    assert local_episodes[0] != local_episodes[1]  # no episode on both processes
    # The local groups differ: one saturates, one does not.
    local_rewards = [[row[2] for row in rank["trajectories"]] for rank in ranks]
    assert sorted(local_rewards) == sorted([[1.0] * GROUP_SIZE, list(MIXED_REWARDS)])

    # The same trajectories, rewards and advantages as one process (rank order = the sampler's order).
    assert ranks[0]["trajectories"] + ranks[1]["trajectories"] == single["trajectories"]
    assert any(row[3] != 0.0 for row in single["trajectories"])

    # The same decisions on every process: half the groups saturated (move up), the batch had spread.
    assert [rank["curriculum"] for rank in ranks] == [single["curriculum"]] * 2
    assert (
        [rank["zero_advantage_streak"] for rank in ranks] == [single["zero_advantage_streak"]] * 2 == [0, 0]
    )
    assert single["curriculum"]["history"] == [{"step": 1, "from": "easy", "to": "medium"}]

    # Logged metrics are the whole batch's, the same on both processes.
    (log_0,), (log_1,), (log_single,) = ranks[0]["logs"], ranks[1]["logs"], single["logs"]
    for key in AGREED_METRICS:
        assert log_0[key] == log_1[key] == log_single[key], key
    for key in GATHERED_METRICS:
        assert log_0[key] == log_1[key], key

    # The main process writes every process's rollouts.
    written = [json.loads(line) for line in Path(ranks[0]["rollouts_file"]).read_text().splitlines()]
    assert [[row["episode_id"], row["slot"], row["reward"], row["advantage"]] for row in written] == single[
        "trajectories"
    ]


# ----------------------------------------------------------------------------- the command line


CLI_OVERRIDES = {  # one smoke run, as small as it gets: 1 episode x group 2 per process, 2-session episodes
    "episodes_per_step": 1,
    "max_completion_length": 6,
    "save_steps": 1,
    "kl_log_every": 0,
    "episode_overrides": {"n_sessions": [2, 2], "trailing_distractors": [0, 0]},
}
CLI_RUN = ["--profile", "smoke", "--curriculum", "fixed", "--seed", "0"]


def _cli_flags(max_steps: int) -> list[str]:
    overrides = {**CLI_OVERRIDES, "max_steps": max_steps}
    return [
        *CLI_RUN,
        *(flag for key, value in overrides.items() for flag in ("--set", f"{key}={json.dumps(value)}")),
    ]


def _cli_profile(max_steps: int) -> profiles.Profile:
    """The profile the command line trained with: the same overrides, as a notebook would load it."""
    overrides = {**CLI_OVERRIDES, "max_steps": max_steps}
    return profiles.load_profile(
        "smoke", {"training": {"curricula": ["fixed"], "seeds": [0], "overrides": overrides}}
    )


def test_the_command_line_trains_data_parallel_and_06_reads_the_run_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_torch_thread: None
) -> None:
    outputs, model_cache = tmp_path / "outputs", tmp_path / "models"
    env = {"SUPERSEDE_OUTPUT_DIR": str(outputs), GGUF_CACHE_ENV: str(model_cache)}
    command = [sys.executable, "-m", "supersede_lib", "train"]
    first = _run_two_processes([*command, *_cli_flags(max_steps=1)], tmp_path / "launch-1", env)
    second = _run_two_processes([*command, *_cli_flags(max_steps=2)], tmp_path / "launch-2", env)
    for launch in (first, second):  # the main process reports, the other stays quiet
        assert "fixed__seed-0: step" in launch[0] and "fixed__seed-0" not in launch[1]
    assert "fixed__seed-0: step 2 (max_steps), 4 trajectories per step, 2 process(es)" in second[0]

    run_dir = outputs / "smoke" / "06_grpo_training" / "runs" / "fixed" / "seed-0"
    assert sorted(path.name for path in run_dir.iterdir()) == sorted(
        [
            "README.md",
            "checkpoint-1",
            "checkpoint-2",
            CONFIG_FILE,
            METRICS_FILE,
            PRECISION_FILE,
            ROLLOUTS_FILE,
            SUMMARY_FILE,
        ]
    )
    summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    assert (summary["final_step"], summary["processes"]) == (2, 2)
    assert [step for step, _ in summary["checkpoints"]] == [1, 2]
    assert json.loads((run_dir / CONFIG_FILE).read_text())["processes"] == 2
    rows = [json.loads(line) for line in (run_dir / METRICS_FILE).read_text().splitlines()]
    assert [row["step"] for row in rows if row["kind"] == "train"] == [
        1,
        2,
    ]  # one row per step, resume included
    rollouts = [json.loads(line) for line in (run_dir / ROLLOUTS_FILE).read_text().splitlines()]
    for step in (1, 2):  # each process's episode, group of 2: 4 trajectories per step
        rows_of_step = [row for row in rollouts if row["step"] == step]
        assert sorted(row["slot"] for row in rows_of_step) == [0, 0, 1, 1]
        assert len({row["episode_id"] for row in rows_of_step}) == 2
    for checkpoint in (
        "checkpoint-1",
        "checkpoint-2",
    ):  # every process saved its RNG state, the main one the rest
        names = {path.name for path in (run_dir / checkpoint).iterdir()}
        assert {"adapter_model.safetensors", STATE_FILE, "rng_state_0.pth", "rng_state_1.pth"} <= names

    # One process, as notebook 06: the finished run is read back, never trained again.
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", outputs)
    monkeypatch.setenv(GGUF_CACHE_ENV, str(model_cache))

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(training_run, "build_trainer", no_training)
    profile = _cli_profile(max_steps=2)
    study = training_study.run_training(profile)
    (run,) = study.runs
    assert (run.result.final_step, run.result.processes, run.trajectories_per_step) == (2, 2, 4)
    assert study.runs_table["trajectories"].tolist() == [8]
    assert (
        "4 trajectories per step (1 episodes x group 2 on each of 2 processes)"
        in (study.output_dir / "training_runs.md").read_text()
    )
    # Training it on in one process would change every later step's batch: refused, naming the launch.
    with pytest.raises(ValueError, match=r"trained by 2 process\(es\) up to checkpoint 2, this is 1"):
        training_study.train_runs(_cli_profile(max_steps=3))

    from supersede_lib.models.hf import HFChatModel

    base = resolve_base_model(run.config)
    adapter = HFChatModel(
        base, adapter_path=str(run_dir / "checkpoint-2"), device="cpu", max_new_tokens_default=4
    )
    assert HFChatModel(base, device="cpu").differs_only_by_adapter(adapter)
    assert adapter.chat([{"role": "user", "content": "Where do I live now?"}]).completion_tokens <= 4


def test_the_command_line_names_the_bad_argument(capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        ("--profile nope", r"argument --profile nope: no profile 'nope'"),
        ("--profile smoke --seed -1", r"argument --seed: must be a whole number >= 0"),
        ("--profile smoke --curriculum sometimes", r"argument --curriculum: invalid choice"),
        ("--profile smoke --reward dense", r"argument --reward: invalid choice: 'dense'"),
        ("--profile smoke --set reward=memory", r"argument --set reward: set by --reward"),
        ("--profile smoke --set max_steps", r"argument --set: expected FIELD=VALUE"),
        ("--profile smoke --set learning_rat=1", r"argument --set learning_rat: not a TrainingConfig field"),
        ("--profile smoke --set max_steps=many", r"argument --set max_steps: expected a value like 3"),
        ("--profile smoke --set output_dir=x", r"argument --set output_dir: set by the profile"),
        (
            "--profile paper --set episodes_per_step=1",
            r"argument --set: .*must be divisible by gradient_accumulation_steps \(16\)",
        ),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as exit_info:
            training_command(argv.split())
        assert exit_info.value.code == 2
        assert re.search(message, capsys.readouterr().err), argv


def test_a_dry_run_shows_the_batch_of_this_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    paper_on_four = ["--set", "episodes_per_step=1", "--set", "gradient_accumulation_steps=4"]
    assert training_command(["--profile", "paper", "--seed", "0", "--dry-run"]) == 0
    assert "32 trajectories per step = 1 process(es) x 4 episode(s) x group 8" in capsys.readouterr().out
    monkeypatch.setenv("WORLD_SIZE", "4")  # what `accelerate launch --num_processes 4` tells each process
    monkeypatch.setattr("supersede_lib.cli.train.is_main_process", lambda: True)  # no group to join here
    assert training_command(["--profile", "paper", "--seed", "0", "--dry-run", *paper_on_four]) == 0
    printed = capsys.readouterr().out
    assert "32 trajectories per step = 4 process(es) x 1 episode(s) x group 8" in printed
    assert (
        f"fixed__seed-0: {tmp_path / 'paper' / '06_grpo_training' / 'runs' / 'fixed' / 'seed-0'}" in printed
    )
    assert "new, up to step 250" in printed


def test_a_dry_run_lists_every_reward_arm_with_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    runs = tmp_path / "smoke" / "06_grpo_training" / "runs"
    one_arm = ["--profile", "smoke", "--curriculum", "fixed", "--seed", "0", "--dry-run"]
    assert training_command([*one_arm, "--reward", "sparse", "memory"]) == 0
    printed = capsys.readouterr().out
    assert f"fixed__seed-0: {runs / 'fixed' / 'seed-0'}\n  sparse reward, fixed curriculum\n" in printed
    assert (
        f"fixed__memory-reward__seed-0: {runs / 'fixed__memory-reward' / 'seed-0'}\n"
        "  memory reward, fixed curriculum\n"
    ) in printed
    assert training_command(one_arm) == 0  # the smoke profile lists no rewards: the paper's sparse one
    printed = capsys.readouterr().out
    assert "sparse reward, fixed curriculum" in printed and "memory" not in printed

    # without --reward, the profile's training.rewards decide
    data = yaml.safe_load((profiles.CONFIG_DIR / "smoke.yaml").read_text())
    data["training"]["rewards"] = ["memory"]
    path = tmp_path / "memory-only.yaml"
    path.write_text(yaml.safe_dump(data))
    assert (
        training_command(["--profile", str(path), "--curriculum", "adaptive", "--seed", "1", "--dry-run"])
        == 0
    )
    printed = capsys.readouterr().out
    assert f"adaptive__memory-reward__seed-1: {runs / 'adaptive__memory-reward' / 'seed-1'}" in printed
    assert "fixed" not in printed and "sparse reward" not in printed


def test_each_data_parallel_process_loads_unsloth_onto_its_own_gpu(
    fake_unsloth: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a stand-in `unsloth` (no GPU here): under a launcher the replica goes to LOCAL_RANK's GPU."""
    config = TrainingConfig.preset("paper", output_dir="unused")
    training_run.load_policy(config)
    assert "device_map" not in fake_unsloth["from_pretrained"]  # one process: Unsloth's own placement
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "3")
    training_run.load_policy(config)
    assert fake_unsloth["from_pretrained"]["device_map"] == {"": 3}


if __name__ == "__main__":
    _worker(Path(sys.argv[1]), Path(sys.argv[2]))
