"""`python -m supersede_lib.studies.report --profile X`: write outputs/<profile>/REPORT.md from files on disk.

The report re-runs nothing. It collects what each study notebook wrote (summary.json, the
Markdown tables beside the paper's numbers, run manifests) and the exact configuration that
produced them (the profile YAML, model names, n, git commit), so a reader can check every
number against its source file. Sections 06/07 (training, transfer) are included when their
output folders exist (the CPU proof is its own profile, `cpu_proof`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib.eval.agreement import (
    LABELLED_ANSWERS,
    agreement,
    grade_labelled_answers,
    read_labelled_answers,
)
from supersede_lib.eval.run_files import git_commit
from supersede_lib.studies import profiles
from supersede_lib.studies.common import (
    NOTEBOOK_DATA,
    NOTEBOOK_ENVIRONMENT,
    NOTEBOOK_FRONTIER,
    NOTEBOOK_ISOLATION,
    NOTEBOOK_SCALE,
    NOTEBOOK_TRAINING,
    NOTEBOOK_TRANSFER,
    STUDY_SUMMARY_FILE,
    markdown_table,
)
from supersede_lib.studies.validation import judge_results

STUDY_SECTIONS = (
    (NOTEBOOK_DATA, "01 · Data: LongMemEval knowledge-update and the procedural generator"),
    (NOTEBOOK_ISOLATION, "02 · Isolation: full context vs bounded memory (paper §5.1, Table 1)"),
    (NOTEBOOK_FRONTIER, "03 · Frontier: the gap across models (paper Table 1, Figure 2)"),
    (NOTEBOOK_SCALE, "04 · Scale, not size (paper §5.2, Table 2, Figure 3)"),
    (NOTEBOOK_ENVIRONMENT, "05 · Environment validation and synthetic saturation (paper §4, §5.2)"),
    (NOTEBOOK_TRAINING, "06 · GRPO training (paper §5.3, Figure 4a)"),
    (NOTEBOOK_TRANSFER, "07 · Transfer evaluation (paper Table 3, Figure 4b)"),
)
REPORT_FILE = "REPORT.md"


def read_summary(study_dir: Path) -> dict[str, Any] | None:
    """The study's summary.json, or None when the study has not been run."""
    path = study_dir / STUDY_SUMMARY_FILE
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def format_value(value: Any) -> Any:
    """Floats readable in a table: 0.7500 -> '0.75', 10337.25 -> '10,337'; everything else unchanged."""
    if isinstance(value, bool) or not isinstance(value, float):
        return value
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def numbers_table(summary: dict[str, Any]) -> pd.DataFrame:
    """The headline numbers of a summary.json, each with its model, data, profile and n."""
    rows = []
    for number in summary.get("numbers", []):
        rows.append(
            {
                "number": number.get("name"),
                "value": format_value(number.get("value")),
                "model": number.get("model"),
                "data": number.get("data"),
                "profile": number.get("profile"),
                "n": number.get("n"),
                "grader": number.get("grader"),
            }
        )
    return pd.DataFrame(rows, columns=["number", "value", "model", "data", "profile", "n", "grader"])


def manifests_table(study_dir: Path) -> pd.DataFrame:
    """One row per run manifest (`*.manifest.json`) in a study folder."""
    rows = []
    for path in sorted(study_dir.glob("*.manifest.json")):
        manifest = json.loads(path.read_text(encoding="utf-8"))
        git = manifest.get("git") or {}
        totals = manifest.get("totals") or {}
        commit = git.get("commit")
        rows.append(
            {
                "run": manifest.get("run_name", path.name.removesuffix(".manifest.json")),
                "model": (manifest.get("model") or {}).get("name"),
                "judge": (manifest.get("judge") or {}).get("name"),
                "n": (manifest.get("episodes") or {}).get("n"),
                "git commit": (commit[:10] + ("+dirty" if git.get("dirty") else "")) if commit else None,
                "wall s": manifest.get("wall_s"),
                "model calls (cached)": f"{totals.get('calls')} ({totals.get('cached_calls')})"
                if totals
                else None,
            }
        )
    return pd.DataFrame(rows)


def _figures(study_dir: Path, report_dir: Path) -> list[str]:
    return [path.relative_to(report_dir).as_posix() for path in sorted(study_dir.glob("*.png"))]


def study_section(study_dir: Path, title: str, report_dir: Path) -> str:
    """One report section: headline numbers, the study's Markdown tables, figures, run manifests."""
    lines = [f"## {title}", ""]
    if not study_dir.exists():
        return "\n".join([*lines, f"_Not run for this profile (no `{study_dir.name}/` folder)._", ""])
    summary = read_summary(study_dir)
    if summary is not None:
        lines += [
            f"Model: `{summary.get('model')}` · data: {summary.get('data_label')} · "
            f"profile: `{summary.get('profile')}` · written {summary.get('created_at')} · "
            f"git `{(summary.get('git') or {}).get('commit')}`",
            "",
        ]
        numbers = numbers_table(summary)
        if len(numbers):
            lines += ["**Headline numbers (ours)**", "", markdown_table(numbers)]
        warnings = summary.get("warnings") or []
        if warnings:
            lines += ["**Warnings from the runs**", "", *(f"- {warning}" for warning in warnings), ""]
    table_names = (summary or {}).get("tables") or [path.name for path in sorted(study_dir.glob("*.md"))]
    for name in table_names:
        path = study_dir / name
        if path.exists():
            lines += [
                f"**{path.stem.replace('_', ' ')}** (`{study_dir.name}/{name}`)",
                "",
                path.read_text().strip(),
                "",
            ]
    for figure in _figures(study_dir, report_dir):
        lines += [f"![{Path(figure).stem}]({figure})", ""]
    manifests = manifests_table(study_dir)
    if len(manifests):
        lines += ["**Runs behind these numbers**", "", markdown_table(manifests)]
    return "\n".join(lines)


def _profile_yaml(profile_name: str) -> str:
    path = profiles.CONFIG_DIR / f"{profile_name}.yaml"
    return path.read_text(encoding="utf-8") if path.exists() else f"(no {path})"


def instrument_section(output_root: Path) -> str:
    """How far the grader can be trusted: the matcher against the human-labelled answers (computed now,
    no model calls) and any LLM judges held to the same labels (`studies.validation`)."""
    graded = grade_labelled_answers(read_labelled_answers(LABELLED_ANSWERS))
    matcher = agreement(graded)
    lines = [
        "## The instrument: the matcher against human labels",
        "",
        f"{len(graded)} real model answers labelled correct / stale / ambiguous / wrong by careful reading "
        "(`tests/fixtures/matcher_labels/`). Rows: the programmatic matcher's verdict; columns: the human label. "
        f"Agreement {matcher.agreed:.0f}/{matcher.total:.0f} = {matcher.share:.1%}.",
        "",
        markdown_table(matcher.matrix.reset_index()),
        "",
    ]
    judges = judge_results(output_root / "validation")
    if judges:
        rows = [
            {
                "judge model (LongMemEval protocol)": name,
                "n": result["n"],
                "agrees with humans": f"{result['agreement']:.1%}",
                "Cohen's kappa": None if result["cohen_kappa"] is None else round(result["cohen_kappa"], 2),
                "says yes": f"{result['judge_accuracy']:.1%}",
                "humans: correct": f"{result['matcher_accuracy']:.1%}",
            }
            for name, result in judges.items()
        ]
        if rows:
            lines += [
                "LLM judges held to the labels they were run on (correct vs not; n says how many), from "
                "`outputs/validation/judge__*.json`:",
                "",
                markdown_table(pd.DataFrame(rows)),
                "",
            ]
    return "\n".join(lines)


def build_report(profile_name: str, output_root: Path | None = None) -> str:
    """The REPORT.md text for a profile, from the files under outputs/<profile>/."""
    profile = profiles.load_profile(profile_name)
    root = Path(output_root or profiles.OUTPUT_ROOT) / profile_name
    git = git_commit()
    known = {name for name, _ in STUDY_SECTIONS}
    extra = sorted(
        path.name
        for path in root.glob("*")
        if path.is_dir() and path.name[:2].isdigit() and path.name not in known
    )
    lines = [
        f"# Supersede results — profile `{profile_name}`",
        "",
        f"Generated {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')} from the files under "
        f"`outputs/{profile_name}/` by `python -m supersede_lib.studies.report --profile {profile_name}`; "
        f"git commit `{git.get('commit')}`{' (uncommitted changes)' if git.get('dirty') else ''}.",
        "",
        f"Profile: {profile.description} Data: **{profile.data_label or '?'}**.",
        "",
        "Numbers labelled *ours* were measured by this repository with the model, data, profile and n "
        "named beside them. Numbers labelled *paper* are quoted from the Supersede paper "
        "(`supersede_lib/studies/paper_results.py`); they sit in separate columns and are never mixed with ours.",
        "",
    ]
    lines.append(instrument_section(Path(output_root or profiles.OUTPUT_ROOT)))
    for name, title in (*STUDY_SECTIONS, *((name, name) for name in extra)):
        lines.append(study_section(root / name, title, root))
    lines += [
        "## Configuration",
        "",
        f"`configs/{profile_name}.yaml`, as read for this report:",
        "",
        "```yaml",
        _profile_yaml(profile_name).rstrip(),
        "```",
        "",
    ]
    return "\n".join(lines)


def write_report(profile_name: str, output_root: Path | None = None) -> Path:
    """Write outputs/<profile>/REPORT.md and return its path."""
    root = Path(output_root or profiles.OUTPUT_ROOT) / profile_name
    root.mkdir(parents=True, exist_ok=True)
    path = root / REPORT_FILE
    path.write_text(build_report(profile_name, output_root), encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="local", help="configs/<profile>.yaml (default: local)")
    parser.add_argument(
        "--output-root", type=Path, default=None, help="default: outputs/ or SUPERSEDE_OUTPUT_DIR"
    )
    args = parser.parse_args(argv)
    path = write_report(args.profile, args.output_root)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
