"""The one record type every study, the environment and training share.

An `Episode` is a multi-session conversation followed by one question about a fact
that may have changed during it. Real LongMemEval items and procedurally generated
timelines both become Episodes, so the rollout core never needs to know the source.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Turn:
    """One chat message inside a session."""

    role: str  # "user" or "assistant"
    content: str
    has_answer: bool | None = None  # LongMemEval evidence flag; None when unknown


@dataclass(frozen=True)
class Session:
    """One conversation session, shown to the agent exactly once."""

    session_id: str
    date: str  # as written upstream, e.g. "2023/05/30 (Tue) 23:40"
    turns: tuple[Turn, ...]

    @property
    def is_evidence(self) -> bool:
        """True when any turn is marked as holding (part of) the answer."""
        return any(turn.has_answer for turn in self.turns)

    @property
    def char_count(self) -> int:
        return sum(len(turn.content) for turn in self.turns)


@dataclass(frozen=True)
class Episode:
    """A multi-session interaction plus one question about the current value of a fact."""

    episode_id: str
    sessions: tuple[Session, ...]  # in date order
    question: str
    question_date: str
    gold_answers: tuple[str, ...]  # accepted variants of the correct answer
    superseded_values: tuple[str, ...] = ()  # values that were true once but are stale; may be empty
    is_abstention: bool = False  # the right answer is "that information is not available"
    asks_previous_value: bool = False  # the question asks for an OLD value ("initially", "previous")
    source: str = ""  # e.g. "longmemeval:oracle", "synthetic:hard"
    question_type: str = ""
    gold_text: str = ""  # the gold answer as written by the source, before splitting into variants
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def total_chars(self) -> int:
        return sum(session.char_count for session in self.sessions)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (for caches, verifiers `info`, trajectories)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Episode:
        sessions = tuple(
            Session(
                session_id=str(session["session_id"]),
                date=str(session["date"]),
                turns=tuple(Turn(**turn) for turn in session["turns"]),
            )
            for session in record["sessions"]
        )
        return cls(
            episode_id=str(record["episode_id"]),
            sessions=sessions,
            question=record["question"],
            question_date=record["question_date"],
            gold_answers=tuple(record["gold_answers"]),
            superseded_values=tuple(record.get("superseded_values", ())),
            is_abstention=bool(record.get("is_abstention", False)),
            asks_previous_value=bool(record.get("asks_previous_value", False)),
            source=record.get("source", ""),
            question_type=record.get("question_type", ""),
            gold_text=record.get("gold_text", ""),
            metadata=dict(record.get("metadata", {})),
        )
