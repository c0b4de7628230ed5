"""The shared prompt prefix in GRPO training against TRL's per-row loss (part of `make bench`).

One real `cpu_proof` training step (the 0.5B, its line-edit agent, 8 rollouts) supplies the turn
rows; every row gets a non-zero advantage so all of them carry gradient. Then one accumulation
window of those rows (8 micro-batches, as the preset trains) runs three ways: TRL's path, TRL's path
with the prompts padded to a multiple of 64 (the same rows in other tensor shapes: how far bf16
rounding alone moves the gradient), and the shared-prefix path (`train.shared_prefix`). Reported:
seconds per window each, the speed-up, and each gradient's distance from TRL's.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

from supersede_lib.bench.engines import machine_summary


def window_gradient(trainer: Any, samples: list, micro_batches: int, share: bool, pad_to: int | None = None):  # noqa: ANN201
    """Per-micro-batch losses, the weights' gradient (one flat float32 tensor) and the seconds of one
    accumulation window over `samples`, as the Trainer runs it: the loss normaliser spans the window,
    and the shared prefixes' gradient is sent at its end."""
    import torch

    trainer.share_prompt_prefix = share
    trainer.pad_to_multiple_of = pad_to
    trainer.model.train()
    trainer.model.zero_grad()
    tokens = trainer._loss_token_count(samples)
    size = -(-len(samples) // micro_batches)
    losses = []
    started = time.perf_counter()
    for first in range(0, len(samples), size):
        batch = trainer._samples_to_tensors(samples[first : first + size], 0, loss_tokens=tokens)
        with trainer.compute_loss_context_manager():
            loss = trainer._compute_loss(trainer.model, batch)
        loss.backward()
        losses.append(loss.item())
    trainer._flush_window_prefixes()
    seconds = time.perf_counter() - started
    gradient = torch.cat(
        [
            p.grad.flatten().float()
            for p in trainer.model.parameters()
            if p.requires_grad and p.grad is not None
        ]
    )
    return losses, gradient, seconds


def with_advantages(samples: list) -> list:
    """The samples with advantages -0.8, 0.2, 1.2 in turn: every row carries gradient, none cancels."""
    return [dataclasses.replace(sample, advantage=(index % 3) - 0.8) for index, sample in enumerate(samples)]


def train_prefix_bench(
    model_path: str | Path | None = None, seed: int = 5, micro_batches: int = 8, threads: int | None = None
) -> dict[str, Any]:
    """Time one accumulation window three ways on the rows of one `cpu_proof` step of `model_path`
    (default: the preset's GGUF file)."""
    from supersede_lib.train.config import TrainingConfig
    from supersede_lib.train.run import build_trainer
    from supersede_lib.train.samples import expand_to_turn_samples

    model = Path(model_path or TrainingConfig.preset("cpu_proof").model_name_or_path)
    if not model.exists():
        return {"skipped": f"{model.name} not found (the cpu_proof preset's model)"}
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as folder:
        config = TrainingConfig.preset(
            "cpu_proof",
            model_name_or_path=str(model),
            output_dir=folder,
            max_steps=1,
            save_steps=100,
            log_rollouts=False,
            disable_tqdm=True,
        )
        trainer = build_trainer(config, seed=seed)
        trainer.train()
        samples = with_advantages(expand_to_turn_samples(trainer.last_trajectories))
        runs = {
            "trl": window_gradient(trainer, samples, micro_batches, share=False),
            "trl_padded_64": window_gradient(trainer, samples, micro_batches, share=False, pad_to=64),
            "shared": window_gradient(trainer, samples, micro_batches, share=True),
        }
    reference = runs["trl"][1]

    def distance(gradient: Any) -> float:
        return float((gradient - reference).norm() / reference.norm())

    return {
        "model": model.name,
        "rows": len(samples),
        "micro_batches": micro_batches,
        "prompt_tokens": sum(len(sample.prompt_ids) for sample in samples),
        "completion_tokens": sum(len(sample.completion_ids) for sample in samples),
        "seconds": {name: round(run[2], 2) for name, run in runs.items()},
        "speedup": round(runs["trl"][2] / runs["shared"][2], 2),
        "gradient_distance_from_trl": {
            "trl_padded_64": round(distance(runs["trl_padded_64"][1]), 4),
            "shared": round(distance(runs["shared"][1]), 4),
        },
        "loss_sum": {name: round(sum(run[0]), 6) for name, run in runs.items()},
        "machine": machine_summary(threads),
    }


def train_prefix_table(result: dict[str, Any]) -> str:
    """The bench as a Markdown table (or the reason it was skipped)."""
    if "skipped" in result:
        return f"Skipped: {result['skipped']}"
    machine = result["machine"]
    lines = [
        f"One accumulation window of a real `cpu_proof` step ({result['model']}, {result['rows']} turn rows, "
        f"{result['micro_batches']} micro-batches, {result['prompt_tokens']} prompt and "
        f"{result['completion_tokens']} completion tokens; {machine['cpu']}, threads {machine['threads']}, "
        f"load {machine['load_average']}):",
        "",
        "| loss path | seconds per window | gradient distance from TRL's (relative L2) |",
        "| --- | --- | --- |",
        f"| TRL (every row from its first token) | {result['seconds']['trl']} | 0 |",
        f"| TRL, prompts padded to a multiple of 64 (bf16's own noise) | {result['seconds']['trl_padded_64']} | "
        f"{result['gradient_distance_from_trl']['trl_padded_64']} |",
        f"| shared prefix, once per window | {result['seconds']['shared']} | "
        f"{result['gradient_distance_from_trl']['shared']} |",
        "",
        f"Speed-up of the loss: {result['speedup']}x.",
    ]
    return "\n".join(lines)
