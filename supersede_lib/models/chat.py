"""The one chat interface every model backend implements (OpenAI chat-completions shape).

Backends (`openai_api`, `gguf`, `hf`) implement `ChatModel`; the runner, judge and environment
only see this protocol and the errors below.

Errors are split by what the user should do: `ModelConfigError` (fix a setting: key, URL,
model name, file; a runner stops), `ModelCallError` (this call kept failing for a transient
reason, the server answered garbage or rejected this one request; a runner fails that question
alone), `ContextOverflowError` (this prompt does not fit the model).

Model text is cleaned where a `ChatResult` is built (lone UTF-16 surrogates become U+FFFD), so a
broken reply can never poison the next request or the cache. Secrets stay in the process: a URL
part that may hold one is refused (`url_secret_problem`), a key too short to redact is refused
(`check_secret`), and every key read is redacted from whatever is stored or shown.
"""

from __future__ import annotations

import gc
import re
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable
from urllib.parse import unquote, urlsplit

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
    # a call made with `tools`: the tool calls of the reply, each {"name": ..., "arguments": "<json text>"}
    tool_calls: tuple[dict[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", clean_model_text(self.text))
        object.__setattr__(
            self,
            "tool_calls",
            tuple(
                {
                    "name": clean_model_text(call.get("name")),
                    "arguments": clean_model_text(call.get("arguments")),
                }
                for call in self.tool_calls
            ),
        )

    @property
    def was_cut(self) -> bool:
        """True when the reply stopped at the token limit (it is probably incomplete)."""
        return self.finish_reason == "length"


@dataclass(frozen=True)
class EmbedResult:
    """The vectors of one embedding call (one per text, in order) plus the accounting."""

    vectors: tuple[tuple[float, ...], ...]
    prompt_tokens: int = 0
    latency_s: float = 0.0  # 0 for a cache hit
    cached: bool = False
    model: str = ""
    made_by_commit: str | None = None


@runtime_checkable
class ChatModel(Protocol):
    """Anything that turns a message list into a reply.

    A backend that can call tools also takes `tools=` (OpenAI function schemas) in `achat` and returns
    the reply's tool calls in `ChatResult.tool_calls`; one that serves embeddings has
    `async aembed(texts) -> EmbedResult`. Memory policies that need either say so (`MemoryPolicy.needs`)
    and a run checks the server offers it first (`missing_capabilities`)."""

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
# A shorter key cannot be redacted: hiding "wrong" or "local" from every stored text would blank
# ordinary words in model replies. Such keys are refused where they are read (`check_secret`).
MIN_SECRET_CHARS = 8


def check_secret(value: str, source: str) -> str:
    """`value` (a key read from `source`, e.g. an environment variable's name), remembered so that
    `redact_credentials` hides it; `ValueError` naming `source` and the length, never the value, when
    it is too short to be redacted safely."""
    value = value.strip()
    if len(value) < MIN_SECRET_CHARS:
        raise ValueError(
            f"{source} holds a key of {len(value)} characters: keys shorter than {MIN_SECRET_CHARS} are "
            "refused, since hiding them from what a run writes would blank ordinary words; use a longer "
            "key, or for a local server that needs none, unset it (a placeholder is sent)"
        )
    _SECRETS.add(value)
    return value


def register_secret(value: str | None) -> None:
    """Remember a secret so `redact_credentials` hides it (values under `MIN_SECRET_CHARS` are ignored:
    callers that read keys use `check_secret`, which refuses them)."""
    if value and len(value.strip()) >= MIN_SECRET_CHARS:
        _SECRETS.add(value.strip())


# A path segment that reads as a key: a known key prefix, a `name=value` pair, or a long run of letters
# and digits mixed (random tokens have one; model and deployment names break theirs with - . _).
_KEY_PREFIXES = re.compile(
    r"^(sk|pk|rk|gsk|xai|hf|ghp|gho|ghs|github_pat|glpat|key|token|apikey|api-key|api_key|bearer)[-_]"
    r"|^(AIza|eyJ)",
    re.IGNORECASE,
)
_MIXED_RUN = re.compile(r"(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{16,}")


def _looks_like_a_token(segment: str) -> bool:
    text = unquote(segment)
    return bool(_KEY_PREFIXES.search(text) or "=" in text or _MIXED_RUN.search(text))


def url_secret_problem(url: str | None, key_source: str = "the variable named by api_key_env") -> str | None:
    """Why `url` cannot be a base_url because a part of it may hold a secret, in one line that never
    quotes that part; None for a clean URL.

    Refused rather than redacted: the URL also reaches the HTTP libraries (their logs, exception texts,
    a proxy's access log), where nothing here can hide it, while the key in `api_key_env` travels as a
    header they never print. A query or fragment is refused whatever it holds: the OpenAI SDK appends
    `/chat/completions` after it (`/v1?key=...` becomes `/v1/?key=...chat/completions`).
    """
    if not url:
        return None
    where = f"put the key in {key_source} (sent as a Bearer token, never written)"
    if _URL_CREDENTIALS.search(url):
        return (
            "base_url carries credentials (user:password@): httpx would send them as Basic auth instead "
            f"of the API key; remove them and {where}"
        )
    parts = urlsplit(url)
    if parts.query or url.split("#")[0].endswith("?"):
        return (
            "base_url has a query string (?...), which may hold a key and cannot be joined with "
            f"/chat/completions; remove it and {where}"
        )
    if parts.fragment or "#" in url:
        return (
            f"base_url has a fragment (#...), which may hold a key and is never sent; remove it and {where}"
        )
    for position, segment in enumerate(parts.path.split("/")[1:], start=1):
        if _looks_like_a_token(segment):
            return (
                f"base_url path segment {position} looks like a key or token (a key prefix, a name=value "
                f"pair or a long run of mixed letters and digits); remove it and {where}"
            )
    return None


def url_origin(url: str) -> str:
    """`scheme://host:port` of `url`, the part of a refused URL that is safe to show (any user:password
    shown as `***@`; path, query and fragment left out)."""
    parts = urlsplit(url)
    userinfo = "***@" if "@" in parts.netloc else ""
    return f"{parts.scheme}://{userinfo}{parts.netloc.rpartition('@')[2]}"


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


def missing_capabilities(model: Any, needs: frozenset[str] | set[str]) -> dict[str, str]:
    """Which of `needs` ("tools", "embeddings") `model` cannot serve, each with why (empty: all served).

    A model that can say (`OpenAIChatModel.missing_capabilities` asks its server) answers for itself;
    a wrapper (the response cache) asks what it wraps; any other backend serves neither."""
    needs = set(needs)
    if not needs:
        return {}
    ask = getattr(model, "missing_capabilities", None)
    if callable(ask):
        return dict(ask(frozenset(needs)))
    return {need: f"the {type(model).__name__} backend does not offer {need}" for need in sorted(needs)}


def release_model(model: Any) -> None:
    """Free an in-process model (a GGUF or transformers model holds GBs) once a study is done with it.

    In-process models free themselves in `close()`; an API client has none and is left alone.
    """
    inner = getattr(model, "inner", model)
    close = getattr(inner, "close", None)
    if callable(close):
        close()
        gc.collect()
