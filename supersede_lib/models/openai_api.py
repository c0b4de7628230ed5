"""OpenAI-compatible chat-completions backend: `OpenAIChatModel` and its retry policy.

Talks to OpenAI or any compatible server (vLLM, Ollama, llama.cpp, `local_server`) through the
official `openai` SDK with the SDK's retries off, so every attempt, backoff and failure is
classified here. Also holds the reasoning-model rules (and their completion-token floor) and the
per-token price table used to estimate a run's cost.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import logging
import os
import random
import re
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import openai

from supersede_lib.models.chat import (
    ChatResult,
    ContextOverflowError,
    EmbedResult,
    Message,
    ModelCallError,
    ModelConfigError,
    ModelError,
    RequestRejectedError,
    check_secret,
    one_line,
    redact_credentials,
    url_origin,
    url_secret_problem,
)
from supersede_lib.models.rate_limit import report_rate_limited, report_success, report_timeout

logger = logging.getLogger(__name__)
CHAT_PATH = "/chat/completions"
EMBEDDINGS_PATH = "/embeddings"
SERVER_PROBE_TIMEOUT_S = 3.0  # GET /props and /v1/models: a server that is up answers at once

OPENAI_HOST = "api.openai.com"
COMPATIBLE_CACHE_NAMESPACE = "openai-compatible"  # any other server: its "gpt-4o-mini" is not OpenAI's
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})
RETRY_AFTER_MAX_S = 600.0  # the longest Retry-After honoured in full (a longer one waits this long)
LOCAL_PLACEHOLDER_KEY = "EMPTY"  # local servers (vLLM, llama.cpp, local_server) accept any key

# Reasoning models reject `temperature` and `max_tokens`; they take `max_completion_tokens`.
REASONING_MODEL_PREFIXES = ("gpt-5", "o1", "o3", "o4")
# `max_completion_tokens` also pays for a reasoning model's hidden reasoning, which can spend a
# small budget (a 64-token answer, a 132-token notes rewrite) before any visible text: reasoning
# models get at least this many. Only tokens used are billed; the notes cap still applies.
REASONING_TOKEN_FLOOR = 4096
DEFAULT_CACHE_NAMESPACE = "openai"

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


def is_openai_endpoint(base_url: str | None) -> bool:
    """True for OpenAI's own API (no base_url, or api.openai.com): only there do model names mean
    OpenAI's models, with their reasoning rules, prices and shared cache namespace."""
    return base_url is None or (urlsplit(base_url).hostname or "") == OPENAI_HOST


def is_local_url(base_url: str | None) -> bool:
    """True for a URL on this machine (localhost, 127.0.0.1, ::1, 0.0.0.0), where no key is needed."""
    return base_url is not None and (urlsplit(base_url).hostname or "") in LOCAL_HOSTS


SleepFunction = Callable[[float], Awaitable[None]]


class MalformedResponse(Exception):
    """The server answered 200 but the body is not a usable chat completion."""


class OpenAIChatModel:
    """An OpenAI-compatible chat endpoint with an explicit, testable retry policy.

    Retried (exponential backoff capped at `backoff_max_s`, full jitter; a server's `Retry-After`
    honoured in full up to `retry_after_max_s`, 10 minutes by default):
    408/409/429, 5xx, timeouts, connection errors and malformed bodies; each 429 is also reported
    to the runner's adaptive concurrency limit (`rate_limit`). Not retried: 401, 403, 404
    (`ModelConfigError`: a setting is wrong for every call), 400/422 (`RequestRejectedError`, or
    `ContextOverflowError` for a prompt that is too long: this one request fails) and a request
    that cannot be encoded. A server that has never answered and refuses the connection (or whose
    host is unknown) raises `ModelConfigError` at once: retrying would only delay that line.
    Running out of retries raises `ModelCallError`. Timeouts, dropped and refused connections, TLS
    and other transport errors are counted apart (`stats`), from the error's causes
    (`connection_failure`); a TLS failure before any answer stops at once too. The SDK's own retries
    are off so every attempt is visible here.

    Reasoning models get `max_completion_tokens = max(max_tokens, reasoning_token_floor)` so
    their hidden reasoning cannot spend the whole budget. A name means an OpenAI model only on
    OpenAI's own endpoint: elsewhere reasoning rules apply when the spec says `reasoning: true`,
    no price is guessed, and the cache namespace is "openai-compatible". `finish_reason` is passed on in the
    `ChatResult` ("length": the reply was cut at the limit).

    The response cache keys this model on `cache_namespace` ("openai" on OpenAI's endpoint), the model name,
    the messages and the sampling parameters and, on any other server, on what served them
    (`served_identity`: the endpoint and what its GET /v1/models and /props report), so two servers
    under one name never share replies. A `cache_namespace` given in the spec shares replies on
    purpose: the key then leaves the endpoint and identity out (the same model behind two URLs).

    The API key is read from `api_key_env` when the model is built. A missing key is an error,
    except for a `base_url` on localhost/127.0.0.1, where a placeholder key is sent (local
    servers ignore it); a key too short to redact is refused (`models.chat.check_secret`). A
    `base_url` with a part that may hold a secret (user:password@, a query, a fragment, a path
    segment that reads as a key) is refused without repeating it (`models.chat.url_secret_problem`).
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
        retry_after_max_s: float = RETRY_AFTER_MAX_S,
        extra_params: dict[str, Any] | None = None,
        reasoning_effort: str | None = None,
        name: str | None = None,
        cache_namespace: str | None = None,
        reasoning: bool | None = None,
        embedding_model: str | None = None,
        reasoning_token_floor: int = REASONING_TOKEN_FLOOR,
        sleep: SleepFunction = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        problem = url_secret_problem(base_url, key_source=api_key_env)
        if problem:  # the URL is named by its origin only: the refused part is never shown
            raise ModelConfigError(f"{problem} (base_url at {url_origin(base_url or '')})")
        self.model = model
        self.name = name or model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.retry_after_max_s = retry_after_max_s
        self.extra_params = dict(extra_params or {})
        self.reasoning_effort = reasoning_effort
        self.embedding_model = embedding_model
        self.openai_endpoint = is_openai_endpoint(base_url)
        # another server's names are its own: a local model named gpt-5-local is sampled like any other
        self.reasoning = (
            reasoning if reasoning is not None else self.openai_endpoint and is_reasoning_model(model)
        )
        default_namespace = DEFAULT_CACHE_NAMESPACE if self.openai_endpoint else COMPATIBLE_CACHE_NAMESPACE
        self.cache_namespace = cache_namespace or default_namespace
        self.namespace_chosen = cache_namespace is not None  # replies shared on purpose under it
        self.reasoning_token_floor = reasoning_token_floor
        self._sleep = sleep
        self._jitter = jitter
        self._api_key = self._read_api_key()
        # httpx connection pools are bound to one event loop: keep one client per loop (holding the
        # loop itself, not its id, so a new loop at a recycled address never gets a stale client)
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._async_client: openai.AsyncOpenAI | None = None
        self._close_client: weakref.finalize | None = None
        self.call_count = 0
        self.attempt_count = 0
        self.retry_count = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cut_replies = 0
        self.empty_replies = 0
        self.timeouts = 0
        self.dropped_connections = 0
        self.refused_connections = 0
        self.tls_errors = 0
        self.transport_errors = 0
        self.cached_prompt_tokens = 0  # prompt tokens the server reported served from its prompt cache
        self.served_models: dict[str, int] = {}  # the responses' `model`: what actually served the calls
        self.system_fingerprints: set[str] = set()
        self._server_info: dict[str, Any] | None = None
        self._server_probe: ServerProbe | None = None
        self._probe_lock = threading.Lock()  # the probe is asked from worker threads
        self._reached = False  # any HTTP response so far: the address is right

    @property
    def endpoint(self) -> str:
        """`base_url` for messages (credentials redacted)."""
        return redact_credentials(self.base_url) if self.base_url else "the default OpenAI endpoint"

    @property
    def cache_params(self) -> dict[str, Any]:
        """Request settings beyond max_tokens/temperature/seed that shape the reply (for cache keys)."""
        params: dict[str, Any] = {}
        if self.extra_params:
            params["extra_params"] = self.extra_params
        if self.reasoning_effort is not None:
            params["reasoning_effort"] = self.reasoning_effort
        if self.reasoning:
            params["reasoning_token_floor"] = self.reasoning_token_floor
        return params

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """OpenAI's list price for these tokens; None for any other server (its names are its own)."""
        if not self.openai_endpoint:
            return None
        return estimate_cost_usd(self.model, prompt_tokens, completion_tokens)

    def _read_api_key(self) -> str:
        key = os.environ.get(self.api_key_env, "").strip()
        if key:
            try:  # never written: every stored text is redacted of it
                return check_secret(key, self.api_key_env)
            except ValueError as error:
                raise ModelConfigError(str(error)) from None
        if is_local_url(self.base_url):
            return LOCAL_PLACEHOLDER_KEY
        raise ModelConfigError(
            f"set {self.api_key_env} (or pass api_key_env=... naming the variable that holds the key) "
            f"to call {self.model} at {self.endpoint}"
        )

    def _client(self) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()
        if self._async_client is None or self._client_loop is not loop:
            if self._close_client is not None:
                self._close_client()
            self._async_client = openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self.base_url,
                timeout=self.timeout_s,
                max_retries=0,
                http_client=_http_client(self.timeout_s, loop),
            )
            self._client_loop = loop
            # closed on its own loop when this model goes, or at exit (an unclosed aiohttp session
            # warns when collected); a finalizer holds the client, never the model
            self._close_client = weakref.finalize(self, _close_on_its_loop, self._async_client, loop)
        return self._async_client

    def request_params(
        self,
        messages: list[Message],
        max_tokens: int | None,
        temperature: float,
        seed: int,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The keyword arguments sent to `chat.completions.create` (reasoning models differ)."""
        params: dict[str, Any] = {"model": self.model, "messages": messages, "seed": seed}
        if tools:
            params["tools"] = tools
        if response_format:  # e.g. {"type": "json_object"}: llama.cpp answers with a JSON grammar
            params["response_format"] = response_format
        if self.reasoning:
            if max_tokens is not None:
                params["max_completion_tokens"] = max(max_tokens, self.reasoning_token_floor)
            if self.reasoning_effort is not None:
                params["reasoning_effort"] = self.reasoning_effort
        else:
            params["temperature"] = temperature
            if max_tokens is not None:
                params["max_tokens"] = max_tokens
        if self.extra_params:  # server-specific options (llama.cpp's cache_prompt, vLLM's top_k, ...):
            # sent in the JSON body as given; the SDK's keyword arguments would reject unknown names
            params["extra_body"] = dict(self.extra_params)
        return params

    def backoff_delay(self, retry_index: int, retry_after_s: float | None = None) -> float:
        """Full jitter: uniform in [0, min(max, base * 2**retry_index)], at least the server's
        `Retry-After` (up to `retry_after_max_s`: retrying sooner than asked only earns another 429)."""
        ceiling = min(self.backoff_max_s, self.backoff_base_s * (2**retry_index))
        delay = self._jitter() * ceiling
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, self.retry_after_max_s))
        return delay

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
        params = self.request_params(messages, max_tokens, temperature, seed, tools, response_format)
        # the body as `create` would send it, posted as is: `create` first walks every message
        # through the SDK's type annotations (a third of the client's CPU a call, measured on the bench)
        body = {
            **{key: value for key, value in params.items() if key != "extra_body"},
            **params.get("extra_body", {}),
        }
        started = time.perf_counter()
        result = await self._post(CHAT_PATH, body, lambda reply: _read_completion(reply, self.name))
        self._count(result)
        return replace(result, latency_s=time.perf_counter() - started, model=self.name)

    async def aembed(self, texts: list[str]) -> EmbedResult:
        """One vector per text from the server's `POST /embeddings`, with the same retry policy as a
        chat call. The model asked is `embedding_model` (default: the chat model's name, which a
        llama.cpp server started with embeddings on answers with its one model)."""
        body = {"model": self.embedding_model or self.model, "input": list(texts)}
        started = time.perf_counter()
        vectors, prompt_tokens = await self._post(
            EMBEDDINGS_PATH, body, lambda reply: read_embeddings(reply, texts)
        )
        self.prompt_tokens += prompt_tokens
        return EmbedResult(
            vectors=vectors,
            prompt_tokens=prompt_tokens,
            latency_s=time.perf_counter() - started,
            model=self.name,
        )

    async def _post(self, path: str, body: dict[str, Any], read: Callable[[Any], Any]) -> Any:
        """POST `body` to `path` and `read` the JSON reply, retrying as the class docstring says."""
        client = self._client()
        self.call_count += 1
        last_error: BaseException | None = None
        for attempt in range(self.max_retries + 1):
            if attempt > 0:
                self.retry_count += 1
                await self._sleep(self.backoff_delay(attempt - 1, _retry_after_seconds(last_error)))
            self.attempt_count += 1
            try:
                reply = await client.post(path, cast_to=object, body=body)
                self._reached = True
                result = read(reply)
            except Exception as error:  # classified below; unknown errors propagate unchanged
                if not self._is_retryable(error):
                    raise
                last_error = error
                continue
            report_success()
            return result
        raise self._exhausted_error(last_error)

    def _count(self, result: ChatResult) -> None:
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.cut_replies += result.was_cut
        self.empty_replies += not result.text.strip() and not result.tool_calls
        self.cached_prompt_tokens += result.cached_prompt_tokens or 0
        if result.served_model:
            self.served_models[result.served_model] = self.served_models.get(result.served_model, 0) + 1
        if result.system_fingerprint:
            self.system_fingerprints.add(result.system_fingerprint)

    def server_info(self) -> dict[str, Any]:
        """What a self-hosted server offers, read once: `total_slots` (llama.cpp's GET /props: requests
        it serves at once; None when the server does not say) and `models` (GET /v1/models ids).
        OpenAI's own endpoint is not asked (empty dict). Read from the same probe as `served_identity`."""
        if self._server_info is not None:
            return self._server_info
        info: dict[str, Any] = {}
        if not self.openai_endpoint and self.base_url:
            probe = self._probe()
            props = probe.props
            slots = props.get("total_slots") if isinstance(props, dict) else None
            info["total_slots"] = slots if isinstance(slots, int) and slots >= 1 else None
            listed = probe.listed
            data = listed.get("data") if isinstance(listed, dict) else None
            info["models"] = [item.get("id") for item in data or [] if isinstance(item, dict)]
        self._server_info = info
        return info

    def served_identity(self) -> dict[str, Any] | None:
        """What answers this model's calls, for the response cache's key (llama.cpp and vLLM answer
        under any model name, so the name alone would replay one server's replies as another's).

        None where the name says it: OpenAI's own endpoint, or a `cache_namespace` chosen to share
        replies on purpose. Else what the server's probe says (`served_identity_from`), kept once the
        server answered; a server not reached is asked again at the next call, and its calls are keyed
        apart meanwhile."""
        if self.openai_endpoint or self.namespace_chosen or not self.base_url:
            return None
        return served_identity_from(self._probe(), self.base_url, self.model)

    def _probe(self) -> ServerProbe:
        """GET /v1/models and /props, once for `server_info` and `served_identity` together (a run asks
        each once); asked again only while the server has given no lasting answer."""
        with self._probe_lock:
            if self._server_probe is not None and self._server_probe.reached:
                return self._server_probe
            self._server_probe = probe_server(
                self.base_url or "", {"Authorization": f"Bearer {self._api_key}"}
            )
            return self._server_probe

    def missing_capabilities(self, needs: frozenset[str]) -> dict[str, str]:
        """Which of `needs` ("tools", "embeddings") this endpoint does not serve, each with why; asked
        before a run's first paid call. OpenAI's own endpoint serves tools (embeddings need an
        `embedding_model`). A self-hosted server is asked: tools through llama.cpp's GET /props
        by a one-token chat with one tool (llama.cpp answers 400 without --jinja, and with it serves tools
        even where its template has none, in its generic format), embeddings by one embedding of one
        word (llama.cpp answers 501 unless started with embeddings on). A server
        that cannot be reached is not judged here: the run's first call says so with its own error."""
        missing: dict[str, str] = {}
        headers = {"Authorization": f"Bearer {self._api_key}"}
        if "tools" in needs and not self.openai_endpoint and self.base_url:
            problem = _tools_problem(self.base_url, self.model, headers)
            if problem:
                missing["tools"] = (
                    f"the server at {self.endpoint} takes no tools ({problem}; llama.cpp: start it with --jinja)"
                )
        if "embeddings" in needs:
            if self.openai_endpoint and not self.embedding_model:
                missing["embeddings"] = (
                    f"{self.model} is a chat model: give embedding_model for OpenAI's endpoint"
                )
            elif self.base_url:
                problem = _embeddings_problem(self.base_url, self.embedding_model or self.model, headers)
                if problem:
                    missing["embeddings"] = f"the server at {self.endpoint} serves no embeddings ({problem})"
        return missing

    def _is_retryable(self, error: Exception) -> bool:
        """True for transient failures; raises the right error at once for permanent ones."""
        if isinstance(error, UnicodeError):  # a request that can never be sent: retrying cannot help
            raise ModelCallError(
                f"request to {self.model!r} at {self.endpoint} cannot be encoded: {one_line(error)}"
            ) from error
        if isinstance(error, openai.APIConnectionError):  # APITimeoutError is one too
            return self._connection_failed(error)
        if isinstance(
            error,
            MalformedResponse
            | openai.APIResponseValidationError
            | json.JSONDecodeError,  # a 200 whose body is not JSON
        ):
            return True
        if isinstance(error, openai.APIStatusError):
            self._reached = True
            status = error.status_code
            if status == 429:
                report_rate_limited()
            if status in (408, 409, 429) or status >= 500:
                return True
            # not chained: the SDK's error holds the raw body, where a server may echo the key;
            # the message keeps its (redacted) detail
            raise self._status_error(error) from None
        return False

    def _connection_failed(self, error: openai.APIConnectionError) -> bool:
        """Count a connection-level failure by what happened, from the causes under the SDK's error
        (`connection_failure`); retryable, except a server never reached that cannot be: the run stops
        at once, since retrying a refused port or an unknown host only delays that one line."""
        kind = connection_failure(error)
        if kind in UNREACHABLE_REASONS and not self._reached:
            raise ModelConfigError(
                f"cannot reach {self.endpoint}: {UNREACHABLE_REASONS[kind]}: check that the server is running "
                "and that base_url has the right host, port and /v1"
            ) from None
        if kind == TLS and not self._reached:  # a handshake fails the same way every time
            raise ModelConfigError(
                f"cannot reach {self.endpoint}: TLS failed ({one_line(root_cause(error), 160)}): check the "
                "scheme (https:// to a plain-HTTP server, or http:// to a TLS one) and the server's certificate"
            ) from None
        if kind in UNREACHABLE_REASONS:  # it answered before: stopped, or restarting
            self.refused_connections += 1
        elif kind == TIMEOUT:  # a queueing server pushes back with time
            self.timeouts += 1
            report_timeout()
        else:
            counter = {DROPPED: "dropped_connections", TLS: "tls_errors"}.get(kind, "transport_errors")
            setattr(self, counter, getattr(self, counter) + 1)
        return True

    def _status_error(self, error: Any) -> ModelError:
        status = error.status_code
        detail = one_line(getattr(error, "message", error))
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
        return RequestRejectedError(f"request rejected ({status}) by {where}: {detail}")

    def _exhausted_error(self, error: BaseException | None) -> ModelError:
        attempts = self.max_retries + 1
        connection = isinstance(error, openai.APIConnectionError)
        kind = connection_failure(error) if connection and error is not None else None
        if connection and kind != TIMEOUT and not self._reached:
            # something on that port closes every connection, or speaks no HTTP (TLS to a plain port)
            return ModelConfigError(
                f"cannot reach {self.endpoint} after {attempts} attempts ({one_line(error)}): check that an "
                "OpenAI-compatible server listens there and that base_url has the right scheme, host, port and /v1"
            )
        what = FAILURE_NAMES.get(kind or "", type(error).__name__)
        if kind == TRANSPORT and error is not None:
            what = f"{what} ({type(root_cause(error)).__name__})"
        return ModelCallError(
            f"{self.model!r} at {self.endpoint} still failing after {attempts} attempts: "
            f"{what}: {one_line(error)}"
        )

    def stats(self) -> dict[str, Any]:
        """Calls, attempts, retries, tokens and estimated cost so far (for run manifests)."""
        return {
            "model": self.model,
            "base_url": redact_credentials(self.base_url) if self.base_url else None,
            "cache_namespace": self.cache_namespace,
            "calls": self.call_count,
            "attempts": self.attempt_count,
            "retries": self.retry_count,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cut_replies": self.cut_replies,
            "empty_replies": self.empty_replies,
            "timeouts": self.timeouts,  # attempts that ran out of time (not a refused or dropped connection)
            "dropped_connections": self.dropped_connections,  # closed or reset before the whole reply came
            "refused_connections": self.refused_connections,  # refused after the server had answered
            "tls_errors": self.tls_errors,  # a TLS handshake or certificate failure
            "transport_errors": self.transport_errors,  # any other connection-level failure
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "served_models": dict(self.served_models),
            "system_fingerprints": sorted(self.system_fingerprints),
            "server": self._server_info,
            "estimated_cost_usd": self.cost_usd(self.prompt_tokens, self.completion_tokens),
        }


def _read_completion(body: Any, model: str) -> ChatResult:
    """The reply in a chat-completions JSON body (`content: null` -> ""); `MalformedResponse` if
    unusable. The body is read as the server sent it (the SDK's `cast_to=object`): building the SDK's
    typed `ChatCompletion` cost a sixth of the client's CPU per call on the bench, for five fields."""
    try:
        choice = body["choices"][0]
        text = choice["message"].get("content") or ""
    except (AttributeError, IndexError, KeyError, TypeError) as error:
        raise MalformedResponse(f"response has no choices[0].message ({type(body).__name__})") from error
    if not isinstance(text, str):
        raise MalformedResponse(f"message content is {type(text).__name__}, not text")
    tool_calls = read_tool_calls(choice["message"].get("tool_calls"))
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    details = usage.get("prompt_tokens_details")
    cached_tokens = details.get("cached_tokens") if isinstance(details, dict) else None
    finish_reason = choice.get("finish_reason")
    served_model = body.get("model")
    fingerprint = body.get("system_fingerprint")
    return ChatResult(
        text=text,
        prompt_tokens=_count_field(usage, "prompt_tokens"),
        completion_tokens=_count_field(usage, "completion_tokens"),
        model=model,
        finish_reason=str(finish_reason) if finish_reason else None,
        served_model=served_model if isinstance(served_model, str) and served_model else None,
        system_fingerprint=fingerprint if isinstance(fingerprint, str) and fingerprint else None,
        cached_prompt_tokens=cached_tokens if isinstance(cached_tokens, int) else None,
        tool_calls=tool_calls,
    )


def read_tool_calls(calls: Any) -> tuple[dict[str, str], ...]:
    """A message's `tool_calls` as `{"name", "arguments"}` pairs, arguments as the JSON text the server
    sent (an object some servers send is written back as JSON text); whatever the model wrote in them
    is the memory policy's to judge, not a malformed response."""
    read = []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        read.append({"name": str(function.get("name") or ""), "arguments": arguments})
    return tuple(read)


def read_embeddings(body: Any, texts: list[str]) -> tuple[tuple[tuple[float, ...], ...], int]:
    """The vectors of an embeddings body, in the order of `texts`, and its prompt tokens;
    `MalformedResponse` when it holds other than one vector of numbers per text."""
    try:
        items = sorted(body["data"], key=lambda item: item.get("index", 0))
        vectors = tuple(tuple(float(value) for value in item["embedding"]) for item in items)
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise MalformedResponse(
            f"embeddings response has no data[].embedding ({type(body).__name__})"
        ) from error
    if len(vectors) != len(texts) or any(not vector for vector in vectors):
        raise MalformedResponse(f"{len(vectors)} vectors for {len(texts)} texts")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    return vectors, _count_field(usage, "prompt_tokens")


def _count_field(usage: dict[str, Any], key: str) -> int:
    """A token count from `usage` (0 when absent or not a number)."""
    value = usage.get(key)
    return int(value) if isinstance(value, int | float) else 0


DROPPED = "dropped"
TLS = "tls"
TIMEOUT = "timeout"
TRANSPORT = "transport"  # any other connection-level error (a proxy, a protocol the client cannot read)
# what a server that cannot be reached at all means, by kind (the run stops with this)
UNREACHABLE_REASONS = {
    "refused": "connection refused (nothing listens on that port)",
    "no_such_host": "host name not found (DNS lookup failed)",
    "no_route": "no route to the host",
}
FAILURE_NAMES = {
    DROPPED: "connection dropped by the server",
    "refused": "connection refused",
    TLS: "TLS error",
    TIMEOUT: "timed out",
    TRANSPORT: "transport error",
}
_NO_ROUTE_ERRNOS = frozenset({errno.EHOSTUNREACH, errno.ENETUNREACH})
# matched by class name: the SDK vendors its own httpx and httpcore (`httpx2`, `httpcore2`) and aiohttp
# is optional, so there is no one class to import for "the server closed the connection"
_DROPPED_ERROR_NAMES = frozenset(
    {"ServerDisconnectedError", "RemoteProtocolError", "ReadError", "WriteError", "ClientPayloadError"}
)


def connection_failure(error: BaseException) -> str:
    """What a connection-level error was, read from its chain of causes: "refused", "no_such_host",
    "no_route" (the server cannot be reached), `DROPPED` (closed or reset mid-request), `TLS` (the
    handshake or the certificate failed), `TIMEOUT` (a clock ran out), else `TRANSPORT`.

    The SDK's class cannot be trusted: its aiohttp transport (the runner's long-lived loop) maps every
    aiohttp connection error, a refused or closed connection and a TLS failure included, to a connect
    timeout. A real timeout has a `TimeoutError` below it (aiohttp's timeouts and anyio's are one), or
    is httpcore's own.
    """
    seen: set[int] = set()
    timed_out = False
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        kind = _cause_kind(cause)
        if kind is not None:
            return kind
        module = type(cause).__module__
        timed_out = (
            timed_out
            or isinstance(cause, TimeoutError)
            or (module.startswith("httpcore") and type(cause).__name__.endswith("Timeout"))
        )
        cause = cause.__cause__ or cause.__context__
    return TIMEOUT if timed_out else TRANSPORT


def _cause_kind(cause: BaseException) -> str | None:
    """The failure one exception in the chain names for certain, or None."""
    if isinstance(cause, ssl.SSLError):  # an OSError too: before the errno checks
        return TLS
    if isinstance(cause, socket.gaierror):
        return "no_such_host"
    if isinstance(cause, ConnectionRefusedError):
        return "refused"
    if isinstance(cause, OSError) and cause.errno in _NO_ROUTE_ERRNOS:
        return "no_route"
    if isinstance(cause, ConnectionResetError | ConnectionAbortedError | BrokenPipeError):
        return DROPPED
    if type(cause).__name__ in _DROPPED_ERROR_NAMES:
        return DROPPED
    return None


def root_cause(error: BaseException) -> BaseException:
    """The innermost exception under `error` (what a transport error was, for its one line)."""
    seen = {id(error)}
    while (below := error.__cause__ or error.__context__) is not None and id(below) not in seen:
        seen.add(id(below))
        error = below
    return error


# what a GET /v1/models entry says about the weights behind a name (never `created`: a server's clock)
LISTED_IDENTITY_FIELDS = ("id", "aliases", "root", "parent", "owned_by", "max_model_len", "meta")
# what llama.cpp's GET /props says about the file it serves (not `build_info`: a rebuilt server on the
# same file keeps its answers); the chat template is hashed, since a `--chat-template` changes replies
PROPS_IDENTITY_FIELDS = ("model_path", "model_alias", "model_ftype")


def cache_endpoint(base_url: str) -> str:
    """`base_url` as the cache keys it: scheme, host, port and path, without credentials, query or
    fragment (nothing secret is hashed into a key shown in no file, yet `/v1` and `/v1/` are one)."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    try:
        netloc = host if parts.port is None else f"{host}:{parts.port}"
    except ValueError:  # a port that is not a number: the request fails later, with its own message
        netloc = host
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))


@dataclass(frozen=True)
class ServerProbe:
    """One look at a self-hosted server: whether GET /v1/models gave a lasting answer (`reached`),
    its JSON (`listed`), and llama.cpp's GET /props JSON (`props`; None where the server has none)."""

    reached: bool
    listed: Any = None
    props: Any = None


def probe_server(base_url: str, headers: dict[str, str]) -> ServerProbe:
    """GET /v1/models, then (when that answered) GET /props: one request each."""
    reached, listed = _probe_get(f"{base_url.rstrip('/')}/models", headers)
    if not reached:
        return ServerProbe(reached=False)
    _, props = _probe_get(f"{base_url.rstrip('/').removesuffix('/v1')}/props", headers)
    return ServerProbe(reached=True, listed=listed, props=props)


def served_identity_from(probe: ServerProbe, base_url: str, model: str) -> dict[str, Any]:
    """The endpoint and what it says it serves: `models`, the GET /v1/models entries for `model` (every
    entry when none is listed under that name, as llama.cpp answers any name with its one model), and
    `server`, llama.cpp's GET /props about its file. `unreachable: True` when /v1/models gave no lasting
    answer (not reached, timed out, 408, 429 or 5xx)."""
    endpoint = cache_endpoint(base_url)
    if not probe.reached:
        return {"endpoint": endpoint, "unreachable": True}
    return {
        "endpoint": endpoint,
        "models": _listed_identity(probe.listed, model),
        "server": _props_identity(probe.props),
    }


def _listed_identity(listed: Any, model: str) -> list[dict[str, Any]] | None:
    data = listed.get("data") if isinstance(listed, dict) else None
    entries = [item for item in data if isinstance(item, dict)] if isinstance(data, list) else []
    named = [item for item in entries if model == item.get("id") or model in (item.get("aliases") or [])]
    chosen = [{key: item[key] for key in LISTED_IDENTITY_FIELDS if key in item} for item in named or entries]
    return chosen or None


def _props_identity(props: Any) -> dict[str, Any] | None:
    if not isinstance(props, dict):
        return None
    identity = {key: props[key] for key in PROPS_IDENTITY_FIELDS if props.get(key) is not None}
    template = props.get("chat_template")
    if isinstance(template, str) and template:
        identity["chat_template_sha256"] = hashlib.sha256(template.encode("utf-8")).hexdigest()[:16]
    return identity or None


_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "probe",
        "description": "unused",
        "parameters": {"type": "object", "properties": {}},
    },
}


def _tools_problem(base_url: str, model: str, headers: dict[str, str]) -> str | None:
    """Why a one-token chat with one tool was refused (its status and message), or None when it was
    served or the server could not be reached (not a missing capability)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [_PROBE_TOOL],
        "max_tokens": 1,
    }
    return _probe_post(f"{base_url.rstrip('/')}{CHAT_PATH}", headers, body, lambda reply: None)


def _probe_post(
    url: str, headers: dict[str, str], body: dict[str, Any], check: Callable[[Any], Any]
) -> str | None:
    """POST a capability probe: None when it was served (`check` accepts the JSON reply) or gave no
    lasting answer; else the refusal's status and message."""
    try:
        response = httpx.post(url, headers=headers, json=body, timeout=60)
    except httpx.HTTPError:
        return None
    if response.status_code == 200:
        try:
            check(response.json())
            return None
        except (ValueError, MalformedResponse) as error:
            return f"200 without the expected reply: {one_line(error, 120)}"
    if response.status_code in (408, 429) or response.status_code >= 500 and response.status_code != 501:
        return None
    return f"{response.status_code}: {one_line(response.text, 160)}"


def _embeddings_problem(base_url: str, model: str, headers: dict[str, str]) -> str | None:
    """Why a one-word POST /embeddings failed (its status and message), or None when it gave a vector
    or the server could not be reached (not a missing capability)."""
    body = {"model": model, "input": ["probe"]}
    url = f"{base_url.rstrip('/')}{EMBEDDINGS_PATH}"
    return _probe_post(url, headers, body, lambda reply: read_embeddings(reply, ["probe"]))


def _probe_get(url: str, headers: dict[str, str]) -> tuple[bool, Any]:
    """(whether the server gave a lasting answer, its JSON body when the status was 200, else None).
    No answer, a 408, 429 or 5xx is passing: the identity read then would not be the server's own."""
    try:
        response = httpx.get(url, headers=headers, timeout=SERVER_PROBE_TIMEOUT_S)
    except httpx.HTTPError as error:
        logger.debug("GET %s: %s", redact_credentials(url), one_line(error))
        return False, None
    if response.status_code in (408, 429) or response.status_code >= 500:
        return False, None
    try:
        return True, response.json() if response.status_code == 200 else None
    except ValueError:
        return True, None


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


_long_lived_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def mark_long_lived(loop: asyncio.AbstractEventLoop) -> None:
    """Say that `loop` runs until the process ends (the runner's own loop): clients opened on it use
    aiohttp, which can be closed there at exit. On a short-lived loop (`asyncio.run`) an aiohttp session
    would outlive its loop and warn when collected, so those keep the SDK's httpx."""
    _long_lived_loops.add(loop)


def _http_client(timeout_s: float, loop: asyncio.AbstractEventLoop) -> Any:
    """aiohttp as the HTTP transport on a long-lived loop where it is installed (the SDK's `aiohttp`
    extra), else the SDK's default (httpx). With many calls in flight httpx's connection pool scans
    every connection for every request: on the bench (623 calls, 78 in flight) aiohttp took 1.6-1.9 s
    of client CPU, httpx 2.9-3.1."""
    if loop not in _long_lived_loops:
        return None
    aiohttp_client = getattr(openai, "DefaultAioHttpClient", None)  # openai >= 1.84
    try:
        return aiohttp_client(timeout=timeout_s) if aiohttp_client is not None else None
    except RuntimeError:  # the SDK's aiohttp extra is not installed
        return None


_closing_tasks: set[asyncio.Task[None]] = set()


def _closed(task: asyncio.Task[None]) -> None:
    """Retrieve a close task's outcome, so that a failed close is logged here instead of surfacing as
    asyncio's "Task exception was never retrieved" when the process ends."""
    _closing_tasks.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.debug("closing an HTTP client failed", exc_info=task.exception())


def _close_on_its_loop(client: openai.AsyncOpenAI, loop: asyncio.AbstractEventLoop | None) -> None:
    """Close a client on the loop that opened it, when that loop still runs (its sessions belong to it)."""
    if loop is None or loop.is_closed() or not loop.is_running():
        return
    try:
        if asyncio.get_running_loop() is loop:
            closing_task = loop.create_task(client.close())
            _closing_tasks.add(closing_task)  # held until done: the loop keeps only a weak reference
            closing_task.add_done_callback(_closed)
            return
    except RuntimeError:  # no loop runs in this thread
        pass
    closing = asyncio.run_coroutine_threadsafe(client.close(), loop)
    try:
        closing.result(timeout=5)
    except Exception:  # noqa: BLE001 - closing is best effort; the process is ending or moving on
        logger.debug("closing an HTTP client failed", exc_info=True)
