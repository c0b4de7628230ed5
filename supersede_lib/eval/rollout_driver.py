"""Driving one rollout: the model call for each turn of the rollout core, and what the rollout cost.

`arun_rollout` feeds a `supersede_lib.agent.rollout` state machine one model reply per turn (sessions
strictly in order, then the answer) and returns a `RolloutOutcome`: the finished rollout, one
`CallRecord` per call (tokens, latency, cached or live, cut or empty), and why it ended without an
answer when it did. The outcome's `trajectory()` is the JSON record a run writes per rollout. How
many rollouts run at once is `eval.scheduling`'s business; what a question's row holds, `eval.rows`'.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from supersede_lib.agent.episode import Episode
from supersede_lib.agent.memory import PolicyCall, PolicyReply
from supersede_lib.agent.rollout import Rollout
from supersede_lib.eval.memory_metrics import MemoryMetrics, notes_holdings, trajectory_memory_metrics
from supersede_lib.models.chat import (
    ChatModel,
    ChatResult,
    ContextOverflowError,
    EmbedResult,
    ModelCallError,
    ModelConfigError,
)


@dataclass
class CallRecord:
    """Accounting for one model call (one rollout turn)."""

    kind: str
    session_index: int | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    finish_reason: str | None = None
    empty_reply: bool = False
    made_by_commit: str | None = None  # a replayed call: the commit of the run that made it live
    served_model: str | None = None  # a live call: the model id the server said answered it
    system_fingerprint: str | None = None
    cached_prompt_tokens: int | None = None  # a live call: prompt tokens the server had cached

    @property
    def was_cut(self) -> bool:
        return self.finish_reason == "length"


@dataclass
class RolloutOutcome:
    """A finished rollout plus what it cost."""

    rollout: Rollout
    condition: str
    model_name: str
    calls: list[CallRecord] = field(default_factory=list)
    wall_s: float = 0.0
    error: str | None = None  # why the rollout ended without an answer
    failed: bool = False  # a model call failed for good (a re-run retries it), not a context overflow

    @property
    def episode(self) -> Episode:
        return self.rollout.episode

    @property
    def answer(self) -> str:
        return self.rollout.answer or ""

    @property
    def prompt_tokens(self) -> int:
        return sum(call.prompt_tokens for call in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(call.completion_tokens for call in self.calls)

    @property
    def latency_s(self) -> float:
        """Time spent inside model calls (cache hits count as zero)."""
        return sum(call.latency_s for call in self.calls)

    @property
    def n_calls(self) -> int:
        return len(self.calls)

    @property
    def cached_calls(self) -> int:
        return sum(1 for call in self.calls if call.cached)

    @property
    def cut_calls(self) -> int:
        """Replies that stopped at the token limit (finish_reason "length")."""
        return sum(1 for call in self.calls if call.was_cut)

    @property
    def empty_replies(self) -> int:
        return sum(1 for call in self.calls if call.empty_reply)

    @property
    def notes_history(self) -> list[str]:
        return list(self.rollout.notes_history)

    @property
    def final_notes(self) -> str | None:
        if not self.rollout.bounded:
            return None
        return self.rollout.notes

    @property
    def memory_policy(self) -> str | None:
        """The memory policy that wrote the memory (None under full context, which keeps none)."""
        return self.rollout.memory_policy

    @property
    def memory_failures(self) -> int:
        """Memory calls whose reply the policy could not use (a malformed tool call or JSON)."""
        return self.rollout.memory_failures

    def trajectory(self, *, store_messages: bool = False) -> dict[str, Any]:
        """A JSON-able record of the rollout: per-turn notes, holdings and accounting."""
        episode = self.episode
        holds_current, holds_stale = notes_holdings(self.notes_history, episode)
        turns = []
        for turn, call in zip(self.rollout.turns, self.calls, strict=True):
            record: dict[str, Any] = {
                "kind": turn.kind,
                "session_index": turn.session_index,
                "reply": turn.reply,
                "notes_after": turn.notes_after,
                "truncated_chars": turn.truncated_chars,
                "prompt_chars": sum(len(message.get("content") or "") for message in turn.messages),
                "prompt_tokens": call.prompt_tokens,
                "completion_tokens": call.completion_tokens,
                "latency_s": round(call.latency_s, 6),
                "cached": call.cached,
                "made_by_commit": call.made_by_commit,
                "served_model": call.served_model,
                "system_fingerprint": call.system_fingerprint,
                "cached_prompt_tokens": call.cached_prompt_tokens,
                "finish_reason": call.finish_reason,
                "cut": call.was_cut,
                "empty_reply": call.empty_reply,
            }
            if turn.memory_failure:
                record["memory_failure"] = turn.memory_failure
            if store_messages:
                record["messages"] = turn.messages
            turns.append(record)
        return {
            "episode_id": episode.episode_id,
            "source": episode.source,
            "question_type": episode.question_type,
            "condition": self.condition,
            "model": self.model_name,
            "notes_budget_chars": self.rollout.notes_budget_chars or None,
            "question": episode.question,
            "gold_answers": list(episode.gold_answers),
            "superseded_values": list(episode.superseded_values),
            "is_abstention": episode.is_abstention,
            "asks_previous_value": episode.asks_previous_value,
            "n_sessions": len(episode.sessions),
            "notes_history": self.notes_history,
            "holds_current": holds_current,
            "holds_stale": holds_stale,
            "answer": self.answer,
            "truncations": self.rollout.truncation_count,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": round(self.latency_s, 6),
            "wall_s": round(self.wall_s, 6),
            "n_calls": self.n_calls,
            "cached_calls": self.cached_calls,
            "cut_calls": self.cut_calls,
            "empty_replies": self.empty_replies,
            "turns": turns,
            "error": self.error,
            "failed": self.failed,
            "prompt_variant": self.rollout.prompt_variant,
            "memory_policy": self.memory_policy,
            "memory_failures": self.memory_failures,
            "memory": self.memory_metrics().as_dict() if self.rollout.bounded else None,
        }

    def memory_metrics(self) -> MemoryMetrics:
        """Did this rollout write, update and keep its notes (`eval.memory_metrics`)?"""
        return trajectory_memory_metrics(
            self.notes_history, self.episode, truncated_rewrites=self.rollout.truncation_count
        )


async def arun_rollout(
    rollout: Rollout,
    model: ChatModel,
    *,
    max_tokens_notes: int | None,
    max_tokens_answer: int | None,
    seed: int = 0,
    condition: str | None = None,
    temperature: float = 0.0,
) -> RolloutOutcome:
    """Drive one rollout to its answer, one model call at a time (sessions strictly in order).

    A prompt longer than the model's context window ends the rollout without an answer (scored
    as wrong) and is recorded in `outcome.error`: that is the model's limit, not a crash of the run.
    Any other `ModelCallError` (retries used up, a rejected request) ends it the same way with
    `outcome.failed` set: the question failed and a re-run should try it again.
    """
    if condition is None:
        condition = "bounded_memory" if rollout.bounded else "full_context"
    outcome = RolloutOutcome(rollout=rollout, condition=condition, model_name=model.name)
    started = time.perf_counter()
    while not rollout.done:
        kind = rollout.current_kind
        session_index = getattr(rollout, "sessions_consumed", None) if kind == "notes" else None
        max_tokens = max_tokens_notes if kind == "notes" else max_tokens_answer
        call = rollout.current_call() if hasattr(rollout, "current_call") else None
        try:
            reply, record = await _answer_call(rollout, call, model, max_tokens, temperature, seed)
        except ContextOverflowError as error:
            outcome.error = f"context overflow at the {kind} turn: {error}"
            break
        except ModelCallError as error:
            outcome.error = f"{kind} turn failed: {type(error).__name__}: {error}"
            outcome.failed = True
            break
        rollout.step(reply)
        record.kind = record.kind if record.kind == "embed" else kind
        record.session_index = session_index
        outcome.calls.append(record)
    outcome.wall_s = time.perf_counter() - started
    if not rollout.done and hasattr(rollout, "close"):
        rollout.close()  # ended early: a policy's worker thread and store go now, not at exit
    return outcome


async def _answer_call(
    rollout: Rollout,
    call: PolicyCall | None,
    model: ChatModel,
    max_tokens: int | None,
    temperature: float,
    seed: int,
) -> tuple[str | PolicyReply, CallRecord]:
    """Make the current turn's model call: a chat call (with the call's tools, if any) or, for a memory
    policy, an embedding call; the reply to step the rollout with and the call's record."""
    if call is not None and call.kind == "embed":
        aembed = getattr(model, "aembed", None)
        if aembed is None:
            raise ModelConfigError(f"{model.name} serves no embeddings, which this memory policy needs")
        embedded: EmbedResult = await aembed(list(call.texts))
        record = CallRecord(
            kind="embed",
            session_index=None,
            prompt_tokens=int(embedded.prompt_tokens or 0),
            completion_tokens=0,
            latency_s=float(embedded.latency_s or 0.0),
            cached=bool(embedded.cached),
            made_by_commit=embedded.made_by_commit if embedded.cached else None,
        )
        return PolicyReply(vectors=[list(vector) for vector in embedded.vectors]), record
    if call is not None and call.max_tokens != "auto":  # "auto": the run's cap for this kind of turn
        max_tokens = call.max_tokens
    extra: dict[str, Any] = {}  # tools and a response format are never sent to backends without them
    if call is not None and call.tools:
        extra["tools"] = call.tools
    if call is not None and call.response_format:
        extra["response_format"] = call.response_format
    messages = list(call.messages) if call is not None else rollout.current_messages()
    result: ChatResult = await model.achat(
        messages, max_tokens=max_tokens, temperature=temperature, seed=seed, **extra
    )
    record = CallRecord(
        kind="chat",
        session_index=None,
        prompt_tokens=int(result.prompt_tokens or 0),
        completion_tokens=int(result.completion_tokens or 0),
        latency_s=float(result.latency_s or 0.0),
        cached=bool(result.cached),
        finish_reason=result.finish_reason,
        empty_reply=not result.text.strip() and not result.tool_calls,
        made_by_commit=result.made_by_commit if result.cached else None,
        served_model=result.served_model,
        system_fingerprint=result.system_fingerprint,
        cached_prompt_tokens=result.cached_prompt_tokens,
    )
    if call is None:
        return result.text, record
    return PolicyReply(text=result.text, tool_calls=[dict(item) for item in result.tool_calls]), record
