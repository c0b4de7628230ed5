"""The trainer's callbacks: stop after a run of zero-advantage batches, and log metrics to a JSONL file."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback


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
