"""A trained PEFT LoRA adapter as a llama.cpp GGUF adapter, so llama.cpp's Q4 engine can judge it.

Adapters are trained on the GGUF base dequantised by transformers, so the same LoRA applied by
llama.cpp to that GGUF file is (up to the base's quantised arithmetic) the same model. The
conversion follows llama.cpp's own `convert_lora_to_gguf.py`: metadata `general.type = adapter`,
`adapter.type = lora`, `adapter.lora.alpha`, the base's `general.architecture`; per adapted weight
`<gguf name>.lora_a` (rank x in) and `<gguf name>.lora_b` (out x rank) in float32, named through
the `gguf` package's own HF-to-GGUF map. llama.cpp scales each product by alpha / rank, as PEFT does.

The llama architecture's HF-to-GGUF conversion reorders the rows of q and k (rotary pairs
interleaved per head); the base GGUF holds them reordered, so lora_b of q and k is reordered the
same way. Qwen2 keeps HF's order. Other architectures are refused rather than guessed.

Converted files are cached under ~/.cache/supersede/lora, keyed by the adapter's SHA-256, its
config and the base's geometry: converting again is a file lookup.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supersede_lib.models.adapter_files import (
    PEFT_CONFIG_FILE,
    PEFT_WEIGHTS_FILE,
    file_sha256,
    read_kept_record,
)
from supersede_lib.models.chat import ModelConfigError, one_line

LORA_CACHE_ENV = "SUPERSEDE_LORA_CACHE"  # where converted adapters go (default ~/.cache/supersede/lora)
CONVERSION_VERSION = 1  # bump when the written file would differ for the same input
QK_REORDERED_ARCHS = frozenset({"llama"})  # convert_hf_to_gguf permutes q/k rows for these
SUPPORTED_ARCHS = frozenset({"llama", "qwen2"})
# PEFT options llama.cpp's LoRA cannot express, with the value that means "not used"
_UNSUPPORTED_OPTIONS: dict[str, Any] = {
    "use_dora": False,
    "fan_in_fan_out": False,
    "lora_bias": False,
    "rank_pattern": {},
    "alpha_pattern": {},
    "modules_to_save": None,
    "trainable_token_indices": None,
}


@dataclass(frozen=True)
class LoraAdapter:
    """A PEFT LoRA adapter on disk: a checkpoint folder or a kept record (`train.kept_adapters`)."""

    source: Path  # the folder or the record .json that was named
    label: str  # the folder's or record's name, for model names
    weights_path: Path
    sha256: str  # of the weights file: what names the adapter in caches
    config: dict[str, Any]

    @property
    def short_sha(self) -> str:
        return self.sha256[:12]


def read_lora_adapter(path: str | os.PathLike[str]) -> LoraAdapter:
    """The adapter at `path` (a PEFT folder or a kept record .json), its bytes hashed and, for a
    record, checked; anything missing or damaged is a `ModelConfigError` naming the file."""
    source = Path(path).expanduser()
    if source.is_dir():
        weights_path, config_path = source / PEFT_WEIGHTS_FILE, source / PEFT_CONFIG_FILE
        for required in (config_path, weights_path):
            if not required.is_file():
                raise ModelConfigError(
                    f"LoRA adapter {source}: {required.name} is missing (not a PEFT adapter folder)"
                )
        try:
            config = json.loads(config_path.read_text())
        except (OSError, ValueError) as error:
            raise ModelConfigError(
                f"LoRA adapter config {config_path} is unreadable: {one_line(error)}"
            ) from error
        return LoraAdapter(source, source.name, weights_path, file_sha256(weights_path), config)
    if source.suffix == ".json" and source.is_file():
        try:
            record = read_kept_record(source)
        except (OSError, ValueError, KeyError) as error:
            raise ModelConfigError(
                f"kept LoRA adapter record {source} is unusable: {one_line(error)}"
            ) from error
        weights_path = source.parent / record["weights_file"]
        return LoraAdapter(source, source.stem, weights_path, record["sha256"], dict(record["peft_config"]))
    raise ModelConfigError(
        f"LoRA adapter {source} not found: name a PEFT folder ({PEFT_CONFIG_FILE} + {PEFT_WEIGHTS_FILE}) "
        "or a kept adapter record (.json)"
    )


def adapted_model_name(base_name: str, adapter: LoraAdapter) -> str:
    """`<base>+<adapter>@<short sha>`: base and adapted replies never share a cache entry."""
    return f"{base_name}+{adapter.label}@{adapter.short_sha}"


@dataclass(frozen=True)
class BaseGeometry:
    """What the conversion needs from the base GGUF: architecture, blocks, heads, tensor names."""

    arch: str
    n_blocks: int
    n_head: int
    n_head_kv: int
    tensor_names: frozenset[str]

    def key(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "n_blocks": self.n_blocks,
            "n_head": self.n_head,
            "n_head_kv": self.n_head_kv,
        }


def read_base_geometry(gguf_path: str | os.PathLike[str]) -> BaseGeometry:
    """The base model's architecture and shape, read from its GGUF header (memory-mapped, no weights)."""
    import gguf

    reader = gguf.GGUFReader(str(gguf_path))

    def field(key: str) -> Any:
        found = reader.get_field(key)
        if found is None:
            raise ModelConfigError(f"{gguf_path} has no {key!r}: not a model GGUF llama.cpp can adapt")
        return found.contents()

    arch = str(field(gguf.Keys.General.ARCHITECTURE))
    n_head = int(field(gguf.Keys.Attention.HEAD_COUNT.format(arch=arch)))
    kv_key = gguf.Keys.Attention.HEAD_COUNT_KV.format(arch=arch)
    return BaseGeometry(
        arch=arch,
        n_blocks=int(field(gguf.Keys.LLM.BLOCK_COUNT.format(arch=arch))),
        n_head=n_head,
        n_head_kv=int(field(kv_key)) if reader.get_field(kv_key) is not None else n_head,
        tensor_names=frozenset(tensor.name for tensor in reader.tensors),
    )


def lora_alpha_for_llamacpp(config: dict[str, Any]) -> float:
    """The `adapter.lora.alpha` that makes llama.cpp's alpha / rank equal PEFT's scaling.

    rsLoRA scales by alpha / sqrt(rank), i.e. alpha * sqrt(rank) / rank. Options llama.cpp has no
    equivalent for (DoRA, per-module ranks or alphas, extra trained modules) are refused by name."""
    if config.get("peft_type", "LORA") != "LORA":
        raise ModelConfigError(
            f"only LoRA adapters convert to GGUF, not peft_type {config.get('peft_type')!r}"
        )
    used = [
        key for key, unused in _UNSUPPORTED_OPTIONS.items() if config.get(key) not in (unused, None, {}, [])
    ]
    if config.get("bias", "none") != "none":
        used.append("bias")
    if used:
        raise ModelConfigError(
            f"the LoRA adapter uses {', '.join(used)}, which llama.cpp's LoRA cannot apply"
        )
    alpha = float(config["lora_alpha"])
    return alpha * math.sqrt(float(config["r"])) if config.get("use_rslora") else alpha


def _reorder_rows(lora_b: Any, n_head: int) -> Any:
    """llama's HF-to-GGUF q/k row order: within each head, rotary halves become interleaved pairs."""
    rows, rank = lora_b.shape
    return lora_b.reshape(n_head, 2, rows // n_head // 2, rank).swapaxes(1, 2).reshape(rows, rank)


def _paired_by_gguf_name(
    tensors: dict[str, Any], geometry: BaseGeometry
) -> dict[str, tuple[Any, dict[str, Any]]]:
    """PEFT tensors grouped per adapted weight: GGUF name -> (tensor type, {"A": ..., "B": ...})."""
    import gguf

    arch_enum = next(arch for arch, name in gguf.MODEL_ARCH_NAMES.items() if name == geometry.arch)
    name_map = gguf.get_tensor_name_map(arch_enum, geometry.n_blocks)
    pairs: dict[str, tuple[Any, dict[str, Any]]] = {}
    for key, value in tensors.items():
        part = "A" if key.endswith(".lora_A.weight") else "B" if key.endswith(".lora_B.weight") else None
        if part is None:
            raise ModelConfigError(
                f"adapter tensor {key!r} is not a LoRA A or B matrix; llama.cpp cannot apply it"
            )
        hf_name = key.removeprefix("base_model.model.").replace(f".lora_{part}.weight", ".weight")
        found = name_map.get_type_and_name(hf_name, try_suffixes=(".weight", ".bias"))
        if found is None or found[1] not in geometry.tensor_names:
            target = found[1] if found else "no GGUF tensor"
            raise ModelConfigError(
                f"adapter tensor {key!r} maps to {target}, which the {geometry.arch} base lacks"
            )
        tensor_type, gguf_name = found
        pairs.setdefault(gguf_name, (tensor_type, {}))[1][part] = value
    return pairs


def gguf_lora_tensors(tensors: dict[str, Any], geometry: BaseGeometry) -> list[tuple[str, Any]]:
    """The GGUF adapter's tensors (float32 numpy, `.lora_a` then `.lora_b` per adapted weight) from
    PEFT's `...lora_A.weight` / `...lora_B.weight` arrays."""
    import gguf
    import numpy

    if geometry.arch not in SUPPORTED_ARCHS:
        raise ModelConfigError(
            f"LoRA conversion knows the q/k layout of {', '.join(sorted(SUPPORTED_ARCHS))}, not {geometry.arch!r}"
        )
    reorder_heads = {gguf.MODEL_TENSOR.ATTN_Q: geometry.n_head, gguf.MODEL_TENSOR.ATTN_K: geometry.n_head_kv}
    converted: list[tuple[str, Any]] = []
    for gguf_name, (tensor_type, parts) in sorted(_paired_by_gguf_name(tensors, geometry).items()):
        if set(parts) != {"A", "B"}:
            raise ModelConfigError(f"adapter has only lora_{''.join(parts)} for {gguf_name}")
        lora_a = numpy.ascontiguousarray(parts["A"], dtype=numpy.float32)
        lora_b = numpy.asarray(parts["B"], dtype=numpy.float32)
        if geometry.arch in QK_REORDERED_ARCHS and tensor_type in reorder_heads:
            lora_b = _reorder_rows(lora_b, reorder_heads[tensor_type])
        converted += [
            (f"{gguf_name}.lora_a", lora_a),
            (f"{gguf_name}.lora_b", numpy.ascontiguousarray(lora_b)),
        ]
    return converted


def write_lora_gguf(path: Path, arch: str, alpha: float, tensors: list[tuple[str, Any]]) -> None:
    """Write a llama.cpp LoRA adapter file (written beside, then renamed into place)."""
    import gguf

    partial = path.with_name(path.name + ".partial")
    writer = gguf.GGUFWriter(str(partial), arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
    for name, array in tensors:
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.replace(path)


def lora_cache_dir() -> Path:
    """Where converted adapters are kept: `$SUPERSEDE_LORA_CACHE`, else ~/.cache/supersede/lora."""
    configured = os.environ.get(LORA_CACHE_ENV, "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "supersede" / "lora"


def _load_tensors(adapter: LoraAdapter) -> dict[str, Any]:
    from safetensors.torch import load_file

    try:
        loaded = load_file(str(adapter.weights_path))
    except Exception as error:  # safetensors raises its own error types for a damaged header
        raise ModelConfigError(
            f"LoRA weights {adapter.weights_path} are unreadable: {one_line(error)}"
        ) from error
    return {key: value.float().numpy() for key, value in loaded.items()}


def convert_lora_adapter(
    adapter_path: str | os.PathLike[str] | LoraAdapter,
    base_gguf: str | os.PathLike[str],
    cache_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """The GGUF LoRA file for `adapter_path` on `base_gguf`, converted once and cached by the
    adapter's SHA-256, its config and the base's geometry."""
    adapter = adapter_path if isinstance(adapter_path, LoraAdapter) else read_lora_adapter(adapter_path)
    geometry = read_base_geometry(base_gguf)
    alpha = lora_alpha_for_llamacpp(adapter.config)
    key = json.dumps(
        [CONVERSION_VERSION, adapter.sha256, adapter.config, geometry.key()], sort_keys=True, default=str
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    folder = Path(cache_dir) if cache_dir is not None else lora_cache_dir()
    target = folder / f"{adapter.label}-{adapter.short_sha}-{geometry.arch}-{digest}.gguf"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    write_lora_gguf(target, geometry.arch, alpha, gguf_lora_tensors(_load_tensors(adapter), geometry))
    return target
