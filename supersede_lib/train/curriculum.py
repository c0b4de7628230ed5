"""What a GRPO run trains on: the difficulty ladder, the curriculum that climbs it, and the episodes.

`Curriculum` decides the difficulty of the next batch from the last batch's rewards;
`EpisodeSource` turns (dataset slot, step, difficulty) into an `Episode`, from a fixed pool or
from the procedural generator, deterministically, so a resumed run sees the same episodes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from supersede_lib.agent.episode import Episode
from supersede_lib.data import synthetic
from supersede_lib.train.config import TRAINING_SEED_BASE


def difficulty_level(name: str) -> int:
    """Position of a difficulty on the generator's ladder (-1 when not on it)."""
    ladder = list(synthetic.DIFFICULTY_LADDER)
    return ladder.index(name) if name in ladder else -1


@dataclass
class Curriculum:
    """Fixed, or adaptive: move up the difficulty ladder when GRPO groups saturate.

    A group saturates when at least `saturation_threshold` of its rollouts succeed (reward >=
    `success_reward`); once `saturated_group_fraction` of a batch's groups saturate for `patience`
    batches in a row, the next difficulty is used, so the group-relative advantage does not vanish.
    """

    difficulty: str
    adaptive: bool = False
    success_reward: float = 1.0
    saturation_threshold: float = 0.875
    saturated_group_fraction: float = 0.5
    patience: int = 2
    next_difficulty: Callable[[str], str | None] | None = None  # None: the generator's ladder
    saturated_streak: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)

    def group_is_saturated(self, rewards: Sequence[float]) -> bool:
        successes = sum(1 for reward in rewards if reward >= self.success_reward - 1e-9)
        return bool(rewards) and successes / len(rewards) >= self.saturation_threshold

    def observe(self, group_rewards: Sequence[Sequence[float]], step: int = 0) -> str:
        """Feed one batch's rewards (one list per group); return the difficulty for the next batch."""
        if not self.adaptive or not group_rewards:
            return self.difficulty
        saturated = sum(self.group_is_saturated(rewards) for rewards in group_rewards) / len(group_rewards)
        self.saturated_streak = self.saturated_streak + 1 if saturated >= self.saturated_group_fraction else 0
        if self.saturated_streak >= self.patience:
            self.saturated_streak = 0
            upcoming = (self.next_difficulty or synthetic.next_difficulty)(self.difficulty)
            if upcoming and upcoming != self.difficulty:
                self.history.append({"step": step, "from": self.difficulty, "to": upcoming})
                self.difficulty = upcoming
        return self.difficulty

    def state_dict(self) -> dict[str, Any]:
        return {
            "difficulty": self.difficulty,
            "saturated_streak": self.saturated_streak,
            "history": self.history,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.difficulty = state["difficulty"]
        self.saturated_streak = int(state.get("saturated_streak", 0))
        self.history = list(state.get("history", []))


class EpisodeSource:
    """Which episode a dataset slot stands for: a fixed pool, or fresh procedural episodes.

    Procedural episodes are generated from (run seed, step, slot) at the curriculum's current
    difficulty, so a resumed run sees the same episodes it would have seen uninterrupted. Their
    generator seeds use base `TRAINING_SEED_BASE + seed`, disjoint from the small base seeds the
    profiles use for evaluation sets.
    """

    def __init__(
        self,
        seed: int,
        episodes: Sequence[Episode] | None = None,
        overrides: dict[str, Any] | None = None,
        slots_per_step: int = 1,
    ) -> None:
        self.seed = seed
        self.slots_per_step = slots_per_step
        self.pool = list(episodes) if episodes is not None else None
        self.overrides = dict(overrides or {})

    def episode(self, slot: int, step: int, difficulty: str) -> Episode:
        if self.pool is not None:
            return self.pool[slot % len(self.pool)]
        generator_config = synthetic.config_for_difficulty(difficulty)
        if self.overrides:
            generator_config = dataclasses.replace(generator_config, **self.overrides)
        index = step * self.slots_per_step + slot
        return synthetic.generate_episode(
            synthetic.episode_seed(TRAINING_SEED_BASE + self.seed, index), generator_config
        )
