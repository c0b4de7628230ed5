"""The rollout core: one small state machine per condition, with no framework imports.

Evaluation (`agents`), the verifiers environment and GRPO training all drive these
classes the same way::

    rollout = BoundedMemoryRollout(episode, notes_budget_chars=300)
    while not rollout.done:
        reply = model(rollout.current_messages())
        rollout.step(reply)
    rollout.answer, rollout.turns

so the three can never disagree about what the model saw. The bounded-memory agent
sees, at each turn, ONLY its current notes and one new session; the raw session is
never shown again, and the final answer is produced from the notes alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from supersede_lib.agent import prompts
from supersede_lib.agent.episode import Episode
from supersede_lib.agent.memory import DEFAULT_MEMORY, PolicyRollout, TurnRecord, get_memory_policy
from supersede_lib.agent.memory.notes import updated_notes
from supersede_lib.agent.settings import DEFAULT_ROLLOUT, RolloutSettings

TurnKind = Literal["notes", "answer"]
__all__ = [
    "CONDITIONS",
    "BoundedMemoryRollout",
    "FullContextRollout",
    "Rollout",
    "TurnRecord",
    "make_rollout",
]


@dataclass
class BoundedMemoryRollout:
    """Notes start empty; one rewrite per session in date order; then answer from notes alone."""

    episode: Episode
    notes_budget_chars: int
    notes: str = ""
    turns: list[TurnRecord] = field(default_factory=list)
    answer: str | None = None
    prompt_variant: str = DEFAULT_ROLLOUT.prompt_variant
    notes_system: str | None = None  # replaces the variant's notes system text (None: the variant's)
    bounded: ClassVar[bool] = True  # the answer reads a B-capped memory, never the sessions
    memory_policy: ClassVar[str] = DEFAULT_MEMORY
    memory_failures: ClassVar[int] = 0  # a notes reply is always usable: it is the notes

    def __post_init__(self) -> None:
        if self.notes_budget_chars < 1:
            raise ValueError(f"notes_budget_chars must be positive, got {self.notes_budget_chars}")
        prompts.get_prompt_variant(self.prompt_variant)  # unknown name: ValueError listing the allowed ones

    @property
    def sessions_consumed(self) -> int:
        return sum(1 for turn in self.turns if turn.kind == "notes")

    @property
    def done(self) -> bool:
        return self.answer is not None

    @property
    def current_kind(self) -> TurnKind:
        self._require_not_done()
        return "notes" if self.sessions_consumed < len(self.episode.sessions) else "answer"

    @property
    def truncation_count(self) -> int:
        return sum(1 for turn in self.turns if turn.truncated_chars > 0)

    @property
    def notes_history(self) -> list[str]:
        """The notes after each session, in order."""
        return [turn.notes_after or "" for turn in self.turns if turn.kind == "notes"]

    def current_messages(self) -> list[dict[str, str]]:
        """The exact prompt for the next model call."""
        if self.current_kind == "notes":
            session = self.episode.sessions[self.sessions_consumed]
            return prompts.notes_update_messages(
                self.notes, session, self.notes_budget_chars, self.prompt_variant, self.notes_system
            )
        return prompts.answer_from_notes_messages(
            self.notes, self.episode.question, self.episode.question_date, self.prompt_variant
        )

    def step(self, reply: str) -> None:
        """Feed the model's reply to the current prompt and advance."""
        kind = self.current_kind
        messages = self.current_messages()
        reply = reply or ""
        if kind == "notes":
            capped, cut_chars = updated_notes(
                self.notes, reply, self.notes_budget_chars, self.prompt_variant, self.sessions_consumed + 1
            )
            self.turns.append(
                TurnRecord(
                    kind="notes",
                    session_index=self.sessions_consumed,
                    messages=messages,
                    reply=reply,
                    notes_after=capped,
                    truncated_chars=cut_chars,
                )
            )
            self.notes = capped
        else:
            self.turns.append(TurnRecord(kind="answer", session_index=None, messages=messages, reply=reply))
            self.answer = reply.strip()

    def _require_not_done(self) -> None:
        if self.done:
            raise RuntimeError(f"rollout for {self.episode.episode_id} is already done")


@dataclass
class FullContextRollout:
    """The upper bound: one call with every session in date order, then the question."""

    episode: Episode
    turns: list[TurnRecord] = field(default_factory=list)
    answer: str | None = None
    notes_budget_chars: int = 0  # unused; keeps the two rollouts interchangeable in drivers
    truncation_count: int = 0
    notes_history: list[str] = field(default_factory=list)
    prompt_variant: str = DEFAULT_ROLLOUT.prompt_variant
    bounded: ClassVar[bool] = False  # every session goes to the one answer call
    memory_policy: ClassVar[str | None] = None
    memory_failures: ClassVar[int] = 0

    def __post_init__(self) -> None:
        prompts.get_prompt_variant(self.prompt_variant)  # unknown name: ValueError listing the allowed ones

    @property
    def done(self) -> bool:
        return self.answer is not None

    @property
    def current_kind(self) -> TurnKind:
        if self.done:
            raise RuntimeError(f"rollout for {self.episode.episode_id} is already done")
        return "answer"

    def current_messages(self) -> list[dict[str, str]]:
        self.current_kind  # noqa: B018 - raises when done
        return prompts.full_context_messages(
            self.episode.sessions, self.episode.question, self.episode.question_date, self.prompt_variant
        )

    def step(self, reply: str) -> None:
        messages = self.current_messages()
        self.turns.append(TurnRecord(kind="answer", session_index=None, messages=messages, reply=reply or ""))
        self.answer = (reply or "").strip()


Rollout = BoundedMemoryRollout | FullContextRollout | PolicyRollout

CONDITIONS = ("full_context", "bounded_memory")


def make_rollout(
    episode: Episode, condition: str, *, settings: RolloutSettings = DEFAULT_ROLLOUT, **changes: Any
) -> Rollout:
    """The rollout for a condition name ("full_context" or "bounded_memory") under `settings`, with
    `changes` to its fields (e.g. `notes_budget_chars=120`, `prompt_variant=...`, `memory=...`) on top.

    Bounded memory runs `settings.memory` (`agent.memory.MEMORY_POLICIES`): "notes", the paper's notes
    (rewritten whole, or by line edits as the prompt variant says), is a `BoundedMemoryRollout`, as every
    recorded notes run was; any other policy a `PolicyRollout` over the same budget and prompt variant."""
    settings = settings.with_changes(**changes)
    if condition == "full_context":
        return FullContextRollout(episode, prompt_variant=settings.prompt_variant)
    if condition == "bounded_memory":
        budget = settings.budget_for(episode)
        if settings.memory == DEFAULT_MEMORY:
            return BoundedMemoryRollout(
                episode,
                notes_budget_chars=budget,
                prompt_variant=settings.prompt_variant,
                notes_system=settings.notes_system,
            )
        policy = get_memory_policy(settings.memory)(budget, settings.prompt_variant)
        return PolicyRollout(episode, policy)
    raise ValueError(f"unknown condition {condition!r}; expected one of {CONDITIONS}")
