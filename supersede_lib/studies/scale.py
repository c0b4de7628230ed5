"""Notebook 04 (paper §5.2, Table 2, Figure 3): does the failure track conversation length or the ratio?

Three bounded-memory conditions: short history at a fixed budget B, long history at B, and long
history with B = `chars_per_session` x sessions. `run_scale(profile)` = `run_scale_conditions` →
`analyse_scale` (accuracy per condition, answers that differ, McNemar tests, Table 2 beside the
paper's) → `write_scale`. Graded by the programmatic matcher throughout, as in the paper.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib import profiles
from supersede_lib.agent.episode import Episode
from supersede_lib.data.episodes import load_episodes
from supersede_lib.eval.diagnostics import failure_breakdown
from supersede_lib.eval.run_files import default_run_name
from supersede_lib.eval.runner import RunResult, run_condition
from supersede_lib.profiles import Profile, ScaleBlock
from supersede_lib.results import paper_results
from supersede_lib.results.comparison import (
    MEMORY_NOTE,
    accuracy_cell,
    accuracy_incomplete_line,
    combine_failures,
    failed_ids,
    failed_mask,
    failure_counts_table,
    mcnemar_dict,
    memory_numbers,
    memory_row,
    run_accuracy_row,
    shares_as_percent,
    write_failures,
)
from supersede_lib.results.headings import (
    MATCHER,
    NOTEBOOK_SCALE,
    format_pvalue,
    headline_number,
    ours_label,
    paper_label,
    percent,
)
from supersede_lib.results.outputs import ResultOfRuns, record_summary, study_progress, write_table

SCALE_CONDITIONS = ("short_fixed", "long_fixed", "long_per_session")


@dataclass
class ScaleRuns:
    """The three bounded-memory runs of notebook 04, as `run_condition` returned them."""

    profile: Profile
    model: str
    runs: dict[str, RunResult]  # by scale condition
    long_episodes: list[Episode]  # to pair lengthened episodes with their short originals


@dataclass
class ScaleResult(ResultOfRuns):
    """Notebook 04: does the failure track conversation length or the memory/history ratio?"""

    raw: ScaleRuns
    n: int
    accuracy: pd.DataFrame  # one row per scale condition, with history/memory descriptions
    answers_differ: int  # questions whose answers differ between the two long-history conditions
    answers_compared: int
    mcnemar_long: dict[str, Any]  # long fixed (A) vs long per-session budget (B)
    mcnemar_short_long: dict[str, Any] | None  # short (A) vs long (B) at fixed B, when the questions pair up
    table: pd.DataFrame
    failures: pd.DataFrame
    failure_counts: pd.DataFrame
    memory: pd.DataFrame  # one row of memory metrics per scale condition

    @property
    def data_label(self) -> str:
        """The long-history episodes, which the headline numbers describe."""
        return self.profile.require("scale").long.label


def run_scale_conditions(profile: Profile, *, progress: bool = True) -> ScaleRuns:
    """Short at B, long at B, long at `chars_per_session` per session (run files in 04's folder)."""
    block: ScaleBlock = profile.require("scale")
    directory = profiles.output_dir(profile, NOTEBOOK_SCALE)
    model = profiles.model_for(profile.model, profile)
    short, long = load_episodes(block.short), load_episodes(block.long)
    fixed = profile.run_settings(notes_budget_chars=block.notes_budget_chars)
    per_session = replace(fixed, notes_budget_chars=None, chars_per_session=block.chars_per_session)
    plan = {
        "short_fixed": (short, fixed),
        "long_fixed": (long, fixed),
        "long_per_session": (long, per_session),
    }
    total = sum(len(episodes) for episodes, _ in plan.values())
    with study_progress(profile, NOTEBOOK_SCALE, total, progress) as bar:
        runs = {
            condition: run_condition(
                episodes,
                "bounded_memory",
                model,
                settings,
                output_dir=directory,
                run_name=default_run_name(condition, model.name, None, None),
                progress=bar,
            )
            for condition, (episodes, settings) in plan.items()
        }
    return ScaleRuns(profile=profile, model=model.name, runs=runs, long_episodes=long)


def _accuracy_rows(raw: ScaleRuns) -> list[dict[str, Any]]:
    block: ScaleBlock = raw.profile.require("scale")
    rows = []
    for condition, run in raw.runs.items():
        frame = run.frame
        mean_sessions = float(frame["n_sessions"].mean())
        mean_budget = float(frame["notes_budget_chars"].mean())
        row = run_accuracy_row(raw.model, condition, frame, MATCHER)
        row.update(
            data=(block.short if condition == "short_fixed" else block.long).label,
            history=f"~{mean_sessions:.1f} sessions",
            memory=f"{block.notes_budget_chars} char"
            if condition != "long_per_session"
            else f"~{mean_budget:,.0f} char ({block.chars_per_session}/session)",
            mean_sessions=mean_sessions,
            mean_notes_budget_chars=mean_budget,
            mean_final_notes_chars=float(frame["final_notes"].fillna("").str.len().mean()),
        )
        rows.append(row)
    return rows


def _short_vs_long(raw: ScaleRuns, long_fixed: pd.DataFrame) -> dict[str, Any] | None:
    """McNemar short vs long at fixed B, when both ask the same questions.

    LongMemEval ids are shared by oracle and _s; a lengthened synthetic episode keeps its original
    id in `base_episode_id`.
    """
    base_id = {
        episode.episode_id: episode.metadata.get("base_episode_id", episode.episode_id)
        for episode in raw.long_episodes
    }
    short = raw.runs["short_fixed"].frame.set_index("episode_id")
    short_correct = (short["verdict"] == "correct").to_dict()
    long_correct = {base_id[key]: value for key, value in (long_fixed["verdict"] == "correct").items()}
    if set(short_correct) != set(long_correct):
        return None
    left_out = {str(key) for key in short.index[failed_mask(short)]}
    left_out |= {str(base_id[key]) for key in long_fixed.index[failed_mask(long_fixed)]}
    keys = sorted(key for key in short_correct if str(key) not in left_out)  # failed: neither right nor wrong
    return mcnemar_dict([short_correct[key] for key in keys], [long_correct[key] for key in keys])


def scale_table(
    accuracy: pd.DataFrame,
    ours_header: str,
    long_label: str,
    answers_differ: int,
    answers_compared: int,
    mcnemar_long: dict[str, Any],
) -> pd.DataFrame:
    """Table 2: the paper's three conditions beside ours, then answer differences and McNemar."""
    paper_header = paper_label("gpt-4.1-mini", paper_results.TABLE2_N)
    rows = []
    for paper_row, condition in zip(paper_results.TABLE2_SCALE, SCALE_CONDITIONS, strict=True):
        ours = accuracy.set_index("condition").loc[condition]
        rows.append(
            {
                "condition": condition.replace("_", " "),
                "paper: split / history / memory": f"{paper_row['split']} / {paper_row['history']} / {paper_row['memory']}",
                paper_header: percent(paper_row["accuracy"]),
                "ours: data / history / memory": f"{ours['data']} / {ours['history']} / {ours['memory']}",
                ours_header: accuracy_cell(ours),
            }
        )
    paper_b, paper_c = paper_results.SCALE_MCNEMAR_B_C
    rows.append(
        {
            "condition": "answers differ between the two long conditions",
            "paper: split / history / memory": "_s",
            paper_header: f"{paper_results.SCALE_ANSWERS_DIFFER}/{paper_results.TABLE2_N}",
            "ours: data / history / memory": long_label,
            ours_header: f"{answers_differ}/{answers_compared}",
        }
    )
    rows.append(
        {
            "condition": "McNemar long fixed vs per-session budget",
            "paper: split / history / memory": "_s",
            paper_header: f"b={paper_b}, c={paper_c}",
            "ours: data / history / memory": long_label,
            ours_header: f"b={mcnemar_long['b']}, c={mcnemar_long['c']}, p exact={format_pvalue(mcnemar_long['p_exact'])}",
        }
    )
    return pd.DataFrame(rows)


def analyse_scale(raw: ScaleRuns) -> ScaleResult:
    """Accuracy per condition, answers that differ between the long conditions, McNemar, Table 2, failures."""
    profile = raw.profile
    accuracy = pd.DataFrame(_accuracy_rows(raw))
    fixed, ratio = (
        raw.runs[name].frame.set_index("episode_id") for name in ("long_fixed", "long_per_session")
    )
    left_out = failed_ids(*(raw.runs[name].frame for name in ("long_fixed", "long_per_session")))
    common = fixed.index.intersection(ratio.index)
    common = common[~common.astype(str).isin(left_out)]  # a failed question is neither right nor wrong
    answers_differ = int(
        sum(str(fixed.loc[key, "answer"]).strip() != str(ratio.loc[key, "answer"]).strip() for key in common)
    )
    mcnemar_long = mcnemar_dict(
        fixed.loc[common, "verdict"] == "correct", ratio.loc[common, "verdict"] == "correct"
    )
    n = len(raw.runs["long_fixed"].frame)
    ours_header = ours_label(raw.model, profile.data_label, profile.name, n)
    long_label = profile.require("scale").long.label
    failures = combine_failures(
        [
            failure_breakdown(run.trajectories).assign(scale_condition=condition)
            for condition, run in raw.runs.items()
        ]
    )
    return ScaleResult(
        raw=raw,
        n=n,
        answers_compared=len(common),
        accuracy=accuracy,
        answers_differ=answers_differ,
        mcnemar_long=mcnemar_long,
        mcnemar_short_long=_short_vs_long(raw, fixed),
        table=scale_table(accuracy, ours_header, long_label, answers_differ, len(common), mcnemar_long),
        failures=failures,
        failure_counts=failure_counts_table(failures, ("scale_condition",)),
        memory=pd.DataFrame(
            [memory_row(raw.model, condition, run.trajectories) for condition, run in raw.runs.items()]
        ),
    )


def _scale_numbers(result: ScaleResult) -> list[dict]:
    profile = result.profile
    numbers = [
        headline_number(
            f"accuracy {row.condition}",
            row.accuracy,
            model=result.model,
            data=row.data,
            profile=profile.name,
            n=row.n,
            grader=MATCHER,
        )
        for row in result.accuracy.itertuples(index=False)
    ]
    meta = {
        "model": result.model,
        "data": result.data_label,
        "profile": profile.name,
        "n": result.answers_compared,
    }
    numbers += [
        headline_number("answers differ long_fixed vs long_per_session", result.answers_differ, **meta),
        *(
            headline_number(f"mcnemar long {key}", result.mcnemar_long[key], grader=MATCHER, **meta)
            for key in ("b", "c", "p_exact")
        ),
    ]
    if result.mcnemar_short_long is not None:
        numbers += [
            headline_number(
                f"mcnemar short vs long {key}", result.mcnemar_short_long[key], grader=MATCHER, **meta
            )
            for key in ("b", "c", "p_exact")
        ]
    return numbers


def write_scale(result: ScaleResult, directory: Path | None = None) -> ScaleResult:
    """Write 04's CSVs, Table 2, Figure 3 and summary.json; returns `result` with them filled in."""
    from supersede_lib.present import plots

    profile, accuracy, counts = result.profile, result.accuracy, result.failure_counts
    directory = directory or profiles.output_dir(profile, NOTEBOOK_SCALE)
    accuracy.to_csv(directory / "accuracy.csv", index=False)
    tables = [
        write_table(
            directory,
            "table2_scale",
            result.table,
            "Graded by the programmatic matcher in every condition.",
            first_line=accuracy_incomplete_line(accuracy),
        ),
        write_failures(directory, result.failures, counts),
        write_table(
            directory, "memory_metrics", result.memory, MEMORY_NOTE, shown=shares_as_percent(result.memory)
        ),
    ]
    ours_plot = accuracy.assign(
        condition=[
            f"{row.condition.replace('_', ' ')}\n{row.history}\n{row.memory}" for row in accuracy.itertuples()
        ]
    )
    paper_plot = pd.DataFrame(
        [
            {"condition": f"{row['split']} {row['history']}\n{row['memory']}", "accuracy": row["accuracy"]}
            for row in paper_results.TABLE2_SCALE
        ]
    )
    figure = plots.scale_figure(
        ours_plot,
        f"ours: {result.model}\n{profile.name}, n={result.n}, matcher (95% Wilson)",
        paper=paper_plot,
        paper_title=f"paper: gpt-4.1-mini, LongMemEval, n={paper_results.TABLE2_N}",
    )
    result.figures["figure3"] = plots.save_figure(figure, directory / "figure3_scale.png")
    if not counts.empty:
        figure = plots.failure_breakdown_figure(
            counts, group="scale_condition", title=f"bounded memory failures ({result.model})"
        )
        result.figures["failures"] = plots.save_figure(figure, directory / "failure_breakdown.png")
    numbers = _scale_numbers(result)
    numbers += memory_numbers(
        result.memory.assign(model=result.memory["condition"].map(lambda c: f"{result.model} ({c})")),
        {"data": result.data_label, "profile": profile.name},
    )
    config = profile.as_config("scale", "model")
    extra = {"mcnemar_long": result.mcnemar_long, "mcnemar_short_long": result.mcnemar_short_long}
    return record_summary(result, directory, NOTEBOOK_SCALE, numbers, tables, config, extra)


def run_scale(profile: Profile, *, progress: bool = True) -> ScaleResult:
    """Paper §5.2: short vs long history at fixed B, and long history with B = chars_per_session x sessions."""
    return write_scale(analyse_scale(run_scale_conditions(profile, progress=progress)))
