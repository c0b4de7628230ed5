"""Before and after: the optimised instruction against the one it started from, on held-out episodes.

Both runs go through the runner on the same episodes (never the selection set GEPA saw); the original
instruction runs with no override, exactly as a normal run of the prompt variant. The report pairs them
by episode: accuracy with 95% Wilson intervals, the exact two-sided McNemar test, and what the
optimisation and the two runs cost. A failed episode counts as not correct and is counted apart.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supersede_lib.agent.episode import Episode
from supersede_lib.eval.run_files import write_bytes_atomic
from supersede_lib.eval.runner import RunResult, RunSettings, run_condition
from supersede_lib.eval.stats import paired_mcnemar, wilson_interval
from supersede_lib.instruction.adapter import CONDITION
from supersede_lib.instruction.optimise import Optimisation
from supersede_lib.models.chat import ChatModel

REPORT_FILE = "REPORT.md"
REPORT_JSON = "report.json"
ARMS = ("original", "optimised")


@dataclass(frozen=True)
class HeldOutReport:
    """The report's numbers (`data`, also `report.json`) and the two files written."""

    data: dict[str, Any]
    markdown_path: Path
    json_path: Path


def _arm_summary(result: RunResult) -> dict[str, Any]:
    frame = result.frame
    correct = int(((frame["verdict"] == "correct") & ~frame["failed"].astype(bool)).sum())
    n = len(frame)
    low, high = wilson_interval(correct, n)
    return {
        "correct": correct,
        "n": n,
        "accuracy": correct / n if n else 0.0,
        "wilson_95": [low, high],
        "failed": int(frame["failed"].sum()),
        "model_calls": int(frame["n_calls"].sum()),
        "cached_calls": int(frame["cached_calls"].sum()),
        "prompt_tokens": int(frame["prompt_tokens"].sum()),
        "completion_tokens": int(frame["completion_tokens"].sum()),
        "wall_s": float(result.manifest.get("wall_s") or 0.0),
    }


def _correct_by_episode(result: RunResult) -> dict[str, bool]:
    return {
        row["episode_id"]: bool(row["verdict"] == "correct" and not row["failed"])
        for row in result.frame.to_dict("records")
    }


def compare_held_out(
    model: ChatModel,
    episodes: Sequence[Episode],
    settings: RunSettings,
    optimisation: Optimisation,
    output_dir: str | Path,
    *,
    about: dict[str, Any] | None = None,
    progress: bool = True,
) -> HeldOutReport:
    """Run the original and the optimised instruction on `episodes` and write REPORT.md and
    report.json in `output_dir` (each run's files under `output_dir/held_out/`). `about`: what the
    page says was run (models, data, budget)."""
    output_dir = Path(output_dir)
    runs = {
        "original": settings.with_changes(notes_system=None),
        "optimised": settings.with_changes(notes_system=optimisation.best_instruction),
    }
    results = {
        arm: run_condition(
            episodes,
            CONDITION,
            model,
            arm_settings,
            output_dir=output_dir / "held_out",
            run_name=arm,
            progress=progress,
        )
        for arm, arm_settings in runs.items()
    }
    before, after = (_correct_by_episode(results[arm]) for arm in ARMS)
    paired = sorted(set(before) & set(after))
    test = paired_mcnemar([after[i] for i in paired], [before[i] for i in paired])
    data = {
        "about": about or {},
        "arms": {arm: _arm_summary(results[arm]) for arm in ARMS},
        "mcnemar": {
            "n_paired": len(paired),
            "optimised_only_correct": test.b,
            "original_only_correct": test.c,
            "p_exact": test.p_exact,
        },
        "instructions": {
            "original": optimisation.seed_instruction,
            "optimised": optimisation.best_instruction,
        },
        "optimisation": optimisation.as_dict() | {"candidates": len(optimisation.candidates)},
    }
    markdown_path, json_path = output_dir / REPORT_FILE, output_dir / REPORT_JSON
    write_bytes_atomic(json_path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    write_bytes_atomic(markdown_path, render_report(data).encode("utf-8"))
    return HeldOutReport(data=data, markdown_path=markdown_path, json_path=json_path)


def _fenced(text: str) -> str:
    fence = "````" if "```" in text else "```"
    return f"{fence}text\n{text}\n{fence}"


def _accuracy_lines(data: dict[str, Any]) -> list[str]:
    lines = ["| instruction | correct | accuracy | 95% Wilson | failed |", "| --- | --- | --- | --- | --- |"]
    for arm in ARMS:
        summary = data["arms"][arm]
        low, high = summary["wilson_95"]
        lines.append(
            f"| {arm} | {summary['correct']}/{summary['n']} | {summary['accuracy']:.1%} "
            f"| {low:.1%} - {high:.1%} | {summary['failed']} |"
        )
    test = data["mcnemar"]
    lines += [
        "",
        f"Exact two-sided McNemar, paired by episode (n = {test['n_paired']}): p = {test['p_exact']:.4g}; "
        f"{test['optimised_only_correct']} episodes correct only with the optimised instruction, "
        f"{test['original_only_correct']} only with the original.",
    ]
    return lines


def _cost_lines(data: dict[str, Any]) -> list[str]:
    optimisation, reflection = data["optimisation"], data["optimisation"]["reflection"]
    rollouts = optimisation["rollouts"]
    lines = [
        "| step | model calls (cached) | prompt tokens | completion tokens | wall time |",
        "| --- | --- | --- | --- | --- |",
        f"| optimisation: task model ({optimisation['metric_calls']} metric calls of {optimisation['max_metric_calls']}) "
        f"| {rollouts['model_calls']} ({rollouts['cached_calls']}) | {rollouts['prompt_tokens']:,} "
        f"| {rollouts['completion_tokens']:,} | {optimisation['wall_s']:.1f} s (both models) |",
        f"| optimisation: reflection model | {reflection['calls']} ({reflection['cached_calls']}) "
        f"| {reflection['prompt_tokens']:,} | {reflection['completion_tokens']:,} | |",
    ]
    for arm in ARMS:
        summary = data["arms"][arm]
        lines.append(
            f"| held-out run: {arm} | {summary['model_calls']} ({summary['cached_calls']}) "
            f"| {summary['prompt_tokens']:,} | {summary['completion_tokens']:,} | {summary['wall_s']:.1f} s |"
        )
    lines += [
        "",
        f"Reflection replies: {reflection['proposals']} proposals evaluated; skipped {reflection['skipped']} "
        f"({reflection['no_instruction']} without an instruction, {reflection['too_long']} over the "
        f"character limit, {reflection['failed_calls']} failed calls). Candidates: "
        f"{optimisation['candidates']}; the chosen one is #{optimisation['best_index']} "
        f"(validation score {optimisation['validation_scores'][optimisation['best_index']]:.3f}, "
        f"the original {optimisation['validation_scores'][0]:.3f}). Failed episodes during the "
        f"optimisation: {rollouts['failed_episodes']}.",
    ]
    return lines


def render_report(data: dict[str, Any]) -> str:
    """REPORT.md from the report's numbers (deterministic: no clock, no absolute path)."""
    about = data["about"]
    header = ["# Memory instruction optimised with GEPA: before and after on held-out episodes", ""]
    header += [f"- {key}: {value}" for key, value in about.items()]
    return "\n".join(
        [
            *header,
            "",
            "## Accuracy on the held-out episodes",
            "",
            *_accuracy_lines(data),
            "",
            "## The instruction (system text of the notes-writing call)",
            "",
            "Original:",
            "",
            _fenced(data["instructions"]["original"]),
            "",
            "Optimised:",
            "",
            _fenced(data["instructions"]["optimised"]),
            "",
            "## Cost",
            "",
            *_cost_lines(data),
            "",
        ]
    )
