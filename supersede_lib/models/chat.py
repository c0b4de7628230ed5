"""The one chat interface every model backend implements (OpenAI chat-completions shape).

Backends (`openai_api`, `gguf`, `hf`) implement `ChatModel`; the runner, judge and environment
only see this protocol and the errors below.

Errors are split by what the user should do: `ModelConfigError` (fix a setting: key, URL,
model name, file; a runner stops), `ModelCallError` (this call kept failing for a transient
reason, the server answered garbage or rejected this one request; a runner fails that question
alone), `ContextOverflowError` (this prompt does not fit the model).

Model text is cleaned where a `ChatResult` is built (lone UTF-16 surrogates become U+FFFD), so a
broken reply can never poison the next request or the cache, and URL credentials are redacted
from every one-line error message.
"""

from __future__ import annotations

import gc
import re
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from supersede_lib.agent.messages import Message  # defined in the agent core; re-exported here


@dataclass(frozen=True)
class ChatResult:
    """One model reply plus the accounting the runner aggregates."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0  # wall time inside the model call (0 for a cache hit)
    cached: bool = False
    model: str = ""
    finish_reason: str | None = None  # "stop", "length" (cut at max_tokens), ...; None when unknown
    made_by_commit: str | None = None  # for a replayed reply: the git commit of the run that made the call
    # what the server said served the call (live calls of HTTP backends; None when not reported)
    served_model: str | None = None  # the response's `model`
    system_fingerprint: str | None = None
    cached_prompt_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", clean_model_text(self.text))

    @property
    def was_cut(self) -> bool:
        """True when the reply stopped at the token limit (it is probably incomplete)."""
        return self.finish_reason == "length"


@runtime_checkable
class ChatModel(Protocol):
    """Anything that turns a message list into a reply."""

    name: str  # model id used in result tables and cache keys

    async def achat(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> ChatResult: ...


class ModelError(RuntimeError):
    """Base class for every backend failure, so a runner can catch one type."""


class ModelConfigError(ModelError):
    """A setting is wrong or missing (key, URL, model name, model file); the message says which."""


class ModelCallError(ModelError):
    """The call failed after all retries, or the backend returned something unusable."""


class ContextOverflowError(ModelCallError):
    """The prompt is longer than the model's context window."""


class RequestRejectedError(ModelCallError):
    """The server refused this one request (400/422 other than context length); not retried."""


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")


def clean_model_text(text: str | None) -> str:
    """Model text safe to encode, store and send back: None -> "", lone surrogates -> U+FFFD.

    A split surrogate pair (two code points) is joined into its character.
    """
    text = text or ""
    if not _LONE_SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


# secret values in use in this process (API keys as read): redacted from anything written or shown
_SECRETS: set[str] = set()
MIN_SECRET_CHARS = 8  # shorter values (placeholders such as "local") would redact ordinary words


def register_secret(value: str | None) -> None:
    """Remember a secret (an API key as read from the environment) so `redact_credentials` hides it."""
    if value and len(value.strip()) >= MIN_SECRET_CHARS:
        _SECRETS.add(value.strip())


def has_url_credentials(url: str | None) -> bool:
    """Whether a URL carries `user:password@` (httpx would send them as Basic auth, not the key)."""
    return bool(url) and bool(_URL_CREDENTIALS.search(url))


def redact_credentials(text: str) -> str:
    """`text` with the user:password part of every URL, and every registered secret, replaced by `***`.

    Servers echo keys in error bodies ("Incorrect API key provided: sk-..."): whatever a run stores
    (CSV error column, trajectories, manifests, summaries, executed notebooks) passes through here.
    """
    text = _URL_CREDENTIALS.sub("***@", text)
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, "***")
    return text


def redact_json(value: Any) -> Any:
    """A JSON-like value with every string passed through `redact_credentials`."""
    if isinstance(value, str):
        return redact_credentials(value)
    if isinstance(value, dict):
        return {key: redact_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(item) for item in value]
    return value


def one_line(text: object, limit: int = 300) -> str:
    """`text` with whitespace collapsed, URL credentials redacted and cut to `limit` characters."""
    flat = redact_credentials(" ".join(str(text).split()))
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def release_model(model: Any) -> None:
    """Free an in-process model (a GGUF or transformers model holds GBs) once a study is done with it.

    In-process models free themselves in `close()`; an API client has none and is left alone.
    """
    inner = getattr(model, "inner", model)
    close = getattr(inner, "close", None)
    if callable(close):
        close()
        gc.collect()
