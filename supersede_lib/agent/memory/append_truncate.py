"""Append and truncate, the naive baseline: facts appended as lines, the newest lines that fit in B kept.

One model call per session extracts the session's facts as lines (prompt `append_truncate`); they are
appended to the list, never edited or removed, and the memory is the newest lines that fit in B.
Extracted facts rather than the raw session lines: B = 300 characters holds only the last few turns of
the last session, so a raw-lines baseline would lose any fact not said at the very end and would measure
the budget rather than the design. With extracted lines the one difference from the notes is the one
under test: nothing is ever superseded, so a stale value stays until newer lines push it out.
"""

from __future__ import annotations

import re

from supersede_lib.agent import prompts
from supersede_lib.agent.episode import Session
from supersede_lib.agent.memory.base import MemoryPolicy, PolicyCall, PolicyReply, newest_lines_within

_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")
_NONE_REPLY = re.compile(r"^\W*(none|no facts?|nothing)\W*$", re.IGNORECASE)


def reply_lines(text: str) -> list[str]:
    """The non-empty lines of a reply, bullets and numbering removed; a reply that says "none" has none."""
    lines = [_BULLET.sub("", line).strip() for line in (text or "").splitlines()]
    return [line for line in lines if line and not _NONE_REPLY.match(line)]


class AppendTruncatePolicy(MemoryPolicy):
    """One extraction call per session; lines only appended; the answer sees the newest that fit in B."""

    name = "append_truncate"

    def __init__(self, budget_chars: int, prompt_variant: str = prompts.DEFAULT_PROMPT_VARIANT) -> None:
        super().__init__(budget_chars, prompt_variant)
        self.lines: list[str] = []
        self._session: Session | None = None

    def begin_session(self, session: Session, session_index: int) -> None:
        self._session = session

    def next_call(self) -> PolicyCall | None:
        if self._session is None:
            return None
        return PolicyCall(
            kind="chat", messages=prompts.memory_policy_messages("append_truncate", self._session)
        )

    def take_reply(self, reply: PolicyReply) -> str | None:
        self._session = None
        self.lines += reply_lines(reply.text)
        kept = newest_lines_within(self.lines, self.budget_chars)
        dropped = sum(len(line) + 1 for line in self.lines[: len(self.lines) - len(kept)])
        if dropped:  # lines pushed out by newer ones: the truncation this design is about
            self.truncation_count += 1
            self.last_truncated_chars = dropped
        self.lines = kept
        if not reply.text.strip():
            return "empty reply: nothing extracted (a session without facts is answered 'none')"
        return None

    def render(self) -> str:
        return "\n".join(newest_lines_within(self.lines, self.budget_chars))
