"""What the sampling engine said about the tokens it drew, and how far the training engine disagrees.

GRPO's loss assumes the completions were sampled by the policy it differentiates. The engine that
samples the rollouts need not compute what the training forward computes: today it is the policy
itself, but through `generate` (a KV cache, one token at a time, possibly under another autocast);
a later engine may be another program altogether (llama.cpp with the LoRA as GGUF). So the gap is
measured, not assumed:

* `SampledTokenLogps` records, while `generate` runs, the log-probability of every drawn token under
  the logits it was drawn from, divided by the temperature (TRL's training log-prob definition:
  `_get_per_token_logps_and_entropies` divides the logits by the temperature, and top-k / top-p are
  not part of it). It reads the scores after `generate`'s own penalties (none with TRL's defaults)
  and before temperature and top-k / top-p, as vLLM's `processed_logprobs`, which TRL asks for.
* `logp_gap_totals` sums |training - sampling| over the completion tokens (the metrics
  `sampling/sampling_logp_difference/mean` and `/max`, TRL's names for its vLLM gap).
* `importance_sampling_ratio` is TRL's vLLM correction (`vllm_importance_sampling_mode`): the ratio
  pi_train / pi_sampler per token or per sequence, truncated at or masked beyond a cap.
"""

from __future__ import annotations

import math

import torch
from transformers import LogitsProcessor, LogitsProcessorList
from trl.trainer.utils import pad

from supersede_lib.train.config import DEFAULT_IS_CLIP_MAX, IS_CORRECTION_MODES


class SampledTokenLogps(LogitsProcessor):
    """Records each sampled token's log-probability as `generate` runs; returns the scores unchanged.

    `generate` calls a logits processor once per step with the ids so far, and the step's token is
    drawn after the call: so step t's log-softmax is kept until step t+1 shows the drawn token (the
    last column of its ids), and `finish` reads the final step's token from the generated columns.
    Only one step's distribution is held at a time (the full logits of a long reply would not fit).
    """

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature
        self._pending: torch.Tensor | None = None
        self._steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self._take(input_ids[:, -1])
        self._pending = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def _take(self, drawn: torch.Tensor) -> None:
        if self._pending is not None:
            self._steps.append(self._pending.gather(1, drawn.unsqueeze(1).to(self._pending.device))[:, 0])
            self._pending = None

    def finish(self, generated: torch.Tensor) -> torch.Tensor:
        """The (rows, generated columns) log-probabilities of `generated`, `generate`'s new columns."""
        self._take(generated[:, -1])
        if len(self._steps) != generated.size(1):
            raise RuntimeError(
                f"recorded {len(self._steps)} sampling steps for {generated.size(1)} generated columns"
            )
        return torch.stack(self._steps, dim=1)

    def as_list(self) -> LogitsProcessorList:
        """`generate`'s `logits_processor` argument."""
        return LogitsProcessorList([self])


def generate_left_padded(
    model: torch.nn.Module,
    prompts: list[list[int]],
    *,
    generation_config: object,
    pad_id: int,
    recorder: SampledTokenLogps,
) -> torch.Tensor:
    """TRL's plain `generate` over left-padded prompts (`_generate_single_turn`), with `recorder` on.

    Returns the generated columns only, as TRL cuts them.
    """
    rows = [torch.tensor(ids) for ids in prompts]
    input_ids = pad(rows, padding_value=pad_id, padding_side="left").to(model.device)
    attention_mask = pad([torch.ones_like(ids) for ids in rows], padding_value=0, padding_side="left")
    output = model.generate(
        input_ids=input_ids,
        attention_mask=attention_mask.to(model.device),
        generation_config=generation_config,
        logits_processor=recorder.as_list(),
    )
    return output[:, input_ids.size(1) :]


def logp_gap_totals(
    training_logps: torch.Tensor, sampling_logps: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """[sum, count, max] of |training - sampling| over the masked tokens whose sampling log-prob is known.

    Sums rather than a mean, so the gap over several processes is the mean over all their tokens.
    Tokens the sampler could not score (NaN) are left out rather than counted as zero.
    """
    gap = (training_logps - sampling_logps).abs()
    counted = mask.bool() & ~torch.isnan(gap)
    values = gap[counted]
    largest = values.max() if values.numel() else torch.zeros((), device=gap.device)
    return torch.stack([values.sum(), counted.sum().to(values.dtype), largest.to(values.dtype)])


def importance_sampling_ratio(
    training_logps: torch.Tensor,
    sampling_logps: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    clip_max: float | None = DEFAULT_IS_CLIP_MAX,
    clip_min: float | None = None,
) -> torch.Tensor:
    """TRL's vLLM importance-sampling weight pi_train / pi_sampler: (B, T) for `token_*` modes, (B, 1)
    for `sequence_*` ones; `*_truncate` clamps it to [clip_min, clip_max], `*_mask` zeroes it outside.

    Masked-out tokens and tokens without a sampling log-prob (NaN) count as no gap (weight 1).
    """
    if mode not in IS_CORRECTION_MODES[1:]:
        raise ValueError(f"importance sampling mode must be one of {IS_CORRECTION_MODES[1:]}, got {mode!r}")
    difference = torch.nan_to_num((training_logps - sampling_logps) * mask, nan=0.0)
    if mode.startswith("sequence"):
        difference = difference.sum(dim=-1, keepdim=True)
    ratio = torch.exp(difference)
    if mode.endswith("truncate"):
        return torch.clamp(ratio, min=clip_min, max=clip_max)
    low = -math.inf if clip_min is None else clip_min
    high = math.inf if clip_max is None else clip_max
    return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)


def ratio_statistics(ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[min, sum, count, max] of the weights that act: per masked token, or per row with a masked token."""
    acting = mask.bool() if ratio.size(-1) == mask.size(-1) else mask.bool().any(dim=-1, keepdim=True)
    values = ratio[acting]
    if not values.numel():
        return torch.tensor([math.inf, 0.0, 0.0, -math.inf], device=ratio.device)
    return torch.stack([values.min(), values.sum(), values.new_tensor(float(values.numel())), values.max()])
