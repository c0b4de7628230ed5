"""Which local engine runs an embedded model: batched bf16 transformers or llama.cpp.

Measured (outputs/bench/): a bf16 matmul is ~20x faster than fp32 on CPUs with bf16 matrix units
(Intel AMX, `amx_bf16`), where one batched bf16 `generate` beats llama.cpp several times over. With
bf16 vector instructions only (`avx512_bf16`, e.g. AMD Zen 4) bf16 is ~2x faster than fp32 but
batched transformers only matched llama.cpp on full-context questions and ran at half its speed on
bounded-memory ones; without either, bf16 is emulated and far slower than fp32. So "auto" picks
transformers on a CUDA GPU or an AMX CPU and llama.cpp elsewhere; a transformers model (forced, or
used for training) runs bf16 wherever the CPU computes bf16 natively, else fp32. The choice is a
pure function of the CPU flags (testable with fake `/proc/cpuinfo` text); a model spec can force
either engine. `make_embedded_model` builds the chosen engine and prints the choice.
"""

from __future__ import annotations

import asyncio
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from supersede_lib.models import cpu_features
from supersede_lib.models.batched import BatchedHFChatModel
from supersede_lib.models.chat import ChatModel, ChatResult, EmbedResult, Message, ModelConfigError
from supersede_lib.models.gguf import (
    DEFAULT_GGUF_FILE,
    EmbeddedGGUFModel,
    resolve_default_gguf,
    threads_from_env,
)
from supersede_lib.models.lora_gguf import adapted_model_name, read_lora_adapter

ENGINES = ("auto", "llamacpp", "transformers")
ENGINE_ENV = "SUPERSEDE_ENGINE"  # llamacpp | transformers: what "auto" means on this machine
Engine = Literal["llamacpp", "transformers"]


@dataclass(frozen=True)
class EngineChoice:
    """The engine an embedded model runs on, with its dtype, CPU threads and the reason."""

    engine: Engine
    dtype: str  # "bfloat16" / "float32" for transformers, "gguf" (the file's quantisation) for llama.cpp
    device: str
    threads: int | None  # None: the engine's own default
    reason: str

    def describe(self) -> str:
        threads = "engine default" if self.threads is None else str(self.threads)
        return (
            f"engine: {self.engine} (dtype {self.dtype}, device {self.device}, threads {threads}); "
            f"why: {self.reason}"
        )


def choose_engine(
    requested: str = "auto",
    *,
    cpuinfo_text: str = "",
    cuda_available: bool = False,
    threads: int | None = None,
) -> EngineChoice:
    """Pick the engine: a forced one, else transformers where batched bf16 wins (GPU or AMX CPU).

    Transformers gets bf16 on a CUDA GPU or a CPU with native bf16 arithmetic (AMX, AVX512-BF16)
    and fp32 otherwise (there bf16 would be emulated and far slower than fp32).
    """
    if requested not in ENGINES:
        raise ValueError(f"unknown engine {requested!r}; choose one of {', '.join(ENGINES)}")
    matrix = cpu_features.bf16_matrix_flags(cpuinfo_text)
    native = cpu_features.bf16_native_flags(cpuinfo_text)
    if cuda_available:
        fast_bf16, where = True, "a CUDA GPU is available"
    elif matrix:
        fast_bf16, where = True, f"the CPU has bf16 matrix units ({', '.join(matrix)})"
    elif native:
        fast_bf16, where = (
            False,
            f"the CPU has bf16 vector instructions ({', '.join(native)}) but no bf16 matrix units (amx_bf16)",
        )
    else:
        fast_bf16, where = (
            False,
            f"the CPU has no native bf16 (no {' or '.join(cpu_features.BF16_NATIVE_FLAGS)})",
        )
    device = "cuda" if cuda_available else "cpu"
    transformers_dtype = "bfloat16" if cuda_available or native else "float32"
    if requested == "llamacpp":
        return EngineChoice("llamacpp", "gguf", "cpu", threads, f"forced by the model spec ({where})")
    if requested == "transformers":
        return EngineChoice(
            "transformers", transformers_dtype, device, threads, f"forced by the model spec ({where})"
        )
    if fast_bf16:
        return EngineChoice(
            "transformers", "bfloat16", device, threads, f"{where}: batched bf16 generate beats llama.cpp"
        )
    return EngineChoice(
        "llamacpp", "gguf", "cpu", threads, f"{where}: llama.cpp's quantised kernels are faster"
    )


def cuda_is_available() -> bool:
    """True when torch is installed and sees a CUDA GPU."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def detect_engine(requested: str = "auto", threads: int | None = None) -> EngineChoice:
    """`choose_engine` on this machine's CPU flags and GPU; `SUPERSEDE_ENGINE` overrides "auto"."""
    if requested == "auto":
        requested = os.environ.get(ENGINE_ENV, "").strip() or "auto"
    return choose_engine(
        requested,
        cpuinfo_text=cpu_features.read_cpuinfo(),
        cuda_available=cuda_is_available(),
        threads=threads,
    )


def engine_for_adapter(requested: str, lora_adapter: object | None) -> str:
    """The engine to ask for: llama.cpp when a LoRA adapter is given ("auto" included), since the
    batched transformers engine applies no adapter; forcing transformers with one is an error."""
    if lora_adapter is None:
        return requested
    if requested == "transformers":
        raise ModelConfigError(
            "lora_adapter runs on the llama.cpp engine: set engine: llamacpp (or auto), "
            "or use backend: hf with adapter_path for transformers"
        )
    return "llamacpp"


def make_embedded_model(
    model_path: str | os.PathLike,
    *,
    engine: str = "auto",
    n_ctx: int = 8192,
    n_threads: int | None = None,
    name: str | None = None,
    default_max_tokens: int = 512,
    verbose: bool = False,
    max_batch_size: int | None = None,
    batch_window_s: float | None = None,
    announce: bool = True,
    lora_adapter: str | os.PathLike | None = None,
) -> ChatModel:
    """The embedded GGUF model on the engine `detect_engine(engine)` picks (printed unless `announce=False`).

    The transformers engine runs the GGUF dequantised once (`hf.materialize_gguf`) and keeps the
    GGUF file's stem as its name, so result tables name the same model on either engine; its
    responses are cached under their own namespace (engine and dtype). A `lora_adapter` runs on
    llama.cpp (`engine_for_adapter`).
    """
    threads = n_threads if n_threads is not None else threads_from_env()
    choice = detect_engine(engine_for_adapter(engine, lora_adapter), threads)
    if announce:
        print(f"{Path(model_path).name}: {choice.describe()}")
    if choice.engine == "llamacpp":
        return EmbeddedGGUFModel(
            model_path,
            n_ctx=n_ctx,
            n_threads=threads,
            name=name,
            default_max_tokens=default_max_tokens,
            verbose=verbose,
            lora_adapter=lora_adapter,
        )
    batching: dict[str, Any] = {}
    if max_batch_size is not None:
        batching["max_batch_size"] = max_batch_size
    if batch_window_s is not None:
        batching["batch_window_s"] = batch_window_s
    return BatchedHFChatModel(
        model_path,
        device=choice.device,
        dtype=choice.dtype,
        n_ctx=n_ctx,
        n_threads=threads,
        name=name or Path(model_path).stem,
        default_max_tokens=default_max_tokens,
        **batching,
    )


class DeferredEmbeddedModel:
    """An embedded model whose GGUF file is not on this machine: found or downloaded at its first call.

    It already has the name and cache namespace the built model will have, so a response cache
    answers for it; a replay of recorded replies never calls it and needs no model file. The
    first call that reaches it resolves the file (`resolve_default_gguf`, which may download)
    and builds the engine `make_embedded_model` picks.
    """

    def __init__(self, model_dir: str | None, lookup: dict[str, str], options: dict[str, Any]) -> None:
        self._model_dir, self._lookup, self._options = model_dir, dict(lookup), dict(options)
        filename = lookup.get("filename", DEFAULT_GGUF_FILE)
        self.name = options.get("name") or Path(filename).stem
        if options.get("lora_adapter") is not None:
            self.name = adapted_model_name(self.name, read_lora_adapter(options["lora_adapter"]))
        choice = detect_engine(engine_for_adapter(options.get("engine", "auto"), options.get("lora_adapter")))
        self.engine = choice.engine
        self.cache_namespace = "embedded" if choice.engine == "llamacpp" else f"transformers-{choice.dtype}"
        self._model: ChatModel | None = None
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        return self._model is not None

    def _build(self) -> ChatModel:
        with self._lock:
            if self._model is None:
                path = resolve_default_gguf(self._model_dir, **self._lookup)
                self._model = make_embedded_model(path, **self._options)
            return self._model

    def missing_capabilities(self, needs: frozenset[str]) -> dict[str, str]:
        """Answered from the engine this machine picks, without loading it (a replay needs no file):
        llama.cpp serves tools and embeddings, the transformers engine neither."""
        if self.engine == "llamacpp":
            return {}
        return {
            need: f"the transformers engine offers no {need} (engine: llamacpp does)"
            for need in sorted(needs)
        }

    async def achat(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
        **options: Any,
    ) -> ChatResult:
        """The built model's reply; `options` (a memory policy's `tools`, `response_format`) pass on."""
        model = await asyncio.to_thread(self._build)
        return await model.achat(
            messages, max_tokens=max_tokens, temperature=temperature, seed=seed, **options
        )

    async def aembed(self, texts: list[str]) -> EmbedResult:
        model = await asyncio.to_thread(self._build)
        aembed = getattr(model, "aembed", None)
        if aembed is None:
            raise ModelConfigError(f"{self.name}: the {self.engine} engine serves no embeddings")
        return await aembed(texts)

    def close(self) -> None:
        close = getattr(self._model, "close", None)
        if close is not None:
            close()
