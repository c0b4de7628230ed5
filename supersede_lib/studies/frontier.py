"""Notebook 03 (paper Table 1, Figure 2): the isolation comparison for every model of the profile.

`run_frontier(profile)` = `run_frontier_models` (both conditions per model in `frontier.models`, on
the same questions, each model released before the next loads) → `analyse_frontier` (the paper's
models and ours in separate column groups) → `write_frontier`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from supersede_lib import profiles
from supersede_lib.agent.rollout import CONDITIONS
from supersede_lib.data.episodes import load_episodes
from supersede_lib.models.chat import release_model
from supersede_lib.profiles import FrontierBlock, Profile, judge_for
from supersede_lib.results import comparison as paired
from supersede_lib.results import paper_results
from supersede_lib.results.headings import NOTEBOOK_FRONTIER, format_pvalue, percent
from supersede_lib.results.outputs import StudyResult, record_summary, study_progress, write_table


@dataclass
class FrontierResult(StudyResult):
    """Notebook 03: the isolation comparison for every model of the profile."""

    profile: Profile
    data_label: str
    n: int
    grader: str
    comparisons: list[paired.ConditionComparison]
    accuracy: pd.DataFrame  # tidy: model, condition, n, correct, accuracy, ci_low, ci_high
    table: pd.DataFrame  # paper models and ours in separate column groups (Table 1)
    failures: pd.DataFrame
    failure_counts: pd.DataFrame

    @property
    def model(self) -> list[str]:
        """The models compared, in the profile's order."""
        return [comparison.model for comparison in self.comparisons]


def paper_table1_frame() -> pd.DataFrame:
    """The paper's Table 1 as a tidy frame (model, condition, accuracy) for its own figure panel."""
    rows = [
        {"model": row["model"], "condition": condition, "accuracy": row[condition]}
        for row in paper_results.TABLE1_ISOLATION
        for condition in CONDITIONS
    ]
    return pd.DataFrame(rows)


def frontier_table(comparisons: list[paired.ConditionComparison], ours_header: str) -> pd.DataFrame:
    """Row i: the paper's i-th model beside our i-th model; never in the same column."""
    paper_header = f"paper (LongMemEval oracle, LLM judge, n={paper_results.TABLE1_N})"
    ours_rows = []
    for comparison in comparisons:
        acc = comparison.accuracy.set_index("condition")
        test = comparison.mcnemar
        ours_rows.append(
            [
                comparison.model,
                paired.accuracy_cell(acc.loc["full_context"], interval=False),
                paired.accuracy_cell(acc.loc["bounded_memory"], interval=False),
                f"b={test['b']}, c={test['c']}, p={format_pvalue(test['p_chi2_corrected'])}",
            ]
        )
    paper_rows = [
        [
            row["model"],
            percent(row["full_context"]),
            percent(row["bounded_memory"]),
            "—"
            if row["mcnemar_b"] is None
            else f"b={row['mcnemar_b']}, c={row['mcnemar_c']}, p={row['p_chi2_corrected']}",
        ]
        for row in paper_results.TABLE1_ISOLATION
    ]
    width = max(len(ours_rows), len(paper_rows))
    blank = ["—"] * 4
    columns = [
        f"{paper_header}: model",
        "paper: full context",
        "paper: bounded memory",
        "paper: McNemar",
        f"{ours_header}: model",
        "ours: full context",
        "ours: bounded memory",
        "ours: McNemar (chi², corrected)",
    ]
    rows = [
        (paper_rows[index] if index < len(paper_rows) else blank)
        + (ours_rows[index] if index < len(ours_rows) else blank)
        for index in range(width)
    ]
    return pd.DataFrame(rows, columns=columns)


def run_frontier_models(profile: Profile, *, progress: bool = True) -> list[paired.ConditionComparison]:
    """Both conditions for every model in `frontier.models`, on the same questions, one model at a time."""
    block: FrontierBlock = profile.require("frontier")
    directory = profiles.output_dir(profile, NOTEBOOK_FRONTIER)
    episodes = load_episodes(block.episodes)
    judge = judge_for(profile)
    settings = profile.run_settings(notes_budget_chars=block.notes_budget_chars)
    comparisons = []
    total = len(episodes) * len(CONDITIONS) * len(block.models)
    with study_progress(profile, NOTEBOOK_FRONTIER, total, progress) as bar:
        for spec in block.models:
            model = profiles.model_for(spec, profile)
            comparisons.append(
                paired.compare_conditions(
                    episodes,
                    model,
                    settings,
                    directory=directory,
                    judge=judge,
                    progress=bar,
                )
            )
            release_model(model)
    return comparisons


def analyse_frontier(profile: Profile, comparisons: list[paired.ConditionComparison]) -> FrontierResult:
    """Table 1 across models (paper and ours apart), accuracy per model and condition, failure classes."""
    data = profile.require("frontier").episodes.label
    n, grader = comparisons[0].n, comparisons[0].grader
    failures = paired.combine_failures([comparison.failures for comparison in comparisons])
    return FrontierResult(
        profile=profile,
        data_label=data,
        n=n,
        grader=grader,
        comparisons=comparisons,
        accuracy=pd.concat([comparison.accuracy for comparison in comparisons], ignore_index=True),
        table=frontier_table(comparisons, f"ours ({data}, {profile.name}, {grader}, n={n})"),
        failures=failures,
        failure_counts=paired.failure_counts_table(failures, ("model",)),
    )


def write_frontier(result: FrontierResult, directory: Path | None = None) -> FrontierResult:
    """Write 03's CSVs, tables, Figure 2 and summary.json; returns `result` with them filled in."""
    from supersede_lib.present import plots

    profile, comparisons, counts = result.profile, result.comparisons, result.failure_counts
    directory = directory or profiles.output_dir(profile, NOTEBOOK_FRONTIER)
    result.accuracy.to_csv(directory / "accuracy.csv", index=False)
    mcnemar = pd.DataFrame([{"model": comparison.model, **comparison.mcnemar} for comparison in comparisons])
    mcnemar.to_csv(directory / "mcnemar.csv", index=False)
    memory = pd.concat([comparison.memory for comparison in comparisons], ignore_index=True)
    tables = [
        write_table(
            directory,
            "table1_frontier",
            result.table,
            first_line=paired.accuracy_incomplete_line(result.accuracy),
        ),
        paired.write_failures(directory, result.failures, counts),
        write_table(
            directory, "memory_metrics", memory, paired.MEMORY_NOTE, shown=paired.shares_as_percent(memory)
        ),
    ]
    figure = plots.accuracy_by_model_figure(
        result.accuracy,
        f"ours: {result.data_label}, {profile.name}, n={result.n}\n({result.grader}; bars: 95% Wilson)",
        paper=paper_table1_frame(),
        paper_title=f"paper: LongMemEval oracle, LLM judge, n={paper_results.TABLE1_N}",
    )
    result.figures["figure2"] = plots.save_figure(figure, directory / "figure2_frontier.png")
    if not counts.empty:
        figure = plots.failure_breakdown_figure(counts, title="bounded memory failures by model")
        result.figures["failures"] = plots.save_figure(figure, directory / "failure_breakdown.png")

    numbers = [
        number
        for comparison in comparisons
        for number in paired.comparison_numbers(comparison, result.data_label, profile.name)
    ]
    meta = {"data": result.data_label, "profile": profile.name}
    numbers += [
        number for comparison in comparisons for number in paired.memory_numbers(comparison.memory, meta)
    ]
    config = profile.as_config("frontier", "judge")
    return record_summary(result, directory, NOTEBOOK_FRONTIER, numbers, tables, config)


def run_frontier(profile: Profile, *, progress: bool = True) -> FrontierResult:
    """Paper Table 1 / Figure 2 over the profile's `frontier.models` on the same questions."""
    return write_frontier(analyse_frontier(profile, run_frontier_models(profile, progress=progress)))
