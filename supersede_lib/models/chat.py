"""The one chat interface every model backend implements (OpenAI chat-completions shape).

Backends (`openai_api`, `gguf`, `hf`) implement `ChatModel`; the runner, judge and environment
only see this protocol and the errors below.

Errors are split by what the user should do: `ModelConfigError` (fix a setting: key, URL,
model name, file), `ModelCallError` (the call kept failing for a transient reason, or the
server answered garbage), `ContextOverflowError` (this prompt does not fit the model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

Message = dict[str, str]


@dataclass(frozen=True)
class ChatResult:
    """One model reply plus the accounting the runner aggregates."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0  # wall time inside the model call (0 for a cache hit)
    cached: bool = False
    model: str = ""


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


def one_line(text: object, limit: int = 300) -> str:
    """`text` with whitespace collapsed and cut to `limit` characters, for one-line error messages."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
