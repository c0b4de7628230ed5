"""The instrument checked against people: the matcher and embedded LLM judges on the human-labelled
answers (`supersede_lib/labelling/data/`), written to outputs/validation/.

    python -m supersede_lib validation --judge-model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from supersede_lib.eval.judge import LongMemEvalJudge
from supersede_lib.labelling.agreement import (
    agreement,
    grade_labelled_answers,
    judge_agreement_with_labels,
    judge_labelled_answers,
    read_labelled_answers,
)
from supersede_lib.labelling.labelled_episodes import labelled_episodes
from supersede_lib.models.gguf import EmbeddedGGUFModel, resolve_default_gguf
from supersede_lib.profiles import OUTPUT_ROOT
from supersede_lib.results.outputs import markdown_table

VALIDATION_DIR = OUTPUT_ROOT / "validation"


def judge_results(directory: Path = VALIDATION_DIR) -> dict[str, dict[str, Any]]:
    """Every judge's agreement with the labels it was run on (`judge__<model>.json`), by model file."""
    results = [
        json.loads(path.read_text(encoding="utf-8")) for path in sorted(directory.glob("judge__*.json"))
    ]
    return {result["model_file"]: result for result in results}


def write_validation(labels_path: Path, judge_model_files: Sequence[str], threads: int | None) -> list[str]:
    """Grade the labelled answers with the matcher (and each embedded judge named); write the tables
    under outputs/validation/ and return the Markdown lines. A judge's results stay until it is run
    again (judge__<model>.json/.csv)."""
    rows = read_labelled_answers(labels_path)
    VALIDATION_DIR.mkdir(parents=True, exist_ok=True)
    episodes = labelled_episodes(rows)
    graded = grade_labelled_answers(rows, episodes)
    matcher = agreement(graded)
    for model_file in judge_model_files:
        _judge_labelled(model_file, rows, episodes, threads)
    lines = [
        f"# The matcher against human labels ({len(graded)} real answers, {Path(labels_path).name})",
        "",
        f"Agreement: {matcher.agreed:.0f}/{matcher.total:.0f} = {matcher.share:.1%}",
        "",
        markdown_table(matcher.matrix.reset_index()),
    ]
    for model_file, result in judge_results().items():
        kappa = result["cohen_kappa"]
        lines += [
            "",
            f"## LongMemEval-protocol judge: {model_file} (embedded, greedy, max_tokens 10)",
            "",
            f"Agrees with the human label (correct vs not) on {result['agreement']:.1%} of {result['n']} answers; "
            f"Cohen's kappa {kappa if kappa is None else round(kappa, 3)}; says yes to "
            f"{result['judge_accuracy']:.1%} (humans: {result['matcher_accuracy']:.1%} correct).",
        ]
    summary = {"n": len(graded), "matcher_agreement": matcher.share}
    (VALIDATION_DIR / "agreement.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (VALIDATION_DIR / "agreement.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return lines


def _judge_labelled(model_file: str, rows: list, episodes: dict, threads: int | None) -> None:
    """One embedded judge on every labelled answer; its table and agreement beside the matcher's."""
    model = EmbeddedGGUFModel(resolve_default_gguf(filename=model_file), n_ctx=4096, n_threads=threads)
    try:
        judged = judge_labelled_answers(rows, LongMemEvalJudge(model), episodes)
    finally:
        model.close()
    stem = f"judge__{Path(model_file).stem}"
    judged.to_csv(VALIDATION_DIR / f"{stem}.csv", index=False)
    result = {"model_file": model_file, **judge_agreement_with_labels(judged)}
    (VALIDATION_DIR / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
