"""What every study shares, by one name: labels, the files a study writes, grading and the paired comparison.

The pieces live in `labels` (notebook names, column labels, headline numbers), `outputs` (Markdown
and CSV tables, `summary.json`) and `comparison` (accuracy rows, McNemar, full context vs bounded
memory, failure classes); this module re-exports them so every `studies.common.X` keeps working,
and holds what runs a study's models: its progress bar, its judge, releasing a model.
"""

from __future__ import annotations

import gc
from typing import Any

from supersede_lib.eval.judge import LongMemEvalJudge
from supersede_lib.eval.progress import StudyProgress
from supersede_lib.studies import profiles
from supersede_lib.studies.comparison import (
    MEMORY_NOTE,
    ConditionComparison,
    accuracy_cell,
    accuracy_row,
    all_failed,
    combine_failures,
    compare_conditions,
    comparison_numbers,
    correct_column,
    failure_counts_table,
    failure_note,
    grader_name,
    mcnemar_dict,
    memory_numbers,
    memory_row,
    pair_conditions,
    shares_as_percent,
    write_failures,
)
from supersede_lib.studies.labels import (
    MATCHER,
    NOTEBOOK_DATA,
    NOTEBOOK_ENVIRONMENT,
    NOTEBOOK_FRONTIER,
    NOTEBOOK_ISOLATION,
    NOTEBOOK_SCALE,
    NOTEBOOK_TRAINING,
    NOTEBOOK_TRANSFER,
    format_pvalue,
    headline_number,
    ours_label,
    paper_label,
    percent,
    slug,
)
from supersede_lib.studies.outputs import (
    STUDY_SUMMARY_FILE,
    ResultOfRuns,
    StudyResult,
    markdown_table,
    record_summary,
    study_warnings,
    write_summary,
    write_table,
)
from supersede_lib.studies.profiles import Profile

__all__ = [
    "ConditionComparison",
    "MATCHER",
    "MEMORY_NOTE",
    "NOTEBOOK_DATA",
    "NOTEBOOK_ENVIRONMENT",
    "NOTEBOOK_FRONTIER",
    "NOTEBOOK_ISOLATION",
    "NOTEBOOK_SCALE",
    "NOTEBOOK_TRAINING",
    "NOTEBOOK_TRANSFER",
    "ResultOfRuns",
    "STUDY_SUMMARY_FILE",
    "StudyResult",
    "accuracy_cell",
    "accuracy_row",
    "all_failed",
    "combine_failures",
    "compare_conditions",
    "comparison_numbers",
    "correct_column",
    "failure_counts_table",
    "failure_note",
    "format_pvalue",
    "grader_name",
    "headline_number",
    "markdown_table",
    "mcnemar_dict",
    "memory_numbers",
    "memory_row",
    "ours_label",
    "pair_conditions",
    "paper_label",
    "percent",
    "record_summary",
    "shares_as_percent",
    "slug",
    "study_warnings",
    "write_failures",
    "write_summary",
    "write_table",
    "judge_for",
    "release_model",
    "study_progress",
]


def study_progress(profile: Profile, notebook: str, total_questions: int, enabled: bool) -> StudyProgress:
    """The one bar every run of a study counts on, named by its notebook and profile."""
    return StudyProgress(total_questions, f"{notebook} ({profile.name})", enabled=enabled)


def judge_for(profile: Profile) -> LongMemEvalJudge | None:
    """The profile's LongMemEval judge (None when `judge:` is null)."""
    if not profile.judge:
        return None
    return LongMemEvalJudge(profiles.model_for(profile.judge, profile))


def release_model(model: Any) -> None:
    """Free an in-process model (a GGUF or transformers model holds GBs) once a study is done with it.

    In-process models free themselves in `close()`; an API client has none and is left alone.
    """
    inner = getattr(model, "inner", model)
    close = getattr(inner, "close", None)
    if callable(close):
        close()
        gc.collect()
