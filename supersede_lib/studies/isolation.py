"""Notebook 02 (paper §5.1, Table 1): full context vs bounded memory for one model, paired McNemar, failures.

`run_isolation(profile)` = `run_isolation_conditions` (both conditions on the profile's
`isolation.episodes`) → `analyse_isolation` (Table 1 beside the paper's gpt-4.1-mini row, failure
classes, examples) → `write_isolation` (CSVs, tables, figures, summary.json).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib import profiles
from supersede_lib.agent.rollout import CONDITIONS
from supersede_lib.data.episodes import load_episodes
from supersede_lib.models.chat import ChatModel
from supersede_lib.profiles import IsolationBlock, Profile, judge_for
from supersede_lib.results import paper_results
from supersede_lib.results.comparison import (
    MEMORY_NOTE,
    ConditionComparison,
    accuracy_cell,
    accuracy_incomplete_line,
    all_failed,
    compare_conditions,
    comparison_numbers,
    failure_counts_table,
    memory_numbers,
    shares_as_percent,
    write_failures,
)
from supersede_lib.results.headings import (
    NOTEBOOK_ISOLATION,
    format_pvalue,
    headline_number,
    ours_label,
    paper_label,
    percent,
)
from supersede_lib.results.outputs import (
    StudyResult,
    record_summary,
    study_progress,
    write_csv_atomic,
    write_table,
    write_text_atomic,
)


@dataclass
class IsolationResult(StudyResult):
    """Notebook 02: full context vs bounded memory on the same questions, one model."""

    profile: Profile
    model: str
    data_label: str
    n: int
    grader: str
    comparison: ConditionComparison
    table: pd.DataFrame  # ours beside the paper's gpt-4.1-mini row (Table 1)
    failure_counts: pd.DataFrame
    examples: pd.DataFrame  # questions full context got right and bounded memory got wrong

    @property
    def accuracy(self) -> pd.DataFrame:
        return self.comparison.accuracy

    @property
    def mcnemar(self) -> dict[str, Any]:
        return self.comparison.mcnemar


def isolation_table(
    comparison: ConditionComparison, ours_header: str, paper_row: dict, paper_header: str
) -> pd.DataFrame:
    """Table 1 for one model: rows are measures, one column for the paper and one for us."""
    acc = comparison.accuracy.set_index("condition")

    def ours_accuracy(condition: str) -> str:
        return accuracy_cell(acc.loc[condition])

    no_result = any(all_failed(acc.loc[condition]) for condition in acc.index)
    gap_ours = acc.loc["full_context", "accuracy"] - acc.loc["bounded_memory", "accuracy"]
    gap_paper = paper_row["full_context"] - paper_row["bounded_memory"]
    test = comparison.mcnemar
    rows = [
        (
            "full context accuracy [95% Wilson]",
            percent(paper_row["full_context"]),
            ours_accuracy("full_context"),
        ),
        (
            f"bounded memory (B={comparison.notes_budget_chars}) accuracy",
            percent(paper_row["bounded_memory"]),
            ours_accuracy("bounded_memory"),
        ),
        ("gap (points)", f"{100 * gap_paper:.1f}", "—" if no_result else f"{100 * gap_ours:.1f}"),
        ("McNemar b (full right, bounded wrong)", paper_row.get("mcnemar_b") or "—", test["b"]),
        ("McNemar c (bounded right, full wrong)", paper_row.get("mcnemar_c") or "—", test["c"]),
        (
            "p, chi² with continuity correction",
            format_pvalue(paper_row.get("p_chi2_corrected")),
            format_pvalue(test["p_chi2_corrected"]),
        ),
        ("p, exact binomial", "—", format_pvalue(test["p_exact"])),
        ("grader", "LLM judge (gpt-4o-2024-08-06, LongMemEval protocol)", comparison.grader),
    ]
    return pd.DataFrame(rows, columns=["measure", paper_header, ours_header]).astype(str)


def run_isolation_conditions(
    profile: Profile, *, progress: bool = True, model: ChatModel | None = None
) -> ConditionComparison:
    """Both conditions on `isolation.episodes` with the profile's model (run files in 02's folder);
    `model` is that model already built (diagnose probes its server once, for the estimate and the run)."""
    block: IsolationBlock = profile.require("isolation")
    episodes = load_episodes(block.episodes)
    total = len(episodes) * len(CONDITIONS)
    with study_progress(profile, NOTEBOOK_ISOLATION, total, progress) as bar:
        return compare_conditions(
            episodes,
            model if model is not None else profiles.model_for(profile.model, profile),
            profile.run_settings(notes_budget_chars=block.notes_budget_chars, **block.token_caps()),
            directory=profiles.output_dir(profile, NOTEBOOK_ISOLATION),
            judge=judge_for(profile),
            progress=bar,
        )


def analyse_isolation(profile: Profile, comparison: ConditionComparison) -> IsolationResult:
    """Table 1 for the profile's model beside the paper's, failure classes, and telling examples."""
    data = profile.require("isolation").episodes.label
    ours_header = ours_label(comparison.model, data, profile.name, comparison.n)
    paper_row = paper_results.TABLE1_ISOLATION[0]
    paper_header = paper_label(paper_row["model"], paper_results.TABLE1_N)
    paired = comparison.per_question
    examples = paired[paired["correct_full_context"] & ~paired["correct_bounded_memory"]][
        ["episode_id", "question", "gold", "answer_full_context", "answer_bounded_memory", "final_notes"]
    ]
    return IsolationResult(
        profile=profile,
        model=comparison.model,
        data_label=data,
        n=comparison.n,
        grader=comparison.grader,
        comparison=comparison,
        table=isolation_table(comparison, ours_header, paper_row, paper_header),
        failure_counts=failure_counts_table(comparison.failures, ("model",)),
        examples=examples,
    )


def write_isolation(result: IsolationResult, directory: Path | None = None) -> IsolationResult:
    """Write 02's CSVs, tables, figures and summary.json; returns `result` with them filled in."""
    from supersede_lib.present import plots

    profile, comparison, counts = result.profile, result.comparison, result.failure_counts
    directory = directory or profiles.output_dir(profile, NOTEBOOK_ISOLATION)
    first_line = accuracy_incomplete_line(comparison.accuracy)
    tables = [write_table(directory, "table1_isolation", result.table, first_line=first_line)]
    write_csv_atomic(comparison.accuracy, directory / "accuracy.csv")
    write_text_atomic(directory / "mcnemar.json", json.dumps(comparison.mcnemar, indent=2) + "\n")
    write_csv_atomic(comparison.per_question, directory / "per_question.csv")
    tables.append(write_failures(directory, comparison.failures, counts))
    tables.append(
        write_table(
            directory,
            "memory_metrics",
            comparison.memory,
            MEMORY_NOTE,
            shown=shares_as_percent(comparison.memory),
        )
    )
    write_csv_atomic(result.examples, directory / "examples_full_right_bounded_wrong.csv")

    ours_title = f"ours: {result.model}\n{result.data_label}, {profile.name}, n={result.n}"
    figure = plots.accuracy_by_model_figure(comparison.accuracy, ours_title)
    result.figures["accuracy"] = plots.save_figure(figure, directory / "accuracy.png")
    if not counts.empty:
        figure = plots.failure_breakdown_figure(counts, title=f"bounded memory failures ({result.model})")
        result.figures["failures"] = plots.save_figure(figure, directory / "failure_breakdown.png")

    meta = {"model": result.model, "data": result.data_label, "profile": profile.name, "n": result.n}
    numbers = comparison_numbers(comparison, result.data_label, profile.name)
    for row in counts.to_dict("records"):
        for failure, count in row.items():
            if failure not in ("model", "total"):
                numbers.append(
                    headline_number(f"failures {failure}", int(count), **{**meta, "n": int(row["total"])})
                )
    numbers += memory_numbers(comparison.memory, meta)
    config = profile.as_config("isolation", "model", "judge")
    extra = {"mcnemar": comparison.mcnemar, "runs": comparison.run_names}
    if comparison.left_out:
        extra["left_out"] = comparison.left_out  # failed questions: in no number above
    runs = comparison.run_names.values()
    return record_summary(result, directory, NOTEBOOK_ISOLATION, numbers, tables, config, extra, runs=runs)


def run_isolation(profile: Profile, *, progress: bool = True) -> IsolationResult:
    """Paper §5.1 on the profile's model: full context vs bounded memory, paired McNemar, failures."""
    comparison = run_isolation_conditions(profile, progress=progress)
    return write_isolation(analyse_isolation(profile, comparison))
