"""Which dtype a CPU run's base weights take, and why a run keeps it on another machine.

`cpu_dtype: auto` lets the machine decide: bf16 where the CPU computes bf16 natively (`amx_bf16`,
`avx512_bf16`), float32 elsewhere (`models.hf.fast_dtype`). The same config therefore trains in
float32 on an AVX2-only CPU and in bf16 on an AMX one: other numerics, other rollouts. Three rules
keep a recorded run's numerics from changing silently:

- a run folder records the dtype it started with (`precision.json`); resumed anywhere, it keeps it;
- `SUPERSEDE_CPU_DTYPE` (float32 or bfloat16) decides what "auto" means on this machine, so a run
  can be retrained as it was recorded without editing its config (and so its config hash);
- retraining a run whose committed summary names another dtype than "auto" gives here is refused,
  naming both and that variable (`check_recorded_precision`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from supersede_lib.models import cpu_features
from supersede_lib.models.hf import dtype_label, fast_dtype

CPU_DTYPE_ENV = "SUPERSEDE_CPU_DTYPE"
PRECISION_FILE = "precision.json"  # in a run folder: the dtype and threads it started with
CHOSEN_DTYPES = ("bfloat16", "float32")
_DEVICE_DTYPE = re.compile(r"(\w+) base weights")


class PrecisionMismatch(ValueError):
    """A run would train in another dtype than the one it was recorded or started with."""


def dtype_for_auto() -> tuple[str, str]:
    """(dtype label, why) that `cpu_dtype: auto` resolves to on this machine."""
    chosen = os.environ.get(CPU_DTYPE_ENV, "").strip()
    if chosen:
        if chosen not in CHOSEN_DTYPES:
            raise ValueError(f"{CPU_DTYPE_ENV}={chosen!r}: expected one of {', '.join(CHOSEN_DTYPES)}")
        return chosen, f"{CPU_DTYPE_ENV}={chosen}"
    flags = cpu_features.bf16_native_flags(cpu_features.read_cpuinfo())
    label = dtype_label(fast_dtype("cpu"))
    return label, f"auto: {'native bf16 (' + ', '.join(flags) + ')' if flags else 'no native bf16'}"


def recorded_dtype(run_dir: Path) -> str | None:
    """The base dtype a run folder started with, or None for a folder without `precision.json`."""
    path = Path(run_dir) / PRECISION_FILE
    if not path.exists():
        return None
    try:
        return str(json.loads(path.read_text())["base_dtype"])
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise ValueError(
            f"{path}: not a precision record ({error}); expected a 'base_dtype' field"
        ) from error


def resolve_cpu_dtype(config_dtype: str, run_dir: Path | None = None) -> tuple[str, str]:
    """(dtype label, why) of a CPU run's base weights: the config's own, else the run folder's record,
    else what "auto" means here. A folder started in one dtype and configured for another is refused."""
    recorded = recorded_dtype(run_dir) if run_dir is not None else None
    if config_dtype != "auto":
        if recorded is not None and recorded != config_dtype:
            raise PrecisionMismatch(
                f"{run_dir}: started with {recorded} base weights, but its config names cpu_dtype "
                f"{config_dtype}; resume it with cpu_dtype {recorded} or train it in a new folder"
            )
        return config_dtype, "named in the config"
    if recorded is not None:
        return recorded, f"recorded in {PRECISION_FILE} when the run started"
    return dtype_for_auto()


def write_precision(run_dir: Path, dtype: str, why: str, threads: int) -> None:
    """Record, once, the dtype and threads a run folder starts with (a resume keeps the first record)."""
    path = Path(run_dir) / PRECISION_FILE
    if path.exists():
        return
    text = cpu_features.read_cpuinfo()
    record = {
        "base_dtype": dtype,
        "why": why,
        "torch_threads": threads,
        "cpu": cpu_features.cpu_model_name(text),
        "bf16_flags": cpu_features.bf16_native_flags(text),
    }
    path.write_text(json.dumps(record, indent=2) + "\n")


def dtype_in_device(device: str) -> str | None:
    """The base dtype named in a run summary's `device` ("cpu (1 torch thread, float32 base weights)")."""
    found = _DEVICE_DTYPE.search(device or "")
    return found.group(1) if found else None


def check_recorded_precision(summary_path: Path, config_dtype: str, device: str) -> None:
    """Refuse to retrain, in another dtype, a run whose committed summary (`summary_path`, its `device`
    field given as `device`) says how it trained; the message names the variable that keeps it."""
    recorded = dtype_in_device(device)
    if recorded is None or not device.startswith("cpu") or config_dtype != "auto":
        return
    here, why = dtype_for_auto()
    if here != recorded:
        raise PrecisionMismatch(
            f"{summary_path}: the recorded run trained with {recorded} base weights ({device}); on this "
            f"machine cpu_dtype 'auto' gives {here} ({why}). Set {CPU_DTYPE_ENV}={recorded} to retrain it "
            f"as recorded, or {CPU_DTYPE_ENV}={here} to train it in {here} on purpose"
        )
