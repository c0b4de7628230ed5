"""Data-parallel GRPO: 2 CPU processes (gloo) on the tiny model agree with one process on the same batch.

Each process rolls out its own episode group; the rewards are scripted per episode and rollout
order (not read from the sampled text), so one process given both groups sees the same rewards.
One group saturates and the other does not, so the processes' local groups differ: advantages
(also under batch-wide reward scaling), the curriculum's move, the zero-advantage counter, the
logged metrics and the rollouts file must still be those of the single process.

This file is also the worker: `python tests/test_training_multiprocess.py <tiny model> <out dir>`
with torch.distributed's environment (RANK, WORLD_SIZE, MASTER_ADDR, ...) set.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from transformers import TrainerCallback  # noqa: E402

from supersede_lib.episode import Episode  # noqa: E402
from supersede_lib.rollout import BoundedMemoryRollout  # noqa: E402
from supersede_lib.train.config import ROLLOUTS_FILE, TrainingConfig  # noqa: E402
from supersede_lib.train.run import build_trainer, run_dir_for  # noqa: E402

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
    return TrainingConfig.preset(
        "smoke",
        model_name_or_path=str(tiny_path),
        output_dir=str(output_dir),
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
    rank = int(os.environ["RANK"])
    results = {scale: _one_step(tiny_path, out / scale, scale, processes=2) for scale in SCALINGS}
    (out / f"rank-{rank}.json").write_text(json.dumps(results))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _launch_two_processes(tiny_path: Path, out: Path) -> list[dict[str, Any]]:
    """Run `_worker` in 2 gloo processes; their results in rank order."""
    repo = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2",
        "OMP_NUM_THREADS": "1",
        "TRL_EXPERIMENTAL_SILENCE": "1",
    }
    workers = []
    for rank in range(2):
        log = (out / f"rank-{rank}.log").open("w")
        workers.append(
            subprocess.Popen(
                [sys.executable, __file__, str(tiny_path), str(out)],
                env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
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
    for rank, worker in enumerate(workers):
        if worker.returncode != 0:
            tail = (out / f"rank-{rank}.log").read_text()[-3000:]
            pytest.fail(f"rank {rank} exited with {worker.returncode} (a hang is killed):\n{tail}")
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


if __name__ == "__main__":
    _worker(Path(sys.argv[1]), Path(sys.argv[2]))
