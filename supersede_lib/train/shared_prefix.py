"""Run the prompt prefix that many training rows share once per optimiser step, not once per row.

Every turn row of a GRPO step starts with the same system prompt and worked examples: with the
`cpu_proof` agent that is ~516 of a rewrite prompt's ~607 tokens. TRL's loss runs each row through
the model from its first token, so the prefix is prefilled and back-propagated once per row. Here
the rows that share a prefix run it once, with gradient (LoRA adapts the prefix's keys and values
too), and each row runs only its own remainder against those keys and values. The log-probabilities
and the gradient are the same up to float rounding; the tokens through the model are a fraction.
Across the micro-batches of one gradient-accumulation window the prefix runs once too
(`WindowPrefix`: its keys and values collect every micro-batch's gradient, then back-propagate once).
Sampling the rollouts reuses the prefix the same way (`generate_with_shared_prefix`).

How the remainder lines up: TRL's batch is prompts left-padded, completions right-padded, so each
row's completion ends in the last `logits_to_keep` columns. A row's remainder (the rest of its
prompt, then its completion columns) is left-padded to the longest remainder of its group, which
keeps that alignment; the pad columns sit between the prefix and the remainder, masked out, and
explicit position ids continue the prefix's positions without a gap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache
from trl.trainer.utils import selective_log_softmax, selective_log_softmax_and_entropy

# Rows join a group when their prompts agree on at least this many first tokens: shorter shared
# heads (a chat template's first line) are not worth a separate forward pass.
MIN_SHARED_TOKENS = 64

# Per-token log-probabilities and entropies (None when not asked for) of some rows.
RowsLogps = tuple[torch.Tensor, torch.Tensor | None]


@dataclass(frozen=True)
class PrefixGroup:
    """Batch rows whose prompts begin with the same `prefix_ids`."""

    rows: list[int]
    prefix_ids: list[int]
    starts: list[int]  # each row's first attended column (its left padding ends there)


def _common_length(sequences: list[list[int]]) -> int:
    shortest = min(len(sequence) for sequence in sequences)
    for index in range(shortest):
        token = sequences[0][index]
        if any(sequence[index] != token for sequence in sequences[1:]):
            return index
    return shortest


def shared_prefix_groups(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    min_shared: int = MIN_SHARED_TOKENS,
) -> tuple[list[PrefixGroup], list[int]]:
    """Group rows by a common prompt prefix of at least `min_shared` tokens; the other rows go alone.

    A group's prefix stops one token before its shortest prompt ends, so every row keeps its last
    prompt token (whose logits predict the first completion token) in its remainder. A row whose
    prompt is not one left-padded run of tokens (an inert padding row) is never grouped.
    """
    prompt_columns = input_ids.size(1) - logits_to_keep
    prompts: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    alone: list[int] = []
    for row in range(input_ids.size(0)):
        mask = attention_mask[row, :prompt_columns]
        attended = torch.nonzero(mask).flatten()
        start = int(attended[0]) if attended.numel() else prompt_columns
        if prompt_columns - start <= min_shared or not bool(mask[start:].all()):
            alone.append(row)
            continue
        prompts[row] = input_ids[row, start:prompt_columns].tolist()
        starts[row] = start
    by_head: dict[tuple[int, ...], list[int]] = {}
    for row, prompt in prompts.items():
        by_head.setdefault(tuple(prompt[:min_shared]), []).append(row)
    groups = []
    for rows in by_head.values():
        if len(rows) < 2:
            alone.extend(rows)
            continue
        members = [prompts[row] for row in rows]
        shared = common_prefix_length(members)
        groups.append(PrefixGroup(rows, members[0][:shared], [starts[row] for row in rows]))
    return groups, sorted(alone)


def remainder_batch(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, group: PrefixGroup, rows: list[int], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The remainders of `rows` (members of `group`) after its prefix: ids, attention mask over prefix
    plus remainder, and position ids that continue the prefix's."""
    shared = len(group.prefix_ids)
    width = input_ids.size(1)
    offsets = [group.starts[group.rows.index(row)] + shared for row in rows]
    longest = width - min(offsets)
    ids = torch.full((len(rows), longest), pad_id, dtype=input_ids.dtype, device=input_ids.device)
    mask = torch.zeros((len(rows), longest), dtype=attention_mask.dtype, device=attention_mask.device)
    positions = torch.full((len(rows), longest), shared, dtype=torch.long, device=input_ids.device)
    for index, (row, offset) in enumerate(zip(rows, offsets, strict=True)):
        length = width - offset
        ids[index, longest - length :] = input_ids[row, offset:]
        mask[index, longest - length :] = attention_mask[row, offset:]
        positions[index, longest - length :] = torch.arange(shared, shared + length, device=input_ids.device)
    prefix_mask = torch.ones((len(rows), shared), dtype=mask.dtype, device=mask.device)
    return ids, torch.cat([prefix_mask, mask], dim=1), positions


def _prefill(model: Any, prefix: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each layer's keys and values of `prefix` (one row), with gradient when it is enabled."""
    cache = model(input_ids=prefix, use_cache=True, logits_to_keep=1).past_key_values
    if cache is None:  # gradient checkpointing in training mode turns use_cache off
        raise RuntimeError("no keys and values came back for the shared prefix (gradient checkpointing on?)")
    return [(layer.keys, layer.values) for layer in cache.layers]


def _repeated(layers: list[tuple[torch.Tensor, torch.Tensor]], rows: int, config: Any) -> DynamicCache:
    """A fresh cache holding each layer's keys and values once per row (the forward extends its copy)."""
    copy = DynamicCache(config=config)
    for layer_index, (keys, values) in enumerate(layers):
        copy.update(keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1), layer_index)
    return copy


@dataclass
class WindowPrefix:
    """A prefix's keys and values, computed once for a whole gradient-accumulation window.

    The weights do not change within a window, so every micro-batch may attend to the same keys and
    values. The rows attend to `leaves` (detached float32 copies), which collect the gradient of every
    micro-batch; `backward` then sends that sum once through the prefix's own graph (`computed`) to
    the weights. The result is the gradient of running the prefix in every row, at one prefix pass
    per window instead of one per micro-batch.
    """

    computed: list[tuple[torch.Tensor, torch.Tensor]]
    leaves: list[tuple[torch.Tensor, torch.Tensor]]

    @classmethod
    def run(cls, model: Any, prefix: torch.Tensor) -> WindowPrefix:
        computed = _prefill(model, prefix)
        leaves = [
            (keys.detach().float().requires_grad_(), values.detach().float().requires_grad_())
            for keys, values in computed
        ]
        return cls(computed, leaves)

    def attended(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The leaves in the computed dtype (the cast passes the rows' gradient back to the leaves)."""
        return [
            (leaf_keys.to(keys.dtype), leaf_values.to(values.dtype))
            for (keys, values), (leaf_keys, leaf_values) in zip(self.computed, self.leaves, strict=True)
        ]

    def backward(self) -> None:
        """Send the gradient the leaves collected through the prefix's graph (once per window)."""
        outputs, gradients = [], []
        for pair, leaf_pair in zip(self.computed, self.leaves, strict=True):
            for computed, leaf in zip(pair, leaf_pair, strict=True):
                if leaf.grad is not None and computed.requires_grad:
                    outputs.append(computed)
                    gradients.append(leaf.grad.to(computed.dtype))
        if outputs:
            torch.autograd.backward(outputs, gradients)


def logps_with_shared_prefix(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    plain: Callable[[torch.Tensor, torch.Tensor], RowsLogps],
    pad_id: int,
    window: dict[tuple[int, ...], WindowPrefix] | None = None,
    temperature: float = 1.0,
    compute_entropy: bool = False,
    entropy_requires_grad: bool = False,
    batch_size: int | None = None,
    min_shared: int = MIN_SHARED_TOKENS,
) -> RowsLogps:
    """Per-token log-probabilities (and entropies) of the completion columns, as TRL computes them.

    Rows that share a prompt prefix run it once per group; rows that share none are computed by
    `plain(input_ids_rows, attention_mask_rows)` (TRL's own path). `batch_size` caps the rows of
    one remainder forward, as TRL's does for whole rows. With `window` (the prefixes of the current
    accumulation window, by token ids) a prefix runs once per window, not once per call: the caller
    then owes each `WindowPrefix.backward()` after the window's last backward.
    """
    groups, alone = shared_prefix_groups(input_ids, attention_mask, logits_to_keep, min_shared)
    config = getattr(model, "module", model).config
    per_row: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
    if alone:
        index = torch.tensor(alone, device=input_ids.device)
        logps, entropies = plain(input_ids[index], attention_mask[index])
        for position, row in enumerate(alone):
            per_row[row] = (logps[position], None if entropies is None else entropies[position])
    for group in groups:
        prefix = torch.tensor([group.prefix_ids], dtype=input_ids.dtype, device=input_ids.device)
        if window is None:
            layers = _prefill(model, prefix)
        else:
            key = tuple(group.prefix_ids)
            if key not in window:
                window[key] = WindowPrefix.run(model, prefix)
            layers = window[key].attended()
        step = batch_size or len(group.rows)
        for first in range(0, len(group.rows), step):
            rows = group.rows[first : first + step]
            ids, mask, positions = remainder_batch(input_ids, attention_mask, group, rows, pad_id)
            outputs = model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                past_key_values=_repeated(layers, len(rows), config),
                use_cache=True,
                logits_to_keep=logits_to_keep + 1,
            )
            logits = outputs.logits[:, :-1, :][:, -logits_to_keep:, :]
            completion_ids = ids[:, -logits_to_keep:]
            completion_mask = mask[:, -logits_to_keep:]
            if compute_entropy:
                logps, entropies = selective_log_softmax_and_entropy(
                    logits,
                    completion_ids,
                    entropy_requires_grad=entropy_requires_grad,
                    temperature=temperature,
                    row_mask=completion_mask,
                )
            else:
                logps = selective_log_softmax(
                    logits, completion_ids, temperature=temperature, row_mask=completion_mask
                )
                entropies = None
            for position, row in enumerate(rows):
                per_row[row] = (logps[position], None if entropies is None else entropies[position])
    order = range(input_ids.size(0))
    logps = torch.stack([per_row[row][0] for row in order])
    entropies = torch.stack([per_row[row][1] for row in order]) if compute_entropy else None
    return logps, entropies


def common_prefix_length(prompts: list[list[int]]) -> int:
    """Tokens all `prompts` begin with, leaving each at least its last token to run."""
    return min(_common_length(prompts), min(len(prompt) for prompt in prompts) - 1)


def generate_with_shared_prefix(
    model: Any,
    prompts: list[list[int]],
    *,
    generation_config: Any,
    pad_id: int,
    shared: int,
    logits_processor: Any = None,
) -> torch.Tensor:
    """`model.generate` over `prompts` whose first `shared` tokens are equal, prefilling those once.

    The batch is laid out as the shared prefix, then each prompt's remainder left-padded: the pad
    columns sit in the middle, masked out, and `generate` numbers positions from the attention mask,
    so every row continues the prefix without a gap. Returns the generated columns only.
    `logits_processor` goes to `generate` (`sampling_logps.SampledTokenLogps` records with it).
    """
    device = model.device
    prefix = torch.tensor([prompts[0][:shared]], device=device)
    layers = _prefill(model, prefix)
    remainders = [prompt[shared:] for prompt in prompts]
    width = max(map(len, remainders))
    ids = torch.full((len(prompts), shared + width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    ids[:, :shared] = prefix
    mask[:, :shared] = 1
    for row, remainder in enumerate(remainders):
        ids[row, shared + width - len(remainder) :] = torch.tensor(remainder, device=device)
        mask[row, shared + width - len(remainder) :] = 1
    config = getattr(model, "module", model).config
    output = model.generate(
        input_ids=ids,
        attention_mask=mask,
        past_key_values=_repeated(layers, len(prompts), config),
        generation_config=generation_config,
        logits_processor=logits_processor,
    )
    return output[:, ids.size(1) :]
