"""A run's result row: one per question, defined once.

`ResultRow` is the row: its fields, in order, are the columns of a run's frame and of its
`<run_name>.csv` (`ROW_COLUMNS` is read from it), so a column is added, renamed or moved in one
place. A field copied as it is from the episode, the rollout's outcome or the trajectory's memory
record (`eval.memory_metrics`) says so where it is declared (`COPIED_COLUMNS`, `MEMORY_COLUMNS`);
`question_row` copies those and computes the rest (the matcher's score, the judge's verdict, the
budget). `QuestionResult` carries a row with its trajectory and the judge's accounting to the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import pandas as pd

from supersede_lib.agent.episode import Episode
from supersede_lib.eval.matcher import Score
from supersede_lib.eval.rollout_driver import RolloutOutcome

COPIED_FROM = "copied_from"  # a field's metadata: the record and the key its value is copied from
Record = Literal["episode", "outcome", "memory"]


def _copied(record: Record, key: str | None = None) -> Any:
    """A column copied from `record` (the episode, the rollout's outcome, or the trajectory's `memory`
    record: `MemoryMetrics.as_dict`) under `key`, by default the column's own name. The memory record
    is absent under full context, which keeps no notes: its columns are then empty."""
    return field(metadata={COPIED_FROM: (record, key)})


@dataclass(frozen=True)
class ResultRow:
    """One question of one run: what was asked, what the agent answered, how it was graded, what it cost."""

    episode_id: str = _copied("episode")
    source: str = _copied("episode")
    question_type: str = _copied("episode")
    condition: str = _copied("outcome")  # "bounded_memory" or "full_context"
    model: str = _copied("outcome", "model_name")
    notes_budget_chars: int | None  # empty under full context
    chars_per_session: int | None  # set when the budget grows with the history
    n_sessions: int
    question: str = _copied("episode")
    answer: str = _copied("outcome")
    gold: str
    verdict: str  # the matcher's: correct, stale, ambiguous or wrong
    answered_current: bool
    asserted_stale: bool
    reward: float
    is_abstention: bool = _copied("episode")
    asks_previous_value: bool = _copied("episode")
    judge_correct: bool | None  # empty without a judge
    prompt_tokens: int = _copied("outcome")
    completion_tokens: int = _copied("outcome")
    latency_s: float = _copied("outcome")  # time inside model calls; cache hits count as zero
    n_calls: int = _copied("outcome")
    cached_calls: int = _copied("outcome")
    truncations: int  # notes rewrites the budget had to cut
    final_notes: str | None = _copied("outcome")
    error: str | None = _copied("outcome")  # why the rollout ended without an answer
    failed: bool = _copied("outcome")  # a call failed for good; a re-run retries the question
    cut_calls: int = _copied("outcome")  # replies stopped at the token limit
    empty_replies: int = _copied("outcome")
    prompt_variant: str
    memory_policy: str | None = _copied(
        "outcome"
    )  # which memory design wrote the notes; empty under full context
    memory_failures: int = _copied(
        "outcome"
    )  # memory replies the policy could not use (bad tool call or JSON)
    notes_changed_share: float | None = _copied("memory", "changed_share")
    notes_empty_share: float | None = _copied("memory", "empty_share")
    notes_echo_example: bool | None = _copied("memory", "echoes_example")
    notes_hold_current: bool | None = _copied("memory", "holds_current")
    notes_hold_stale: bool | None = _copied("memory", "holds_stale")
    notes_hold_current_keyed: bool | None = _copied("memory", "holds_current_keyed")

    def as_dict(self) -> dict[str, Any]:
        """The row as the run's frame and the manifest's totals read it, in column order."""
        return {column: getattr(self, column) for column in ROW_COLUMNS}


ROW_COLUMNS: tuple[str, ...] = tuple(column.name for column in fields(ResultRow))
COPIED_COLUMNS: dict[str, tuple[Record, str]] = {  # column -> (record, key) it is copied from
    column.name: (column.metadata[COPIED_FROM][0], column.metadata[COPIED_FROM][1] or column.name)
    for column in fields(ResultRow)
    if COPIED_FROM in column.metadata
}
MEMORY_COLUMNS: dict[str, str] = {  # column -> key of the trajectory's `memory` record
    column: key for column, (record, key) in COPIED_COLUMNS.items() if record == "memory"
}


def gold_text(episode: Episode) -> str:
    """The gold column: the episode's own wording of the answer, else its accepted answers joined."""
    return episode.gold_text or " | ".join(episode.gold_answers)


def _copied_values(
    episode: Episode, outcome: RolloutOutcome, memory: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The values of every copied column (`COPIED_COLUMNS`) for one question."""
    values = {}
    for column, (record, key) in COPIED_COLUMNS.items():
        if record == "memory":
            values[column] = (memory or {}).get(key)
        else:
            values[column] = getattr(episode if record == "episode" else outcome, key)
    return values


def question_row(
    outcome: RolloutOutcome,
    score: Score,
    *,
    judge_correct: bool | None,
    chars_per_session: int | None,
    prompt_variant: str,
    memory: Mapping[str, Any] | None,
) -> ResultRow:
    """The row of one finished question: its rollout's `outcome`, graded by the matcher's `score`;
    `memory` is the trajectory's memory record (None under full context)."""
    episode, rollout = outcome.episode, outcome.rollout
    is_bounded = rollout.bounded
    return ResultRow(
        **_copied_values(episode, outcome, memory),
        notes_budget_chars=rollout.notes_budget_chars if is_bounded else None,
        chars_per_session=chars_per_session if is_bounded else None,
        n_sessions=len(episode.sessions),
        gold=gold_text(episode),
        verdict=score.verdict,
        answered_current=bool(score.answered_current),
        asserted_stale=bool(score.asserted_stale),
        reward=float(score.reward),
        judge_correct=judge_correct,
        truncations=rollout.truncation_count,
        prompt_variant=prompt_variant,
    )


def rows_frame(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """A run's rows as a frame with every column, in `ROW_COLUMNS` order (even when there are none)."""
    return pd.DataFrame(list(rows), columns=list(ROW_COLUMNS))


@dataclass
class QuestionResult:
    """What one question hands the run: its row (as a dict), its trajectory, and the judge's calls."""

    row: dict[str, Any]
    trajectory: dict[str, Any]
    judge_prompt_tokens: int = 0
    judge_completion_tokens: int = 0
    judge_cached: int = 0
    judge_calls: int = 0


def judge_tallies(results: Iterable[QuestionResult]) -> dict[str, int]:
    """The judge's calls and tokens over a run's questions (the manifest's totals)."""
    results = list(results)
    return {
        "judge_calls": sum(result.judge_calls for result in results),
        "judge_cached_calls": sum(result.judge_cached for result in results),
        "judge_prompt_tokens": sum(result.judge_prompt_tokens for result in results),
        "judge_completion_tokens": sum(result.judge_completion_tokens for result in results),
    }
