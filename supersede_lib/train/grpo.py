"""The GRPO trainer of the bounded-memory policy (paper Section 5.3), on the shared rollout core.

Holds `SupersedeGRPOTrainer`. What it trains on is in `samples.py`, the reward and the advantages
in `rewards.py`, its callbacks in `callbacks.py`; loading the policy and running, resuming and
recording a run are in `run.py`.

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
The reward is computed once per trajectory by the environment's rubric
(`matcher.score_episode_answer`, as in evaluation),
normalised within the group of G trajectories of the same episode (GRPO), and that one advantage
is stamped on every turn of the trajectory. TRL's unchanged loss (token-level "dapo" by default)
then optimises exactly the log-probabilities of what the policy saw and said at each turn. The
sample count varies with the number of sessions, so the batch is topped up to a multiple of
`gradient_accumulation_steps` with inert rows (loss mask all zero) instead of letting TRL's
equal-chunk split drop samples. Rows of zero-advantage groups are left out of the forward pass
when that provably leaves the gradient unchanged (beta 0, token-sum loss; their tokens still
count in the normaliser).

Data parallel (`accelerate launch`): TRL's sampler gives each process its own episodes, each group
whole on one process. Rewards are gathered, so the advantages (batch-wide scaling too), the
curriculum and zero-advantage-stop decisions, the logged metrics and the rollouts file are those of
the whole batch and the same on every process; each process's rows are topped up to the same count
because TRL's loss gathers per-row values. In one process the gathers return their input unchanged.

Reading of the paper's "batch 32, group 8": 32 trajectories per optimiser step = 4 episodes x 8
sampled rollouts each; every trajectory contributes all its turns to that one step.

On CUDA the model is loaded and LoRA-patched by Unsloth (4-bit); on CPU by transformers + PEFT.
Either way the training loop is TRL's `GRPOTrainer` (not Unsloth's re-generated trainer, whose
patched generation/loss internals would bypass the per-turn expansion above), which is why this
module imports TRL at the top and `run.py` imports this module before Unsloth.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer
from trl.models import unwrap_model_for_generation
from trl.models import utils as trl_model_utils
from trl.trainer.utils import nanstd, pad, use_adapter

from supersede_lib.agent.episode import Episode
from supersede_lib.agent.rollout import BoundedMemoryRollout, make_rollout
from supersede_lib.agent.settings import DEFAULT_ROLLOUT, RolloutSettings
from supersede_lib.train.callbacks import ZeroAdvantageStop
from supersede_lib.train.config import DEFAULT_IS_CLIP_MAX, IS_CORRECTION_MODES, ROLLOUTS_FILE, STATE_FILE
from supersede_lib.train.curriculum import Curriculum, EpisodeSource, difficulty_level
from supersede_lib.train.llamacpp_rollouts import LlamaCppRolloutSampler
from supersede_lib.train.rewards import TrajectoryScorer, group_advantages, rollout_record, score_trajectory
from supersede_lib.train.samples import TrajectoryRecord, TurnSample, TurnTokens, expand_to_turn_samples
from supersede_lib.train.sampling_logps import (
    SampledTokenLogps,
    generate_left_padded,
    importance_sampling_ratio,
    logp_gap_totals,
    ratio_statistics,
)
from supersede_lib.train.shared_prefix import (
    MIN_SHARED_TOKENS,
    WindowPrefix,
    common_prefix_length,
    generate_with_shared_prefix,
    logps_with_shared_prefix,
)


def keep_trainable_parameters_fp32(model: torch.nn.Module) -> int:
    """Cast every trainable half-precision parameter back to fp32; returns how many were cast.

    TRL casts the trainable (LoRA) parameters of a 4/8-bit model to bf16 (`GRPOTrainer.__init__`,
    `_is_quantized_model`). At lr 1e-5 most bf16 updates round away, the optimizer state would be
    bf16 too, and fp16 loss scaling refuses half-precision gradients; Unsloth's own trainers drop
    that cast for the same reasons. Frozen (base) weights keep their dtype.
    """
    cast = 0
    for parameter in model.parameters():
        if parameter.requires_grad and parameter.dtype in (torch.bfloat16, torch.float16):
            parameter.data = parameter.data.float()
            cast += 1
    return cast


@contextmanager
def _loads_onto_indexless_cpu(device: torch.device) -> Iterator[None]:
    """Let `torch.load` map onto `device` when it is an indexed CPU device (`cpu:0`).

    Data-parallel CPU processes (gloo) get `torch.device("cpu", 0)` from accelerate, and the Trainer
    resumes their optimizer state with it as `map_location`, which torch cannot restore to; "cpu"
    is the same place. Any other device (a GPU, the one-process CPU) loads unchanged.
    """
    if device.type != "cpu" or device.index is None:
        yield
        return
    load = torch.load

    def load_on_cpu(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("map_location") == device:
            kwargs["map_location"] = "cpu"
        return load(*args, **kwargs)

    torch.load = load_on_cpu
    try:
        yield
    finally:
        torch.load = load


# --------------------------------------------------------------------------- the trainer


class SupersedeGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer whose rollouts are `BoundedMemoryRollout`s expanded into per-turn samples."""

    def __init__(
        self,
        *args: Any,
        episode_source: EpisodeSource,
        scorer: TrajectoryScorer,
        curriculum: Curriculum,
        zero_advantage_stop: ZeroAdvantageStop,
        rollout_settings: RolloutSettings = DEFAULT_ROLLOUT,
        kl_log_every: int = 1,
        sampling_gap_every: int = 0,
        rollout_is_correction: str = "none",
        rollout_is_clip_max: float = DEFAULT_IS_CLIP_MAX,
        skip_zero_advantage_rows: bool = True,
        log_rollouts: bool = True,
        share_prompt_prefix: bool = False,
        rollout_sampler: LlamaCppRolloutSampler | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if share_prompt_prefix and self.args.gradient_checkpointing:
            raise ValueError(
                "share_prompt_prefix needs the prefix's keys and values, and gradient checkpointing "
                "drops every cache in training mode: turn one of them off"
            )
        if rollout_is_correction not in IS_CORRECTION_MODES:
            raise ValueError(
                f"rollout_is_correction must be one of {IS_CORRECTION_MODES}, got {rollout_is_correction!r}"
            )
        if rollout_is_correction != "none" and self.use_liger_kernel:
            raise ValueError(
                "rollout_is_correction needs TRL's own loss (_compute_loss), not the Liger kernel's"
            )
        keep_trainable_parameters_fp32(self.model)  # before train() builds the optimizer over them
        self.episode_source = episode_source
        self.scorer = scorer
        self.curriculum = curriculum
        self.zero_advantage_stop = zero_advantage_stop
        self.rollout_settings = rollout_settings  # the budget and prompt every rollout is built with
        self.kl_log_every = kl_log_every
        self.sampling_gap_every = sampling_gap_every  # log the sampler's log-prob gap every N steps
        self.rollout_is_correction = rollout_is_correction  # TRL's vLLM IS modes, or "none"
        self.rollout_is_clip_max = rollout_is_clip_max
        self.skip_zero_advantage_rows = skip_zero_advantage_rows
        self.log_rollouts = log_rollouts
        self.share_prompt_prefix = share_prompt_prefix
        self.rollout_sampler = rollout_sampler  # None: the policy samples its own rollouts
        self._sampled_turn = (-1, 0)  # (step, turns llama.cpp sampled in it): the next turn's seed
        # the shared prefixes of the current accumulation window, their gradient owed at its end
        self._window_prefixes: dict[tuple[int, ...], WindowPrefix] = {}
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
            with self._rollout_autocast():
                completion_ids, sampling_logps = self._generate_turn(prompt_ids)
            replies = self.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
            for position, (index, prompt, completion, reply) in enumerate(
                zip(active, prompt_ids, completion_ids, replies, strict=True)
            ):
                logps = None if sampling_logps is None else list(sampling_logps[position])
                turns[index].append(TurnTokens(list(prompt), list(completion), logps))
                rollouts[index].step(reply)

    @property
    def records_sampling_logps(self) -> bool:
        """Whether rollouts keep the sampler's log-probs: the gap is logged or corrected for (always when
        another engine samples)."""
        return (
            self.sampling_gap_every > 0
            or self.rollout_is_correction != "none"
            or self.rollout_sampler is not None
        )

    def _sample_with_engine(self, prompt_ids: list[list[int]]) -> tuple[list[list[int]], list[list[float]]]:
        """A turn sampled by `rollout_sampler` with the current LoRA (reloaded after each optimiser
        step); each reply seeded from the run's seed, the step and the turn, so a rerun draws the same."""
        step = self.state.global_step
        turn = self._sampled_turn[1] if self._sampled_turn[0] == step else 0
        self._sampled_turn = (step, turn + 1)
        self.rollout_sampler.sync(self.accelerator.unwrap_model(self.model), step, len(prompt_ids))
        tokens, logps = self.rollout_sampler.sample(
            prompt_ids,
            max_new_tokens=self.max_completion_length,
            temperature=self.temperature,
            seed=(self.args.seed * 100_003 + step * 1_009 + turn * 101) % 2**31,
        )
        completions = [self._until_eos(row) for row in tokens]
        return completions, [row[: len(ids)] for row, ids in zip(logps, completions, strict=True)]

    def _generate_turn(self, prompt_ids: list[list[int]]) -> tuple[list[list[int]], list[list[float]] | None]:
        """One reply per prompt, and the sampler's log-prob of each reply token (None: not recorded).

        TRL's sampling, with a shared prompt prefix prefilled once when allowed, and the log-probs
        recorded by `SampledTokenLogps` when `records_sampling_logps`. Sharing needs TRL's plain
        `generate` path in one process and prompts that share `MIN_SHARED_TOKENS` tokens. Where
        neither sharing nor recording applies, or generation is not TRL's plain `generate` (vLLM,
        continuous batching), TRL's own path samples, with its own log-probs (vLLM's) or None.
        """
        if self.rollout_sampler is not None:
            return self._sample_with_engine(prompt_ids)
        own_generate = not self.use_vllm and not self.use_transformers_continuous_batching
        shared = common_prefix_length(prompt_ids)
        share = (
            own_generate
            and self.share_prompt_prefix
            and self.accelerator.num_processes == 1
            and shared >= MIN_SHARED_TOKENS
        )
        record = own_generate and self.records_sampling_logps
        if not share and not record:
            return self._generate_single_turn(prompt_ids, None, {}, num_generations=1)
        recorder = SampledTokenLogps(self.temperature) if record else None
        with (
            unwrap_model_for_generation(
                self.model_wrapped,
                self.accelerator,
                gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                generation_kwargs=self.generation_kwargs,
            ) as model,
            torch.no_grad(),
            self._dist.summon_full_params(self.model_wrapped, recurse=False),
        ):
            pad_id = self._tokenizer.pad_token_id
            if share:
                generated = generate_with_shared_prefix(
                    model,
                    prompt_ids,
                    generation_config=self.generation_config,
                    pad_id=pad_id,
                    shared=shared,
                    logits_processor=None if recorder is None else recorder.as_list(),
                )
            else:
                generated = generate_left_padded(
                    model,
                    prompt_ids,
                    generation_config=self.generation_config,
                    pad_id=pad_id,
                    recorder=recorder,
                )
        completions = [self._until_eos(row) for row in generated.cpu().tolist()]
        if recorder is None:
            return completions, None
        logps = recorder.finish(generated).cpu().tolist()
        return completions, [row[: len(ids)] for row, ids in zip(logps, completions, strict=True)]

    def _until_eos(self, tokens: list[int]) -> list[int]:
        """A generated row up to and including its first EOS token (TRL's completion ids)."""
        eos_ids = set(self.eos_token_ids)
        for index, token in enumerate(tokens):
            if token in eos_ids:
                return tokens[: index + 1]
        return tokens

    def _rollout_autocast(self) -> AbstractContextManager:
        """bf16 autocast for sampling on a CPU whose base weights are bf16 (as the loss runs), else nothing.

        TRL samples outside autocast; with fp32 LoRA weights on a bf16 base every adapted layer would
        then cast its activations to fp32. GPUs keep TRL's behaviour (Unsloth has its own kernels).
        """
        if self.accelerator.device.type == "cpu" and self.args.bf16:
            return self.accelerator.autocast()
        return nullcontext()

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
        rollouts = [
            make_rollout(episodes[slot], "bounded_memory", settings=self.rollout_settings) for slot in slots
        ]
        started = time.perf_counter()
        turn_tokens = self._run_rollouts(rollouts)
        self._metrics[mode]["timing/rollouts_s"].append(time.perf_counter() - started)
        trajectories = [
            TrajectoryRecord(slot, episodes[slot], rollout, turns)
            for slot, rollout, turns in zip(slots, rollouts, turn_tokens, strict=True)
        ]
        for trajectory in trajectories:
            score_trajectory(self.scorer, trajectory)
        # Group statistics and decisions over every process's trajectories (in process order), as TRL does.
        rewards = gather_object([trajectory.reward for trajectory in trajectories])
        advantages, zero_spread_groups = group_advantages(rewards, group_size, self.scale_rewards)
        first = self.accelerator.process_index * len(trajectories)  # every process has as many trajectories
        local_advantages = advantages[first : first + len(trajectories)]
        for trajectory, advantage in zip(trajectories, local_advantages, strict=True):
            trajectory.advantage = advantage
        self.last_trajectories = trajectories

        samples = expand_to_turn_samples(trajectories)
        trained = (
            [sample for sample in samples if sample.advantage != 0.0]
            if self._can_skip_zero_advantage
            else samples
        )
        rows = max(gather_object([len(trained)]))  # TRL gathers per-row values: as many rows on every process
        if mode == "train":  # at least one row per accumulation chunk, and no remainder for TRL to drop
            rows = max(self.args.steps_per_generation, rows + -rows % self.args.steps_per_generation)
        inert_rows = rows - len(trained)
        batch = self._samples_to_tensors(trained, inert_rows, loss_tokens=self._loss_token_count(samples))

        if mode == "train":
            group_rewards = [
                rewards[start : start + group_size] for start in range(0, len(rewards), group_size)
            ]
            self.zero_advantage_stop.record_batch(all(zero_spread_groups))
            self.curriculum.observe(group_rewards, step=step + 1)
        self._record_metrics(mode, trajectories, samples, rewards, zero_spread_groups, difficulty)
        started = time.perf_counter()
        self._add_logps(batch, mode)
        self._metrics[mode]["timing/logps_s"].append(time.perf_counter() - started)
        if self.log_rollouts and mode == "train":
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
        batch = {
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
        sampling_logps = self._padded_sampling_logps(samples, inert_rows)
        if sampling_logps is not None:
            batch["sampling_per_token_logps"] = sampling_logps
        return batch

    def _padded_sampling_logps(self, samples: list[TurnSample], inert_rows: int) -> torch.Tensor | None:
        """The sampler's log-probs laid out as the completions (TRL's `sampling_per_token_logps`): NaN
        for a token without one, 0 in padding; None unless `records_sampling_logps` (decided by the
        settings, not the rows, so every process measures, and gathers, on the same steps)."""
        if not self.records_sampling_logps:
            return None
        rows = [
            torch.tensor(
                sample.sampling_logps
                if sample.sampling_logps is not None
                else [math.nan] * len(sample.completion_ids),
                dtype=torch.float32,
            )
            for sample in samples
        ]
        rows += [torch.zeros(1)] * inert_rows
        return pad(rows, padding_value=0.0, padding_side="right", pad_to_multiple_of=self.pad_to_multiple_of)

    def _get_per_token_logps_and_entropies(  # noqa: ANN001 - TRL's signature
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **kwargs,
    ):
        """TRL's log-probabilities, with the rows' shared prompt prefix run once (`shared_prefix`).

        Only where that is plainly the same computation: one process (a DDP-wrapped model must see one
        forward per backward), no Liger kernel, no MoE aux loss, no images, a model that takes
        `logits_to_keep`. Anything else, or `share_prompt_prefix=False`, is TRL's own path.
        """
        plain_path = (
            not self.share_prompt_prefix
            or compute_aux_loss
            or self.use_liger_kernel
            or self.accelerator.num_processes > 1
            or "logits_to_keep" not in self.model_kwarg_keys
            or any(value is not None for value in kwargs.values())
        )
        if plain_path:
            return super()._get_per_token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
                compute_aux_loss=compute_aux_loss,
                **kwargs,
            )

        def plain(
            rows_ids: torch.Tensor, rows_mask: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor | None]:
            logps, entropies, _ = super(SupersedeGRPOTrainer, self)._get_per_token_logps_and_entropies(
                model,
                rows_ids,
                rows_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
            )
            return logps, entropies

        logps, entropies = logps_with_shared_prefix(
            model,
            input_ids,
            attention_mask,
            logits_to_keep,
            plain=plain,
            pad_id=self._tokenizer.pad_token_id,
            temperature=self.temperature,
            compute_entropy=compute_entropy,
            entropy_requires_grad=self._entropy_bonus_enabled,
            batch_size=batch_size,
            window=self._window_prefixes if torch.is_grad_enabled() else None,
        )
        return logps, entropies, None

    def training_step(self, model, inputs, num_items_in_batch=None):  # noqa: ANN001, ANN201 - Trainer's
        """TRL's step; at the end of an accumulation window the shared prefixes' gradient goes to the weights
        (before the Trainer clips and steps)."""
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self._step % self.current_gradient_accumulation_steps == 0:
            self._flush_window_prefixes()
        return loss

    def _flush_window_prefixes(self) -> None:
        prefixes, self._window_prefixes = self._window_prefixes, {}
        for prefix in prefixes.values():
            prefix.backward()

    def _add_logps(self, batch: dict[str, Any], mode: str) -> None:
        """Old/reference log-probs where TRL's loss needs them, KL to the base model for logging, and the
        sampler's log-prob gap (logged, and corrected for when `rollout_is_correction` is set)."""
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
        measure_gap = "sampling_per_token_logps" in batch and (
            self.rollout_is_correction != "none"
            or self.rollout_sampler is not None
            or (self.sampling_gap_every > 0 and (step == 1 or step % self.sampling_gap_every == 0))
        )

        def logps(adapter_off: bool) -> torch.Tensor:
            model = self.accelerator.unwrap_model(self.model)
            with (
                torch.no_grad(),
                # looked up per call: Unsloth replaces TRL's toggle with a no-op that keeps its own checkpointing
                trl_model_utils.disable_gradient_checkpointing(
                    self.model, self.args.gradient_checkpointing_kwargs
                ),
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

        policy = logps(adapter_off=False) if (need_old or measure_kl or measure_gap) else None
        reference = logps(adapter_off=True) if (need_ref or measure_kl) else None
        if need_old:
            batch["old_per_token_logps"] = policy
        if need_ref:
            batch["ref_per_token_logps"] = reference
        mask = batch["completion_mask"].to(device).float()
        if measure_gap and policy is not None:
            self._record_sampling_gap(batch, policy, mask, mode)
        if measure_kl and policy is not None and reference is not None:
            delta = reference - policy
            per_token_kl = torch.exp(delta) - delta - 1
            totals = torch.stack([(per_token_kl * mask).sum(), mask.sum()])
            kl_sum, tokens = self.accelerator.gather(totals).view(-1, 2).sum(dim=0)
            if tokens > 0:  # the token mean over every process's batch
                self._metrics[mode]["kl"].append((kl_sum / tokens).item())

    def _record_sampling_gap(
        self, batch: dict[str, Any], training_logps: torch.Tensor, mask: torch.Tensor, mode: str
    ) -> None:
        """Log |training - sampling| log-prob over every process's completion tokens (TRL's metric names
        for vLLM), and with a correction set, put TRL's weight in the batch for `_compute_loss`."""
        metrics = self._metrics[mode]
        sampling = batch["sampling_per_token_logps"].to(training_logps.device)
        gap = self.accelerator.gather(logp_gap_totals(training_logps, sampling, mask)).view(-1, 3)
        if gap[:, 1].sum() > 0:
            metrics["sampling/sampling_logp_difference/mean"].append(
                (gap[:, 0].sum() / gap[:, 1].sum()).item()
            )
            metrics["sampling/sampling_logp_difference/max"].append(gap[:, 2].max().item())
        if self.rollout_is_correction == "none":
            return
        ratio = importance_sampling_ratio(
            training_logps, sampling, mask, self.rollout_is_correction, clip_max=self.rollout_is_clip_max
        )
        batch["importance_sampling_ratio"] = ratio
        statistics = self.accelerator.gather(ratio_statistics(ratio, mask)).view(-1, 4)
        if statistics[:, 2].sum() > 0:
            metrics["sampling/importance_sampling_ratio/min"].append(statistics[:, 0].min().item())
            metrics["sampling/importance_sampling_ratio/mean"].append(
                (statistics[:, 1].sum() / statistics[:, 2].sum()).item()
            )
            metrics["sampling/importance_sampling_ratio/max"].append(statistics[:, 3].max().item())

    def _compute_loss(self, model, inputs):  # noqa: ANN001, ANN201 - TRL's signature
        """TRL's loss, with the importance-sampling weight of `rollout_is_correction` on every token.

        TRL multiplies its per-token policy loss by that weight only under vLLM (`use_vllm`). Every
        loss type but vespo is positively homogeneous in the advantage (-min(c1 r A, c2 r A) =
        -r min(c1 A, c2 A) for a weight r >= 0; cispo's and sapo's terms scale with it too), so the
        weight goes into a per-token advantage (TRL's loss takes (B, T) advantages) and multiplies
        exactly the policy term, as TRL's does; the KL and entropy terms stay unweighted, as in TRL.
        vespo reads the weight from the same key itself.
        """
        ratio = inputs.get("importance_sampling_ratio")
        if (
            ratio is None
            or self.loss_type == "vespo"
            or (self.use_vllm and self.vllm_importance_sampling_correction)
        ):
            return super()._compute_loss(model, inputs)
        advantages = inputs["advantages"]
        if advantages.dim() == 1:
            advantages = advantages.unsqueeze(1)
        return super()._compute_loss(model, {**inputs, "advantages": advantages * ratio})

    def _record_metrics(
        self,
        mode: str,
        trajectories: list[TrajectoryRecord],
        samples: list[TurnSample],
        all_rewards: list[float],
        zero_spread_groups: list[bool],
        difficulty: str,
    ) -> None:
        """Log the statistics of every process's batch (gathered, as TRL does), so all processes log the same."""
        metrics = self._metrics[mode]
        rewards = torch.tensor(all_rewards)
        lengths = torch.tensor(
            gather_object([len(sample.completion_ids) for sample in samples]), dtype=torch.float32
        )
        eos_ids = set(self.eos_token_ids) | {self._tokenizer.pad_token_id}
        clipped = gather_object(
            [bool(sample.completion_ids) and sample.completion_ids[-1] not in eos_ids for sample in samples]
        )
        notes_truncated = gather_object(
            [
                turn.truncated_chars > 0
                for trajectory in trajectories
                for turn in trajectory.rollout.turns
                if turn.kind == "notes"
            ]
        )
        successes = [reward >= self.curriculum.success_reward - 1e-9 for reward in rewards.tolist()]
        tokens = sum(
            gather_object([sum(len(sample.prompt_ids) + len(sample.completion_ids) for sample in samples)])
        )
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
        metrics["turns_per_trajectory"].append(len(lengths) / max(1, len(rewards)))
        metrics["notes_truncation_rate"].append(sum(notes_truncated) / max(1, len(notes_truncated)))
        metrics["curriculum/level"].append(float(difficulty_level(difficulty)))

    def _write_rollouts(self, step: int, difficulty: str, trajectories: list[TrajectoryRecord]) -> None:
        """Append every process's rollouts to the run's rollouts file (written by the main process)."""
        records = gather_object([rollout_record(step, difficulty, trajectory) for trajectory in trajectories])
        if not self.accelerator.is_main_process:
            return
        path = Path(self.args.output_dir) / ROLLOUTS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as handle:
            for record in records:
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
        with _loads_onto_indexless_cpu(self.args.device):
            super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None and (Path(checkpoint) / STATE_FILE).exists():
            state = json.loads((Path(checkpoint) / STATE_FILE).read_text())
            self.curriculum.load_state_dict(state["curriculum"])
            self.zero_advantage_stop.streak = int(state.get("zero_advantage_streak", 0))
