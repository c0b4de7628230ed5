"""Trained adapters kept in the repository, small enough for every clone, loadable by a later session.

A training run's checkpoint folder (PEFT's `adapter_config.json` + `adapter_model.safetensors`, fp32)
is ignored by git: a fresh clone cannot load the adapter a reported number came from. `keep_adapter`
stores the LoRA tensors in float16 beside a JSON record (the PEFT config, both files' SHA-256, the
run's provenance); for the 0.5B at rank 32 that is about half the fp32 file. `restore_adapter` writes
a normal PEFT folder back from the two files, refusing one whose bytes do not match its record, so
`HFChatModel(base, adapter_path=restore_adapter(...))` evaluates it again.

Float16 rounds each LoRA weight to 11 significant bits; the restored adapter is a close copy, not
the trained bytes, and the record says so (`stored_dtype`, `source_sha256` of the original file).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supersede_lib.models.adapter_files import (
    PEFT_CONFIG_FILE,
    PEFT_WEIGHTS_FILE,
    read_kept_record,
    restore_adapter,
)
from supersede_lib.models.adapter_files import file_sha256 as _sha256

__all__ = [
    "KeptAdapter",
    "PEFT_CONFIG_FILE",
    "PEFT_WEIGHTS_FILE",
    "keep_adapter",
    "read_kept_record",
    "restore_adapter",
]

KEPT_DTYPE_NAME = "float16"


@dataclass(frozen=True)
class KeptAdapter:
    """Where a kept adapter lies: its float16 tensors and the JSON record that describes them."""

    weights_path: Path
    record_path: Path
    sha256: str


def keep_adapter(
    checkpoint: str | Path, destination: str | Path, name: str, provenance: dict[str, Any] | None = None
) -> KeptAdapter:
    """Store a PEFT checkpoint's LoRA tensors in float16 as `<destination>/<name>.safetensors` with
    `<name>.json` beside it; `provenance` (commit, config, run) is written into the record."""
    from safetensors.torch import load_file, save_file

    checkpoint = Path(checkpoint)
    source = checkpoint / PEFT_WEIGHTS_FILE
    config_path = checkpoint / PEFT_CONFIG_FILE
    for required in (source, config_path):
        if not required.is_file():
            raise FileNotFoundError(f"{required} is missing: {checkpoint} is not a PEFT adapter checkpoint")
    tensors = load_file(str(source))
    if not any("lora_" in key for key in tensors):
        raise ValueError(f"{source} holds no LoRA tensors (keys like '...lora_A.weight')")
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    weights_path = destination / f"{name}.safetensors"
    partial = weights_path.with_name(weights_path.name + ".partial")
    save_file(
        {key: value.to(dtype=_kept_dtype()).contiguous() for key, value in tensors.items()}, str(partial)
    )
    partial.replace(weights_path)
    sha256 = _sha256(weights_path)
    record = {
        "name": name,
        "weights_file": weights_path.name,
        "sha256": sha256,
        "stored_dtype": KEPT_DTYPE_NAME,
        "source_sha256": _sha256(source),
        "source_checkpoint": str(checkpoint),
        "n_tensors": len(tensors),
        "n_parameters": int(sum(value.numel() for value in tensors.values())),
        "peft_config": json.loads(config_path.read_text()),
        "provenance": provenance or {},
    }
    record_path = destination / f"{name}.json"
    record_path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return KeptAdapter(weights_path=weights_path, record_path=record_path, sha256=sha256)


def _kept_dtype() -> Any:
    import torch

    return getattr(torch, KEPT_DTYPE_NAME)
