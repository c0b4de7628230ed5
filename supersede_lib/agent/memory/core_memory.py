"""A core-memory block edited by tool calls, with Letta/MemGPT's published semantics, capped at B.

One chat call per session offers two tools (OpenAI function tools, sent as `tools`):
`core_memory_append(content)` adds `content` on a new line and `core_memory_replace(old_content,
new_content)` replaces the exact text `old_content` (every occurrence, as Letta's `str.replace` does).
As in Letta, an edit is checked before it is applied: a replace whose old text is not in the block,
and an edit that would take the block over its limit (B characters), are rejected and leave the block
as it was. Every tool call of the reply is applied in order. Letta sends a rejected edit back to the
agent as an error; here there is one call per session (the cost is then the same as the notes'), so a
rejected or malformed call (unknown tool, arguments that are not a JSON object with the named strings)
is recorded as the turn's memory failure. A reply with no tool call edits nothing, as a Letta agent
may choose.
"""

from __future__ import annotations

import json
from typing import Any

from supersede_lib.agent import prompts
from supersede_lib.agent.episode import Session
from supersede_lib.agent.memory.base import MemoryPolicy, PolicyCall, PolicyReply


def _function(name: str, description: str, parameters: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    key: {"type": "string", "description": text} for key, text in parameters.items()
                },
                "required": list(parameters),
            },
        },
    }


CORE_MEMORY_TOOLS: list[dict[str, Any]] = [
    _function(
        "core_memory_append",
        "Append to the contents of core memory (a new line).",
        {"content": "Content to write to the memory."},
    ),
    _function(
        "core_memory_replace",
        "Replace the contents of core memory. To delete memories, use an empty string for new_content.",
        {
            "old_content": "String to replace. Must be an exact match.",
            "new_content": "Content to write to the memory.",
        },
    ),
]
_PARAMETERS = {"core_memory_append": ("content",), "core_memory_replace": ("old_content", "new_content")}


class CoreMemoryPolicy(MemoryPolicy):
    """One tool-calling chat per session; the block is what the answer sees (always within B)."""

    name = "core_memory"
    needs = frozenset({"tools"})

    def __init__(self, budget_chars: int, prompt_variant: str = prompts.DEFAULT_PROMPT_VARIANT) -> None:
        super().__init__(budget_chars, prompt_variant)
        self.block = ""
        self._session: Session | None = None

    def begin_session(self, session: Session, session_index: int) -> None:
        self._session = session

    def next_call(self) -> PolicyCall | None:
        if self._session is None:
            return None
        messages = prompts.memory_policy_messages(
            "core_memory",
            self._session,
            memory=self.block or "(empty)",
            used=len(self.block),
            budget=self.budget_chars,
        )
        return PolicyCall(kind="chat", messages=messages, tools=CORE_MEMORY_TOOLS)

    def take_reply(self, reply: PolicyReply) -> str | None:
        self._session = None
        problems = [problem for call in reply.tool_calls if (problem := self._apply(call))]
        return "; ".join(problems) or None

    def _apply(self, call: dict[str, Any]) -> str | None:
        """Apply one tool call to the block; what was wrong with it (the block unchanged), else None."""
        name = call.get("name")
        if name not in _PARAMETERS:
            return f"unknown tool {name!r}"
        try:
            arguments = json.loads(call.get("arguments") or "")
        except (TypeError, ValueError):
            return f"{name}: arguments are not JSON: {str(call.get('arguments'))[:80]!r}"
        if not isinstance(arguments, dict) or not all(
            isinstance(arguments.get(key), str) for key in _PARAMETERS[name]
        ):
            return f"{name}: arguments need the strings {', '.join(_PARAMETERS[name])}"
        if name == "core_memory_append":
            edited = f"{self.block}\n{arguments['content']}" if self.block else arguments["content"]
        elif not arguments["old_content"] or arguments["old_content"] not in self.block:
            return f"core_memory_replace: old_content {arguments['old_content'][:80]!r} is not in the block"
        else:
            edited = self.block.replace(arguments["old_content"], arguments["new_content"])
        if len(edited) > self.budget_chars:
            self.truncation_count += 1
            self.last_truncated_chars += len(edited) - self.budget_chars
            return (
                f"{name}: rejected, the block would hold {len(edited)} characters (limit {self.budget_chars})"
            )
        self.block = edited
        return None

    def render(self) -> str:
        return self.block
