"""How a rollout is run, in one place: what the agent may keep, how it is asked, how long it may reply.

`RolloutSettings` is read by every driver of the rollout core: the evaluation runner (whose
`RunSettings` adds concurrency and sampling to it), the verifiers environment and the GRPO trainer.
Each default is written here once; a profile builds a run's settings from its blocks
(`profiles.Profile.run_settings`), and a training preset names the same fields.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from supersede_lib.agent import prompts
from supersede_lib.agent.episode import Episode
from supersede_lib.agent.memory import DEFAULT_MEMORY, get_memory_policy

PAPER_NOTES_BUDGET_CHARS = 300  # the paper's notes field: B = 300 characters
PAPER_CHARS_PER_SESSION = 150  # the paper's constant-ratio budget: 150 characters per session
DEFAULT_MAX_TOKENS_ANSWER = 64
AUTO: Literal["auto"] = "auto"  # a notes reply capped at about budget/3 tokens plus a margin


@dataclass(frozen=True)
class RolloutSettings:
    """The notes budget (a fixed `notes_budget_chars`, or `chars_per_session` x the episode's sessions
    when that is set), the prompt variant (`prompts.PROMPT_VARIANTS`), the token caps of a notes
    reply (`"auto"`: from the budget) and of the answer (None: no cap), the memory policy of a
    bounded-memory rollout (`agent.memory.MEMORY_POLICIES`; "notes", the paper's, by default), and
    `notes_system`: a system text that replaces the variant's in every notes call (an instruction
    being optimised, `supersede_lib.instruction`; None, the default, sends the variant's own)."""

    notes_budget_chars: int | None = PAPER_NOTES_BUDGET_CHARS
    chars_per_session: int | None = None
    prompt_variant: str = prompts.DEFAULT_PROMPT_VARIANT
    max_tokens_notes: int | None | Literal["auto"] = AUTO
    max_tokens_answer: int | None = DEFAULT_MAX_TOKENS_ANSWER
    memory: str = DEFAULT_MEMORY
    notes_system: str | None = None

    def __post_init__(self) -> None:
        prompts.get_prompt_variant(self.prompt_variant)  # an unknown name fails here, listing the known ones
        get_memory_policy(self.memory)  # and an unknown policy here
        if self.notes_system is not None and self.memory != DEFAULT_MEMORY:
            raise ValueError(f"notes_system replaces the notes' system text; memory {self.memory!r} has none")

    def budget_for(self, episode: Episode) -> int:
        """The notes cap for one episode: fixed B, or `chars_per_session` x its number of sessions."""
        if self.chars_per_session is not None:
            return max(1, self.chars_per_session * len(episode.sessions))
        if self.notes_budget_chars is None or self.notes_budget_chars < 1:
            raise ValueError("give a positive notes_budget_chars or chars_per_session")
        return self.notes_budget_chars

    def with_changes(self, **changes: Any) -> RolloutSettings:
        """A copy with `changes` (field names of this class or of a subclass such as `RunSettings`)."""
        return replace(self, **changes) if changes else self


DEFAULT_ROLLOUT = RolloutSettings()
