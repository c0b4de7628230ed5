"""The predictions M1-M6 of docs/memory-systems-log.md, judged mechanically from 08's accuracy rows.

The predictions were committed before any policy but `notes` ran live; this module applies their
rules as written (the log's entry "how the prediction rules are read"), so no reading of the results
can bend them. Each prediction is a conjunction of clauses, one per (model, rule); a clause compares
one measure of the accuracy rows (`studies.memory_systems.policy_row`) across named policies:

- only the synthetic rows count (`data == "synthetic"`); the LongMemEval sanity rows never do;
- a model is found by its size tag, "0.5B" or "1.5B", in its name (case aside, not preceded by a
  digit or a dot), because the log names models by size; no model or two models with the tag make
  the clause not evaluable;
- the sets are the log's policies by name: the LLM bounded policies are every bounded one but
  `append_truncate` (it makes no memory call); the bounded policies are every one but full context.
  A policy registered later was not predicted about and is not read;
- "the most / the highest" among a set: no other policy of the set has a strictly larger value
  (ties keep the clause); "below" and "more than" are strict, "at or above" is >=;
- a clause whose model or one of whose policies is missing, refused, or has no accuracy (or no value
  of the measure it reads) is not evaluable.

A prediction is broken when any clause is broken, kept when every clause is kept, and otherwise not
evaluable.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from supersede_lib.results.robustness_predictions import BROKEN, KEPT, TOLERANCE, per_prediction

SYNTHETIC = "synthetic"  # the data label of 08's synthetic rows
SIZES = ("0.5B", "1.5B")
REFERENCE = "notes-rewrite"  # the paper's notes rewrite: 08's reference entry
FULL_CONTEXT = "full_context"
APPEND_TRUNCATE, CORE_MEMORY, MEM0 = "append_truncate", "core_memory", "mem0"
OBSERVATION_LOG, LATEST_VALUE = "observation_log", "latest_value"
LLM_BOUNDED = (REFERENCE, "notes-line-edits", CORE_MEMORY, OBSERVATION_LOG, LATEST_VALUE, MEM0)
BOUNDED = (REFERENCE, "notes-line-edits", APPEND_TRUNCATE, CORE_MEMORY, OBSERVATION_LOG, LATEST_VALUE, MEM0)
MARGIN = 0.10  # M5: "within 10 points of full context"
NOT_EVALUABLE = "not evaluable"
PER_EPISODE = {"memory_failures_per_episode"}  # shown as a count per episode, not in points

STATEMENTS = {
    "M1": "core_memory on the 0.5B: the most memory failures and empty memories of the LLM policies, "
    "below notes",
    "M2": "append_truncate: the highest stale-answer rate of the bounded policies, on both models",
    "M3": "mem0 on the 0.5B: below notes, more empty memories, a stale value at least as often when "
    "its memory holds something",
    "M4": "observation_log on the 1.5B: at or above notes",
    "M5": "latest_value on the 1.5B: the best bounded policy, within 10 points of full context",
    "M6": "full context is the ceiling of every bounded policy, on each model",
}

Values = Mapping[str, float]  # policy -> the measure a clause reads


def highest(subject: str) -> Callable[[Values], bool]:
    """No other policy of the set has a strictly larger value (a tie keeps the clause)."""
    return lambda values: all(value <= values[subject] + TOLERANCE for value in values.values())


def below(subject: str, other: str) -> Callable[[Values], bool]:
    return lambda values: values[subject] < values[other] - TOLERANCE


def above(subject: str, other: str) -> Callable[[Values], bool]:
    return lambda values: values[subject] > values[other] + TOLERANCE


def at_least(subject: str, other: str) -> Callable[[Values], bool]:
    return lambda values: values[subject] >= values[other] - TOLERANCE


def within(subject: str, other: str, margin: float) -> Callable[[Values], bool]:
    return lambda values: abs(values[subject] - values[other]) <= margin + TOLERANCE


@dataclass(frozen=True)
class Clause:
    """One rule of a prediction, for the model of one size: `holds` reads `measure` of `policies`."""

    prediction: str
    size: str
    rule: str
    measure: str
    policies: tuple[str, ...]
    holds: Callable[[Values], bool]


def _clauses() -> list[Clause]:
    """The log's M1-M6, clause by clause (docs/memory-systems-log.md, 2026-12-02, predictions)."""
    failures = (
        "core_memory's memory failures per episode are the highest of the LLM bounded policies",
        "memory_failures_per_episode",
        LLM_BOUNDED,
        highest(CORE_MEMORY),
    )
    empties = (
        "core_memory's empty-memory share is the highest of the LLM bounded policies",
        "held_empty_share",
        LLM_BOUNDED,
        highest(CORE_MEMORY),
    )
    core_below = (
        "core_memory's accuracy < notes-rewrite's",
        "accuracy",
        (CORE_MEMORY, REFERENCE),
        below(CORE_MEMORY, REFERENCE),
    )
    stalest = (
        "append_truncate's stale-answer rate is the highest of the bounded policies",
        "stale_answer_rate",
        BOUNDED,
        highest(APPEND_TRUNCATE),
    )
    mem0_below = ("mem0's accuracy < notes-rewrite's", "accuracy", (MEM0, REFERENCE), below(MEM0, REFERENCE))
    mem0_emptier = (
        "mem0's empty-memory share > notes-rewrite's",
        "held_empty_share",
        (MEM0, REFERENCE),
        above(MEM0, REFERENCE),
    )
    mem0_staler = (
        "of the non-empty final memories, the share holding a superseded value: mem0's >= notes-rewrite's",
        "held_stale_share_nonempty",
        (MEM0, REFERENCE),
        at_least(MEM0, REFERENCE),
    )
    log_at_least = (
        "observation_log's accuracy >= notes-rewrite's",
        "accuracy",
        (OBSERVATION_LOG, REFERENCE),
        at_least(OBSERVATION_LOG, REFERENCE),
    )
    latest_best = (
        "latest_value's accuracy is the highest of the bounded policies",
        "accuracy",
        BOUNDED,
        highest(LATEST_VALUE),
    )
    latest_near = (
        "|full context's accuracy - latest_value's| <= 10 points",
        "accuracy",
        (FULL_CONTEXT, LATEST_VALUE),
        within(FULL_CONTEXT, LATEST_VALUE, MARGIN),
    )
    ceiling = (
        "full context's accuracy >= every bounded policy's",
        "accuracy",
        (FULL_CONTEXT, *BOUNDED),
        highest(FULL_CONTEXT),
    )
    table = [
        *[("M1", "0.5B", rule) for rule in (failures, empties, core_below)],
        *[("M2", size, stalest) for size in SIZES],
        *[("M3", "0.5B", rule) for rule in (mem0_below, mem0_emptier, mem0_staler)],
        ("M4", "1.5B", log_at_least),
        *[("M5", "1.5B", rule) for rule in (latest_best, latest_near)],
        *[("M6", size, ceiling) for size in SIZES],
    ]
    return [Clause(name, size, *rule) for name, size, rule in table]


CLAUSES = _clauses()


def _size_pattern(size: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\d.]){re.escape(size)}", re.IGNORECASE)


def model_of_size(synthetic: pd.DataFrame, size: str) -> str:
    """The one model whose name carries `size`, or why there is none to read ("not evaluable (...)")."""
    names = [name for name in dict.fromkeys(synthetic["model"]) if _size_pattern(size).search(str(name))]
    if len(names) == 1:
        return str(names[0])
    found = "no model" if not names else f"{len(names)} models"
    return f"{NOT_EVALUABLE} ({found} tagged {size})"


def _value(row: Mapping[str, Any] | None, policy: str, measure: str) -> float | str:
    """The measure of one policy's row, or why it cannot be read."""
    if row is None:
        return f"{NOT_EVALUABLE} ({policy} missing)"
    if isinstance(row.get("refused"), str) and row["refused"]:
        return f"{NOT_EVALUABLE} ({policy} refused)"
    for needed in dict.fromkeys(("accuracy", measure)):
        if row.get(needed) is None or pd.isna(row[needed]):
            return f"{NOT_EVALUABLE} ({policy} has no {needed})"
    return float(row[measure])


def clause_values(synthetic: pd.DataFrame, model: str, clause: Clause) -> dict[str, float | str]:
    """Per policy of the clause, its value of the clause's measure on `model` (or why it has none)."""
    rows = synthetic[synthetic["model"] == model]
    by_policy = {str(row["policy"]): row for row in rows.to_dict("records")}
    return {policy: _value(by_policy.get(policy), policy, clause.measure) for policy in clause.policies}


def _shown(measure: str, values: Mapping[str, float | str]) -> str:
    """The numbers a reader checks the clause on: shares in points, per-episode counts as counts."""

    def number(value: float | str) -> str:
        if isinstance(value, str):
            return "—"
        return f"{value:.2f}" if measure in PER_EPISODE else f"{100 * value:.1f}"

    return f"{measure}: " + ", ".join(f"{policy} {number(value)}" for policy, value in values.items())


def synthetic_rows(accuracy: pd.DataFrame) -> pd.DataFrame:
    """The rows the predictions read: `data == "synthetic"` (an empty frame has none)."""
    if accuracy.empty or "data" not in accuracy.columns:
        return pd.DataFrame(columns=["data", "model", "policy"])
    return accuracy[accuracy["data"] == SYNTHETIC]


def judge_memory_clauses(accuracy: pd.DataFrame) -> pd.DataFrame:
    """One row per clause of M1-M6: the model, the rule, the numbers read and the result."""
    synthetic = synthetic_rows(accuracy)
    rows = []
    for clause in CLAUSES:
        model = model_of_size(synthetic, clause.size)
        if model.startswith(NOT_EVALUABLE):
            model, values, result = clause.size, {}, model
        else:
            values = clause_values(synthetic, model, clause)
            unreadable = [value for value in values.values() if isinstance(value, str)]
            result = unreadable[0] if unreadable else KEPT if clause.holds(values) else BROKEN
        rows.append(
            {
                "prediction": clause.prediction,
                "model": model,
                "rule": clause.rule,
                "numbers": _shown(clause.measure, values) if values else "",
                "result": result,
            }
        )
    return pd.DataFrame(rows)


def prediction_verdict(results: list[str]) -> str:
    """A conjunction: broken if any clause is, kept if every clause is, else not evaluable."""
    if BROKEN in results:
        return BROKEN
    return KEPT if all(result == KEPT for result in results) else NOT_EVALUABLE


def judge_memory_predictions(accuracy: pd.DataFrame) -> pd.DataFrame:
    """M1-M6 each kept, broken or not evaluable, its clauses (with the numbers read) beside.

    `accuracy` is 08's accuracy frame (`PolicyTables.accuracy`): one row per data x model x policy
    with `accuracy`, `stale_answer_rate`, `held_empty_share`, `held_stale_share_nonempty`,
    `memory_failures_per_episode` and `refused`. Models are matched by the size tags "0.5B" and
    "1.5B" in their names; only the synthetic rows are read.
    """
    judged = per_prediction(
        judge_memory_clauses(accuracy),
        lambda row: f"{row['model']}: {row['rule']} ({row['numbers'] or 'no numbers'}): {row['result']}",
        prediction_verdict,
        verdict_column="verdict",
    )
    judged.insert(1, "statement", judged["prediction"].map(STATEMENTS))
    return judged
