"""PEFT LoRA adapter files on disk: a checkpoint folder, or a kept record and its float16 tensors.

Both the transformers path (`hf.HFChatModel(adapter_path=...)`) and the llama.cpp path
(`lora_gguf`) load adapters, so reading and restoring a kept record lives at the models layer;
`train.kept_adapters` writes records and re-exports these readers.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

PEFT_CONFIG_FILE = "adapter_config.json"
PEFT_WEIGHTS_FILE = "adapter_model.safetensors"


def file_sha256(path: Path) -> str:
    """SHA-256 of a whole file (adapter files are tens of MB: read in one go)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_kept_record(record_path: str | Path) -> dict[str, Any]:
    """A kept adapter's record, checked against the bytes of its weights file."""
    record_path = Path(record_path)
    record = json.loads(record_path.read_text())
    weights_path = record_path.parent / record["weights_file"]
    if not weights_path.is_file():
        raise FileNotFoundError(f"{record_path} names {weights_path.name}, which is not beside it")
    actual = file_sha256(weights_path)
    if actual != record["sha256"]:
        raise ValueError(
            f"{weights_path} has SHA-256 {actual[:12]}..., its record {record_path} says "
            f"{record['sha256'][:12]}...: the kept adapter was changed or damaged"
        )
    return record


def restore_adapter(record_path: str | Path, folder: str | Path) -> Path:
    """Write a PEFT adapter folder (config + weights) from a kept adapter; returns the folder."""
    from safetensors.torch import load_file, save_file

    record_path = Path(record_path)
    record = read_kept_record(record_path)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = load_file(str(record_path.parent / record["weights_file"]))
    save_file(tensors, str(folder / PEFT_WEIGHTS_FILE))
    (folder / PEFT_CONFIG_FILE).write_text(json.dumps(record["peft_config"], indent=2) + "\n")
    return folder
