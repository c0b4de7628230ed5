"""A local transformers model (optionally + a PEFT LoRA adapter) behind the `ChatModel` protocol.

Transfer evaluation compares a base model with the same model plus a trained adapter, so this
module also answers "do these two differ only by the adapter?": `base_fingerprint()` hashes the
base weights (LoRA tensors excluded, PEFT's renaming undone) and `adapter_fingerprint` hashes the
adapter file. GGUF files are dequantised once by transformers and cached as a plain
`save_pretrained` directory, so later loads (and LoRA training on top) are ordinary and fast.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import os
import re
import shutil
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from filelock import FileLock

from supersede_lib.models import cpu_features
from supersede_lib.models.chat import ChatResult, Message
from supersede_lib.models.gguf import file_sha256

GGUF_CACHE_ENV = "SUPERSEDE_HF_CACHE"
DEFAULT_GGUF_CACHE = Path.home() / ".cache" / "supersede" / "hf"
ADAPTER_WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")
CHATML_END = "<|im_end|>"


def split_gguf_path(
    model_name_or_path: str | os.PathLike, gguf_file: str | None = None
) -> tuple[str, str | None]:
    """`dir/x.gguf` -> (`dir`, `x.gguf`); anything else is passed through unchanged."""
    text = os.path.expanduser(str(model_name_or_path))
    if gguf_file is None and text.endswith(".gguf"):
        path = Path(text)
        return str(path.parent), path.name
    return text, gguf_file


def materialize_gguf(
    model_dir: str | os.PathLike, gguf_file: str, cache_dir: str | os.PathLike | None = None
) -> Path:
    """Dequantise a GGUF file with transformers once and cache it as a `save_pretrained` directory.

    Loading a GGUF through transformers converts the tokenizer and every tensor (minutes for a
    0.5B model on 2 cores); the cached copy loads in seconds and is a normal base model that a
    LoRA adapter can name. The copy is written to a temporary folder and renamed, so an
    interrupted conversion never leaves a half-written cache entry, and a lock lets one process
    convert while the others wait for its result.
    """
    source = Path(os.path.expanduser(str(model_dir))) / gguf_file
    if not source.is_file():
        raise FileNotFoundError(f"GGUF file not found: {source}")
    root = Path(cache_dir or os.environ.get(GGUF_CACHE_ENV) or DEFAULT_GGUF_CACHE)
    target = root / Path(gguf_file).stem
    if (target / "config.json").exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    # Two processes converting at once: the second would replace the first's folder while the first
    # loads from it (seen here: a training run died on a half-deleted model.safetensors).
    with FileLock(str(root / f".{target.name}.lock")):
        if (target / "config.json").exists():
            return target
        _convert_gguf(source, gguf_file, root, target)
    return target


def _convert_gguf(source: Path, gguf_file: str, root: Path, target: Path) -> None:
    """Dequantise `source` into `target` through a staging folder (`materialize_gguf`)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=gguf_file, dtype=torch.float32)
    # The weights are already dequantised; drop the GGUF "quantizer" so save_pretrained writes them.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    prepare_chat_tokenizer(tokenizer, model)
    staging = root / f".{target.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)


def prepare_chat_tokenizer(tokenizer: Any, model: Any | None = None) -> Any:
    """Normalise a chat tokenizer for batched generation and GRPO.

    Left padding, a pad token, and for ChatML templates `<|im_end|>` as EOS (GGUF metadata
    sometimes names `<|im_start|>` or `<|endoftext|>` instead, which would let a reply run on).
    """
    template = tokenizer.chat_template or ""
    if CHATML_END in template and CHATML_END in tokenizer.get_vocab():
        tokenizer.eos_token = CHATML_END
    if tokenizer.pad_token is None:
        tokenizer.pad_token = (
            "<|endoftext|>" if "<|endoftext|>" in tokenizer.get_vocab() else tokenizer.eos_token
        )
    tokenizer.padding_side = "left"
    if model is not None:
        eos_ids = model.generation_config.eos_token_id
        eos_ids = [] if eos_ids is None else [eos_ids] if isinstance(eos_ids, int) else list(eos_ids)
        if tokenizer.eos_token_id not in eos_ids:
            eos_ids.append(tokenizer.eos_token_id)
        model.generation_config.eos_token_id = eos_ids if len(eos_ids) > 1 else eos_ids[0]
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.config.pad_token_id = tokenizer.pad_token_id
    return tokenizer


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def fast_dtype(device: str) -> Any:
    """The dtype that runs fastest on `device`: bf16 on a CUDA GPU or a CPU with native bf16, else fp32.

    Native bf16: `amx_bf16` or `avx512_bf16` (a bf16 matmul measured ~2.3x fp32 with AVX512-BF16
    alone, ~20x with AMX). Without them (AVX2-only CPUs) bf16 is emulated and far slower than fp32.
    """
    import torch

    if device.startswith("cuda"):
        return torch.bfloat16
    return torch.bfloat16 if cpu_features.bf16_native_flags(cpu_features.read_cpuinfo()) else torch.float32


def dtype_label(dtype: Any) -> str:
    """`bfloat16` for torch.bfloat16 (names in records and cache namespaces)."""
    return str(dtype).removeprefix("torch.")


def hf_cache_namespace(dtype: str) -> str:
    """The response-cache namespace of an `HFChatModel` whose weights are `dtype` (a `dtype_label`).

    Replies differ between dtypes: a bf16 model never reads an fp32 model's cached replies.
    """
    return f"HFChatModel-{dtype}"


def load_model_and_tokenizer(
    model_name_or_path: str | os.PathLike,
    gguf_file: str | None = None,
    device: str | None = None,
    dtype: Any = None,
) -> tuple[Any, Any]:
    """Load a causal LM + chat tokenizer by hub id, local directory or GGUF file (no adapter)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source, gguf_file = split_gguf_path(model_name_or_path, gguf_file)
    if gguf_file is not None:
        source = str(materialize_gguf(source, gguf_file))
    device = device or default_device()
    if dtype is None:
        dtype = fast_dtype(device)
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype).to(device)
    prepare_chat_tokenizer(tokenizer, model)
    return model, tokenizer


def contiguous_lm_head_input(model: Any) -> Any:
    """Make the output layer's input contiguous (a forward pre-hook); returns the hook handle.

    Under CPU bf16 autocast, the last-position slice `generate` hands the output layer is not
    contiguous, and torch's matmul then copies the whole (vocabulary x hidden) weight once per
    sequence in the batch: 272 MB per row per decoding step for Qwen2.5-0.5B (profiled here: half of a
    forward pass). A contiguous input takes the plain matrix product; the values are unchanged.
    """
    return model.get_output_embeddings().register_forward_pre_hook(
        lambda module, args: (args[0].contiguous(), *args[1:])
    )


def _base_parameter_name(name: str) -> str:
    """The name a base weight has without PEFT's wrapping (so base and adapted models compare)."""
    name = re.sub(r"^base_model\.model\.", "", name)
    return name.replace(".base_layer.", ".")


def weights_fingerprint(model: Any) -> str:
    """SHA-256 over the base weights (names + bytes), ignoring any LoRA tensors."""
    import torch

    digest = hashlib.sha256()
    state = model.state_dict()
    named = sorted(
        (_base_parameter_name(name), tensor) for name, tensor in state.items() if "lora_" not in name
    )
    for name, tensor in named:
        digest.update(name.encode())
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(str(tensor.dtype).encode())
        flat = tensor.detach().to("cpu").contiguous().reshape(-1)
        digest.update(flat.view(dtype=torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def with_adapter(model: Any, adapter_path: str | os.PathLike, device: str) -> Any:
    """`model` with the PEFT adapter folder `adapter_path` attached, its weights in the base's dtype.

    PEFT loads the adapter in fp32 beside a bf16 base; every adapted layer would then cast its
    activations to fp32 (measured ~2x slower on a CPU). Training sampled under bf16 autocast, i.e.
    with bf16 adapter weights: the same arithmetic as casting them once here.
    """
    from peft import PeftModel

    if not Path(adapter_path).is_dir():
        raise FileNotFoundError(f"adapter_path is not a directory: {adapter_path}")
    model = PeftModel.from_pretrained(model, str(adapter_path)).to(device)
    base_dtype = next(p.dtype for n, p in model.named_parameters() if "lora_" not in n)
    return model.to(base_dtype)


def adapter_file_fingerprint(adapter_path: str | os.PathLike) -> str:
    """SHA-256 of an adapter directory's weight file."""
    folder = Path(adapter_path)
    for filename in ADAPTER_WEIGHT_FILES:
        candidate = folder / filename
        if candidate.is_file():
            return hashlib.sha256(candidate.read_bytes()).hexdigest()
    raise FileNotFoundError(f"no adapter weights ({' or '.join(ADAPTER_WEIGHT_FILES)}) in {folder}")


def base_model_file_fingerprint(model_name_or_path: str) -> str | None:
    """SHA-256 of a local base model file (a GGUF the run dequantized), None for a hub name or a folder:
    two copies of "the same" model assembled from packages need not hold the same bytes."""
    path = Path(model_name_or_path).expanduser()
    return file_sha256(path) if path.is_file() else None


class PromptPrefixCache:
    """Keys and values of the prompt prefixes many calls share, computed once per prefix.

    Every memory rewrite starts with the same system prompt and worked examples (~500 of its ~600
    tokens for the CPU proof's prompt): reusing their keys and values leaves only the rest of the
    prompt to prefill. The prefix is the chat template applied to all messages but the last, used
    only when its tokens begin the whole prompt's. Replies are not bit-identical to a whole-prompt
    prefill (bf16 sums run in another order), so a model using this caches its replies apart.
    """

    def __init__(self, max_entries: int = 8) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def prefix_lengths(self) -> list[int]:
        """The token counts of the prefixes held now."""
        return [len(key) for key in self._entries]

    def prefix_ids(self, tokenizer: Any, messages: list[Message], prompt_ids: list[int]) -> list[int]:
        """The tokens of `messages[:-1]` when they begin `prompt_ids` and leave some of it; else []."""
        if len(messages) < 2:
            return []
        prefix = list(tokenizer.apply_chat_template(messages[:-1], return_dict=True)["input_ids"])
        if 0 < len(prefix) < len(prompt_ids) and prompt_ids[: len(prefix)] == prefix:
            return prefix
        return []

    def cache_for(self, model: Any, prefix: list[int]) -> Any:
        """A fresh copy of the prefix's keys and values (generate extends the copy it is given)."""
        import torch
        from transformers import DynamicCache

        key = tuple(prefix)
        if key in self._entries:
            self.hits += 1
            self._entries.move_to_end(key)
        else:
            self.misses += 1
            with torch.no_grad():
                output = model(
                    input_ids=torch.tensor([prefix], device=model.device),
                    past_key_values=DynamicCache(config=model.config),
                    use_cache=True,
                )
            self._entries[key] = output.past_key_values
            if len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return copy.deepcopy(self._entries[key])


def refuse_after_unsloth(device: str) -> None:
    """Raise when Unsloth is loaded in this process: it replaces the forward of transformers' model
    classes, and a model loaded by plain transformers then fails inside Unsloth's inference path
    (seen on an H200: `'Qwen2ForCausalLM' object has no attribute 'max_seq_length'`)."""
    if device.startswith("cuda") and "unsloth" in sys.modules:
        raise RuntimeError(
            "Unsloth is loaded in this process (GRPO training imported it) and has patched transformers' "
            "models, so HFChatModel cannot generate here: evaluate in a fresh process or kernel (notebook 07)"
        )


class HFChatModel:
    """A transformers chat model (+ optional LoRA adapter) implementing `ChatModel`.

    Generation runs in a worker thread under a lock (one generate at a time per model), greedy at
    temperature 0, with the tokenizer's chat template. `chat()` is a synchronous convenience for
    notebooks.
    """

    def __init__(
        self,
        model_name_or_path: str,
        adapter_path: str | None = None,
        gguf_file: str | None = None,
        device: str | None = None,
        dtype: Any = None,
        max_new_tokens_default: int = 256,
        name: str | None = None,
        merge_adapter: bool = False,
        prefix_cache: bool = False,
    ) -> None:
        """`merge_adapter` folds the LoRA weights into the base ones once (generation then costs what the
        base model's does; an unmerged adapter adds ~170 small products per decoded token): for
        evaluation only, the weights are not the base's any more (`base_fingerprint` is taken before).
        `prefix_cache` reuses the keys and values of shared prompt prefixes (`PromptPrefixCache`);
        its replies are cached under their own namespace."""
        self.model_name_or_path = str(model_name_or_path)
        self.adapter_path = str(adapter_path) if adapter_path is not None else None
        self.device = device or default_device()
        refuse_after_unsloth(self.device)
        self.max_new_tokens_default = max_new_tokens_default
        model, tokenizer = load_model_and_tokenizer(model_name_or_path, gguf_file, self.device, dtype)
        if self.adapter_path is not None:
            model = with_adapter(model, self.adapter_path, self.device)
        self._base_fingerprint: str | None = None
        if self.adapter_path is not None and merge_adapter:
            self._base_fingerprint = weights_fingerprint(model)
            model = model.merge_and_unload()
        model.eval()
        self.model = model
        self.tokenizer = tokenizer
        self.adapter_fingerprint: str | None = (
            adapter_file_fingerprint(self.adapter_path) if self.adapter_path is not None else None
        )
        base_label = Path(split_gguf_path(model_name_or_path, gguf_file)[1] or self.model_name_or_path).name
        # the adapter's hash in the name: two runs' `checkpoint-10` folders must not share cached replies
        self.name = name or (
            f"{base_label}+{Path(self.adapter_path).name}@{self.adapter_fingerprint[:12]}"
            if self.adapter_fingerprint
            else base_label
        )
        self.dtype = dtype_label(next(model.parameters()).dtype)
        self.prefix_cache = PromptPrefixCache() if prefix_cache else None
        self.cache_namespace = hf_cache_namespace(self.dtype) + ("-prefix" if prefix_cache else "")
        self._lock = threading.Lock()

    def close(self) -> None:
        """Drop the weights (transfer evaluation loads one checkpoint after another)."""
        self.__dict__.pop("model", None)

    def base_fingerprint(self) -> str:
        """Hash of the base weights (computed once; LoRA tensors excluded)."""
        if self._base_fingerprint is None:
            self._base_fingerprint = weights_fingerprint(self.model)
        return self._base_fingerprint

    def differs_only_by_adapter(self, other: HFChatModel) -> bool:
        """True when both share identical base weights and their adapters differ (one may be absent)."""
        return (
            self.base_fingerprint() == other.base_fingerprint()
            and self.adapter_fingerprint != other.adapter_fingerprint
        )

    def _generate(
        self, messages: list[Message], max_tokens: int, temperature: float, seed: int
    ) -> ChatResult:
        import torch
        from transformers import GenerationConfig, set_seed

        encoded = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_dict=True, return_tensors="pt"
        )
        encoded = {key: value.to(self.model.device) for key, value in encoded.items()}
        prompt_tokens = int(encoded["input_ids"].shape[1])
        base_config = self.model.generation_config
        config = GenerationConfig(
            max_new_tokens=max_tokens,
            eos_token_id=base_config.eos_token_id,
            pad_token_id=base_config.pad_token_id,
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None,
            top_p=None,
            top_k=None,
        )
        with self._lock:
            started = time.perf_counter()
            reuse: dict[str, Any] = {}
            if self.prefix_cache is not None:
                prompt_ids = encoded["input_ids"][0].tolist()
                prefix = self.prefix_cache.prefix_ids(self.tokenizer, messages, prompt_ids)
                if prefix:
                    reuse["past_key_values"] = self.prefix_cache.cache_for(self.model, prefix)
            if temperature > 0:
                set_seed(seed)
            with torch.no_grad():
                output = self.model.generate(**encoded, generation_config=config, **reuse)
            latency = time.perf_counter() - started
        new_tokens = output[0, prompt_tokens:]
        text = self.tokenizer.decode(new_tokens, skip_special_tokens=True)
        eos_ids = base_config.eos_token_id
        eos_ids = set(eos_ids) if isinstance(eos_ids, list | tuple) else {eos_ids}
        ended = new_tokens.shape[0] > 0 and int(new_tokens[-1]) in eos_ids
        return ChatResult(
            text=text.strip(),
            prompt_tokens=prompt_tokens,
            completion_tokens=int(new_tokens.shape[0]),  # one sequence: no padding, EOS included
            latency_s=latency,
            cached=False,
            model=self.name,
            finish_reason="length" if new_tokens.shape[0] >= max_tokens and not ended else "stop",
        )

    async def achat(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> ChatResult:
        return await asyncio.to_thread(
            self._generate, messages, max_tokens or self.max_new_tokens_default, temperature, seed
        )

    def chat(self, messages: list[Message], **kwargs: Any) -> ChatResult:
        """Synchronous `achat` (for scripts; in a running event loop use `await achat`)."""
        return self._generate(
            messages,
            kwargs.get("max_tokens") or self.max_new_tokens_default,
            kwargs.get("temperature", 0.0),
            kwargs.get("seed", 0),
        )

    def __repr__(self) -> str:
        return f"HFChatModel(name={self.name!r}, device={self.device!r}, adapter={self.adapter_path!r})"
