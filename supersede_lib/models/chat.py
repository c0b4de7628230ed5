"""The one chat interface every model backend implements (OpenAI chat-completions shape).

Backends (remote OpenAI-compatible, embedded GGUF, local transformers) live in
`supersede_lib.models.openai_api`; the runner, judge and environment only see `ChatModel`.
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
