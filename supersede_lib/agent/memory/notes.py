"""The paper's notes: a B-character notes field rewritten after each session, whole or by line edits.

Which of the two is the prompt variant's business (`PromptSet.notes_update`: "rewrite" for the paper's
whole-notes rewrite, "line_edits" for the line-edit notes applied by `notes_edits.apply_line_edits`),
so one policy covers both. `agent.rollout.BoundedMemoryRollout` runs this same update (`updated_notes`)
and is what `make_rollout` builds for memory "notes", so every recorded notes run keeps its prompts and
replies; `NotesPolicy` is the same design as a `MemoryPolicy`, turn for turn (tests/test_memory_policies.py).
"""

from __future__ import annotations

from supersede_lib.agent import prompts
from supersede_lib.agent.episode import Session
from supersede_lib.agent.memory.base import MemoryPolicy, PolicyCall, PolicyReply
from supersede_lib.agent.notes_edits import apply_line_edits, repair_prose_reply


def updated_notes(
    notes: str, reply: str, budget_chars: int, variant: str, session_number: int
) -> tuple[str, int]:
    """The notes after one notes reply to the `session_number`-th session (from 1), capped at the budget,
    and how many characters the cap cut."""
    prompt_set = prompts.get_prompt_variant(variant)
    if prompt_set.notes_update == "line_edits":
        edits = reply
        if prompt_set.repair_prose:
            edits = repair_prose_reply(reply, session_number, prompt_set.keep_times)
        return apply_line_edits(
            notes, edits, budget_chars, prompt_set.edit_line_chars, keep_times=prompt_set.keep_times
        )
    capped = reply.strip()[:budget_chars]
    return capped, len(reply.strip()) - len(capped)


class NotesPolicy(MemoryPolicy):
    """One notes call per session; the reply becomes the notes (rewrite) or edits them (line edits)."""

    name = "notes"

    def __init__(self, budget_chars: int, prompt_variant: str = prompts.DEFAULT_PROMPT_VARIANT) -> None:
        super().__init__(budget_chars, prompt_variant)
        self.notes = ""
        self._session: Session | None = None
        self._session_index = 0

    def begin_session(self, session: Session, session_index: int) -> None:
        self._session, self._session_index = session, session_index

    def next_call(self) -> PolicyCall | None:
        if self._session is None:
            return None
        messages = prompts.notes_update_messages(
            self.notes, self._session, self.budget_chars, self.prompt_variant
        )
        return PolicyCall(kind="chat", messages=messages)

    def take_reply(self, reply: PolicyReply) -> str | None:
        self.notes, cut = updated_notes(
            self.notes, reply.text or "", self.budget_chars, self.prompt_variant, self._session_index + 1
        )
        self.last_truncated_chars = cut
        self.truncation_count += cut > 0
        self._session = None
        return None

    def render(self) -> str:
        return self.notes
