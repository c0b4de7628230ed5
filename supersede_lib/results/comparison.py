"""Grading and statistics shared by the studies, and the paired comparison of notebooks 02 and 03.

`accuracy_row` (Wilson interval) and `mcnemar_dict` (paired test) are the tidy rows every table is
built from; `compare_conditions` runs full context and bounded memory on the same questions, pairs
them, tests them and classifies the bounded-memory failures; the failure helpers serve 02, 03 and 04.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib.agent.episode import Episode
from supersede_lib.agent.rollout import CONDITIONS
from supersede_lib.eval.diagnostics import FAILURE_CLASSES, failure_breakdown, failure_counts
from supersede_lib.eval.memory_metrics import aggregate_memory_metrics
from supersede_lib.eval.progress import StudyProgress, progress_bar
from supersede_lib.eval.run_files import default_run_name
from supersede_lib.eval.runner import RunResult, RunSettings, run_condition
from supersede_lib.eval.stats import paired_mcnemar, wilson_interval
from supersede_lib.results.headings import MATCHER, headline_number, percent
from supersede_lib.results.outputs import write_csv_atomic, write_table


def grader_name(judge: Any) -> str:
    return f"LLM judge ({judge.name}, LongMemEval protocol)" if judge is not None else MATCHER


def correct_column(frame: pd.DataFrame, use_judge: bool) -> pd.Series:
    """Per-question correctness: the judge's verdict when judged, else the matcher's `verdict == 'correct'`.

    A failed row (no answer, or the judge's call failed) reads False here; every table leaves it out.
    """
    if use_judge:
        unjudged = frame["judge_correct"].isna() & ~failed_mask(frame)
        if unjudged.any():
            missing = frame.loc[unjudged, "episode_id"].tolist()
            raise ValueError(f"rows without a judge verdict (field 'judge_correct'): {missing[:5]}")
        return frame["judge_correct"].astype("boolean").fillna(False).astype(bool)
    return frame["verdict"] == "correct"


def failed_mask(frame: pd.DataFrame) -> pd.Series:
    """Rows whose run failed for the infrastructure (the runner's `failed`: connection, timeouts,
    5xx after retries): they have no answer to score, so every table leaves them out."""
    if "failed" not in frame.columns:
        return pd.Series(False, index=frame.index)
    return frame["failed"].fillna(False).astype(bool)


def failed_ids(*frames: pd.DataFrame) -> set[str]:
    """Questions failed in any of `frames`: a paired comparison drops every condition's row of them."""
    return {str(key) for frame in frames for key in frame.loc[failed_mask(frame), "episode_id"]}


def incomplete_line(failed: int, questions: int) -> str | None:
    """The first line of a table or page some of whose questions failed (None when none did): a
    failure is neither right nor wrong, so what follows is unfinished, not a finding, and the same
    command, whose cache keeps every finished answer, asks only for the rest."""
    if not failed:
        return None
    return f"> **incomplete: {failed} of {questions} failed — re-run the same command to finish.**"


def accuracy_incomplete_line(accuracy: pd.DataFrame) -> str | None:
    """`incomplete_line` for a study's accuracy table (rows of `accuracy_row`): the most questions
    any row left out, of the questions that row was asked."""
    if "failed" not in accuracy.columns:
        return None
    failed = accuracy["failed"].fillna(0).astype(int)
    if not failed.any():
        return None
    worst = failed.idxmax()
    return incomplete_line(int(failed[worst]), int(accuracy.loc[worst, "n"]) + int(failed[worst]))


def accuracy_row(
    model: str, condition: str, correct: Sequence[bool], grader: str, failed: int | None = None
) -> dict[str, Any]:
    """Accuracy with a 95% Wilson interval, as one tidy row over the questions scored (`correct`);
    `failed`: questions left out because a run failed on them, kept beside the accuracy so a table
    can say how many are missing (a failure is neither right nor wrong)."""
    n = len(correct)
    successes = int(sum(bool(value) for value in correct))
    low, high = wilson_interval(successes, n)
    row = {
        "model": model,
        "condition": condition,
        "n": n,
        "correct": successes,
        "accuracy": successes / n if n else float("nan"),
        "ci_low": low,
        "ci_high": high,
        "grader": grader,
    }
    if failed is not None:
        row["failed"] = int(failed)
    return row


def run_accuracy_row(
    model: str, condition: str, frame: pd.DataFrame, grader: str, *, use_judge: bool = False
) -> dict[str, Any]:
    """`accuracy_row` of one run's rows: failed rows left out, and counted in `failed` when there
    are any (a run without failures keeps the columns it always had)."""
    failed = failed_mask(frame)
    correct = correct_column(frame, use_judge)[~failed]
    return accuracy_row(model, condition, correct.tolist(), grader, failed=int(failed.sum()) or None)


def _failed_count(row: Any) -> int:
    """An accuracy row's `failed` (0 when absent, or blank in a table whose other rows had failures)."""
    failed = row.get("failed")
    return 0 if failed is None or pd.isna(failed) else int(failed)


def all_failed(row: Any) -> bool:
    """Whether no question of an accuracy row could be scored because runs failed: no result, only a failure."""
    return _failed_count(row) > 0 and int(row["n"]) == 0


def accuracy_cell(row: Any, *, interval: bool = True) -> str:
    """An accuracy as a table shows it: `62.5% [48.1%, 75.0%]`; `failed 60/60` when no question could
    be scored; questions left out named after the number (`(3 of 60 failed, left out)`)."""
    n, failed = int(row["n"]), _failed_count(row)
    if all_failed(row):
        return f"failed {failed}/{failed}"
    text = percent(row["accuracy"])
    if interval:
        text += f" [{percent(row['ci_low'])}, {percent(row['ci_high'])}]"
    if failed:
        text += f" ({failed} of {n + failed} failed, left out)"
    return text


def mcnemar_dict(correct_a: Sequence[bool], correct_b: Sequence[bool]) -> dict[str, Any]:
    """Paired McNemar test as a dict: b = A right & B wrong, c = B right & A wrong."""
    result = paired_mcnemar(list(map(bool, correct_a)), list(map(bool, correct_b)))
    return {
        "b": int(result.b),
        "c": int(result.c),
        "n": int(result.n),
        "p_exact": float(result.p_exact),
        "p_chi2_corrected": float(result.p_chi2_corrected),
        "statistic": None if result.statistic is None else float(result.statistic),
    }


# --------------------------------------------------------------------------------------------
# Full context vs bounded memory for one model (02 and 03)
# --------------------------------------------------------------------------------------------


@dataclass
class ConditionComparison:
    """Full context vs bounded memory for one model on the same questions."""

    model: str
    n: int
    grader: str
    accuracy: pd.DataFrame  # one row per condition (accuracy_row)
    mcnemar: dict[str, Any]  # full context = A, bounded memory = B
    per_question: pd.DataFrame  # episode_id, question, gold, answers and correctness per condition
    failures: pd.DataFrame  # diagnostics.failure_breakdown of the bounded-memory trajectories
    run_names: dict[str, str]
    notes_budget_chars: int
    memory: pd.DataFrame  # one row: memory metrics of the bounded-memory trajectories (memory_row)
    left_out: list[str] = field(default_factory=list)  # questions a run failed on: in no number above
    manifests: dict[str, dict[str, Any]] = field(default_factory=dict)  # per condition, as this run wrote it

    @property
    def questions(self) -> int:
        """Questions asked: those compared plus those left out because a run failed on them."""
        return self.n + len(self.left_out)

    def accuracy_of(self, condition: str) -> float:
        return float(self.accuracy.set_index("condition").loc[condition, "accuracy"])


def pair_conditions(
    runs: dict[str, RunResult], *, model_name: str, use_judge: bool, grader: str, notes_budget_chars: int
) -> ConditionComparison:
    """Pair the two runs by question, test them (McNemar) and classify the bounded-memory failures.

    A question that failed in either run (the runner's `failed`) leaves the comparison in both: it
    was never answered, so scoring it wrong would turn a dead server into a finding.
    """
    left_out = failed_ids(*(run.frame for run in runs.values()))
    paired = None
    for condition, run in runs.items():
        frame = run.frame
        part = frame[["episode_id", "question", "gold", "answer", "verdict"]].rename(
            columns={"answer": f"answer_{condition}", "verdict": f"verdict_{condition}"}
        )
        part[f"correct_{condition}"] = correct_column(frame, use_judge).to_numpy()
        if condition == "bounded_memory":
            part["final_notes"] = frame["final_notes"].to_numpy()
        part = part[~part["episode_id"].astype(str).isin(left_out)]
        paired = (
            part if paired is None else paired.merge(part.drop(columns=["question", "gold"]), on="episode_id")
        )
    assert paired is not None
    accuracy = pd.DataFrame(
        [
            accuracy_row(model_name, condition, paired[f"correct_{condition}"], grader, failed=len(left_out))
            for condition in CONDITIONS
        ]
    )
    bounded = [
        trajectory
        for trajectory in runs["bounded_memory"].trajectories
        if str(trajectory.get("episode_id")) not in left_out
    ]
    return ConditionComparison(
        model=model_name,
        n=len(paired),
        grader=grader,
        accuracy=accuracy,
        mcnemar=mcnemar_dict(paired["correct_full_context"], paired["correct_bounded_memory"]),
        per_question=paired,
        failures=failure_breakdown(bounded, use_judge=use_judge),
        run_names={condition: run.run_name for condition, run in runs.items()},
        notes_budget_chars=notes_budget_chars,
        memory=pd.DataFrame([memory_row(model_name, "bounded_memory", bounded)]),
        left_out=sorted(left_out),
        manifests={condition: run.manifest for condition, run in runs.items()},
    )


MEMORY_NOTE = (
    "Memory metrics of the bounded-memory trajectories (supersede_lib.eval.memory_metrics): changed_share = "
    "rewrites that changed the notes; empty_share = notes states empty or a placeholder; truncation_share = "
    "rewrites the cap cut; echo_share = trajectories whose notes copied a prompt's worked example; "
    "holds_current_share / holds_stale_share = trajectories whose final notes held the current / a stale value "
    "anywhere; holds_current_keyed_share = the current value on a line that also names the asked thing."
)


def shares_as_percent(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy whose `*_share` columns read "83%" (missing values stay blank): for Markdown tables."""
    shown = frame.copy()
    for column in [name for name in shown.columns if str(name).endswith("_share")]:
        shown[column] = [f"{value:.0%}" if pd.notna(value) else "" for value in shown[column]]
    return shown


def memory_row(model: str, condition: str, trajectories: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One tidy row of pooled memory metrics for a run's bounded-memory trajectories."""
    measured = [trajectory["memory"] for trajectory in trajectories if trajectory.get("memory")]
    return {"model": model, "condition": condition, **aggregate_memory_metrics(measured)}


def memory_numbers(memory: pd.DataFrame, meta: dict[str, Any]) -> list[dict[str, Any]]:
    """Headline numbers of a memory-metrics table (one per row and share)."""
    shares = (
        "changed_share",
        "empty_share",
        "truncation_share",
        "echo_share",
        "holds_current_share",
        "holds_stale_share",
        "holds_current_keyed_share",
    )
    return [
        headline_number(
            f"memory {share}", row[share], **{**meta, "model": row["model"], "n": int(row["n_trajectories"])}
        )
        for row in memory.to_dict("records")
        for share in shares
        if row[share] is not None and row[share] == row[share]
    ]


def compare_conditions(
    episodes: Sequence[Episode],
    model: Any,
    settings: RunSettings,
    *,
    directory: Path,
    judge: Any = None,
    progress: bool | StudyProgress = True,
) -> ConditionComparison:
    """Run both conditions (files under `directory`), pair them by question, test and classify.

    `progress`: the study's bar to count both runs on, or a bool for a bar of this comparison's own.
    """
    total = len(episodes) * len(CONDITIONS)
    with progress_bar(progress, total=total, description=f"compare conditions | {model.name}") as bar:
        runs = {
            condition: run_condition(
                episodes,
                condition,
                model,
                settings,
                judge=judge,
                output_dir=directory,
                run_name=default_run_name(condition, model.name, settings.notes_budget_chars, None),
                progress=bar,
            )
            for condition in CONDITIONS
        }
    return pair_conditions(
        runs,
        model_name=model.name,
        use_judge=judge is not None,
        grader=grader_name(judge),
        notes_budget_chars=settings.notes_budget_chars,
    )


def comparison_numbers(comparison: ConditionComparison, data: str, profile_name: str) -> list[dict]:
    """The headline numbers of one comparison (both accuracies, McNemar b, c and p values)."""
    meta = {"model": comparison.model, "data": data, "profile": profile_name, "n": comparison.n}
    numbers = [
        headline_number(
            f"accuracy {condition}", comparison.accuracy_of(condition), grader=comparison.grader, **meta
        )
        for condition in CONDITIONS
    ]
    for key in ("b", "c", "p_exact", "p_chi2_corrected"):
        numbers.append(
            headline_number(f"mcnemar {key}", comparison.mcnemar[key], grader=comparison.grader, **meta)
        )
    return numbers


# --------------------------------------------------------------------------------------------
# Failure classes of bounded-memory trajectories (02, 03, 04)
# --------------------------------------------------------------------------------------------


def combine_failures(breakdowns: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Several failure breakdowns as one frame, keeping the count of unclassified trajectories."""
    failures = pd.concat(breakdowns, ignore_index=True)
    failures.attrs["skipped"] = sum(breakdown.attrs.get("skipped", 0) for breakdown in breakdowns)
    return failures


def failure_counts_table(failures: pd.DataFrame, by: tuple[str, ...]) -> pd.DataFrame:
    """Failure classes counted per group (an empty table with the right columns when nothing failed)."""
    if failures.empty:
        return pd.DataFrame(columns=[*by, *FAILURE_CLASSES, "total", "notes_echo_prompt_example"])
    return failure_counts(failures, by=by)


def failure_note(failures: pd.DataFrame) -> str:
    """The note under a failure-counts table: what the classes mean, and what could not be classified."""
    skipped = failures.attrs.get("skipped", 0)
    note = (
        "Rule-based classes from the bounded-memory trajectories (supersede_lib.eval.diagnostics): notes never "
        "written (every notes state empty or a placeholder), never entered (notes written, the fact omitted), "
        "squeezed out, kept stale, held but missed (the notes held it, the answer did not). "
        "notes_echo_prompt_example: trajectories whose notes copied a notes prompt's worked example into the "
        "user's memory."
    )
    if skipped:
        note += f" {skipped} trajectories could not be classified (abstention items have no value to hold)."
    return note


def write_failures(directory: Path, failures: pd.DataFrame, counts: pd.DataFrame) -> str:
    """`failure_breakdown.csv` and the `failure_counts` table; returns the table's .md name."""
    write_csv_atomic(failures, directory / "failure_breakdown.csv")
    return write_table(directory, "failure_counts", counts, failure_note(failures))
