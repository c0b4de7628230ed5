"""What a memory policy is: the calls it asks for, the replies it takes, the memory it renders.

A policy sees each session once, in date order, and never again. For each session the rollout calls
`begin_session`, then asks `next_call()` for model calls (a chat call, optionally with OpenAI-style
tools, or an embedding call) until it says None, feeding each reply to `take_reply`. The answer call
sees only `render()`, capped at the same B characters (`budget_chars`) for every policy, so policies
differ in how they spend B and in what their calls cost, never in what the answer call may read.

The policy holds no model and makes no call itself: the driver (the runner, the environment, a test)
answers every `PolicyCall`, so the response cache, the call counts and replay see each one. A reply
the policy cannot use (a malformed tool call, bad JSON) is a memory failure: `take_reply` returns a
note saying what was wrong, the memory stays as it was, and the rollout records the note on the turn.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from supersede_lib.agent import prompts
from supersede_lib.agent.episode import Session

CAPABILITIES = frozenset({"tools", "embeddings"})  # what a policy may need beyond plain chat
CallKind = Literal["chat", "embed"]


@dataclass
class TurnRecord:
    """What the model saw and said at one turn, and what the memory held afterwards."""

    kind: Literal["notes", "answer"]
    session_index: int | None  # which session this memory call consumed; None for the answer
    messages: list[dict[str, Any]]
    reply: str
    notes_after: str | None = None  # the rendered memory after this call (memory turns only)
    truncated_chars: int = 0  # characters the cap cut (from the reply, or from the edited notes)
    memory_failure: str | None = None  # a reply the policy could not use, and why (memory unchanged)


@dataclass(frozen=True)
class PolicyCall:
    """One model call a policy asks for: a chat call (optionally with tools) or an embedding call.

    `max_tokens`: "auto" is the run's notes cap (about B/3 tokens), None no cap, or a number."""

    kind: CallKind
    messages: list[dict[str, Any]] = ()  # type: ignore[assignment]  # chat
    tools: list[dict[str, Any]] | None = None  # chat with OpenAI-style tool schemas
    texts: list[str] = ()  # type: ignore[assignment]  # embed
    max_tokens: int | None | Literal["auto"] = "auto"
    response_format: dict[str, Any] | None = None  # chat: e.g. {"type": "json_object"} (Mem0 asks for it)

    def __post_init__(self) -> None:
        if self.kind not in ("chat", "embed"):
            raise ValueError(f"a PolicyCall is 'chat' or 'embed', got {self.kind!r}")
        if self.kind == "chat" and not self.messages:
            raise ValueError("a chat PolicyCall needs messages")
        if self.kind == "embed" and not self.texts:
            raise ValueError("an embed PolicyCall needs texts")


@dataclass(frozen=True)
class PolicyReply:
    """The answer to a `PolicyCall`: the reply text and tool calls of a chat call
    (`{"name": ..., "arguments": "<json string>"}`, as the server sent them), or an embed call's vectors."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = ()  # type: ignore[assignment]
    vectors: list[list[float]] = ()  # type: ignore[assignment]


class MemoryPolicy(ABC):
    """A memory design: its state, the calls it asks for per session and the memory it renders.

    Subclasses set `name` (the key in `MEMORY_POLICIES`) and `needs` (what the server must offer beyond
    plain chat: "tools", "embeddings"; the runner refuses a run whose server lacks one before any paid
    call). `truncation_count` counts memory updates the cap had to cut."""

    name: ClassVar[str]
    needs: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, budget_chars: int, prompt_variant: str = prompts.DEFAULT_PROMPT_VARIANT) -> None:
        if budget_chars < 1:
            raise ValueError(f"budget_chars must be positive, got {budget_chars}")
        prompts.get_prompt_variant(prompt_variant)  # unknown name: ValueError listing the allowed ones
        self.budget_chars = budget_chars
        self.prompt_variant = prompt_variant
        self.truncation_count = 0
        self.last_truncated_chars = 0  # what the cap cut at the last `take_reply` (0: nothing)

    @abstractmethod
    def begin_session(self, session: Session, session_index: int) -> None:
        """The next session, shown once: the policy keeps what it needs for this session's calls."""

    @abstractmethod
    def next_call(self) -> PolicyCall | None:
        """The next model call this session needs, or None when the policy is done with the session."""

    @abstractmethod
    def take_reply(self, reply: PolicyReply) -> str | None:
        """The reply to the last `next_call`; a memory-failure note when it could not be used, else None."""

    @abstractmethod
    def render(self) -> str:
        """The memory the answer call sees, never over `budget_chars` characters."""

    def begin_answer(self, question: str, question_date: str) -> None:  # noqa: B027 - most need no call here
        """The question is known, every session seen: a policy that retrieves for the question (Mem0's
        search) may now ask for calls through `next_call` before `render` (nothing by default)."""

    def close(self) -> None:  # noqa: B027 - a no-op unless the policy holds threads or stores
        """Release threads or stores the policy holds (nothing by default)."""

    def cap(self, text: str) -> str:
        """`text` cut to the budget; the cut is counted (`truncation_count`, `last_truncated_chars`)."""
        capped = text[: self.budget_chars]
        self.last_truncated_chars = len(text) - len(capped)
        if self.last_truncated_chars:
            self.truncation_count += 1
        return capped


def newest_lines_within(lines: list[str], budget_chars: int) -> list[str]:
    """The newest lines (the end of `lines`) whose newline-joined text fits in `budget_chars`, in order.

    A newest line longer than the budget alone is cut rather than dropped, so a full memory is never
    silently empty."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = len(line) + (1 if kept else 0)
        if used + cost > budget_chars:
            if not kept:
                kept.append(line[:budget_chars])
            break
        kept.append(line)
        used += cost
    return list(reversed(kept))
