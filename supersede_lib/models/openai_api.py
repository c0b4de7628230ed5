"""Model backends behind the one `ChatModel` interface.

- `OpenAIChatModel`: any OpenAI-compatible chat-completions server (OpenAI, vLLM, llama.cpp,
  `fake_server`), through the official `openai` SDK with our own explicit retry policy.
- `EmbeddedGGUFModel`: in-process CPU inference on a GGUF file through `xllamacpp`, so the
  notebooks run with no server and no key.
- `make_chat_model(spec)`: build either (or the transformers backend in `hf_model`) from a
  profile's plain dict, optionally behind the persistent response cache.

Errors are split by what the user should do: `ModelConfigError` (fix a setting: key, URL,
model name, file), `ModelCallError` (the call kept failing for a transient reason, or the
server answered garbage), `ContextOverflowError` (this prompt does not fit the model).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import threading
import time
from collections.abc import Awaitable, Callable
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from supersede_lib.models.chat import ChatModel, ChatResult, Message


class ModelError(RuntimeError):
    """Base class for every backend failure, so a runner can catch one type."""


class ModelConfigError(ModelError):
    """A setting is wrong or missing (key, URL, model name, model file); the message says which."""


class ModelCallError(ModelError):
    """The call failed after all retries, or the backend returned something unusable."""


class ContextOverflowError(ModelCallError):
    """The prompt is longer than the model's context window."""


# --------------------------------------------------------------------------- defaults

DEFAULT_GGUF_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
DEFAULT_GGUF_REPO = "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"
MODEL_DIR_ENV = "SUPERSEDE_MODEL_DIR"
THREADS_ENV = "SUPERSEDE_N_THREADS"  # CPU threads of the embedded model when a spec sets none
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})
LOCAL_PLACEHOLDER_KEY = "EMPTY"  # local servers (vLLM, llama.cpp, fake_server) accept any key

# Reasoning models reject `temperature` and `max_tokens`; they take `max_completion_tokens`.
REASONING_MODEL_PREFIXES = ("gpt-5", "o1", "o3", "o4")

# USD per 1M tokens (input, output), standard tier, no cached-input discount. Taken from the model
# pages at developers.openai.com / openai.com/api/pricing (gpt-5.4: $2.50/$15.00 as listed in 2026;
# the gpt-4.1 and gpt-4o families as listed in 2025). Prices change: treat the result as an
# estimate and check the pricing page before budgeting a paid run.
PRICE_USD_PER_MILLION_TOKENS: dict[str, tuple[float, float]] = {
    "gpt-5.4": (2.50, 15.00),
    "gpt-5.4-mini": (0.75, 4.50),
    "gpt-5.4-nano": (0.20, 1.25),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "o3": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
}
_DATED_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def is_reasoning_model(model: str) -> bool:
    """True for OpenAI reasoning families (gpt-5*, o1*, o3*, o4*), matched on the bare model id."""
    return model.split("/")[-1].startswith(REASONING_MODEL_PREFIXES)


def estimate_cost_usd(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Estimated USD cost from `PRICE_USD_PER_MILLION_TOKENS`; None for a model not in the table.

    A dated snapshot (`gpt-4.1-mini-2025-04-14`) is priced as its base model; any other suffix
    (e.g. `gpt-4o-audio-preview`) is unknown rather than guessed.
    """
    base = _DATED_SNAPSHOT.sub("", model.split("/")[-1])
    prices = PRICE_USD_PER_MILLION_TOKENS.get(base)
    if prices is None:
        return None
    input_price, output_price = prices
    return (prompt_tokens * input_price + completion_tokens * output_price) / 1_000_000


def is_local_url(base_url: str | None) -> bool:
    return base_url is not None and (urlsplit(base_url).hostname or "") in LOCAL_HOSTS


def _one_line(text: object, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# --------------------------------------------------------------------------- OpenAI-compatible

SleepFunction = Callable[[float], Awaitable[None]]


class _MalformedResponse(Exception):
    """The server answered 200 but the body is not a usable chat completion."""


class OpenAIChatModel:
    """An OpenAI-compatible chat endpoint with an explicit, testable retry policy.

    Retried (exponential backoff, full jitter, `Retry-After` honoured up to `backoff_max_s`):
    408/409/429, 5xx, timeouts, connection errors and malformed bodies. Not retried: 400, 401,
    403, 404, 422 (raised at once as `ModelConfigError`, or `ContextOverflowError` for a prompt
    that is too long). The SDK's own retries are off so every attempt is visible here.

    The API key is read from `api_key_env` when the model is built. A missing key is an error,
    except for a `base_url` on localhost/127.0.0.1, where a placeholder key is sent (local
    servers ignore it).
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 120,
        max_retries: int = 6,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30,
        extra_params: dict[str, Any] | None = None,
        reasoning_effort: str | None = None,
        name: str | None = None,
        sleep: SleepFunction = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.model = model
        self.name = name or model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.extra_params = dict(extra_params or {})
        self.reasoning_effort = reasoning_effort
        self.cache_namespace = f"openai:{base_url or 'default'}"
        self._sleep = sleep
        self._jitter = jitter
        self._api_key = self._read_api_key()
        # httpx connection pools are bound to one event loop: keep one client per loop (holding the
        # loop itself, not its id, so a new loop at a recycled address never gets a stale client)
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._async_client: Any = None
        self.call_count = 0
        self.attempt_count = 0
        self.retry_count = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    @property
    def endpoint(self) -> str:
        return self.base_url or "the default OpenAI endpoint"

    def _read_api_key(self) -> str:
        key = os.environ.get(self.api_key_env, "").strip()
        if key:
            return key
        if is_local_url(self.base_url):
            return LOCAL_PLACEHOLDER_KEY
        raise ModelConfigError(
            f"set {self.api_key_env} (or pass api_key_env=... naming the variable that holds the key) "
            f"to call {self.model} at {self.endpoint}"
        )

    def _client(self) -> Any:
        import openai

        loop = asyncio.get_running_loop()
        if self._async_client is None or self._client_loop is not loop:
            self._async_client = openai.AsyncOpenAI(
                api_key=self._api_key, base_url=self.base_url, timeout=self.timeout_s, max_retries=0
            )
            self._client_loop = loop
        return self._async_client

    def request_params(
        self, messages: list[Message], max_tokens: int | None, temperature: float, seed: int
    ) -> dict[str, Any]:
        """The keyword arguments sent to `chat.completions.create` (reasoning models differ)."""
        params: dict[str, Any] = {"model": self.model, "messages": messages, "seed": seed}
        if is_reasoning_model(self.model):
            if max_tokens is not None:
                params["max_completion_tokens"] = max_tokens
            if self.reasoning_effort is not None:
                params["reasoning_effort"] = self.reasoning_effort
        else:
            params["temperature"] = temperature
            if max_tokens is not None:
                params["max_tokens"] = max_tokens
        params.update(self.extra_params)
        return params

    def backoff_delay(self, retry_index: int, retry_after_s: float | None = None) -> float:
        """Full jitter: uniform in [0, min(max, base * 2**retry_index)], at least `Retry-After`."""
        ceiling = min(self.backoff_max_s, self.backoff_base_s * (2**retry_index))
        delay = self._jitter() * ceiling
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, self.backoff_max_s))
        return delay

    async def achat(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> ChatResult:
        params = self.request_params(messages, max_tokens, temperature, seed)
        client = self._client()
        started = time.perf_counter()
        self.call_count += 1
        last_error: BaseException | None = None
        for attempt in range(self.max_retries + 1):
            if attempt > 0:
                self.retry_count += 1
                await self._sleep(self.backoff_delay(attempt - 1, _retry_after_seconds(last_error)))
            self.attempt_count += 1
            try:
                completion = await client.chat.completions.create(**params)
                text, prompt_tokens, completion_tokens = _read_completion(completion)
            except Exception as error:  # classified below; unknown errors propagate unchanged
                if not self._is_retryable(error):
                    raise
                last_error = error
                continue
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            return ChatResult(
                text=text,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                latency_s=time.perf_counter() - started,
                model=self.name,
            )
        raise self._exhausted_error(last_error)

    def _is_retryable(self, error: Exception) -> bool:
        """True for transient failures; raises the right error at once for permanent ones."""
        import openai

        if isinstance(
            error, openai.APIConnectionError | _MalformedResponse | openai.APIResponseValidationError
        ):
            return True
        if isinstance(error, ValueError):  # body that is not JSON (json.JSONDecodeError)
            return True
        if isinstance(error, openai.APIStatusError):
            status = error.status_code
            if status in (408, 409, 429) or status >= 500:
                return True
            raise self._status_error(error) from error
        return False

    def _status_error(self, error: Any) -> ModelError:
        status = error.status_code
        detail = _one_line(getattr(error, "message", error))
        where = f"model {self.model!r} at {self.endpoint}"
        if status == 401:
            return ModelConfigError(
                f"authentication failed (401) for {where}: check the key in {self.api_key_env}"
            )
        if status == 403:
            return ModelConfigError(
                f"permission denied (403) for {where}: the key in {self.api_key_env} lacks access ({detail})"
            )
        if status == 404:
            return ModelConfigError(
                f"not found (404) for {where}: check the model name and that base_url ends in /v1 ({detail})"
            )
        if status == 400 and _mentions_context_overflow(error):
            return ContextOverflowError(f"prompt too long for {where}: {detail}")
        return ModelConfigError(f"request rejected ({status}) by {where}: {detail}")

    def _exhausted_error(self, error: BaseException | None) -> ModelError:
        import openai

        attempts = self.max_retries + 1
        if isinstance(error, openai.APIConnectionError) and not isinstance(error, openai.APITimeoutError):
            return ModelConfigError(
                f"cannot reach {self.endpoint} after {attempts} attempts ({_one_line(error)}): "
                "check that the server is running and that base_url has the right host, port and /v1"
            )
        return ModelCallError(
            f"{self.model!r} at {self.endpoint} still failing after {attempts} attempts: "
            f"{type(error).__name__}: {_one_line(error)}"
        )

    def stats(self) -> dict[str, Any]:
        """Calls, attempts, retries, tokens and estimated cost so far (for run manifests)."""
        return {
            "model": self.model,
            "base_url": self.base_url,
            "calls": self.call_count,
            "attempts": self.attempt_count,
            "retries": self.retry_count,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "estimated_cost_usd": estimate_cost_usd(self.model, self.prompt_tokens, self.completion_tokens),
        }


def _read_completion(completion: Any) -> tuple[str, int, int]:
    """(text, prompt_tokens, completion_tokens) from an SDK response; `_MalformedResponse` if unusable."""
    try:
        message = completion.choices[0].message
        text = message.content or ""
    except (AttributeError, IndexError, KeyError, TypeError) as error:
        raise _MalformedResponse(
            f"response has no choices[0].message ({type(completion).__name__})"
        ) from error
    if not isinstance(text, str):
        raise _MalformedResponse(f"message content is {type(text).__name__}, not text")
    usage = getattr(completion, "usage", None)
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    return text, prompt_tokens, completion_tokens


def _retry_after_seconds(error: BaseException | None) -> float | None:
    """The server's `Retry-After` (seconds or HTTP date) from a status error, if any."""
    response = getattr(error, "response", None)
    header = response.headers.get("retry-after") if response is not None else None
    if not header:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(header).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _mentions_context_overflow(error: Any) -> bool:
    code = str(getattr(error, "code", "") or "")
    text = str(getattr(error, "message", "")).lower()
    return code == "context_length_exceeded" or "context length" in text or "context size" in text


# --------------------------------------------------------------------------- embedded GGUF


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

    The model loads on first use. Calls are serialised with a lock and run in a worker thread
    (`asyncio.to_thread`; xllamacpp releases the GIL) so the event loop stays responsive.
    Temperature 0 is greedy decoding. `max_tokens=None` uses `default_max_tokens`, because an
    uncapped small model can ramble until the context is full.

    xllamacpp also serves llama.cpp's OpenAI-compatible HTTP API on a random 127.0.0.1 port:
    `serve()` returns that base URL (ending in /v1) for `vf-eval -b` or `OpenAIChatModel`.
    """

    def __init__(
        self,
        model_path: str | Path,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        name: str | None = None,
        default_max_tokens: int = 512,
        verbose: bool = False,
    ) -> None:
        self.model_path = Path(model_path).expanduser()
        if not self.model_path.is_file():
            raise ModelConfigError(
                f"GGUF model file not found: {self.model_path} (set {MODEL_DIR_ENV} or pass a model_path)"
            )
        self.name = name or self.model_path.stem
        self.n_ctx = n_ctx
        self.n_threads = n_threads if n_threads is not None else threads_from_env()
        self.default_max_tokens = default_max_tokens
        self.verbose = verbose
        self.cache_namespace = "embedded"
        self._server: Any = None
        self._load_lock = threading.Lock()
        self._call_lock = threading.Lock()

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
            params = xllamacpp.CommonParams()
            params.model.path = str(self.model_path)
            params.n_ctx = self.n_ctx
            params.n_parallel = 1
            if self.n_threads is not None:
                params.cpuparams.n_threads = self.n_threads
                params.cpuparams_batch.n_threads = self.n_threads
            if not self.verbose:
                params.verbosity = -1  # llama.cpp logs every request on stderr otherwise
            try:
                self._server = xllamacpp.Server(params)
            except RuntimeError as error:
                raise ModelConfigError(
                    f"xllamacpp could not load {self.model_path} with n_ctx={self.n_ctx} ({_one_line(error)}): "
                    "check that the file is a complete GGUF and that there is enough memory"
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
        with self._load_lock, self._call_lock:
            self._server = None

    def request_body(
        self, messages: list[Message], max_tokens: int | None, temperature: float, seed: int
    ) -> dict[str, Any]:
        return {
            "messages": messages,
            "max_tokens": self.default_max_tokens if max_tokens is None else max_tokens,
            "temperature": temperature,
            "seed": seed,
            "cache_prompt": True,  # reuse the KV cache for the shared system prompt
        }

    def chat(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> ChatResult:
        """Blocking call (used by `achat` in a worker thread; handy in scripts)."""
        self.load()
        body = self.request_body(messages, max_tokens, temperature, seed)
        with self._call_lock:
            started = time.perf_counter()
            try:
                response = self._server.handle_chat_completions(body)
            except ValueError as error:  # xllamacpp raises on malformed requests
                raise ModelCallError(f"{self.name}: request rejected: {_one_line(error)}") from error
            latency_s = time.perf_counter() - started
        return chat_result_from_llamacpp(response, model=self.name, latency_s=latency_s)

    async def achat(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> ChatResult:
        return await asyncio.to_thread(
            self.chat, messages, max_tokens=max_tokens, temperature=temperature, seed=seed
        )


def chat_result_from_llamacpp(response: dict[str, Any], *, model: str, latency_s: float) -> ChatResult:
    """Turn llama.cpp's OpenAI-style dict (or its error dict) into a `ChatResult`."""
    error = response.get("error") if isinstance(response.get("error"), dict) else None
    if error is None and "choices" not in response and "message" in response:
        error = response  # xllamacpp's own top-level {"code", "type", "message"} on a bad reply
    if error is not None:
        message = _one_line(error.get("message", error))
        if error.get("type") == "exceed_context_size_error":
            raise ContextOverflowError(
                f"{model}: prompt of {error.get('n_prompt_tokens', '?')} tokens exceeds n_ctx={error.get('n_ctx', '?')}"
                " (raise n_ctx or shorten the prompt)"
            )
        raise ModelCallError(
            f"{model}: llama.cpp error {error.get('code', '?')} ({error.get('type', '?')}): {message}"
        )
    try:
        text = response["choices"][0]["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError) as failure:
        raise ModelCallError(
            f"{model}: llama.cpp reply has no choices[0].message: {_one_line(response)}"
        ) from failure
    usage = response.get("usage") or {}
    return ChatResult(
        text=text,
        prompt_tokens=int(usage.get("prompt_tokens", 0) or 0),
        completion_tokens=int(usage.get("completion_tokens", 0) or 0),
        latency_s=latency_s,
        model=model,
    )


# --------------------------------------------------------------------------- model files


def default_model_dir() -> Path:
    """Where `provision-models.sh` puts GGUF files: ~/.cache/supersede/models."""
    return Path.home() / ".cache" / "supersede" / "models"


def resolve_default_gguf(
    model_dir: str | Path | None = None,
    filename: str = DEFAULT_GGUF_FILE,
    repo_id: str = DEFAULT_GGUF_REPO,
) -> Path:
    """Find a GGUF file locally, else download it with `huggingface_hub` into the model cache.

    Looked up in order: `model_dir` (a file, or a folder holding `filename`), the folder in
    `$SUPERSEDE_MODEL_DIR`, `~/.cache/supersede/models`. A download goes into the first of those
    folders that was given (else the home cache), so the next lookup finds it.
    """
    explicit = Path(model_dir).expanduser() if model_dir is not None else None
    if explicit is not None and explicit.suffix == ".gguf":
        if explicit.is_file():
            return explicit
        raise ModelConfigError(f"GGUF model file not found: {explicit} (check the model path)")
    env_dir = os.environ.get(MODEL_DIR_ENV, "").strip()
    folders = [folder for folder in (explicit, Path(env_dir).expanduser() if env_dir else None) if folder]
    folders.append(default_model_dir())
    for folder in folders:
        candidate = folder / filename
        if candidate.is_file():
            return candidate
    download_dir = folders[0]
    try:
        from huggingface_hub import hf_hub_download

        downloaded = hf_hub_download(repo_id=repo_id, filename=filename, local_dir=download_dir)
    except Exception as error:  # offline, gated, missing file: all mean "provide the file yourself"
        searched = ", ".join(str(folder) for folder in folders)
        raise ModelConfigError(
            f"{filename} is not in {searched} and could not be downloaded from {repo_id} "
            f"({type(error).__name__}: {_one_line(error, 160)}): set {MODEL_DIR_ENV} to a folder holding it "
            "or pass a model_path"
        ) from error
    return Path(downloaded)


# --------------------------------------------------------------------------- factory

BACKENDS = ("openai", "embedded", "hf")
_OPENAI_KEYS = frozenset(
    {
        "model",
        "base_url",
        "api_key_env",
        "timeout_s",
        "max_retries",
        "backoff_base_s",
        "backoff_max_s",
        "extra_params",
        "reasoning_effort",
        "name",
    }
)
_EMBEDDED_KEYS = frozenset({"model_path", "model_dir", "filename", "repo_id", "n_ctx", "n_threads", "name"})
_EMBEDDED_KEYS |= {"default_max_tokens", "verbose", "model_file"}  # model_file: alias of filename


def infer_backend(spec: dict[str, Any]) -> str:
    """`spec["backend"]` if given; else "embedded" for a model file (or nothing), "openai" for a URL/model id."""
    if spec.get("backend"):
        return str(spec["backend"])
    if any(key in spec for key in ("model_path", "model_dir")):
        return "embedded"
    if any(key in spec for key in ("base_url", "api_key_env", "model")):
        return "openai"
    return "embedded"


def make_chat_model(spec: dict[str, Any] | None = None) -> ChatModel:
    """Build a backend from a plain dict (as written in `configs/<profile>.yaml`).

    `{"backend": "openai", "model": ..., "base_url": ..., "api_key_env": ...}`,
    `{"backend": "embedded", "model_path": ... | "model_dir": ..., "n_ctx": ...}` (no path: the
    default GGUF via `resolve_default_gguf`), or `{"backend": "hf", ...}` (keyword arguments of
    `hf_model.HFChatModel`; "model" is passed as `model_name_or_path`). An empty spec gives the
    default embedded model. With `"cache_path"` the model is wrapped in `CachedChatModel`.
    """
    options = dict(spec or {})
    backend = infer_backend(options)
    options.pop("backend", None)
    cache_path = options.pop("cache_path", None)
    if backend not in BACKENDS:
        raise ValueError(f"unknown model backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    model: ChatModel
    if backend == "openai":
        _reject_unknown_keys(options, _OPENAI_KEYS, backend)
        if not options.get("model"):
            raise ValueError("model spec for backend 'openai' needs a 'model' (e.g. gpt-4.1-mini)")
        model = OpenAIChatModel(**options)
    elif backend == "embedded":
        _reject_unknown_keys(options, _EMBEDDED_KEYS, backend)
        model_path = options.pop("model_path", None)
        if "model_file" in options:
            options.setdefault("filename", options.pop("model_file"))
        lookup = {key: options.pop(key) for key in ("filename", "repo_id") if key in options}
        model_dir = options.pop("model_dir", None)
        if model_path is None:
            model_path = resolve_default_gguf(model_dir, **lookup)
        model = EmbeddedGGUFModel(model_path, **options)
    else:
        from supersede_lib.models.hf import HFChatModel

        if "model" in options and "model_name_or_path" not in options:
            options["model_name_or_path"] = options.pop("model")
        model = HFChatModel(**options)
    if cache_path:
        from supersede_lib.models.cache import CachedChatModel, ResponseCache

        model = CachedChatModel(
            model, ResponseCache(cache_path), backend=getattr(model, "cache_namespace", backend)
        )
    return model


def _reject_unknown_keys(options: dict[str, Any], allowed: frozenset[str], backend: str) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ValueError(
            f"model spec for backend {backend!r} has unknown key(s) {', '.join(unknown)}; "
            f"accepted: {', '.join(sorted(allowed | {'backend', 'cache_path'}))}"
        )
