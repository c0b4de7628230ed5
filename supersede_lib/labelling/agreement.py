"""The matcher against human labels: grade a labelled answer set, and the matcher x human confusion matrix.

The labelled set (`supersede_lib/labelling/data/labelled_answers.jsonl`, described in the README
beside it) holds real model answers, each with the episode's question and values and a careful
reader's verdict. `grade_labelled_answers` scores every answer with `score_answer`; `agreement` gives
the confusion matrix (rows: matcher verdict, columns: human label) and the share that agree, which
the agreement test and the report both use. `judge_labelled_answers` asks an LLM judge (the
LongMemEval protocol) about the same answers, so a judge model can be held to the same labels
(`python -m supersede_lib validation` writes both under outputs/validation/).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import pandas as pd

from supersede_lib.agent.episode import Episode
from supersede_lib.eval.judge import LongMemEvalJudge, agreement_from_pairs
from supersede_lib.eval.matcher import Verdict, other_turn_topics, score_answer
from supersede_lib.eval.runner import run_sync

VERDICTS: tuple[str, ...] = get_args(Verdict)
LABELS_DIR = Path(__file__).parent / "data"  # research data the library reads: shipped with the package
LABELLED_ANSWERS = LABELS_DIR / "labelled_answers.jsonl"
BLIND_BATCHES = LABELS_DIR / "blind_batches.jsonl"
"""The fresh blind batches of trained answers, each graded once by a matcher frozen before it was read."""


@dataclass(frozen=True)
class Agreement:
    """Matcher x human confusion matrix (with `total` row and column) and how many verdicts agree."""

    matrix: pd.DataFrame
    agreed: float
    total: float

    @property
    def share(self) -> float:
        """Agreed / total (nan for an empty set)."""
        return self.agreed / self.total if self.total else float("nan")


def read_labelled_answers(path: str | Path) -> list[dict[str, Any]]:
    """The labelled answers, one dict per JSON line."""
    with Path(path).open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


TRAINING_ROLLOUTS = "training rollouts"
"""How a batch of training-rollout answers begins: answers logged while training (temperature 0.7, any
step), the harder kind."""


@dataclass(frozen=True)
class BlindBatch:
    """One fresh blind batch (`blind_batches.jsonl`) and what its matcher measured on it, graded once at
    its freeze: the out-of-sample agreement, which later rule rounds (developed on it) cannot claim."""

    batch: str
    first_id: str
    last_id: str
    matcher: str
    frozen_at: str
    n: int
    credit_agrees: int
    verdict_agrees: int
    clear_n: int  # the answers whose label's reason is not marked borderline by its readers
    clear_credit_agrees: int
    answers: str = TRAINING_ROLLOUTS  # which trained answers the batch sampled: batches differ in kind

    @property
    def credit_share(self) -> float:
        return self.credit_agrees / self.n

    @property
    def clear_credit_share(self) -> float:
        return self.clear_credit_agrees / self.clear_n

    def holds(self, answer_id: str) -> bool:
        """Whether the labelled answer `answer_id` ("ans-3950") belongs to this batch."""
        return (
            answer_id_number(self.first_id) <= answer_id_number(answer_id) <= answer_id_number(self.last_id)
        )


def answer_id_number(answer_id: str) -> int:
    """The number of a labelled answer's id ("ans-3950" -> 3950): ids run in the order answers were added."""
    return int(answer_id.removeprefix("ans-"))


def read_blind_batches(path: str | Path = BLIND_BATCHES) -> list[BlindBatch]:
    """The blind batches in the order they were graded; a malformed line is named by file, line, field."""
    batches = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        graded = row.get("graded_once", {})
        missing = [field for field in _BATCH_FIELDS if field not in row] + [
            f"graded_once.{field}" for field in _GRADED_FIELDS if field not in graded
        ]
        if missing:
            raise ValueError(f"{path}, line {number}: field {missing[0]!r} is missing")
        batches.append(
            BlindBatch(
                *(row[field] for field in _BATCH_FIELDS[:-1]),
                *(int(graded[field]) for field in _GRADED_FIELDS),
                row.get("answers", TRAINING_ROLLOUTS),
            )
        )
    return batches


def current_matcher_batches(batches: list[BlindBatch], matcher_version: str) -> list[BlindBatch]:
    """The batches graded once by `matcher_version` at its freeze: what the current matcher measured out
    of sample, every kind of answer it was measured on (a report quotes them all, not the kindest)."""
    return [batch for batch in batches if batch.matcher == matcher_version]


FINAL_ANSWERS = "greedy final answers"
"""How the F batches' `answers` begin: a final adapter's greedy answers to new episodes, the kind a
trained number is made of, and the answers the instrument target is read on (docs/preregistration.md)."""


def pooled_final_answer_credit(batches: list[BlindBatch]) -> tuple[int, int]:
    """Credit agreements and answers over every batch of fresh greedy final answers, each counted once at
    its first grading (a batch graded again by a later matcher counts once): (agreed, n)."""
    first: dict[str, BlindBatch] = {}
    for batch in batches:
        if batch.answers.startswith(FINAL_ANSWERS):
            first.setdefault(batch.batch, batch)
    return sum(b.credit_agrees for b in first.values()), sum(b.n for b in first.values())


_BATCH_FIELDS = ("batch", "first_id", "last_id", "matcher", "frozen_at", "graded_once")
_GRADED_FIELDS = ("n", "credit_agrees", "verdict_agrees", "clear_n", "clear_credit_agrees")


def grade_labelled_answers(
    rows: Iterable[Mapping[str, Any]], episodes: Mapping[str, Episode] | None = None
) -> pd.DataFrame:
    """One row per labelled answer: its id, human `label`, the matcher's `verdict` and `reason`, and whether
    the label's readers called it `borderline` (their reason says so): where the readers hesitate, a
    disagreement may be the label's as much as the matcher's. `episodes` (by answer id, see
    `labelling.labelled_episodes`) lets the matcher read an answer's sessions, as it does live; an
    answer without its episode is graded on its record alone."""
    graded = []
    for row in rows:
        episode = (episodes or {}).get(row["id"])
        score = score_answer(
            row["answer"],
            row["gold_answers"],
            row["superseded_values"],
            is_abstention=row["is_abstention"],
            asks_previous_value=row["asks_previous_value"],
            question=row["question"],
            other_topics=other_turn_topics(episode) if episode is not None else frozenset(),
        )
        graded.append(
            {
                "id": row["id"],
                "population": answer_population(row),
                "question": row["question"],
                "answer": row["answer"],
                "label": row["label"],
                "verdict": score.verdict,
                "reason": score.reason,
                "n_copies": row.get("n_copies", 1),
                "borderline": "borderline" in str(row.get("reason", "")).casefold(),
            }
        )
    return pd.DataFrame(
        graded,
        columns=[
            "id",
            "population",
            "question",
            "answer",
            "label",
            "verdict",
            "reason",
            "n_copies",
            "borderline",
        ],
    )


def answer_population(row: Mapping[str, Any]) -> str:
    """`trained adapter` for answers of GRPO-trained checkpoints (model `<arm>__seed-N__step-M`), else
    `base model`: RL optimises against the matcher, so its agreement is held to account separately."""
    model = str(row.get("source", {}).get("model", ""))
    return "trained adapter" if "__seed-" in model else "base model"


_ROLLOUT_STEP = re.compile(r"(?:training rollout|GRPO training policy), step (\d+)")


def rollout_condition(step: int) -> str:
    """The `source.condition` a labelled training rollout carries (`label-batch training-packets`
    writes it; `rollout_step` reads it back; the oldest rollout labels say "(GRPO training policy,
    step N)" in their model instead)."""
    return f"training rollout, step {step}"


def rollout_step(row: Mapping[str, Any]) -> int | None:
    """The training step at which a logged rollout answer was sampled (its source says "training
    rollout, step 11" or "(GRPO training policy, step 3)"), or None for an answer of a finished model."""
    source = row.get("source", {})
    found = _ROLLOUT_STEP.search(f"{source.get('model', '')} {source.get('condition', '')}")
    return int(found.group(1)) if found else None


def reward_errors_by_step(
    rows: Iterable[Mapping[str, Any]], graded: pd.DataFrame, step_bins: Sequence[int] = (0, 5, 10, 15, 20)
) -> pd.DataFrame:
    """The matcher's credit errors on labelled training rollouts, by training step: a verdict is the
    reward, so `over-credit` (paid, the readers say not correct) is what a policy learns to seek. If
    it grew with the steps, training would be finding the matcher's holes; `under-credit` withholds
    reward the readers would pay. `graded` is `grade_labelled_answers(rows)`."""
    steps = pd.Series({row["id"]: rollout_step(row) for row in rows}, dtype="float")
    frame = graded.assign(step=graded["id"].map(steps)).dropna(subset=["step"])
    readers_pay, matcher_pays = frame["label"] == "correct", frame["verdict"] == "correct"
    frame = frame.assign(
        readers=readers_pay,
        matcher=matcher_pays,
        over=matcher_pays & ~readers_pay,
        under=readers_pay & ~matcher_pays,
    )
    last_edge = max(step_bins[-1], int(frame["step"].max())) if len(frame) else step_bins[-1]
    bins = pd.cut(frame["step"], [*step_bins[:-1], last_edge])  # a longer run widens the last bin
    table = frame.groupby(bins, observed=True).agg(
        rollouts=("id", "size"),
        readers=("readers", "sum"),
        matcher=("matcher", "sum"),
        over=("over", "sum"),
        under=("under", "sum"),
    )
    table.index = [f"{int(interval.left) + 1}-{int(interval.right)}" for interval in table.index]
    table.loc["all"] = table.sum()
    return (
        table.rename_axis("steps")
        .reset_index()
        .rename(
            columns={
                "readers": "correct by labels",
                "matcher": "correct by matcher",
                "over": "over-credit (paid, labels: not correct)",
                "under": "under-credit (labels: correct, not paid)",
            }
        )
    )


def credit_agreement(frame: pd.DataFrame) -> float:
    """Share of answers where matcher and human agree on credit (`correct` or not): what accuracy and
    the reward read, whatever the kind of miss (stale, ambiguous, wrong)."""
    if frame.empty:
        return float("nan")
    return float(((frame["label"] == "correct") == (frame["verdict"] == "correct")).mean())


def agreement(
    frame: pd.DataFrame,
    matcher_column: str = "verdict",
    human_column: str = "label",
    weight_column: str | None = None,
) -> Agreement:
    """Confusion matrix of matcher verdicts (rows) against human labels (columns), every verdict shown.

    With `weight_column` (e.g. "n_copies") each row counts that many times.
    """
    for column in (matcher_column, human_column, weight_column):
        if column is not None and column not in frame.columns:
            raise KeyError(f"agreement needs a {column!r} column; got {list(frame.columns)}")
    weights = frame[weight_column] if weight_column else pd.Series(1, index=frame.index)
    matrix = (
        pd.crosstab(frame[matcher_column], frame[human_column], values=weights, aggfunc="sum")
        .reindex(index=list(VERDICTS), columns=list(VERDICTS))
        .fillna(0)
        .astype(weights.dtype)
    )
    matrix.index.name, matrix.columns.name = "matcher \\ human", None
    matrix["total"] = matrix.sum(axis=1)
    matrix.loc["total"] = matrix.sum(axis=0)
    agreed = sum(matrix.loc[verdict, verdict] for verdict in VERDICTS)
    return Agreement(matrix=matrix, agreed=float(agreed), total=float(matrix.loc["total", "total"]))


def disagreements(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows whose matcher verdict differs from the human label."""
    return frame[frame["verdict"] != frame["label"]]


def _episode_for(row: Mapping[str, Any]) -> Episode:
    """The parts of an episode the judge prompt reads (question, gold, abstention)."""
    return Episode(
        episode_id=str(row["id"]),
        sessions=(),
        question=row["question"],
        question_date="",
        gold_answers=tuple(row["gold_answers"]),
        superseded_values=tuple(row["superseded_values"]),
        is_abstention=bool(row["is_abstention"]),
        asks_previous_value=bool(row["asks_previous_value"]),
        gold_text=str(row.get("gold_text", "")),  # abstention items: why the question is unanswerable
    )


def judge_labelled_answers(
    rows: Iterable[Mapping[str, Any]],
    judge: LongMemEvalJudge,
    episodes: Mapping[str, Episode] | None = None,
) -> pd.DataFrame:
    """One row per labelled answer: the human label, the matcher verdict and the judge's yes/no."""
    rows = list(rows)
    graded = grade_labelled_answers(rows, episodes)

    async def ask_all() -> list[Any]:
        return [await judge.ajudge_result(_episode_for(row), row["answer"]) for row in rows]

    verdicts = run_sync(ask_all())
    graded["judge_correct"] = [verdict.correct for verdict in verdicts]
    graded["judge_reply"] = [verdict.reply for verdict in verdicts]
    return graded


def judge_agreement_with_labels(frame: pd.DataFrame) -> dict[str, Any]:
    """The judge's yes/no against the human label (correct or not), with Cohen's kappa."""
    return agreement_from_pairs(
        [label == "correct" for label in frame["label"]], [bool(value) for value in frame["judge_correct"]]
    )
