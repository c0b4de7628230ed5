"""Kept adapters: a trained LoRA stored in float16 in the repository loads again as a PEFT adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")

from conftest import save_random_lora  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

from supersede_lib.train.kept_adapters import keep_adapter, read_kept_record, restore_adapter  # noqa: E402


def _trained_checkpoint(base: Path, folder: Path) -> Path:
    """A LoRA on the tiny model with non-zero B matrices."""
    return save_random_lora(base, folder, ["q_proj", "v_proj"])


def _logits(base: Path, adapter: Path) -> torch.Tensor:
    model = peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(base)), str(adapter))
    with torch.no_grad():
        return model(torch.tensor([[5, 17, 42, 99, 3]])).logits


def test_a_kept_adapter_restores_to_the_trained_one_within_float16_rounding(
    tiny_path: Path, tmp_path: Path
) -> None:
    checkpoint = _trained_checkpoint(tiny_path, tmp_path / "checkpoint-20")
    kept = keep_adapter(checkpoint, tmp_path / "kept", "verdict__seed-11", provenance={"commit": "abc"})
    record = read_kept_record(kept.record_path)
    assert record["stored_dtype"] == "float16" and record["provenance"] == {"commit": "abc"}
    assert kept.weights_path.stat().st_size < (checkpoint / "adapter_model.safetensors").stat().st_size
    restored = restore_adapter(kept.record_path, tmp_path / "restored")
    trained, again = _logits(tiny_path, checkpoint), _logits(tiny_path, restored)
    untouched = AutoModelForCausalLM.from_pretrained(str(tiny_path))
    with torch.no_grad():
        base_logits = untouched(torch.tensor([[5, 17, 42, 99, 3]])).logits
    assert not torch.allclose(trained, base_logits, atol=1e-4)  # the adapter does something
    assert torch.allclose(trained, again, atol=1e-3)


def test_a_changed_kept_file_is_refused_naming_both_files(tiny_path: Path, tmp_path: Path) -> None:
    checkpoint = _trained_checkpoint(tiny_path, tmp_path / "checkpoint-20")
    kept = keep_adapter(checkpoint, tmp_path / "kept", "run")
    data = bytearray(kept.weights_path.read_bytes())
    data[-1] ^= 0xFF
    kept.weights_path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"run\.safetensors.*run\.json"):
        restore_adapter(kept.record_path, tmp_path / "restored")


def test_a_folder_without_lora_tensors_is_not_kept(tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text(json.dumps({}))
    with pytest.raises(FileNotFoundError, match="adapter_model.safetensors"):
        keep_adapter(tmp_path, tmp_path / "kept", "run")
