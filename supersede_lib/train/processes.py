"""The processes of one data-parallel launch (`accelerate launch`, `torchrun`): how many, which is main, a barrier.

A launcher starts one process per GPU and tells each its place through the environment (`WORLD_SIZE`,
`RANK`, `LOCAL_RANK`, `MASTER_ADDR`, ...). `train` joins their process group before the Trainer
exists, so the main process can prepare a run folder while the others wait. In one process (no
launcher) nothing is imported or joined and every helper answers at once.
"""

from __future__ import annotations

import os
from typing import Any


def process_count() -> int:
    """How many processes train together: the launcher's `WORLD_SIZE`, 1 without a launcher."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def local_rank() -> int:
    """This process's index on its machine (its GPU under `accelerate launch`), 0 without a launcher."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def join_process_group() -> int:
    """Join the launch's process group as the Trainer would (gloo on CPU, nccl on CUDA); the process count.

    Joining again is free, and the Trainer's own setup later finds the group initialised and reuses it.
    """
    processes = process_count()
    if processes > 1:
        _launch_state()
    return processes


def _launch_state() -> Any:
    """accelerate's `PartialState` of this launch, joined on first use."""
    from datetime import timedelta

    import torch
    from accelerate import PartialState
    from transformers import TrainingArguments

    if torch.cuda.is_available():
        return PartialState(timeout=timedelta(seconds=TrainingArguments.ddp_timeout))
    return PartialState(cpu=True)


def is_main_process() -> bool:
    """Whether this process writes the run's own files (always, in one process)."""
    return process_count() == 1 or _launch_state().is_main_process


def wait_for_everyone() -> None:
    """A barrier over the launch's processes (nothing to wait for in one process)."""
    if process_count() > 1:
        _launch_state().wait_for_everyone()


def leave_process_group() -> None:
    """Close the launch's process group at the end of a command (torch warns when a group is left open)."""
    if process_count() > 1:
        import torch.distributed

        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
