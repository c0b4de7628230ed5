"""An embedded GGUF model: llama.cpp in-process through `xllamacpp`, so notebooks need no server or key.

`EmbeddedGGUFModel` runs a GGUF file on CPU behind `ChatModel` (and can expose llama.cpp's own
OpenAI-compatible HTTP port); `resolve_default_gguf` finds the model file locally or downloads it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import huggingface_hub

from supersede_lib.models.chat import (
    ChatResult,
    ContextOverflowError,
    EmbedResult,
    Message,
    ModelCallError,
    ModelConfigError,
    one_line,
)
from supersede_lib.models.lora_gguf import adapted_model_name, convert_lora_adapter, read_lora_adapter
from supersede_lib.models.openai_api import MalformedResponse, read_embeddings, read_tool_calls

logger = logging.getLogger(__name__)

DEFAULT_GGUF_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
DEFAULT_GGUF_REPO = "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"
MODEL_DIR_ENV = "SUPERSEDE_MODEL_DIR"
THREADS_ENV = "SUPERSEDE_N_THREADS"  # CPU threads of the embedded model when a spec sets none


def threads_from_env() -> int | None:
    """`SUPERSEDE_N_THREADS` as a positive int (None when unset: llama.cpp picks)."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ModelConfigError(f"{THREADS_ENV} must be a positive whole number of CPU threads, got {raw!r}")
    return int(raw)


class EmbeddedGGUFModel:
    """A GGUF model run in-process on CPU by `xllamacpp` (llama.cpp's server engine).

    The model loads on first use. Calls run in a worker thread (`asyncio.to_thread`; xllamacpp
    releases the GIL) so the event loop stays responsive; at most `n_parallel` at once. With one slot
    (the default) calls are serialised; with more, llama.cpp decodes the in-flight requests together
    (continuous batching, each slot with its own `n_ctx` and prompt cache): more replies a second on
    a CPU, but a batch can round differently from a lone request, so such replies are cached under
    their own namespace (`embedded-slots`), never mixed with one-slot replies.
    Temperature 0 is greedy decoding. `max_tokens=None` uses `default_max_tokens`, because an
    uncapped small model can ramble until the context is full.

    xllamacpp also serves llama.cpp's OpenAI-compatible HTTP API on a random 127.0.0.1 port:
    `serve()` returns that base URL (ending in /v1) for `vf-eval -b` or `OpenAIChatModel`.

    `lora_adapter` (a PEFT folder or a kept adapter record) is converted to a GGUF adapter
    (`lora_gguf`) and applied by llama.cpp at full strength; the name gains `+<adapter>@<sha>`.
    """

    def __init__(
        self,
        model_path: str | Path,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        name: str | None = None,
        default_max_tokens: int = 512,
        verbose: bool = False,
        lora_adapter: str | Path | None = None,
        n_parallel: int = 1,
        embeddings: bool = True,
    ) -> None:
        if n_parallel < 1:
            raise ModelConfigError(f"n_parallel must be at least 1, got {n_parallel}")
        self.model_path = Path(model_path).expanduser()
        if not self.model_path.is_file():
            raise ModelConfigError(
                f"GGUF model file not found: {self.model_path} (set {MODEL_DIR_ENV} or pass a model_path)"
            )
        # read (and hashed) now: a missing or damaged adapter fails here, and the name carries its hash
        self.lora_adapter = read_lora_adapter(lora_adapter) if lora_adapter is not None else None
        self.name = name or self.model_path.stem
        if self.lora_adapter is not None:
            self.name = adapted_model_name(self.name, self.lora_adapter)
        self.n_ctx = n_ctx
        self.n_threads = n_threads if n_threads is not None else threads_from_env()
        self.default_max_tokens = default_max_tokens
        self.verbose = verbose
        self.n_parallel = n_parallel
        self.embeddings = embeddings
        self.cache_namespace = "embedded" if n_parallel == 1 else "embedded-slots"
        self._server: Any = None
        self._load_lock = threading.Lock()
        self._call_slots = threading.BoundedSemaphore(n_parallel)

    @property
    def loaded(self) -> bool:
        return self._server is not None

    def load(self) -> None:
        """Load the model once (idempotent, thread-safe)."""
        with self._load_lock:
            if self._server is not None:
                return
            try:
                import xllamacpp
            except ImportError as error:
                raise ModelConfigError(
                    "the embedded backend needs xllamacpp: pip install xllamacpp (or pip install -e '.[embedded]')"
                ) from error
            converted = None
            if self.lora_adapter is not None:
                converted = convert_lora_adapter(self.lora_adapter, self.model_path)
            params = server_params(
                self.model_path,
                n_ctx=self.n_ctx,
                n_parallel=self.n_parallel,
                n_threads=self.n_threads,
                verbose=self.verbose,
                lora_gguf=converted,
            )
            if self.serves_embeddings:
                serve_embeddings(params)
            adapter_note = ""
            if converted is not None:
                adapter_note = f" and LoRA adapter {converted} (from {self.lora_adapter.source})"
            try:
                self._server = xllamacpp.Server(params)
            except RuntimeError as error:
                raise ModelConfigError(
                    f"xllamacpp could not load {self.model_path}{adapter_note} with n_ctx={self.n_ctx} "
                    f"({one_line(error)}): check that the file is a complete GGUF and that there is enough memory"
                ) from error

    def serve(self) -> str:
        """Load the model and return its OpenAI-compatible base URL (http://127.0.0.1:PORT/v1)."""
        self.load()
        return self._server.listening_address.rstrip("/") + "/v1"

    @property
    def base_url(self) -> str:
        return self.serve()

    def close(self) -> None:
        """Free the model (and stop its HTTP listener); a later call loads it again."""
        with self._load_lock:
            for _ in range(self.n_parallel):  # every call in flight finishes first
                self._call_slots.acquire()
            self._server = None
            for _ in range(self.n_parallel):
                self._call_slots.release()

    @property
    def serves_embeddings(self) -> bool:
        """Asked for (`embeddings`, the default) and one slot only: this llama.cpp build aborts at load
        (a ggml assert) with embeddings on and several slots."""
        return self.embeddings and self.n_parallel == 1

    def missing_capabilities(self, needs: frozenset[str]) -> dict[str, str]:
        """Tools go through the model's own chat template (llama.cpp's Jinja, on by default);
        embeddings are on with one slot (`serves_embeddings`)."""
        if "embeddings" in needs and not self.serves_embeddings:
            why = "were turned off" if not self.embeddings else f"need one slot, not {self.n_parallel}"
            return {"embeddings": f"{self.name}: llama.cpp's embeddings {why}"}
        return {}

    def request_body(
        self,
        messages: list[Message],
        max_tokens: int | None,
        temperature: float,
        seed: int,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messages": messages,
            "max_tokens": self.default_max_tokens if max_tokens is None else max_tokens,
            "temperature": temperature,
            "seed": seed,
            "cache_prompt": True,  # reuse the KV cache for the shared system prompt
        }
        if tools:
            body["tools"] = tools
        if response_format:
            body["response_format"] = response_format  # llama.cpp turns a JSON schema into a grammar
        return body

    def chat(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> ChatResult:
        """Blocking call (used by `achat` in a worker thread; handy in scripts)."""
        self.load()
        body = self.request_body(messages, max_tokens, temperature, seed, tools, response_format)
        with self._call_slots:
            started = time.perf_counter()
            try:
                response = self._server.handle_chat_completions(body)
            except ValueError as error:  # xllamacpp raises on malformed requests
                raise ModelCallError(f"{self.name}: request rejected: {one_line(error)}") from error
            latency_s = time.perf_counter() - started
        return chat_result_from_llamacpp(response, model=self.name, latency_s=latency_s)

    async def achat(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> ChatResult:
        return await asyncio.to_thread(
            self.chat,
            messages,
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
            tools=tools,
            response_format=response_format,
        )

    def embed(self, texts: list[str]) -> EmbedResult:
        """One mean-pooled vector per text from llama.cpp's embeddings endpoint (blocking)."""
        self.load()
        with self._call_slots:
            started = time.perf_counter()
            try:
                response = self._server.handle_embeddings({"input": list(texts), "model": self.name})
                vectors, prompt_tokens = read_embeddings(response, list(texts))
            except (ValueError, MalformedResponse) as error:
                raise ModelCallError(f"{self.name}: embeddings failed: {one_line(error)}") from error
            latency_s = time.perf_counter() - started
        return EmbedResult(vectors, prompt_tokens, latency_s, model=self.name)

    async def aembed(self, texts: list[str]) -> EmbedResult:
        return await asyncio.to_thread(self.embed, texts)


def server_params(
    model_path: str | Path,
    *,
    n_ctx: int,
    n_parallel: int = 1,
    n_threads: int | None = None,
    verbose: bool = False,
    lora_gguf: str | Path | None = None,
) -> Any:
    """llama.cpp's server params for `model_path`: `n_ctx` tokens in each of `n_parallel` slots,
    `n_threads` (None: llama.cpp's default), quiet unless `verbose`, a GGUF LoRA at full strength."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model_path)
    params.n_ctx = n_ctx * n_parallel  # llama.cpp divides the context among its slots
    params.n_parallel = n_parallel
    if n_threads is not None:
        params.cpuparams.n_threads = n_threads
        params.cpuparams_batch.n_threads = n_threads
    if not verbose:
        params.verbosity = -1  # llama.cpp logs every request on stderr otherwise
    if lora_gguf is not None:
        params.lora_adapters = [xllamacpp.CommonAdapterLoraInfo(str(lora_gguf), 1.0)]
    return params


def serve_embeddings(params: Any) -> None:
    """Turn on /v1/embeddings beside chat in llama.cpp's server params (Mem0's vectors: mean-pooled
    hidden states); chat replies and their speed are the same as without it (greedy, SmolLM2-135M and
    Qwen2.5-Coder-0.5B)."""
    import xllamacpp

    params.embedding = True
    params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN


def chat_result_from_llamacpp(response: dict[str, Any], *, model: str, latency_s: float) -> ChatResult:
    """Turn llama.cpp's OpenAI-style dict (or its error dict) into a `ChatResult`."""
    error = response.get("error") if isinstance(response.get("error"), dict) else None
    if error is None and "choices" not in response and "message" in response:
        error = response  # xllamacpp's own top-level {"code", "type", "message"} on a bad reply
    if error is not None:
        message = one_line(error.get("message", error))
        if error.get("type") == "exceed_context_size_error":
            raise ContextOverflowError(
                f"{model}: prompt of {error.get('n_prompt_tokens', '?')} tokens exceeds n_ctx={error.get('n_ctx', '?')}"
                " (raise n_ctx or shorten the prompt)"
            )
        raise ModelCallError(
            f"{model}: llama.cpp error {error.get('code', '?')} ({error.get('type', '?')}): {message}"
        )
    try:
        choice = response["choices"][0]
        text = choice["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError) as failure:
        raise ModelCallError(
            f"{model}: llama.cpp reply has no choices[0].message: {one_line(response)}"
        ) from failure
    usage = response.get("usage") or {}
    return ChatResult(
        text=text,
        prompt_tokens=int(usage.get("prompt_tokens", 0) or 0),
        completion_tokens=int(usage.get("completion_tokens", 0) or 0),
        latency_s=latency_s,
        model=model,
        finish_reason=choice.get("finish_reason"),
        tool_calls=read_tool_calls(choice["message"].get("tool_calls")),
    )


def default_model_dir() -> Path:
    """Where `provision-models.sh` puts GGUF files: ~/.cache/supersede/models."""
    return Path.home() / ".cache" / "supersede" / "models"


def _lookup_folders(model_dir: str | Path | None) -> list[Path]:
    explicit = Path(model_dir).expanduser() if model_dir is not None else None
    env_dir = os.environ.get(MODEL_DIR_ENV, "").strip()
    folders = [folder for folder in (explicit, Path(env_dir).expanduser() if env_dir else None) if folder]
    return [*folders, default_model_dir()]


def find_local_gguf(model_dir: str | Path | None = None, filename: str = DEFAULT_GGUF_FILE) -> Path | None:
    """The GGUF file on this machine (`resolve_default_gguf`'s lookup, no download), or None.

    An explicit `model_dir` naming a .gguf file that does not exist is an error, not a miss.
    """
    explicit = Path(model_dir).expanduser() if model_dir is not None else None
    if explicit is not None and explicit.suffix == ".gguf":
        if explicit.is_file():
            return explicit
        raise ModelConfigError(f"GGUF model file not found: {explicit} (check the model path)")
    for folder in _lookup_folders(model_dir):
        candidate = folder / filename
        if candidate.is_file():
            return candidate
    return None


def resolve_default_gguf(
    model_dir: str | Path | None = None,
    filename: str = DEFAULT_GGUF_FILE,
    repo_id: str = DEFAULT_GGUF_REPO,
    revision: str | None = None,
    sha256: str | None = None,
) -> Path:
    """Find a GGUF file locally, else download it with `huggingface_hub` into the model cache.

    Looked up in order: `model_dir` (a file, or a folder holding `filename`), the folder in
    `$SUPERSEDE_MODEL_DIR`, `~/.cache/supersede/models`. A download goes into the first of those
    folders that was given (else the home cache), so the next lookup finds it.

    A download is pinned and checked: the hub's metadata for `revision` (a spec's `revision:`,
    else the default branch) names the commit, the file's size and its LFS SHA-256; the file is
    fetched at that exact commit and its size and SHA-256 (the spec's `sha256:` when given, else
    upstream's) are checked. A file that does not match is moved aside and the error says so.
    """
    found = find_local_gguf(model_dir, filename)
    if found is not None:
        return found
    folders = _lookup_folders(model_dir)
    try:
        pinned = _pinned_download(repo_id, filename, revision, folders[0])
    except Exception as error:  # offline, gated, missing file: all mean "provide the file yourself"
        searched = ", ".join(str(folder) for folder in folders)
        raise ModelConfigError(
            f"{filename} is not in {searched} and could not be downloaded from {repo_id} "
            f"({type(error).__name__}: {one_line(error, 160)}): set {MODEL_DIR_ENV} to a folder holding it "
            "or pass a model_path"
        ) from error
    path, commit, size, upstream_sha256 = pinned
    check_downloaded_file(path, size=size, sha256=sha256 or upstream_sha256, source=f"{repo_id}@{commit}")
    return path


class DownloadMismatchError(ModelConfigError):
    """A downloaded file is not the one upstream published (size or SHA-256)."""


def _pinned_download(
    repo_id: str, filename: str, revision: str | None, download_dir: Path
) -> tuple[Path, str | None, int | None, str | None]:
    """Download `filename` at the commit `revision` resolves to; (path, commit, size, LFS sha256)."""
    url = huggingface_hub.hf_hub_url(repo_id, filename, revision=revision)
    metadata = huggingface_hub.get_hf_file_metadata(url)
    commit = metadata.commit_hash or revision
    etag = (metadata.etag or "").strip('"').lower()
    lfs_sha256 = etag if len(etag) == 64 and all(char in "0123456789abcdef" for char in etag) else None
    downloaded = huggingface_hub.hf_hub_download(
        repo_id=repo_id, filename=filename, revision=commit, local_dir=download_dir
    )
    logger.info("downloaded %s from %s at commit %s", filename, repo_id, commit)
    return Path(downloaded), commit, metadata.size, lfs_sha256


def file_sha256(path: Path) -> str:
    """SHA-256 of a file read in blocks (model files run to gigabytes)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_downloaded_file(path: Path, *, size: int | None, sha256: str | None, source: str) -> None:
    """Raise `DownloadMismatchError` (the file moved aside to `<name>.mismatch`) unless `path` has
    the expected size and SHA-256 (each checked when known)."""
    actual_size = path.stat().st_size
    problem = None
    if size is not None and actual_size != size:
        problem = f"{actual_size} bytes, expected {size}"
    elif sha256 is not None and (actual := file_sha256(path)) != sha256.lower():
        problem = f"SHA-256 {actual}, expected {sha256.lower()}"
    if problem is None:
        return
    aside = path.with_name(path.name + ".mismatch")
    os.replace(path, aside)
    raise DownloadMismatchError(
        f"{path.name} downloaded from {source} is not the published file ({problem}); moved aside to {aside}: "
        "download it again, or put the right file there yourself"
    )
