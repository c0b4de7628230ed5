"""The GEPA adapter: a candidate memory instruction run on episodes through the project's runner.

GEPA (the `gepa` package) sees the system as one text component, `NOTES_COMPONENT`: the system text of
every notes-writing call. `evaluate` runs the bounded-memory agent with that text as the run's
`notes_system` (`RunSettings`), through `eval.runner.run_condition`, the one rollout core every study
uses, so each call goes through the model's response cache (a re-run or a resumed optimisation replays
what was paid for), each batch writes its rows, trajectories and manifest (provenance), and a question
whose call failed for good is a failed row: scored 0, counted, never an exception. The answer call,
the notes format and parser and the matcher stay as the prompt variant has them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gepa.core.adapter import EvaluationBatch

from supersede_lib.agent.episode import Episode
from supersede_lib.agent.prompts import get_prompt_variant
from supersede_lib.eval.runner import RunSettings, run_condition
from supersede_lib.models.chat import ChatModel

NOTES_COMPONENT = "notes_system"  # the one text GEPA optimises: the notes call's system text
CONDITION = "bounded_memory"


def seed_instruction(settings: RunSettings) -> str:
    """The instruction GEPA starts from: the notes system text the run's prompt variant sends."""
    return settings.notes_system or get_prompt_variant(settings.prompt_variant).notes_system


def text_digest(text: str, length: int = 10) -> str:
    """A short, stable name for a text (a candidate, a batch): its SHA-256, cut."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


@dataclass
class RolloutTally:
    """What the adapter's runs cost and how many episodes failed, across every evaluation (a resumed
    run counts its replays too: their calls come from the cache, `cached_calls`)."""

    batches: int = 0
    episodes: int = 0
    failed_episodes: int = 0
    model_calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: list[str] = field(default_factory=list)  # "episode_id: error", the first few

    def add(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.batches += 1
        self.episodes += len(rows)
        for row in rows:
            self.model_calls += int(row.get("n_calls") or 0)
            self.cached_calls += int(row.get("cached_calls") or 0)
            self.prompt_tokens += int(row.get("prompt_tokens") or 0)
            self.completion_tokens += int(row.get("completion_tokens") or 0)
            if row.get("failed"):
                self.failed_episodes += 1
                if len(self.failures) < 10:
                    self.failures.append(f"{row.get('episode_id')}: {row.get('error')}")


def episode_score(row: Mapping[str, Any] | None) -> float:
    """The pre-registered metric: 1 when the matcher's verdict is `correct`, else 0 (a failed row too)."""
    if row is None or row.get("failed"):
        return 0.0
    return 1.0 if row.get("verdict") == "correct" else 0.0


def feedback_record(episode: Episode, row: Mapping[str, Any] | None) -> dict[str, Any]:
    """One example the reflection model reads: the question, the gold and the superseded value, the final
    notes, the answer and the matcher's verdict (a failed episode says why instead of a verdict)."""
    row = row or {"failed": True, "error": "no row: the episode did not run"}
    gold = "; ".join(episode.gold_answers) or "(none)"
    superseded = "; ".join(episode.superseded_values) or "(none)"
    if row.get("failed"):
        verdict = f"failed (scored 0): {row.get('error')}"
    else:
        verdict = str(row.get("verdict"))
    return {
        "Inputs": {"Question": episode.question},
        "Generated Outputs": {
            "Final notes": row.get("final_notes") or "(empty)",
            "Answer": row.get("answer") or "(none)",
        },
        "Feedback": (
            f"Matcher verdict: {verdict}. The current (gold) value: {gold}. "
            f"The superseded (old) value: {superseded}."
        ),
    }


class NotesInstructionAdapter:
    """`gepa.GEPAAdapter` over the runner: `evaluate` runs a candidate instruction on a batch of
    episodes, `make_reflective_dataset` builds the pre-registered feedback from the rows.

    `output_dir` (optional) receives each batch's run files, named by the candidate and the batch, so a
    replayed batch rewrites the same files. `get_adapter_state` / `set_adapter_state` carry whatever
    `resume_state` holds (the optimiser's random state, the bad-reply counts) through GEPA's saved state.
    """

    propose_new_texts = None  # GEPA's own reflective proposer writes the new texts

    def __init__(
        self,
        model: ChatModel,
        settings: RunSettings,
        *,
        output_dir: str | Path | None = None,
        resume_state: Any = None,
        tally: RolloutTally | None = None,
    ) -> None:
        self.model = model
        self.settings = settings
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.resume_state = resume_state
        self.tally = tally if tally is not None else RolloutTally()

    def run_rows(self, batch: Sequence[Episode], instruction: str) -> list[dict[str, Any] | None]:
        """The runner's row for each episode of `batch` (in order) under `instruction`. An episode may
        come twice (GEPA's epoch sampler pads the last minibatch of an epoch with the least drawn ids,
        e.g. 80 training episodes in batches of 3): it runs once and its row fills each place."""
        settings = self.settings.with_changes(notes_system=instruction)
        ids = json.dumps([episode.episode_id for episode in batch])
        run_name = f"candidate-{text_digest(instruction)}__batch-{text_digest(ids)}"
        unique = list({episode.episode_id: episode for episode in batch}.values())
        result = run_condition(
            unique,
            CONDITION,
            self.model,
            settings,
            output_dir=self.output_dir,
            run_name=run_name,
            progress=False,
        )
        by_id = {row["episode_id"]: row for row in result.frame.to_dict("records")}
        rows = [by_id.get(episode.episode_id) for episode in batch]
        self.tally.add([by_id[episode.episode_id] for episode in unique if episode.episode_id in by_id])
        return rows

    def evaluate(
        self, batch: list[Episode], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch:
        rows = self.run_rows(batch, candidate[NOTES_COMPONENT])
        scores = [episode_score(row) for row in rows]
        outputs = [
            {"answer": (row or {}).get("answer"), "verdict": (row or {}).get("verdict")} for row in rows
        ]
        trajectories = (
            [feedback_record(episode, row) for episode, row in zip(batch, rows, strict=True)]
            if capture_traces
            else None
        )
        return EvaluationBatch(outputs=outputs, scores=scores, trajectories=trajectories)

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: EvaluationBatch, components_to_update: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        records = list(eval_batch.trajectories or [])
        return {name: records for name in components_to_update if name == NOTES_COMPONENT}

    def get_adapter_state(self) -> dict[str, Any]:
        return self.resume_state.snapshot() if self.resume_state is not None else {}

    def set_adapter_state(self, state: dict[str, Any]) -> None:
        if self.resume_state is not None and state:
            self.resume_state.restore(state)
