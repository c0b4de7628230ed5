"""Automatic failure breakdown for bounded-memory rollouts.

The paper sorted its failures by hand ("the relevant fact being compressed away or not
overwritten"). A trajectory from `eval.runner.run_condition` records, after every session, whether
the notes still conveyed the current gold value (`holds_current`) and a superseded one
(`holds_stale`), so the same sorting can be done by rule.

Rules, applied in this order to one trajectory:

1. ``correct``         -- the answer was graded correct (matcher `verdict == "correct"`, or the
                          judge's verdict when `use_judge=True`).
2. ``held_but_missed`` -- the FINAL notes conveyed the current value, yet the answer missed it
                          (a reading/answering failure, not a memory failure).
3. ``kept_stale``      -- the final notes did not convey the current value but did convey a
                          superseded one (the update was not written over the old value).
4. ``squeezed_out``    -- the current value appeared in the notes after some session but was gone
                          by the end (and no stale value is left): compressed away.
5. ``notes_never_written`` -- every notes state was empty or a placeholder: the agent never wrote
                          memory at all (a prompt/model failure, not a supersession one).
6. ``never_entered``   -- notes were written, but the current value never appeared in them (the
                          fact was omitted).

Beside the class, `echoes_example` flags notes that copied the prompt's worked example (its
words, e.g. the v1 example's city and dog's name) into the user's memory: a failure of the prompt, not of the memory policy.

Only bounded-memory trajectories of answerable questions can be classified: full-context runs
have no notes, and an abstention item's gold is an explanation, not a value the notes could hold.
`classify_failure` raises `ValueError` for those; `failure_breakdown` skips them and counts them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from supersede_lib.agent.prompts import ALL_EXAMPLE_MARKERS, is_empty_notes
from supersede_lib.eval.memory_metrics import echoes_example

FAILURE_CLASSES = (
    "correct",
    "notes_never_written",
    "never_entered",
    "squeezed_out",
    "kept_stale",
    "held_but_missed",
)


def _field(trajectory: Mapping[str, Any], name: str) -> Any:
    if name not in trajectory:
        raise ValueError(f"trajectory {trajectory.get('episode_id', '?')!r}: missing field {name!r}")
    return trajectory[name]


def _is_correct(trajectory: Mapping[str, Any], use_judge: bool) -> bool:
    if use_judge:
        judged = _field(trajectory, "judge_correct")
        if judged is None:
            raise ValueError(
                f"trajectory {trajectory.get('episode_id', '?')!r}: field 'judge_correct' is None"
            )
        return bool(judged)
    return _field(trajectory, "verdict") == "correct"


def is_classifiable(trajectory: Mapping[str, Any]) -> bool:
    """True for a bounded-memory trajectory whose notes were checked for the current value."""
    holds_current = trajectory.get("holds_current")
    return (
        trajectory.get("condition", "bounded_memory") == "bounded_memory"
        and isinstance(holds_current, list)
        and len(holds_current) > 0
    )


def classify_failure(trajectory: Mapping[str, Any], *, use_judge: bool = False) -> str:
    """One of FAILURE_CLASSES for a bounded-memory trajectory (rules in the module docstring)."""
    episode_id = trajectory.get("episode_id", "?")
    if not is_classifiable(trajectory):
        raise ValueError(
            f"trajectory {episode_id!r}: field 'holds_current' must be a non-empty list of a bounded-memory "
            "rollout (full-context and abstention trajectories cannot be classified)"
        )
    if _is_correct(trajectory, use_judge):
        return "correct"
    holds_current = [bool(value) for value in trajectory["holds_current"]]
    holds_stale = trajectory.get("holds_stale") or [False] * len(holds_current)
    if len(holds_stale) != len(holds_current):
        raise ValueError(
            f"trajectory {episode_id!r}: field 'holds_stale' has {len(holds_stale)} entries, "
            f"'holds_current' has {len(holds_current)}"
        )
    if holds_current[-1]:
        return "held_but_missed"
    if holds_stale[-1]:
        return "kept_stale"
    if any(holds_current):
        return "squeezed_out"
    notes_history = trajectory.get("notes_history")
    if notes_history and all(is_empty_notes(notes) for notes in notes_history):
        return "notes_never_written"
    return "never_entered"


def echoes_prompt_example(
    trajectory: Mapping[str, Any], markers: Iterable[str] = ALL_EXAMPLE_MARKERS
) -> bool:
    """True when some notes of the trajectory hold a word of a notes prompt's worked example.

    A marker the episode itself is about (in its gold or superseded values) is not counted.
    """
    values = [*(trajectory.get("gold_answers") or []), *(trajectory.get("superseded_values") or [])]
    return echoes_example([str(note) for note in trajectory.get("notes_history") or []], values, markers)


def failure_breakdown(trajectories: Iterable[Mapping[str, Any]], *, use_judge: bool = False) -> pd.DataFrame:
    """One row per classifiable trajectory with its failure class and when the value came and went.

    Columns: episode_id, model, condition, notes_budget_chars, n_sessions, failure, entered_after
    (first session index whose notes held the current value, <NA> if none), last_held_after,
    final_holds_stale, echoes_example.
    `frame.attrs["skipped"]` counts trajectories that could not be classified.
    """
    rows = []
    skipped = 0
    for trajectory in trajectories:
        if not is_classifiable(trajectory):
            skipped += 1
            continue
        holds_current = [bool(value) for value in trajectory["holds_current"]]
        held_at = [index for index, held in enumerate(holds_current) if held]
        holds_stale = trajectory.get("holds_stale")
        rows.append(
            {
                "episode_id": trajectory.get("episode_id"),
                "model": trajectory.get("model"),
                "condition": trajectory.get("condition"),
                "notes_budget_chars": trajectory.get("notes_budget_chars"),
                "n_sessions": len(holds_current),
                "failure": classify_failure(trajectory, use_judge=use_judge),
                "entered_after": held_at[0] if held_at else None,
                "last_held_after": held_at[-1] if held_at else None,
                "final_holds_stale": bool(holds_stale[-1]) if holds_stale else False,
                "echoes_example": echoes_prompt_example(trajectory),
            }
        )
    frame = pd.DataFrame(
        rows,
        columns=[
            "episode_id",
            "model",
            "condition",
            "notes_budget_chars",
            "n_sessions",
            "failure",
            "entered_after",
            "last_held_after",
            "final_holds_stale",
            "echoes_example",
        ],
    )
    frame = frame.astype({"entered_after": "Int64", "last_held_after": "Int64"})
    frame.attrs["skipped"] = skipped
    return frame


def failure_counts(breakdown: pd.DataFrame, by: tuple[str, ...] = ("model",)) -> pd.DataFrame:
    """Counts of each failure class (all five, zeros included) per group, and of example echoes."""
    groups = list(by)
    counts = breakdown.groupby(groups + ["failure"]).size().unstack("failure", fill_value=0)
    counts = counts.reindex(columns=list(FAILURE_CLASSES), fill_value=0)
    counts["total"] = counts.sum(axis=1)
    if "echoes_example" in breakdown:
        counts["notes_echo_prompt_example"] = breakdown.groupby(groups)["echoes_example"].sum().astype(int)
    return counts.reset_index()
