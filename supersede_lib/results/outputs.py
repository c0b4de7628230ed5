"""The files a study writes under outputs/<profile>/<notebook>/: Markdown + CSV tables and `summary.json`.

`summary.json` carries every headline number with what produced it (profile, model, data label,
config, git commit) and the warnings of every run in the folder, so no study hides a silent failure.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel

from supersede_lib.eval.progress import StudyProgress
from supersede_lib.eval.provenance import git_state
from supersede_lib.eval.run_files import portable_paths, write_text_atomic
from supersede_lib.models.chat import redact_json
from supersede_lib.profiles import Profile

STUDY_SUMMARY_FILE = "summary.json"


def write_csv_atomic(frame: pd.DataFrame, path: Path) -> Path:
    """`frame.to_csv(path, index=False)`, written atomically (`write_text_atomic`)."""
    return write_text_atomic(path, frame.to_csv(index=False))


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of `frame` as displayed (cells via str, '|' escaped)."""

    def cell(value: Any) -> str:
        if value is None or value is pd.NA or (isinstance(value, float) and pd.isna(value)):
            return "—"
        return str(value).replace("|", "\\|").replace("\n", " ")

    columns = [str(column) for column in frame.columns]
    lines = ["| " + " | ".join(cell(column) for column in columns) + " |"]
    lines.append("| " + " | ".join("---" for _ in columns) + " |")
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(cell(value) for value in row) + " |")
    return "\n".join(lines) + "\n"


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    if is_dataclass(value) and not isinstance(value, type):
        return _jsonable(asdict(value))
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        return value.item()
    return value


def write_summary(
    directory: Path,
    profile: Profile,
    notebook: str,
    *,
    model: str | list[str],
    data: str,
    numbers: list[dict],
    tables: list[str],
    figures: list[str],
    config: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> dict:
    """Write `summary.json` (headline numbers + what produced them) and return it."""
    summary = {
        "notebook": notebook,
        "profile": profile.name,
        "model": model,
        "data_label": data,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git": git_state(),
        "config": config,
        "numbers": numbers,
        "tables": tables,
        "figures": figures,
        **(extra or {}),
    }
    write_text_atomic(
        directory / STUDY_SUMMARY_FILE,
        json.dumps(portable_paths(redact_json(_jsonable(summary))), indent=2) + "\n",
    )
    return summary


def record_summary(
    result: Any,
    directory: Path,
    notebook: str,
    numbers: list[dict],
    tables: list[str],
    config: dict[str, Any],
    extra: dict[str, Any] | None = None,
    runs: Iterable[str] | None = None,
) -> Any:
    """Write a study result's summary.json (its model, data label, figures); fill in `output_dir`, `summary`.

    The warnings of every run in the study's folder (failed questions, cut or empty replies, per model)
    are printed and kept in the summary, so no study hides a silent failure. `runs`: the study's own
    run names, when other runs may share the folder (another budget, another run at once): only
    their manifests are read.
    """
    result.output_dir = directory
    manifests = _run_manifests(directory, runs)  # read once for the warnings and the failures
    warnings = study_warnings(directory, manifests)
    for warning in warnings:
        print(f"WARNING ({notebook}): {warning}")
    extra = {**(extra or {}), "warnings": warnings}
    failed = failed_runs(directory, manifests)
    if failed:
        extra["failed_runs"] = failed
    result.summary = write_summary(
        directory,
        result.profile,
        notebook,
        model=result.model,
        data=result.data_label,
        numbers=numbers,
        tables=tables,
        figures=[path.name for path in result.figures.values()],
        config=config,
        extra=extra,
    )
    if failed:  # everything is written first: a failure loses nothing, but it is never a result
        raise StudyFailedError(
            f"{notebook}: every question failed in {', '.join(failed)}: the tables say 'failed n/n', not a "
            f"number (see the warnings above and the 'error' column of the run CSVs in {directory})"
        )
    return result


class StudyFailedError(RuntimeError):
    """A run of the study had no successful question: its files are written, its numbers are not results."""


def _run_manifests(directory: Path, runs: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """The run manifests of a study's folder by run name, in file order: those of `runs` (when
    given and written), else every one."""
    if runs is None:
        paths = sorted(directory.glob("*.manifest.json"))
    else:
        paths = sorted(path for run in runs if (path := directory / f"{run}.manifest.json").exists())
    return {
        path.name.removesuffix(".manifest.json"): json.loads(path.read_text(encoding="utf-8"))
        for path in paths
    }


def failed_runs(directory: Path, manifests: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """The runs in a study's folder in which every question failed (their manifests say so)."""
    failed = []
    for run, manifest in (manifests if manifests is not None else _run_manifests(directory)).items():
        totals = manifest.get("totals") or {}
        if totals.get("questions") and totals.get("failed_questions") == totals.get("questions"):
            failed.append(run)
    return failed


def study_warnings(directory: Path, manifests: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """The `warnings` of every run manifest in a study's folder, each once, in file order."""
    warnings: list[str] = []
    for manifest in (manifests if manifests is not None else _run_manifests(directory)).values():
        for warning in manifest.get("warnings") or []:
            if warning not in warnings:
                warnings.append(warning)
    return warnings


def write_table(
    directory: Path,
    name: str,
    frame: pd.DataFrame,
    note: str = "",
    shown: pd.DataFrame | None = None,
    *,
    first_line: str | None = None,
) -> str:
    """`<name>.md` (a Markdown table plus an optional note) and `<name>.csv`; returns the .md name.

    `shown` is what the Markdown displays when it differs from the CSV (e.g. shares as percentages);
    `first_line` goes above the table, where a reader cannot miss it (an unfinished table says so).
    """
    text = markdown_table(frame if shown is None else shown) + (f"\n{note}\n" if note else "")
    if first_line:
        text = f"{first_line}\n\n{text}"
    write_text_atomic(directory / f"{name}.md", text)
    write_csv_atomic(frame, directory / f"{name}.csv")
    return f"{name}.md"


@dataclass(kw_only=True)
class StudyResult:
    """What every notebook's result carries once its write step ran: figures, folder, summary."""

    figures: dict[str, Path] = field(default_factory=dict)
    output_dir: Path | None = None
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class ResultOfRuns(StudyResult):
    """A study result computed from one run step's output (`raw`), which names the profile and model."""

    raw: Any

    @property
    def profile(self) -> Profile:
        return self.raw.profile

    @property
    def model(self) -> str:
        return self.raw.model


def study_progress(profile: Profile, notebook: str, total_questions: int, enabled: bool) -> StudyProgress:
    """The one bar every run of a study counts on, named by its notebook and profile."""
    return StudyProgress(total_questions, f"{notebook} ({profile.name})", enabled=enabled)
