"""A deterministic latest-value resolver: the model extracts key, value and date; the newest value wins.

One model call per session asks for the session's facts as a JSON list of `{"key", "value", "date"}`
(prompt `latest_value`). No model decides what is stale: the table keeps, per key (compared without
case or surrounding spaces), the value with the newest date, a later session winning a tie, and the
answer memory renders one `key: value (date)` line per key, newest first, as many as fit in B. It is the
reference an LLM memory should not lose to on knowledge updates. A reply that is not a JSON list of such
objects is the turn's memory failure (the table unchanged); items without a string key and value are
skipped and named in the failure; an item whose date is not `YYYY/MM/DD` takes the session's date.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from supersede_lib.agent import prompts
from supersede_lib.agent.episode import Session
from supersede_lib.agent.memory.base import MemoryPolicy, PolicyCall, PolicyReply, newest_lines_within
from supersede_lib.agent.memory.observation_log import observation_date

_FULL_DATE = re.compile(r"^\d{4}/\d{2}/\d{2}$")
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


@dataclass(frozen=True)
class Fact:
    """One value of one key, with the date it became true and the session that said it."""

    key: str
    value: str
    date: str
    session_index: int


def parse_facts(text: str) -> list[Any]:
    """The JSON list in a reply (code fences allowed); ValueError when there is none."""
    body = _FENCE.sub("", text.strip())
    start, end = body.find("["), body.rfind("]")
    if start < 0 or end < start:
        raise ValueError("no JSON list in the reply")
    facts = json.loads(body[start : end + 1])
    if not isinstance(facts, list):
        raise ValueError("the reply's JSON is not a list")
    return facts


class LatestValuePolicy(MemoryPolicy):
    """One JSON extraction call per session; per key the newest value, rendered newest first within B."""

    name = "latest_value"

    def __init__(self, budget_chars: int, prompt_variant: str = prompts.DEFAULT_PROMPT_VARIANT) -> None:
        super().__init__(budget_chars, prompt_variant)
        self.table: dict[str, Fact] = {}
        self._session: Session | None = None
        self._session_index = 0

    def begin_session(self, session: Session, session_index: int) -> None:
        self._session, self._session_index = session, session_index

    def next_call(self) -> PolicyCall | None:
        if self._session is None:
            return None
        return PolicyCall(kind="chat", messages=prompts.memory_policy_messages("latest_value", self._session))

    def take_reply(self, reply: PolicyReply) -> str | None:
        assert self._session is not None
        session_date = observation_date(self._session)
        self._session = None
        try:
            items = parse_facts(reply.text)
        except ValueError as error:  # json.JSONDecodeError is one
            return f"malformed JSON: {error}: {reply.text.strip()[:80]!r}"
        skipped = 0
        for item in items:
            fact = self._fact(item, session_date)
            if fact is None:
                skipped += 1
            else:
                self._resolve(fact)
        self._count_cut()
        return f"{skipped} of {len(items)} items without a string key and value" if skipped else None

    def _fact(self, item: Any, session_date: str) -> Fact | None:
        if not isinstance(item, dict):
            return None
        key, value, date = item.get("key"), item.get("value"), item.get("date")
        if not isinstance(key, str) or not key.strip() or not isinstance(value, str | int | float):
            return None
        date = date.strip() if isinstance(date, str) and _FULL_DATE.match(date.strip()) else session_date
        return Fact(" ".join(key.split()), str(value).strip(), date, self._session_index)

    def _resolve(self, fact: Fact) -> None:
        """Keep the newer of the stored and the new value of the key (a later session wins a tie)."""
        folded = fact.key.casefold()
        held = self.table.get(folded)
        if held is None or (fact.date, fact.session_index) >= (held.date, held.session_index):
            self.table[folded] = fact

    def _lines(self) -> list[str]:
        """One line per key, oldest first (so the newest are the ones kept within B)."""
        facts = sorted(self.table.values(), key=lambda fact: (fact.date, fact.session_index))
        return [f"{fact.key}: {fact.value} ({fact.date})" for fact in facts]

    def _count_cut(self) -> None:
        lines = self._lines()
        cut = len("\n".join(lines)) - len(self.render())
        if cut > 0:
            self.truncation_count += 1
            self.last_truncated_chars = cut

    def render(self) -> str:
        return "\n".join(reversed(newest_lines_within(self._lines(), self.budget_chars)))
