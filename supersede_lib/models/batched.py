"""A transformers chat model that serves concurrent `achat` calls in batches (one `generate` each).

The runner keeps up to N questions in flight, each waiting on one call. One worker thread owns
the model and its tokenizer: it collects the calls that arrive within a short window (or until
the batch is full), left-pads them with the tokenizer, runs ONE greedy `generate`, and resolves
each caller's future with its own `ChatResult`. Requests with different `max_tokens` share a
batch: a per-row stopping criterion ends each row at its own limit, and greedy decoding is causal,
so a row's tokens do not depend on how long the others run. A request that cannot run (a prompt
longer than the context) fails alone; if a whole batch fails, its requests are retried one by one
so only the culprit fails. Sampled calls (temperature > 0) run alone, seeded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from supersede_lib.models.chat import (
    ChatResult,
    ContextOverflowError,
    Message,
    ModelCallError,
    ModelConfigError,
    one_line,
)
from supersede_lib.models.hf import (
    adapter_file_fingerprint,
    load_model_and_tokenizer,
    split_gguf_path,
    with_adapter,
)

DEFAULT_MAX_BATCH_SIZE = 8
DEFAULT_BATCH_WINDOW_S = 0.05  # callers resubmit within milliseconds of their previous reply
DEFAULT_MAX_BATCH_TOKENS = 32768  # rows x padded prompt length; bounds attention memory of long prompts


@dataclass
class _Request:
    messages: list[Message]
    max_tokens: int
    temperature: float
    seed: int
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    submitted: float = field(default_factory=time.perf_counter)
    input_ids: list[int] = field(default_factory=list)


def _dtype(name: Any, device: str) -> Any:
    """A torch dtype from a name ("bfloat16", "float32", "auto"/None: bf16 on CUDA, fp32 on CPU)."""
    import torch

    if name is None or name == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if isinstance(name, str):
        return getattr(torch, name)
    return name


class BatchedHFChatModel:
    """A transformers causal LM behind `ChatModel` that batches concurrent calls.

    `model_name_or_path` is a hub id, a `save_pretrained` folder or a GGUF file (dequantised once
    by `hf.materialize_gguf`). The model loads on first use. `generate_calls`, `batch_sizes` and
    `generate_s` count what the worker ran (for tests and the bench).
    """

    def __init__(
        self,
        model_name_or_path: str | os.PathLike,
        *,
        gguf_file: str | None = None,
        device: str = "cpu",
        dtype: Any = None,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        name: str | None = None,
        default_max_tokens: int = 512,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        batch_window_s: float = DEFAULT_BATCH_WINDOW_S,
        max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
        adapter_path: str | os.PathLike | None = None,
    ) -> None:
        """`adapter_path`: a PEFT adapter folder merged into the weights at load (a trained policy judged
        at this engine's speed); its hash joins the name, so its replies never mix with the base's."""
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        self.model_name_or_path = str(model_name_or_path)
        self.gguf_file = gguf_file
        self.device = device
        self.dtype = dtype
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.default_max_tokens = default_max_tokens
        self.max_batch_size = max_batch_size
        self.batch_window_s = batch_window_s
        self.max_batch_tokens = max_batch_tokens
        source, gguf = split_gguf_path(model_name_or_path, gguf_file)
        if gguf is not None and not (Path(source) / gguf).is_file():
            raise ModelConfigError(f"GGUF model file not found: {Path(source) / gguf}")
        self.adapter_path = str(adapter_path) if adapter_path is not None else None
        base_name = Path(gguf).stem if gguf else Path(source).name
        if self.adapter_path is not None:
            base_name += f"+{Path(self.adapter_path).name}@{adapter_file_fingerprint(self.adapter_path)[:12]}"
        self.name = name or base_name
        dtype_label = dtype if isinstance(dtype, str) else str(dtype or "auto").replace("torch.", "")
        self.cache_namespace = f"transformers-{dtype_label}"
        self.generate_calls = 0
        self.batch_sizes: list[int] = []
        self.generate_s = 0.0
        self.model: Any = None
        self.tokenizer: Any = None
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._held: _Request | None = None  # encoded but did not fit the last batch
        self._load_lock = threading.Lock()
        self._worker: threading.Thread | None = None

    @property
    def loaded(self) -> bool:
        return self.model is not None

    def load(self) -> None:
        """Load the weights and start the batching worker (idempotent, thread-safe)."""
        with self._load_lock:
            if self.model is not None:
                return
            import torch

            if self.n_threads is not None:
                torch.set_num_threads(self.n_threads)
            model, tokenizer = load_model_and_tokenizer(
                self.model_name_or_path, self.gguf_file, self.device, _dtype(self.dtype, self.device)
            )
            if self.adapter_path is not None:
                model = with_adapter(model, self.adapter_path, self.device).merge_and_unload()
            model.eval()
            if self.n_ctx is None:
                self.n_ctx = int(getattr(model.config, "max_position_embeddings", 0) or 32768)
            self.tokenizer = tokenizer
            self.model = model
            self._worker = threading.Thread(target=self._serve, name=f"batched-{self.name}", daemon=True)
            self._worker.start()

    def close(self) -> None:
        """Stop the worker and drop the weights; a later call loads them again."""
        with self._load_lock:
            if self._worker is not None:
                self._queue.put(None)
                self._worker.join()
                self._worker = None
            self.model = None
            self.tokenizer = None

    def submit(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> concurrent.futures.Future:
        """Queue one call; the future resolves to its `ChatResult` (or its own error)."""
        self.load()
        request = _Request(
            messages=messages,
            max_tokens=max_tokens or self.default_max_tokens,
            temperature=temperature,
            seed=seed,
        )
        self._queue.put(request)
        return request.future

    async def achat(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> ChatResult:
        if not self.loaded:
            await asyncio.to_thread(self.load)
        future = self.submit(messages, max_tokens=max_tokens, temperature=temperature, seed=seed)
        return await asyncio.wrap_future(future)

    def chat(self, messages: list[Message], **kwargs: Any) -> ChatResult:
        """Blocking call (scripts); concurrent callers from other threads still share batches."""
        return self.submit(messages, **kwargs).result()

    # ---- worker thread: the only user of the tokenizer and the model ----

    def _encode(self, request: _Request) -> bool:
        """Tokenise through the chat template; False (and the request failed) when it cannot run."""
        if not request.future.set_running_or_notify_cancel():
            return False  # the caller gave up
        try:
            encoded = self.tokenizer.apply_chat_template(
                request.messages, add_generation_prompt=True, return_dict=True
            )
            request.input_ids = list(encoded["input_ids"])
        except Exception as error:  # a malformed message list fails this call only
            request.future.set_exception(
                ModelCallError(f"{self.name}: cannot apply the chat template: {error}")
            )
            return False
        if len(request.input_ids) >= self.n_ctx:
            request.future.set_exception(
                ContextOverflowError(
                    f"{self.name}: prompt of {len(request.input_ids)} tokens exceeds n_ctx={self.n_ctx}"
                    " (raise n_ctx or shorten the prompt)"
                )
            )
            return False
        return True

    def _next_request(self, timeout: float | None) -> _Request | None:
        """The next runnable request (held-over first); None on timeout or shutdown."""
        while True:
            if self._held is not None:
                request, self._held = self._held, None
                return request
            try:
                request = self._queue.get(timeout=timeout)
            except queue.Empty:
                return None
            if request is None:
                self._queue.put(None)  # keep the shutdown signal for the outer loop
                return None
            if self._encode(request):
                return request

    def _collect(self) -> list[_Request] | None:
        """Block for a first request, then gather more for `batch_window_s`; None means shut down."""
        first = self._next_request(timeout=None)
        if first is None:
            return None
        batch = [first]
        if first.temperature > 0:
            return batch
        deadline = time.monotonic() + self.batch_window_s
        while len(batch) < self.max_batch_size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            request = self._next_request(timeout=remaining)
            if request is None:
                break
            width = max(len(item.input_ids) + item.max_tokens for item in [*batch, request])
            if request.temperature > 0 or width * (len(batch) + 1) > self.max_batch_tokens:
                self._held = request  # first of the next batch
                break
            batch.append(request)
        return batch

    def _serve(self) -> None:
        while True:
            batch = self._collect()
            if batch is None:
                if self._queue.get() is None:  # consume the shutdown signal
                    return
                continue
            self._run_batch(batch)

    def _run_batch(self, batch: list[_Request]) -> None:
        try:
            results = self._generate(batch)
        except Exception as error:
            if len(batch) == 1:
                batch[0].future.set_exception(
                    ModelCallError(f"{self.name}: generate failed: {one_line(error)}")
                )
                return
            for request in batch:  # retry alone, so only the request that breaks generate fails
                self._run_batch([request])
            return
        for request, result in zip(batch, results, strict=True):
            request.future.set_result(result)

    def _generate(self, batch: list[_Request]) -> list[ChatResult]:
        import torch
        from transformers import GenerationConfig, StoppingCriteriaList, set_seed

        padded = self.tokenizer.pad(
            {"input_ids": [request.input_ids for request in batch]}, padding=True, return_tensors="pt"
        )
        padded = {key: value.to(self.model.device) for key, value in padded.items()}
        width = int(padded["input_ids"].shape[1])
        limits = [min(request.max_tokens, self.n_ctx - len(request.input_ids)) for request in batch]
        base = self.model.generation_config
        temperature = batch[0].temperature  # a sampled request always runs alone
        config = GenerationConfig(
            max_new_tokens=max(limits),
            eos_token_id=base.eos_token_id,
            pad_token_id=base.pad_token_id,
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None,
            top_p=None,
            top_k=None,
        )
        stopping = StoppingCriteriaList([_RowLimits(width, limits)]) if len(set(limits)) > 1 else None
        started = time.perf_counter()
        if temperature > 0:
            set_seed(batch[0].seed)
        with torch.no_grad():
            output = self.model.generate(**padded, generation_config=config, stopping_criteria=stopping)
        finished = time.perf_counter()
        self.generate_calls += 1
        self.generate_s += finished - started
        self.batch_sizes.append(len(batch))
        eos_ids = base.eos_token_id
        eos_ids = {eos_ids} if isinstance(eos_ids, int) else set(eos_ids or ())
        results = []
        for row, (request, limit) in enumerate(zip(batch, limits, strict=True)):
            new_tokens = output[row, width : width + limit].tolist()
            end = next(
                (index + 1 for index, token in enumerate(new_tokens) if token in eos_ids), len(new_tokens)
            )
            new_tokens = new_tokens[:end]  # EOS counted, as a lone generate would return it
            results.append(
                ChatResult(
                    text=self.tokenizer.decode(new_tokens, skip_special_tokens=True).strip(),
                    prompt_tokens=len(request.input_ids),
                    completion_tokens=len(new_tokens),
                    latency_s=finished - request.submitted,
                    model=self.name,
                )
            )
        return results

    def __repr__(self) -> str:
        return (
            f"BatchedHFChatModel(name={self.name!r}, device={self.device!r}, dtype={self.dtype!r}, "
            f"max_batch_size={self.max_batch_size})"
        )


class _RowLimits:
    """A stopping criterion that ends each row at its own number of new tokens."""

    def __init__(self, prompt_width: int, limits: list[int]) -> None:
        self.prompt_width = prompt_width
        self.limits = limits

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        limits = torch.tensor(self.limits, device=input_ids.device)
        return (input_ids.shape[1] - self.prompt_width) >= limits
