"""Optimise the memory instruction with GEPA (`gepa.optimize`), resumable after a kill.

The pre-registered set-up (docs/fast-slow-log.md): one component (the notes call's system text), the
selection episodes split by position (the first `validation_n` are GEPA's validation / Pareto set, the
rest its training set), reflection minibatches of 3, GEPA seed 0, a `max_metric_calls` budget (one
metric call = one episode judged once), and the package's defaults otherwise: Pareto candidate
selection, round-robin components, epoch-shuffled minibatches, no merge, strict improvement.

Resume: GEPA saves its state in `run_dir` at the start of every iteration and reloads it when the
folder holds one. Its random generator and its minibatch sampler's shuffle are not part of that state,
so a resumed run would draw other minibatches than the run it continues; here the two default objects
are built with one shared generator (exactly as `optimize` builds them) and their state rides along
in the adapter's state (`ResumeState`), with the reflection counts and the rollout tallies. The calls a
killed run had already made are replayed from the response cache, so a resumed run ends with the same
candidates, scores and metric-call count as one never interrupted.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gepa
from gepa.strategies.batch_sampler import EpochShuffledBatchSampler
from gepa.strategies.candidate_selector import ParetoCandidateSelector

from supersede_lib.agent.episode import Episode
from supersede_lib.eval.run_files import portable_path, write_bytes_atomic
from supersede_lib.eval.runner import RunSettings
from supersede_lib.instruction.adapter import (
    NOTES_COMPONENT,
    NotesInstructionAdapter,
    RolloutTally,
    seed_instruction,
)
from supersede_lib.instruction.reflection import (
    MAX_INSTRUCTION_CHARS,
    REFLECTION_MAX_TOKENS,
    CheckedReflection,
    ReflectionModel,
    ReflectionTally,
    StopOnConfigError,
)
from supersede_lib.models.chat import ChatModel

VALIDATION_EPISODES = 20  # the selection set's first 20 episodes: GEPA's validation (Pareto) set
MINIBATCH_SIZE = 3
GEPA_SEED = 0
SUMMARY_FILE = "optimisation.json"
_SAMPLER_FIELDS = (
    "shuffled_ids",
    "epoch",
    "id_freqs",
    "last_trainset_size",
    "_current_iteration",
    "_calls_in_iteration",
)


def selection_split(
    episodes: Sequence[Episode], validation_n: int = VALIDATION_EPISODES
) -> tuple[list[Episode], list[Episode]]:
    """(training set, validation set): the first `validation_n` episodes by position validate."""
    episodes = list(episodes)
    if not 0 < validation_n < len(episodes):
        raise ValueError(
            f"validation_n={validation_n}: the {len(episodes)} selection episodes must leave both a "
            "validation and a training set"
        )
    return episodes[validation_n:], episodes[:validation_n]


@dataclass
class ResumeState:
    """What GEPA's saved state lacks for an exact resume, and the counts a report needs."""

    rng: random.Random
    sampler: EpochShuffledBatchSampler
    reflection: ReflectionTally
    rollouts: RolloutTally
    started: float = field(default_factory=time.perf_counter)
    wall_s_before: float = 0.0  # seconds the run had taken before this process resumed it

    @property
    def wall_s(self) -> float:
        return self.wall_s_before + time.perf_counter() - self.started

    def snapshot(self) -> dict[str, Any]:
        sampler = {name: getattr(self.sampler, name) for name in _SAMPLER_FIELDS}
        return {
            "rng": self.rng.getstate(),
            "sampler": sampler
            | {"shuffled_ids": list(sampler["shuffled_ids"]), "id_freqs": dict(sampler["id_freqs"])},
            "reflection": asdict(self.reflection),
            "rollouts": asdict(self.rollouts),
            "wall_s": self.wall_s,
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.rng.setstate(state["rng"])
        for name, value in state["sampler"].items():
            setattr(self.sampler, name, Counter(value) if name == "id_freqs" else value)
        for name, value in state["reflection"].items():
            setattr(self.reflection, name, value)
        for name, value in state["rollouts"].items():
            setattr(self.rollouts, name, value)
        self.wall_s_before, self.started = float(state["wall_s"]), time.perf_counter()


@dataclass(frozen=True)
class Optimisation:
    """What one optimisation run returned: the instruction it chose (its best candidate on the
    validation set), the one it started from, every candidate's validation score with the metric calls
    spent when it was found, and what it cost."""

    seed_instruction: str
    best_instruction: str
    best_index: int
    validation_scores: list[float]
    found_at_metric_calls: list[int]
    candidates: list[str]
    metric_calls: int
    max_metric_calls: int
    reflection: dict[str, int]
    rollouts: dict[str, Any]
    wall_s: float
    run_dir: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _engine_parts(
    seed: int, minibatch_size: int
) -> tuple[random.Random, ParetoCandidateSelector, EpochShuffledBatchSampler]:
    """The candidate selector and minibatch sampler `gepa.optimize` builds by default, over one
    generator seeded with `seed`, made here so their state can be saved and restored."""
    rng = random.Random(seed)
    return (
        rng,
        ParetoCandidateSelector(rng=rng),
        EpochShuffledBatchSampler(minibatch_size=minibatch_size, rng=rng),
    )


def optimise_instruction(
    task_model: ChatModel,
    reflection_model: ChatModel,
    episodes: Sequence[Episode],
    settings: RunSettings,
    run_dir: str | Path,
    *,
    max_metric_calls: int,
    validation_n: int = VALIDATION_EPISODES,
    minibatch_size: int = MINIBATCH_SIZE,
    seed: int = GEPA_SEED,
    max_instruction_chars: int = MAX_INSTRUCTION_CHARS,
    reflection_max_tokens: int = REFLECTION_MAX_TOKENS,
    progress: bool = True,
) -> Optimisation:
    """Run GEPA on the notes instruction of `settings` (its prompt variant's, or its `notes_system`)
    for `task_model`, `reflection_model` proposing; resume from `run_dir` when it holds a saved state.
    Writes `run_dir/optimisation.json`; each evaluated batch's run files go under `run_dir/rollouts/`."""
    if max_metric_calls < 1:
        raise ValueError(f"max_metric_calls={max_metric_calls}: give a positive budget")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    train, validation = selection_split(episodes, validation_n)
    rng, selector, sampler = _engine_parts(seed, minibatch_size)
    resume = ResumeState(rng, sampler, ReflectionTally(), RolloutTally())
    adapter = NotesInstructionAdapter(
        task_model, settings, output_dir=run_dir / "rollouts", resume_state=resume, tally=resume.rollouts
    )
    reflector = CheckedReflection(
        ReflectionModel(reflection_model, resume.reflection, reflection_max_tokens),
        max_chars=max_instruction_chars,
    )
    start = seed_instruction(settings)
    result = gepa.optimize(
        seed_candidate={NOTES_COMPONENT: start},
        trainset=train,
        valset=validation,
        adapter=adapter,
        reflection_strategy=reflector,
        candidate_selection_strategy=selector,
        batch_sampler=sampler,
        max_metric_calls=max_metric_calls,
        stop_callbacks=StopOnConfigError(reflector),
        run_dir=str(run_dir),
        display_progress_bar=progress,
        seed=seed,
    )
    if reflector.config_error is not None:
        raise reflector.config_error
    optimisation = Optimisation(
        seed_instruction=start,
        best_instruction=result.candidates[result.best_idx][NOTES_COMPONENT],
        best_index=result.best_idx,
        validation_scores=[float(score) for score in result.val_aggregate_scores],
        found_at_metric_calls=[int(count) for count in result.discovery_eval_counts],
        candidates=[candidate[NOTES_COMPONENT] for candidate in result.candidates],
        metric_calls=int(result.total_metric_calls or 0),
        max_metric_calls=max_metric_calls,
        reflection=resume.reflection.as_dict(),
        rollouts=asdict(resume.rollouts),
        wall_s=round(resume.wall_s, 3),
        run_dir=portable_path(run_dir),  # no machine path in a record
    )
    write_bytes_atomic(run_dir / SUMMARY_FILE, _json_bytes(optimisation.as_dict()))
    return optimisation


def _json_bytes(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
