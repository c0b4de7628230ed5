"""GRPO training of the bounded-memory policy (paper Section 5.3) on the shared rollout core.

How a multi-turn trajectory becomes training samples (the no-re-feed rule, in training too)
----------------------------------------------------------------------------------------
One trajectory = one `BoundedMemoryRollout` driven turn by turn: T-1 notes rewrites (one per
session), then the answer. Turn k's prompt is `rollout.current_messages()` at that moment, i.e.
the current notes + ONE session; it is *not* a continuation of turn k-1's prompt. So the usual
TRL multi-turn recipe (one sample whose completion concatenates every turn, environment tokens
masked by `env_mask`) would put earlier sessions into the context of later turns: a re-feed.

Instead `SupersedeGRPOTrainer` overrides TRL's `_generate_and_score_completions` and turns each
trajectory into T samples ``(prompt_ids_k, completion_ids_k)``, where `prompt_ids_k` are the very
token ids the policy was conditioned on at turn k (the chat template applied to
`current_messages()`, kept as ids, never re-tokenised) and `completion_ids_k` the ids it sampled.
The reward is computed once per trajectory by the environment's rubric (`scoring.score_answer`),
normalised within the group of G trajectories of the same episode (GRPO), and that one advantage
is stamped on every turn of the trajectory. TRL's unchanged loss (token-level "dapo" by default)
then optimises exactly the log-probabilities of what the policy saw and said at each turn. The
sample count varies with the number of sessions, so the batch is topped up to a multiple of
`gradient_accumulation_steps` with inert rows (loss mask all zero) instead of letting TRL's
equal-chunk split drop samples. Rows of zero-advantage groups are left out of the forward pass
when that provably leaves the gradient unchanged (beta 0, token-sum loss; their tokens still
count in the normaliser).

Reading of the paper's "batch 32, group 8": 32 trajectories per optimiser step = 4 episodes x 8
sampled rollouts each; every trajectory contributes all its turns to that one step.

On CUDA the model is loaded and LoRA-patched by Unsloth (4-bit); on CPU by transformers + PEFT.
Either way the training loop is TRL's `GRPOTrainer` (not Unsloth's re-generated trainer, whose
patched generation/loss internals would bypass the per-turn expansion above).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
import random
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.utils import nanstd, pad, use_adapter

from supersede_lib.episode import Episode
from supersede_lib.rollout import PAPER_NOTES_BUDGET_CHARS, BoundedMemoryRollout

TrajectoryScorer = Callable[[Episode, BoundedMemoryRollout], float]

TINY_MODEL = "tiny-random-qwen2"  # resolved to a locally built model by `resolve_model_source`
PRESETS = ("smoke", "offline", "paper")
CURRICULUM_MODES = ("fixed", "adaptive")
LORA_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
METRICS_FILE = "metrics.jsonl"
ROLLOUTS_FILE = "rollouts.jsonl"
SUMMARY_FILE = "run_summary.json"
CONFIG_FILE = "training_config.json"  # the config a run directory was started with
# Fields that change how a run is displayed or stored, never what it learns: free to differ on resume.
CONFIG_FIELDS_FREE_ON_RESUME = frozenset(
    {"output_dir", "disable_tqdm", "log_rollouts", "max_steps", "save_steps"}
)
STATE_FILE = "supersede_state.json"  # curriculum + stop counter, saved inside every checkpoint
TRAINING_SEED_BASE = 500  # synthetic.episode_seed(500 + run seed, step * slots + slot)
CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")


# --------------------------------------------------------------------------- configuration


@dataclass
class TrainingConfig:
    """Everything one GRPO run needs; `TrainingConfig.preset(name)` gives the studied settings."""

    model_name_or_path: str = "Qwen/Qwen2.5-3B-Instruct"
    gguf_file: str | None = None
    output_dir: str = "outputs/training"
    # LoRA (paper: rank 32, alpha 64)
    lora_r: int = 32
    lora_alpha: int = 64
    lora_dropout: float = 0.0
    lora_target_modules: tuple[str, ...] = LORA_TARGET_MODULES
    # GRPO (paper: lr 1e-5, batch 32 = 4 episodes x group 8)
    learning_rate: float = 1e-5
    episodes_per_step: int = 4
    num_generations: int = 8
    gradient_accumulation_steps: int = 8
    max_steps: int = 250
    max_completion_length: int = 192
    temperature: float = 1.0
    kl_beta: float = 0.0
    kl_log_every: int = 1  # beta 0: measure KL(policy || base) every N steps (0: never; costs 2 passes)
    loss_type: str = "dapo"
    skip_zero_advantage_rows: bool = True  # same gradient, less work (see SupersedeGRPOTrainer)
    scale_rewards: str = "group"
    lr_scheduler_type: str = "constant"  # the run length is decided by auto-stop, not max_steps
    # Episodes: procedural, drawn fresh each step at the current difficulty
    difficulty: str = "medium"
    episode_overrides: dict[str, Any] = field(default_factory=dict)
    notes_budget_chars: int = PAPER_NOTES_BUDGET_CHARS
    stale_penalty_weight: float = 1.0
    # Curriculum (beyond the paper): climb the difficulty ladder when groups saturate
    curriculum: str = "fixed"
    success_reward: float = 1.0  # a rollout "succeeds" when its reward reaches this
    saturation_threshold: float = 0.875  # a group saturates when this fraction of it succeeds
    saturated_group_fraction: float = 0.5  # ... and the batch saturates when this fraction of groups do
    curriculum_patience: int = 2  # consecutive saturated batches before moving up
    # Stopping, checkpoints, logging
    zero_advantage_patience: int = 10  # paper: stopped after 10 zero-advantage batches (step 174)
    save_steps: int = 50
    log_rollouts: bool = True
    disable_tqdm: bool = True
    # Backend
    use_unsloth: bool | None = None  # None: exactly when CUDA is available
    load_in_4bit: bool = True
    fast_inference: bool = False
    max_seq_length: int = 2048
    gpu_memory_utilization: float = 0.6
    gradient_checkpointing: bool | None = None  # None: on for CUDA (Unsloth's own), off on CPU
    cpu_threads: int | None = None  # torch.set_num_threads on CPU runs; 1 avoids thread thrash on busy cores

    def __post_init__(self) -> None:
        if self.curriculum not in CURRICULUM_MODES:
            raise ValueError(
                f"TrainingConfig.curriculum must be one of {CURRICULUM_MODES}, got {self.curriculum!r}"
            )
        if self.num_generations < 2:
            raise ValueError(
                f"TrainingConfig.num_generations must be >= 2 for GRPO, got {self.num_generations}"
            )
        if self.trajectories_per_step % self.gradient_accumulation_steps:
            raise ValueError(
                "TrainingConfig: episodes_per_step x num_generations "
                f"({self.trajectories_per_step}) must be divisible by gradient_accumulation_steps "
                f"({self.gradient_accumulation_steps})"
            )

    @property
    def trajectories_per_step(self) -> int:
        return self.episodes_per_step * self.num_generations

    def replace(self, **changes: Any) -> TrainingConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> TrainingConfig:
        """`smoke` (tiny random model, seconds), `offline` (CPU mini-replication), `paper` (GPU)."""
        if name not in PRESETS:
            raise ValueError(f"unknown training preset {name!r}; expected one of {PRESETS}")
        base = dict(_PRESETS[name])
        base.update(overrides)
        return cls(**base)


def model_dir() -> Path:
    return Path(os.environ.get("SUPERSEDE_MODEL_DIR", Path.home() / ".cache" / "supersede" / "models"))


_PRESETS: dict[str, dict[str, Any]] = {
    # Exercises every code path in seconds: random 2-layer model, tiny episodes.
    "smoke": dict(
        model_name_or_path=TINY_MODEL,
        output_dir="outputs/smoke/training",
        lora_r=4,
        lora_alpha=8,
        lora_target_modules=("q_proj", "v_proj"),
        learning_rate=1e-4,
        episodes_per_step=2,
        num_generations=2,
        gradient_accumulation_steps=2,
        max_steps=3,
        max_completion_length=16,
        difficulty="easy",
        episode_overrides={},
        notes_budget_chars=120,
        save_steps=2,
        cpu_threads=1,
        zero_advantage_patience=10,
    ),
    # CPU mini-replication, sized for ~45 min on 2 CPU cores (docs/training.md has the measurements):
    # Qwen2.5-Coder-0.5B-Instruct (GGUF, dequantised once) on short easy episodes. SmolLM2-135M was
    # measured too: its rewards are nearly all 0, so GRPO has no advantage to learn from.
    "offline": dict(
        model_name_or_path=str(model_dir() / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
        output_dir="outputs/offline/training",
        learning_rate=1e-4,  # chosen so 8 small steps move the adapter; measured: mostly noise (README)
        episodes_per_step=1,
        num_generations=4,
        gradient_accumulation_steps=2,
        max_steps=8,
        max_completion_length=64,
        temperature=0.7,
        kl_log_every=4,
        difficulty="easy",
        episode_overrides={"n_sessions": (2, 3)},
        curriculum="fixed",
        saturation_threshold=0.75,  # groups of 4: "most rollouts succeed" = 3 of 4
        curriculum_patience=1,  # with 8 steps, move up after one saturated batch
        save_steps=4,
        cpu_threads=1,
    ),
    # The paper's run: Qwen2.5-3B-Instruct, LoRA 32/64, lr 1e-5, 32 trajectories = 4 x 8 per step.
    "paper": dict(
        model_name_or_path="Qwen/Qwen2.5-3B-Instruct",
        output_dir="outputs/paper/training",
        episodes_per_step=4,
        num_generations=8,
        gradient_accumulation_steps=16,
        max_steps=250,
        max_completion_length=192,
        difficulty="medium",
        save_steps=50,
        zero_advantage_patience=10,
    ),
}


# --------------------------------------------------------------------------- pure GRPO pieces


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


@dataclass
class TurnTokens:
    """One policy turn, as tokens: the exact prompt ids it was conditioned on and what it sampled."""

    prompt_ids: list[int]
    completion_ids: list[int]


@dataclass
class TrajectoryRecord:
    """A finished rollout with its tokens, reward and (shared) advantage."""

    slot: int
    episode: Episode
    rollout: BoundedMemoryRollout
    turns: list[TurnTokens]
    reward: float = 0.0
    advantage: float = 0.0


@dataclass
class TurnSample:
    """One training row: a turn of a trajectory, carrying that trajectory's advantage."""

    trajectory_index: int
    turn_index: int
    prompt_ids: list[int]
    completion_ids: list[int]
    advantage: float


def expand_to_turn_samples(trajectories: Sequence[TrajectoryRecord]) -> list[TurnSample]:
    """Every turn of every trajectory becomes a sample; all turns share the trajectory's advantage."""
    return [
        TurnSample(index, turn_index, turn.prompt_ids, turn.completion_ids, trajectory.advantage)
        for index, trajectory in enumerate(trajectories)
        for turn_index, turn in enumerate(trajectory.turns)
    ]


# --------------------------------------------------------------------------- curriculum and stopping


def _default_next_difficulty(name: str) -> str | None:
    from supersede_lib.data import synthetic

    return synthetic.next_difficulty(name)


def difficulty_level(name: str) -> int:
    """Position of a difficulty on the generator's ladder (-1 when not on it)."""
    try:
        from supersede_lib.data.synthetic import DIFFICULTY_LADDER
    except ImportError:
        return -1
    ladder = list(DIFFICULTY_LADDER)
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
    next_difficulty: Callable[[str], str | None] | None = None
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
            upcoming = (self.next_difficulty or _default_next_difficulty)(self.difficulty)
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


class ZeroAdvantageStop(TrainerCallback):
    """Stop (and save) after `patience` consecutive batches in which every advantage is zero."""

    def __init__(self, patience: int = 10) -> None:
        self.patience = patience
        self.streak = 0
        self.stopped_at_step: int | None = None

    def record_batch(self, all_advantages_zero: bool) -> None:
        self.streak = self.streak + 1 if all_advantages_zero else 0

    @property
    def should_stop(self) -> bool:
        return self.patience > 0 and self.streak >= self.patience

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001 - TrainerCallback signature
        if self.should_stop:
            control.should_training_stop = True
            control.should_save = True
            self.stopped_at_step = state.global_step
        return control


class MetricsFileCallback(TrainerCallback):
    """Append every log (reward, zero-advantage fraction, KL, lengths, ...) to a JSONL file."""

    def __init__(self, path: Path, context: Callable[[], dict[str, Any]] | None = None) -> None:
        self.path = Path(path)
        self.context = context or dict

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001 - TrainerCallback signature
        if not state.is_world_process_zero or not logs:
            return control
        row = {"step": state.global_step, "kind": "summary" if "train_runtime" in logs else "train"}
        row.update(self.context())
        row.update({key: _json_number(value) for key, value in logs.items()})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as handle:
            handle.write(json.dumps(row) + "\n")
        return control


def _json_number(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# --------------------------------------------------------------------------- episodes


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

    @property
    def is_procedural(self) -> bool:
        return self.pool is None

    def episode(self, slot: int, step: int, difficulty: str) -> Episode:
        if self.pool is not None:
            return self.pool[slot % len(self.pool)]
        from supersede_lib.data import synthetic

        generator_config = synthetic.config_for_difficulty(difficulty)
        if self.overrides:
            generator_config = dataclasses.replace(generator_config, **self.overrides)
        index = step * self.slots_per_step + slot
        return synthetic.generate_episode(
            synthetic.episode_seed(TRAINING_SEED_BASE + self.seed, index), generator_config
        )


def rubric_scorer(stale_penalty_weight: float = 1.0) -> TrajectoryScorer:
    """The environment's reward: `score_answer(...).reward` on the rollout's final answer."""

    def score(episode: Episode, rollout: BoundedMemoryRollout) -> float:
        from supersede_lib.eval.matcher import score_answer

        return score_answer(
            rollout.answer or "",
            episode.gold_answers,
            episode.superseded_values,
            is_abstention=episode.is_abstention,
            stale_penalty_weight=stale_penalty_weight,
        ).reward

    return score


# --------------------------------------------------------------------------- the trainer


def supersede_rubric(*args: Any, **kwargs: Any) -> list[float]:
    """Stands in TRL's `reward_funcs` slot (TRL requires one); never called.

    Rewards are per trajectory, not per completion: `SupersedeGRPOTrainer` scores each finished
    rollout with its `scorer` inside `_generate_and_score_completions`.
    """
    raise RuntimeError("supersede_rubric is scored per trajectory by SupersedeGRPOTrainer, not by TRL")


class SupersedeGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer whose rollouts are `BoundedMemoryRollout`s expanded into per-turn samples."""

    def __init__(
        self,
        *args: Any,
        episode_source: EpisodeSource,
        scorer: TrajectoryScorer,
        curriculum: Curriculum,
        zero_advantage_stop: ZeroAdvantageStop,
        notes_budget_chars: int = PAPER_NOTES_BUDGET_CHARS,
        kl_log_every: int = 1,
        skip_zero_advantage_rows: bool = True,
        log_rollouts: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.episode_source = episode_source
        self.scorer = scorer
        self.curriculum = curriculum
        self.zero_advantage_stop = zero_advantage_stop
        self.notes_budget_chars = notes_budget_chars
        self.kl_log_every = kl_log_every
        self.skip_zero_advantage_rows = skip_zero_advantage_rows
        self.log_rollouts = log_rollouts
        self.last_trajectories: list[TrajectoryRecord] = []  # the latest batch, for tests and notebooks

    # -- rollouts

    def _run_rollouts(self, rollouts: list[BoundedMemoryRollout]) -> list[list[TurnTokens]]:
        """Drive all rollouts in lockstep; each turn is one batched generate over the unfinished ones."""
        turns: list[list[TurnTokens]] = [[] for _ in rollouts]
        while True:
            active = [index for index, rollout in enumerate(rollouts) if not rollout.done]
            if not active:
                return turns
            conversations = [rollouts[index].current_messages() for index in active]
            prompt_ids, _, _ = self._tokenize_prompts(conversations)
            completion_ids, _ = self._generate_single_turn(prompt_ids, None, {}, num_generations=1)
            replies = self.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
            for index, prompt, completion, reply in zip(
                active, prompt_ids, completion_ids, replies, strict=True
            ):
                turns[index].append(TurnTokens(list(prompt), list(completion)))
                rollouts[index].step(reply)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        device = self.accelerator.device
        mode = "train" if self.model.training else "eval"
        group_size = self.num_generations if mode == "train" else self.num_generations_eval
        step = self.state.global_step
        slots = [int(row["slot"]) for row in inputs]
        if len(slots) % group_size:
            raise ValueError(
                f"a generation batch of {len(slots)} rows does not split into groups of {group_size}"
            )
        for start in range(0, len(slots), group_size):
            if len(set(slots[start : start + group_size])) != 1:
                raise ValueError(f"rows {start}..{start + group_size - 1} are not one repeated slot: {slots}")

        difficulty = self.curriculum.difficulty
        episodes: dict[int, Episode] = {}
        for slot in slots:
            if slot not in episodes:
                episodes[slot] = self.episode_source.episode(slot, step, difficulty)
        rollouts = [BoundedMemoryRollout(episodes[slot], self.notes_budget_chars) for slot in slots]
        started = time.perf_counter()
        turn_tokens = self._run_rollouts(rollouts)
        self._metrics[mode]["timing/rollouts_s"].append(time.perf_counter() - started)
        trajectories = [
            TrajectoryRecord(slot, episodes[slot], rollout, turns)
            for slot, rollout, turns in zip(slots, rollouts, turn_tokens, strict=True)
        ]
        for trajectory in trajectories:
            trajectory.reward = float(self.scorer(trajectory.episode, trajectory.rollout))
        rewards = [trajectory.reward for trajectory in trajectories]
        advantages, zero_spread_groups = group_advantages(rewards, group_size, self.scale_rewards)
        for trajectory, advantage in zip(trajectories, advantages, strict=True):
            trajectory.advantage = advantage
        self.last_trajectories = trajectories

        samples = expand_to_turn_samples(trajectories)
        trained = (
            [sample for sample in samples if sample.advantage != 0.0]
            if self._can_skip_zero_advantage
            else samples
        )
        inert_rows = 0
        if mode == "train":  # at least one row per accumulation chunk, and no remainder for TRL to drop
            inert_rows = max(
                self.args.steps_per_generation - len(trained), -len(trained) % self.args.steps_per_generation
            )
        batch = self._samples_to_tensors(trained, inert_rows, loss_tokens=self._loss_token_count(samples))

        if mode == "train":
            group_rewards = [
                rewards[start : start + group_size] for start in range(0, len(rewards), group_size)
            ]
            self.zero_advantage_stop.record_batch(all(zero_spread_groups))
            self.curriculum.observe(group_rewards, step=step + 1)
        self._record_metrics(mode, trajectories, samples, zero_spread_groups, difficulty)
        started = time.perf_counter()
        self._add_logps(batch, mode)
        self._metrics[mode]["timing/logps_s"].append(time.perf_counter() - started)
        if self.log_rollouts and mode == "train" and self.accelerator.is_main_process:
            self._write_rollouts(step + 1, difficulty, trajectories)
        return {
            key: value.to(device) if isinstance(value, torch.Tensor) else value
            for key, value in batch.items()
        }

    @property
    def _can_skip_zero_advantage(self) -> bool:
        """Whether rows with advantage 0 can be left out without changing the gradient.

        With beta == 0 and no entropy bonus, a row whose advantage is 0 has a per-token loss of
        exactly 0; under a token-sum loss normalised by the batch's token count (dapo, cispo) it
        only adds to the normaliser, which `_loss_token_count` keeps. Saturated groups (all
        rollouts equal) are common late in training and on small models, so this saves most of
        the forward/backward work there.
        """
        return (
            self.skip_zero_advantage_rows
            and self.beta == 0.0
            and not self._entropy_bonus_enabled
            and self.loss_type in ("dapo", "cispo")
        )

    def _loss_token_count(self, samples: list[TurnSample]) -> int:
        """TRL's `num_items_in_batch`: completion tokens that count in the loss normaliser."""
        if not self.mask_truncated_completions:
            return sum(len(sample.completion_ids) for sample in samples)
        eos_ids = set(self.eos_token_ids) | {self._tokenizer.pad_token_id}
        return sum(
            len(sample.completion_ids)
            for sample in samples
            if sample.completion_ids and sample.completion_ids[-1] in eos_ids
        )

    def _samples_to_tensors(
        self, samples: list[TurnSample], inert_rows: int, loss_tokens: int
    ) -> dict[str, Any]:
        """Pad per-turn samples into TRL's batch layout (prompts left-padded, completions right-padded)."""
        pad_id = self._tokenizer.pad_token_id
        prompts = [torch.tensor(sample.prompt_ids) for sample in samples]
        completions = [torch.tensor(sample.completion_ids) for sample in samples]
        completion_masks = [torch.ones_like(ids) for ids in completions]
        # Inert rows: one attended prompt token, a masked-out completion, advantage 0.
        prompts += [torch.tensor([pad_id])] * inert_rows
        completions += [torch.tensor([pad_id])] * inert_rows
        completion_masks += [torch.tensor([0])] * inert_rows
        multiple = self.pad_to_multiple_of
        prompt_ids = pad(prompts, padding_value=pad_id, padding_side="left", pad_to_multiple_of=multiple)
        prompt_mask = pad(
            [torch.ones_like(ids) for ids in prompts],
            padding_value=0,
            padding_side="left",
            pad_to_multiple_of=multiple,
        )
        completion_ids = pad(
            completions, padding_value=pad_id, padding_side="right", pad_to_multiple_of=multiple
        )
        completion_mask = pad(
            completion_masks, padding_value=0, padding_side="right", pad_to_multiple_of=multiple
        )
        advantages = torch.tensor([sample.advantage for sample in samples] + [0.0] * inert_rows)
        trajectory_index = torch.tensor([sample.trajectory_index for sample in samples] + [-1] * inert_rows)
        turn_index = torch.tensor([sample.turn_index for sample in samples] + [-1] * inert_rows)
        if self.mask_truncated_completions:
            eos_ids = set(self.eos_token_ids) | {pad_id}
            truncated = torch.tensor(
                [
                    bool(sample.completion_ids) and sample.completion_ids[-1] not in eos_ids
                    for sample in samples
                ]
                + [False] * inert_rows
            )
            completion_mask = completion_mask * (~truncated).unsqueeze(1).int()
        return {
            "prompt_ids": prompt_ids,
            "prompt_mask": prompt_mask,
            "completion_ids": completion_ids,
            "completion_mask": completion_mask,
            "advantages": advantages,
            "num_items_in_batch": self.accelerator.gather(
                torch.tensor(loss_tokens, device=self.accelerator.device)
            ).sum(),
            "trajectory_index": trajectory_index,
            "turn_index": turn_index,
        }

    def _add_logps(self, batch: dict[str, Any], mode: str) -> None:
        """Old/reference log-probs where TRL's loss needs them, and KL to the base model for logging."""
        device = self.accelerator.device
        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1).to(device)
        attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1).to(device)
        logits_to_keep = batch["completion_ids"].size(1)
        chunk_rows = max(1, math.ceil(input_ids.size(0) / max(1, self.args.steps_per_generation)))
        generate_every = self.args.steps_per_generation * self.num_iterations
        need_old = mode == "train" and self.args.gradient_accumulation_steps % generate_every != 0
        need_ref = self.beta != 0.0
        step = self.state.global_step + 1
        measure_kl = not need_ref and self.kl_log_every > 0 and (step == 1 or step % self.kl_log_every == 0)

        def logps(adapter_off: bool) -> torch.Tensor:
            model = self.accelerator.unwrap_model(self.model)
            with (
                torch.no_grad(),
                disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs),
            ):
                if adapter_off and hasattr(model, "peft_config"):
                    with use_adapter(model, adapter_name="ref" if "ref" in model.peft_config else None):
                        values, _, _ = self._get_per_token_logps_and_entropies(
                            self.model, input_ids, attention_mask, logits_to_keep, batch_size=chunk_rows
                        )
                    return values
                values, _, _ = self._get_per_token_logps_and_entropies(
                    self.model, input_ids, attention_mask, logits_to_keep, batch_size=chunk_rows
                )
                return values

        policy = logps(adapter_off=False) if (need_old or measure_kl) else None
        reference = logps(adapter_off=True) if (need_ref or measure_kl) else None
        if need_old:
            batch["old_per_token_logps"] = policy
        if need_ref:
            batch["ref_per_token_logps"] = reference
        mask = batch["completion_mask"].to(device).float()
        if measure_kl and policy is not None and reference is not None and mask.sum() > 0:
            delta = reference - policy
            per_token_kl = torch.exp(delta) - delta - 1
            self._metrics[mode]["kl"].append(((per_token_kl * mask).sum() / mask.sum().clamp(min=1.0)).item())

    def _record_metrics(
        self,
        mode: str,
        trajectories: list[TrajectoryRecord],
        samples: list[TurnSample],
        zero_spread_groups: list[bool],
        difficulty: str,
    ) -> None:
        metrics = self._metrics[mode]
        rewards = torch.tensor([trajectory.reward for trajectory in trajectories])
        lengths = torch.tensor([len(sample.completion_ids) for sample in samples], dtype=torch.float32)
        eos_ids = set(self.eos_token_ids) | {self._tokenizer.pad_token_id}
        clipped = [
            bool(sample.completion_ids) and sample.completion_ids[-1] not in eos_ids for sample in samples
        ]
        notes_turns = [
            turn for trajectory in trajectories for turn in trajectory.rollout.turns if turn.kind == "notes"
        ]
        successes = [reward >= self.curriculum.success_reward - 1e-9 for reward in rewards.tolist()]
        tokens = sum(len(sample.prompt_ids) + len(sample.completion_ids) for sample in samples)
        if mode == "train":
            self.state.num_input_tokens_seen += tokens
        metrics["num_tokens"] = [self.state.num_input_tokens_seen]
        metrics["reward"].append(rewards.mean().item())
        metrics["reward_std"].append(nanstd(rewards).item() if len(rewards) > 1 else 0.0)
        zero_fraction = sum(zero_spread_groups) / max(1, len(zero_spread_groups))
        metrics["frac_reward_zero_std"].append(zero_fraction)
        metrics["zero_advantage_fraction"].append(zero_fraction)
        metrics["success_rate"].append(sum(successes) / max(1, len(successes)))
        metrics["completions/mean_length"].append(lengths.mean().item())
        metrics["completions/min_length"].append(lengths.min().item())
        metrics["completions/max_length"].append(lengths.max().item())
        metrics["completions/clipped_ratio"].append(sum(clipped) / max(1, len(clipped)))
        metrics["turns_per_trajectory"].append(len(samples) / max(1, len(trajectories)))
        metrics["notes_truncation_rate"].append(
            sum(turn.truncated_chars > 0 for turn in notes_turns) / max(1, len(notes_turns))
        )
        metrics["curriculum/level"].append(float(difficulty_level(difficulty)))

    def _write_rollouts(self, step: int, difficulty: str, trajectories: list[TrajectoryRecord]) -> None:
        path = Path(self.args.output_dir) / ROLLOUTS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as handle:
            for trajectory in trajectories:
                rollout = trajectory.rollout
                record = {
                    "step": step,
                    "difficulty": difficulty,
                    "episode_id": trajectory.episode.episode_id,
                    "slot": trajectory.slot,
                    "reward": trajectory.reward,
                    "advantage": trajectory.advantage,
                    "answer": rollout.answer,
                    "gold_answers": list(trajectory.episode.gold_answers),
                    "superseded_values": list(trajectory.episode.superseded_values),
                    "final_notes": rollout.notes,
                    "turns": len(rollout.turns),
                    "truncations": rollout.truncation_count,
                }
                handle.write(json.dumps(record) + "\n")

    # -- checkpoints carry the curriculum and the stop counter

    def _save_checkpoint(self, model, trial):  # noqa: ANN001 - Trainer signature
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            folder = Path(self._get_output_dir(trial=trial)) / f"checkpoint-{self.state.global_step}"
            state = {
                "curriculum": self.curriculum.state_dict(),
                "zero_advantage_streak": self.zero_advantage_stop.streak,
            }
            (folder / STATE_FILE).write_text(json.dumps(state, indent=2))

    def _load_optimizer_and_scheduler(self, checkpoint):  # noqa: ANN001 - Trainer signature
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None and (Path(checkpoint) / STATE_FILE).exists():
            state = json.loads((Path(checkpoint) / STATE_FILE).read_text())
            self.curriculum.load_state_dict(state["curriculum"])
            self.zero_advantage_stop.streak = int(state.get("zero_advantage_streak", 0))


# --------------------------------------------------------------------------- model loading


def resolve_model_source(config: TrainingConfig) -> tuple[str, str | None]:
    """(model path or hub id, gguf filename); builds the tiny model for the smoke preset."""
    from supersede_lib.models.hf import split_gguf_path

    if config.model_name_or_path == TINY_MODEL:
        from supersede_lib.models.tiny import build_tiny_model

        cache = Path(os.environ.get("SUPERSEDE_HF_CACHE", Path.home() / ".cache" / "supersede" / "hf"))
        return str(build_tiny_model(cache / TINY_MODEL)), None
    return split_gguf_path(config.model_name_or_path, config.gguf_file)


def resolve_base_model(config: TrainingConfig) -> str:
    """A path or hub id that `HFChatModel` loads as this run's base (the adapters' base)."""
    source, gguf_file = resolve_model_source(config)
    return str(Path(source) / gguf_file) if gguf_file else source


def uses_unsloth(config: TrainingConfig) -> bool:
    return torch.cuda.is_available() if config.use_unsloth is None else config.use_unsloth


def load_policy(config: TrainingConfig, seed: int = 0) -> tuple[Any, Any, Any]:
    """(model, tokenizer, peft_config): Unsloth 4-bit + LoRA on CUDA, transformers (+ PEFT config) on CPU."""
    from supersede_lib.models.hf import load_model_and_tokenizer, materialize_gguf, prepare_chat_tokenizer

    source, gguf_file = resolve_model_source(config)
    if uses_unsloth(config):
        if not torch.cuda.is_available():
            raise RuntimeError(
                "TrainingConfig.use_unsloth=True needs a CUDA GPU; leave it None to pick automatically"
            )
        from unsloth import FastLanguageModel  # importable only when CUDA is present

        if gguf_file is not None:
            source = str(materialize_gguf(source, gguf_file))
        load_kwargs: dict[str, Any] = dict(
            model_name=source,
            max_seq_length=config.max_seq_length,
            load_in_4bit=config.load_in_4bit,
            fast_inference=config.fast_inference,
        )
        if config.fast_inference:  # vLLM engine sizing; only meaningful with fast_inference
            load_kwargs.update(
                max_lora_rank=config.lora_r, gpu_memory_utilization=config.gpu_memory_utilization
            )
        model, tokenizer = FastLanguageModel.from_pretrained(**load_kwargs)
        model = FastLanguageModel.get_peft_model(
            model,
            r=config.lora_r,
            lora_alpha=config.lora_alpha,
            lora_dropout=config.lora_dropout,
            target_modules=list(config.lora_target_modules),
            use_gradient_checkpointing="unsloth",
            random_state=seed,
        )
        prepare_chat_tokenizer(tokenizer, model)
        return model, tokenizer, None
    from peft import LoraConfig

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tokenizer = load_model_and_tokenizer(source, gguf_file, device=device)
    peft_config = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.lora_target_modules),
        task_type="CAUSAL_LM",
    )
    return model, tokenizer, peft_config


# --------------------------------------------------------------------------- running


@dataclass
class TrainingResult:
    """What one seed's run produced (also written to run_summary.json in its directory)."""

    seed: int
    output_dir: Path
    metrics_path: Path
    checkpoints: list[tuple[int, Path]]
    final_step: int
    stop_reason: str  # "max_steps" | "zero_advantage"
    final_difficulty: str
    curriculum_history: list[dict[str, Any]]
    wall_time_s: float
    seconds_per_step: float

    def to_dict(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        record["output_dir"] = str(self.output_dir)
        record["metrics_path"] = str(self.metrics_path)
        record["checkpoints"] = [[step, str(path)] for step, path in self.checkpoints]
        return record


def run_dir_for(config: TrainingConfig, seed: int) -> Path:
    return Path(config.output_dir) / f"seed-{seed}"


def _config_record(config: TrainingConfig, seed: int) -> dict[str, Any]:
    return json.loads(json.dumps({**dataclasses.asdict(config), "seed": seed}, default=str))


def check_run_config(run_dir: Path, config: TrainingConfig, seed: int) -> None:
    """Refuse to continue or reuse a run directory that was started with a different config.

    A resumed or already finished run is only the same experiment when everything that shapes
    learning matches; `max_steps` and `save_steps` may grow (to train on), and output paths may move.
    """
    path = run_dir / CONFIG_FILE
    if not path.exists():
        return
    saved = json.loads(path.read_text())
    current = _config_record(config, seed)
    differing = sorted(
        key
        for key in saved.keys() | current.keys()
        if key not in CONFIG_FIELDS_FREE_ON_RESUME and saved.get(key) != current.get(key)
    )
    if differing:
        changes = ", ".join(f"{key}: {saved.get(key)!r} -> {current.get(key)!r}" for key in differing)
        raise ValueError(
            f"{run_dir} was started with a different training config ({changes}); "
            "use another output_dir, or delete the run (training.remove_run) to start over"
        )


def build_trainer(
    config: TrainingConfig,
    seed: int = 0,
    *,
    episodes: Sequence[Episode] | None = None,
    scorer: TrajectoryScorer | None = None,
    next_difficulty: Callable[[str], str | None] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
) -> SupersedeGRPOTrainer:
    """A ready-to-train `SupersedeGRPOTrainer` for one seed (`train` calls this, then `.train()`)."""
    from datasets import Dataset
    from transformers import set_seed

    if episodes is not None and config.curriculum == "adaptive":
        raise ValueError(
            "TrainingConfig.curriculum='adaptive' needs procedural episodes; a fixed pool was given"
        )
    if episodes is not None and len(episodes) < config.episodes_per_step:
        raise ValueError(
            f"{len(episodes)} episodes given but episodes_per_step={config.episodes_per_step} distinct ones per step"
        )
    trl_base = SupersedeGRPOTrainer.__mro__[1]
    if trl_base.__module__ != "trl.trainer.grpo_trainer":
        raise RuntimeError(
            f"GRPOTrainer comes from {trl_base.__module__} (Unsloth's patch?): import supersede_lib.train.grpo "
            "before unsloth; the per-turn expansion needs TRL's own GRPOTrainer"
        )
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if config.cpu_threads and not torch.cuda.is_available():
        torch.set_num_threads(config.cpu_threads)
    set_seed(seed)
    random.seed(seed)
    run_dir = run_dir_for(config, seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    model, tokenizer, peft_config = load_policy(config, seed)
    on_cuda = torch.cuda.is_available()
    gradient_checkpointing = config.gradient_checkpointing
    if gradient_checkpointing is None:
        gradient_checkpointing = on_cuda and not uses_unsloth(config)  # Unsloth checkpoints by itself
    args = GRPOConfig(
        output_dir=str(run_dir),
        per_device_train_batch_size=config.trajectories_per_step // config.gradient_accumulation_steps,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        num_generations=config.num_generations,
        learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler_type,
        max_steps=config.max_steps,
        max_completion_length=config.max_completion_length,
        temperature=config.temperature,
        beta=config.kl_beta,
        loss_type=config.loss_type,
        scale_rewards=config.scale_rewards,
        logging_steps=1,
        save_strategy="steps",
        save_steps=config.save_steps,
        report_to=[],
        seed=seed,
        data_seed=seed,
        bf16=on_cuda and torch.cuda.is_bf16_supported(),
        use_cpu=not on_cuda,
        gradient_checkpointing=gradient_checkpointing,
        remove_unused_columns=False,
        log_completions=False,
        disable_tqdm=config.disable_tqdm,
        dataloader_num_workers=0,
    )
    slot_count = len(episodes) if episodes is not None else config.episodes_per_step
    dataset = Dataset.from_list(
        [
            {"prompt": [{"role": "user", "content": f"episode slot {slot}"}], "slot": slot}
            for slot in range(slot_count)
        ]
    )
    curriculum = Curriculum(
        difficulty=config.difficulty,
        adaptive=config.curriculum == "adaptive",
        success_reward=config.success_reward,
        saturation_threshold=config.saturation_threshold,
        saturated_group_fraction=config.saturated_group_fraction,
        patience=config.curriculum_patience,
        next_difficulty=next_difficulty,
    )
    stop = ZeroAdvantageStop(config.zero_advantage_patience)
    metrics = MetricsFileCallback(
        run_dir / METRICS_FILE, context=lambda: {"difficulty": curriculum.difficulty}
    )
    trainer = SupersedeGRPOTrainer(
        model=model,
        reward_funcs=[supersede_rubric],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[stop, metrics, *callbacks],
        episode_source=EpisodeSource(seed, episodes, config.episode_overrides, slot_count),
        scorer=scorer or rubric_scorer(config.stale_penalty_weight),
        curriculum=curriculum,
        zero_advantage_stop=stop,
        notes_budget_chars=config.notes_budget_chars,
        kl_log_every=config.kl_log_every,
        skip_zero_advantage_rows=config.skip_zero_advantage_rows,
        log_rollouts=config.log_rollouts,
    )
    return trainer


def _truncate_jsonl(path: Path, max_step: int) -> None:
    """Drop rows logged after `max_step` (an interrupted run's tail that the resumed run redoes)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row["step"] <= max_step and row.get("kind") != "summary":
            kept.append(line + "\n")
    path.write_text("".join(kept))


def train(
    config: TrainingConfig,
    seed: int = 0,
    *,
    episodes: Sequence[Episode] | None = None,
    scorer: TrajectoryScorer | None = None,
    next_difficulty: Callable[[str], str | None] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
    resume: bool = True,
) -> TrainingResult:
    """Run (or resume) one seed; writes checkpoints, metrics.jsonl, rollouts.jsonl, run_summary.json.

    With `resume=True` an interrupted run continues from its last checkpoint (step count, optimizer,
    curriculum and stop counter included); a finished run is not retrained. `resume=False` on a
    directory that already holds checkpoints raises instead of mixing two runs.
    """
    run_dir = run_dir_for(config, seed)
    existing = list_checkpoints(run_dir)
    summary_path = run_dir / SUMMARY_FILE
    if existing and not resume:
        raise FileExistsError(
            f"{run_dir} already holds checkpoints; pass resume=True or use a new output_dir"
        )
    if resume:
        check_run_config(run_dir, config, seed)
    if resume and summary_path.exists():
        finished = read_run_summary(summary_path)
        if finished.stop_reason == "zero_advantage" or finished.final_step >= config.max_steps:
            return finished
    resume_from = existing[-1] if (resume and existing) else None
    for name in (METRICS_FILE, ROLLOUTS_FILE):
        if resume_from is not None:
            _truncate_jsonl(run_dir / name, resume_from[0])
        elif (run_dir / name).exists():
            (run_dir / name).unlink()
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / CONFIG_FILE).write_text(json.dumps(_config_record(config, seed), indent=2) + "\n")
    trainer = build_trainer(
        config, seed, episodes=episodes, scorer=scorer, next_difficulty=next_difficulty, callbacks=callbacks
    )
    start_step = resume_from[0] if resume_from else 0
    started = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=str(resume_from[1]) if resume_from else None)
        wall = time.perf_counter() - started
        final_step = trainer.state.global_step
        stopped = trainer.zero_advantage_stop.stopped_at_step is not None
        result = TrainingResult(
            seed=seed,
            output_dir=run_dir,
            metrics_path=run_dir / METRICS_FILE,
            checkpoints=list_checkpoints(run_dir),
            final_step=final_step,
            stop_reason="zero_advantage" if stopped else "max_steps",
            final_difficulty=trainer.curriculum.difficulty,
            curriculum_history=list(trainer.curriculum.history),
            wall_time_s=wall,
            seconds_per_step=wall / max(1, final_step - start_step),
        )
    finally:
        del trainer
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    summary_path.write_text(json.dumps(result.to_dict(), indent=2))
    return result


def train_seeds(config: TrainingConfig, seeds: Sequence[int], **kwargs: Any) -> list[TrainingResult]:
    """`train` once per seed (each in `<output_dir>/seed-<seed>`)."""
    return [train(config, seed, **kwargs) for seed in seeds]


def read_run_summary(path: Path) -> TrainingResult:
    """A finished run's `run_summary.json` as a `TrainingResult`."""
    record = json.loads(path.read_text())
    record["output_dir"] = Path(record["output_dir"])
    record["metrics_path"] = Path(record["metrics_path"])
    record["checkpoints"] = [(int(step), Path(folder)) for step, folder in record["checkpoints"]]
    return TrainingResult(**record)


# --------------------------------------------------------------------------- results


def list_checkpoints(output_dir: str | os.PathLike) -> list[tuple[int, Path]]:
    """(step, path) of every saved adapter checkpoint under `output_dir`, in step order."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = CHECKPOINT_PATTERN.match(child.name)
        if match and child.is_dir() and (child / "adapter_config.json").exists():
            found.append((int(match.group(1)), child))
    return sorted(found)


def load_metrics(metrics_path: str | os.PathLike) -> Any:
    """The per-step training metrics as a pandas DataFrame (summary rows dropped)."""
    import pandas as pd

    rows = [json.loads(line) for line in Path(metrics_path).read_text().splitlines() if line.strip()]
    frame = pd.DataFrame([row for row in rows if row.get("kind", "train") == "train"])
    if frame.empty:
        return frame
    return frame.sort_values("step").drop_duplicates("step", keep="last").reset_index(drop=True)


def plot_training_curve(metrics_path: str | os.PathLike, window: int = 10) -> Any:
    """Figure 4a: GRPO reward per step (and its rolling mean), curriculum moves marked."""
    from matplotlib.figure import Figure

    frame = load_metrics(metrics_path)
    figure = Figure(figsize=(6.4, 4.0))
    axes = figure.add_subplot()
    if frame.empty or "reward" not in frame:
        raise ValueError(f"{metrics_path}: no per-step 'reward' rows to plot")
    axes.plot(frame["step"], frame["reward"], color="0.7", linewidth=1, label="reward (batch mean)")
    smooth = frame["reward"].rolling(window, min_periods=1).mean()
    axes.plot(frame["step"], smooth, color="C0", linewidth=2, label=f"rolling mean ({window} steps)")
    if "difficulty" in frame:
        changes = frame.index[frame["difficulty"] != frame["difficulty"].shift()].tolist()[1:]
        for index in changes:
            axes.axvline(frame.loc[index, "step"], color="C3", linestyle="--", linewidth=1)
            axes.annotate(
                str(frame.loc[index, "difficulty"]),
                (frame.loc[index, "step"], axes.get_ylim()[1]),
                fontsize=8,
                color="C3",
                va="top",
            )
    axes.set_xlabel("GRPO step")
    axes.set_ylabel("reward")
    axes.set_title("GRPO reward on procedural episodes")
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    return figure


def remove_run(config: TrainingConfig, seed: int) -> None:
    """Delete one seed's run directory (to retrain from scratch)."""
    shutil.rmtree(run_dir_for(config, seed), ignore_errors=True)
