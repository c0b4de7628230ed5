"""`PolicyRollout`: any `MemoryPolicy` as a rollout the drivers already know how to drive.

It keeps the rollout contract of `agent.rollout` (`current_kind`, `current_messages()`, `step(reply)`,
`done`, `answer`, `turns`, `notes_history`, `truncation_count`, `notes_budget_chars`, `prompt_variant`)
and adds `current_call()`, the `PolicyCall` behind the current turn (a chat call with tools, or an
embedding call, which `current_messages()` alone cannot say). Sessions go to the policy one at a time,
in date order, each once; the answer call is the same `prompts.answer_from_notes_messages` for every
policy, over `policy.render()` (never over B). A reply the policy could not use is recorded on its turn
(`TurnRecord.memory_failure`) and counted (`memory_failures`); the rollout goes on.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from supersede_lib.agent import prompts
from supersede_lib.agent.episode import Episode
from supersede_lib.agent.memory.base import MemoryPolicy, PolicyCall, PolicyReply, TurnRecord


class PolicyRollout:
    """Each session once to the policy (as many calls as it asks for), then the answer from its memory."""

    bounded: ClassVar[bool] = True  # the answer reads a B-capped memory, never the sessions

    def __init__(self, episode: Episode, policy: MemoryPolicy) -> None:
        self.episode = episode
        self.policy = policy
        self.turns: list[TurnRecord] = []
        self.answer: str | None = None
        self.notes_history: list[str] = []  # the rendered memory after each session, in order
        self.sessions_consumed = 0
        self._pending: PolicyCall | None = None
        self._begun = False  # the current session was handed to the policy
        self._answer_begun = False  # the question was handed to the policy (`begin_answer`)
        self._advance()

    @property
    def memory_policy(self) -> str:
        return self.policy.name

    @property
    def notes_budget_chars(self) -> int:
        return self.policy.budget_chars

    @property
    def prompt_variant(self) -> str:
        return self.policy.prompt_variant

    @property
    def notes(self) -> str:
        """The memory as the answer call sees it now."""
        return self.policy.render()

    @property
    def truncation_count(self) -> int:
        return self.policy.truncation_count

    @property
    def memory_failures(self) -> int:
        return sum(1 for turn in self.turns if turn.memory_failure)

    @property
    def done(self) -> bool:
        return self.answer is not None

    @property
    def current_kind(self) -> Literal["notes", "answer"]:
        if self.done:
            raise RuntimeError(f"rollout for {self.episode.episode_id} is already done")
        return "notes" if self._pending is not None else "answer"

    def current_call(self) -> PolicyCall:
        """The model call of the current turn (the answer is a chat call with the answer's own cap)."""
        if self.current_kind == "notes":
            assert self._pending is not None
            return self._pending
        messages = prompts.answer_from_notes_messages(
            self._rendered(), self.episode.question, self.episode.question_date, self.prompt_variant
        )
        return PolicyCall(kind="chat", messages=messages)  # "auto": the run's answer cap

    def current_messages(self) -> list[dict[str, Any]]:
        """The chat prompt of the current turn ([] for an embedding call, which has texts instead)."""
        return list(self.current_call().messages)

    def close(self) -> None:
        """Release the policy's threads and stores; the driver calls it when a rollout ends early."""
        self.policy.close()

    def step(self, reply: str | PolicyReply) -> None:
        """Feed the reply to the current call and advance (to the next call, session or the answer)."""
        call = self.current_call()
        reply = reply if isinstance(reply, PolicyReply) else PolicyReply(text=reply or "")
        if self.current_kind == "answer":
            self.turns.append(TurnRecord("answer", None, list(call.messages), reply.text))
            self.answer = reply.text.strip()
            self.policy.close()
            return
        self.policy.last_truncated_chars = 0
        failure = self.policy.take_reply(reply)
        self.turns.append(
            TurnRecord(
                kind="notes",
                session_index=None if self._answer_begun else self.sessions_consumed,
                messages=list(call.messages) or [{"role": "embed", "content": text} for text in call.texts],
                reply=_reply_text(reply),
                notes_after=self._rendered(),
                truncated_chars=self.policy.last_truncated_chars,
                memory_failure=failure,
            )
        )
        self._pending = None
        self._advance()

    def _rendered(self) -> str:
        rendered = self.policy.render()
        if len(rendered) > self.notes_budget_chars:  # a policy bug, never a longer memory
            raise RuntimeError(
                f"memory policy {self.policy.name!r} rendered {len(rendered)} characters, over its "
                f"budget of {self.notes_budget_chars}"
            )
        return rendered

    def _advance(self) -> None:
        """Find the next call: the current session's next one, else the next session's first; a session
        the policy needs no call for is consumed at once."""
        sessions = self.episode.sessions
        while self._pending is None and self.sessions_consumed < len(sessions):
            if not self._begun:
                self.policy.begin_session(sessions[self.sessions_consumed], self.sessions_consumed)
                self._begun = True
            self._pending = self.policy.next_call()
            if self._pending is None:
                self.notes_history.append(self._rendered())
                self.sessions_consumed += 1
                self._begun = False
        if self._pending is None and not self._answer_begun:  # every session seen: the question's calls
            self.policy.begin_answer(self.episode.question, self.episode.question_date)
            self._answer_begun = True
        if self._pending is None and self._answer_begun:
            self._pending = self.policy.next_call()


def _reply_text(reply: PolicyReply) -> str:
    """A reply as the trajectory keeps it: its text, the tool calls as JSON after it, or the vectors' shape."""
    if reply.vectors:
        return f"[{len(reply.vectors)} vectors of {len(reply.vectors[0])}]"
    if reply.tool_calls:
        calls = json.dumps(list(reply.tool_calls), ensure_ascii=False)
        return f"{reply.text}\n{calls}" if reply.text else calls
    return reply.text
