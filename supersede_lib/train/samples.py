"""What GRPO trains on: a trajectory's turns as tokens, and each turn as a sample with its advantage.

Plain records (no TRL, no torch): `SupersedeGRPOTrainer` fills them while it rolls out, `rewards`
scores them, and `expand_to_turn_samples` applies the no-re-feed rule of `grpo`: every turn is its
own sample, with the prompt the policy saw at that turn and its trajectory's advantage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from supersede_lib.agent.episode import Episode
from supersede_lib.agent.rollout import BoundedMemoryRollout
from supersede_lib.eval.matcher import Score


@dataclass
class TurnTokens:
    """One policy turn, as tokens: the exact prompt ids it was conditioned on and what it sampled."""

    prompt_ids: list[int]
    completion_ids: list[int]
    # the sampler's log-probability of each completion token (`train.sampling_logps`); None: not recorded
    sampling_logps: list[float] | None = None


@dataclass
class TrajectoryRecord:
    """A finished rollout with its tokens, reward (and the rubric's score behind it) and advantage."""

    slot: int
    episode: Episode
    rollout: BoundedMemoryRollout
    turns: list[TurnTokens]
    reward: float = 0.0
    advantage: float = 0.0
    score: Score | None = None  # None when the scorer returned a bare number


@dataclass
class TurnSample:
    """One training row: a turn of a trajectory, carrying that trajectory's advantage."""

    trajectory_index: int
    turn_index: int
    prompt_ids: list[int]
    completion_ids: list[int]
    advantage: float
    sampling_logps: list[float] | None = None  # as on `TurnTokens`


def expand_to_turn_samples(trajectories: Sequence[TrajectoryRecord]) -> list[TurnSample]:
    """Every turn of every trajectory becomes a sample; all turns share the trajectory's advantage."""
    return [
        TurnSample(
            index, turn_index, turn.prompt_ids, turn.completion_ids, trajectory.advantage, turn.sampling_logps
        )
        for index, trajectory in enumerate(trajectories)
        for turn_index, turn in enumerate(trajectory.turns)
    ]
