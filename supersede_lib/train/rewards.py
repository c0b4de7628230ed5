"""The reward of a trajectory and the GRPO advantages computed from the rewards of its group.

A reward is scored once per finished trajectory by the environment's rubric
(`matcher.score_episode_answer`, as in evaluation), optionally with credit for notes that hold the
current value (`memory_credit_scorer`); `group_advantages` normalises it within the group of
rollouts of the same episode. `rollout_record` is one row of a run's rollouts file: what the reward
saw and what it gave. Kept apart from the trainer so the reward can be read (and tested) alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
from trl.trainer.utils import nanstd

from supersede_lib.agent.episode import Episode
from supersede_lib.agent.notes_edits import parse_edit_lines, says_nothing_new
from supersede_lib.agent.rollout import BoundedMemoryRollout
from supersede_lib.eval.matcher import Score, score_episode_answer
from supersede_lib.eval.memory_metrics import notes_holdings
from supersede_lib.train.config import REWARDS
from supersede_lib.train.samples import TrajectoryRecord

# A trajectory's reward: the rubric's `Score` (its verdict and reason get logged too) or a bare number.
TrajectoryScorer = Callable[[Episode, BoundedMemoryRollout], Score | float]


def group_advantages(
    rewards: Sequence[float], group_size: int, scale_rewards: str = "group"
) -> tuple[list[float], list[bool]]:
    """GRPO advantages, one per trajectory, and per group whether its rewards had zero spread.

    Same arithmetic as TRL 1.14 (`(r - group mean) / (std + 1e-4)`, unbiased std): rewards are
    compared only with the other rollouts of the same episode.
    """
    if len(rewards) % group_size:
        raise ValueError(f"{len(rewards)} rewards do not split into groups of {group_size}")
    values = torch.tensor(list(rewards), dtype=torch.float32)
    grouped = values.view(-1, group_size)
    mean = grouped.mean(dim=1).repeat_interleave(group_size)
    group_std = nanstd(grouped, dim=1).view(-1)
    if scale_rewards == "batch":
        std = nanstd(values).expand_as(values)
    else:
        std = group_std.repeat_interleave(group_size)
    advantages = values - mean
    if scale_rewards != "none":
        advantages = advantages / (std + 1e-4)
    zero_spread = torch.isclose(group_std, torch.zeros_like(group_std))
    advantages[zero_spread.repeat_interleave(group_size)] = 0.0  # exactly 0, not float-rounding noise
    return advantages.tolist(), zero_spread.tolist()


def rubric_scorer(stale_penalty_weight: float = 1.0) -> TrajectoryScorer:
    """The environment's reward: `score_episode_answer` on the rollout's final answer, as in evaluation."""

    def score(episode: Episode, rollout: BoundedMemoryRollout) -> Score:
        return score_episode_answer(episode, rollout.answer or "", stale_penalty_weight=stale_penalty_weight)

    return score


def memory_credit_scorer(stale_penalty_weight: float = 1.0, memory_credit: float = 0.5) -> TrajectoryScorer:
    """The sparse reward plus `memory_credit` when the notes the answer turn reads hold the current
    value and no stale one: a denser signal for what bounded memory is about (the notes update).

    With `memory_credit` < 1 a wrong answer never reaches the success reward of 1, so success
    (and the curriculum) still means a correct answer, comparable across the two rewards.
    """
    note = f"memory credit +{memory_credit:g}: the notes hold the current value and no stale one"
    return _notes_credit_scorer(stale_penalty_weight, memory_credit, note, only_beside_correct=False)


def notes_used_scorer(stale_penalty_weight: float = 1.0, memory_credit: float = 0.5) -> TrajectoryScorer:
    """The sparse reward plus `memory_credit` only when the answer is correct AND the notes it read
    held the current value: notes are paid for only when the answer uses them.

    The `memory` reward pays for notes whatever the answer does; a policy can then earn it or lose
    it by notes alone, and several `memory` runs ended writing no notes at all (docs/training.md,
    "The collapse"). Tying the credit to a correct answer removes that separate route.
    """
    note = f"notes credit +{memory_credit:g}: a correct answer read notes holding the current value"
    return _notes_credit_scorer(stale_penalty_weight, memory_credit, note, only_beside_correct=True)


def _notes_credit_scorer(
    stale_penalty_weight: float, memory_credit: float, note: str, *, only_beside_correct: bool
) -> TrajectoryScorer:
    """The sparse reward plus `memory_credit` (and `note` in the reason) when the final notes hold the
    current value and no stale one, and (`only_beside_correct`) the answer is correct."""
    if not 0 <= memory_credit < 1:
        raise ValueError(f"memory_credit must be in [0, 1), got {memory_credit}")
    sparse = rubric_scorer(stale_penalty_weight)

    def score(episode: Episode, rollout: BoundedMemoryRollout) -> Score:
        answer = sparse(episode, rollout)
        if only_beside_correct and answer.verdict != "correct":
            return answer
        if not _notes_hold_current(episode, rollout.notes):
            return answer
        return dataclasses.replace(
            answer,
            reward=answer.reward + memory_credit,
            reason=f"{answer.reason}; {note}" if answer.reason else note,
        )

    return score


def well_formed_notes(rollout: BoundedMemoryRollout) -> bool:
    """Every notes reply of the rollout states at least one `subject: value` line (or says there is
    nothing new): the line-edit agent's format, whatever the lines say."""
    replies = [turn.reply for turn in rollout.turns if turn.kind == "notes"]
    return bool(replies) and all(parse_edit_lines(reply) or says_nothing_new(reply) for reply in replies)


def format_only_scorer() -> TrajectoryScorer:
    """A control: reward 1 for well-formed notes replies (`well_formed_notes`), nothing for the answer.

    If an arm trained on this matches the arms trained on the answer, those learned the output format,
    not supersession. The answer is still graded, so its verdict is logged, but the reward
    ignores it: a hedged or wrong answer earns exactly what a correct one does.
    """
    sparse = rubric_scorer(0.0)

    def score(episode: Episode, rollout: BoundedMemoryRollout) -> Score:
        answer = sparse(episode, rollout)
        formatted = well_formed_notes(rollout)
        note = "format reward: " + ("every notes reply well formed" if formatted else "a notes reply was not")
        return dataclasses.replace(answer, reward=float(formatted), reason=note)

    return score


def scorer_for(
    reward: str, stale_penalty_weight: float = 1.0, memory_credit: float = 0.5
) -> TrajectoryScorer:
    """`sparse` (the paper's: the answer alone), `memory` (sparse + credit for current notes),
    `notes_used` (sparse + that credit only beside a correct answer) or `format` (a control: well-formed
    notes replies only). Every answer-based reward reads the evaluation's verdict (ambiguous <= 0)."""
    if reward == "sparse":
        return rubric_scorer(stale_penalty_weight)
    if reward == "memory":
        return memory_credit_scorer(stale_penalty_weight, memory_credit)
    if reward == "notes_used":
        return notes_used_scorer(stale_penalty_weight, memory_credit)
    if reward == "format":
        return format_only_scorer()
    raise ValueError(f"unknown reward {reward!r}; expected one of {REWARDS}")


def score_trajectory(scorer: TrajectoryScorer, trajectory: TrajectoryRecord) -> None:
    """Set the trajectory's reward (and score, when the scorer gives one) from its finished rollout."""
    outcome = scorer(trajectory.episode, trajectory.rollout)
    trajectory.score = outcome if isinstance(outcome, Score) else None
    trajectory.reward = float(outcome.reward if isinstance(outcome, Score) else outcome)


def _notes_hold_current(episode: Episode, notes: str) -> bool | None:
    """Whether the notes the answer turn read held the current value and no stale one (None: not a value)."""
    holds_current, holds_stale = notes_holdings([notes], episode)
    if holds_current is None:
        return None
    return holds_current[-1] and not (holds_stale and holds_stale[-1])


def rollout_record(step: int, difficulty: str, trajectory: TrajectoryRecord) -> dict[str, Any]:
    """One row of the rollouts file: what the reward saw (answer, verdict, reason) and what it gave."""
    rollout, score = trajectory.rollout, trajectory.score
    return {
        "step": step,
        "difficulty": difficulty,
        "episode_id": trajectory.episode.episode_id,
        "slot": trajectory.slot,
        "reward": trajectory.reward,
        "advantage": trajectory.advantage,
        "answer": rollout.answer,
        "verdict": score.verdict if score else None,
        "reason": score.reason if score else None,
        "gold_answers": list(trajectory.episode.gold_answers),
        "superseded_values": list(trajectory.episode.superseded_values),
        "asks_previous_value": trajectory.episode.asks_previous_value,
        "final_notes": rollout.notes,
        "notes_hold_current": _notes_hold_current(trajectory.episode, rollout.notes),
        "turns": len(rollout.turns),
        "truncations": rollout.truncation_count,
    }


def supersede_rubric(*args: Any, **kwargs: Any) -> list[float]:
    """Stands in TRL's `reward_funcs` slot (TRL requires one); never called.

    Rewards are per trajectory, not per completion: `SupersedeGRPOTrainer` scores each finished
    rollout with its `scorer` inside `_generate_and_score_completions`.
    """
    raise RuntimeError("supersede_rubric is scored per trajectory by SupersedeGRPOTrainer, not by TRL")
