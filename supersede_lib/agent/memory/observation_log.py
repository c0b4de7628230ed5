"""A dated observation log with a reflector pass (Mastra's observational memory), capped at B.

Per session an observer call writes the session's observations, one per line (prompt
`observation_log`); each is appended to the log prefixed with the session's date. When the log grows
past the reflection threshold (B characters: the log must fit in what the answer call may read), a
reflector call (prompt `observation_reflector`) rewrites the log, dropping what later observations
superseded or made stale and merging duplicates; its lines replace the log. Mastra runs both agents in
the background against token thresholds well under the context; here the threshold is the run's B, so
the reflector is what keeps the log in budget. What still does not fit after reflection is cut from the
oldest end (the newest lines that fit in B are kept, counted as a truncation). An empty reflector reply
is a memory failure: the log is kept, cut to its newest lines.
"""

from __future__ import annotations

import re

from supersede_lib.agent import prompts
from supersede_lib.agent.episode import Session
from supersede_lib.agent.memory.append_truncate import reply_lines
from supersede_lib.agent.memory.base import MemoryPolicy, PolicyCall, PolicyReply, newest_lines_within

_DATE = re.compile(r"^\d{4}/\d{2}/\d{2}")


def observation_date(session: Session) -> str:
    """The session's calendar date, `YYYY/MM/DD` (its whole date text when that does not start with one)."""
    match = _DATE.match(session.date)
    return match.group(0) if match else session.date


class ObservationLogPolicy(MemoryPolicy):
    """An observer call per session appends dated lines; a reflector call tidies the log once it is over B."""

    name = "observation_log"

    def __init__(self, budget_chars: int, prompt_variant: str = prompts.DEFAULT_PROMPT_VARIANT) -> None:
        super().__init__(budget_chars, prompt_variant)
        self.log: list[str] = []
        self.reflections = 0  # reflector calls made
        self._session: Session | None = None
        self._step: str | None = None  # "observe" or "reflect": the call awaiting its reply

    def begin_session(self, session: Session, session_index: int) -> None:
        self._session, self._step = session, "observe"

    def next_call(self) -> PolicyCall | None:
        if self._step == "observe" and self._session is not None:
            return PolicyCall(
                kind="chat", messages=prompts.memory_policy_messages("observation_log", self._session)
            )
        if self._step == "reflect":
            log = "\n".join(self.log)
            messages = prompts.memory_policy_messages(
                "observation_reflector", log=log, used=len(log), budget=self.budget_chars
            )
            return PolicyCall(kind="chat", messages=messages)
        return None

    def take_reply(self, reply: PolicyReply) -> str | None:
        if self._step == "observe":
            assert self._session is not None
            date = observation_date(self._session)
            self.log += [f"{date}: {line}" for line in reply_lines(reply.text)]
            over = len("\n".join(self.log)) > self.budget_chars
            self._step = "reflect" if over else None
            return None if reply.text.strip() else "empty observer reply: nothing observed"
        self._step = None
        self.reflections += 1
        tidied = reply_lines(reply.text)
        failure = None if tidied else "empty reflector reply: the log was cut to its newest lines instead"
        self._cut_to_budget(tidied or self.log)
        return failure

    def _cut_to_budget(self, lines: list[str]) -> None:
        kept = newest_lines_within(lines, self.budget_chars)
        cut = len("\n".join(lines)) - len("\n".join(kept))
        if cut > 0:
            self.truncation_count += 1
            self.last_truncated_chars = cut
        self.log = kept

    def render(self) -> str:
        return "\n".join(newest_lines_within(self.log, self.budget_chars))
