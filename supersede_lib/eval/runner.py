"""The evaluation runner every study notebook uses: run one condition over many questions.

`run_condition` (and `arun_condition` inside an event loop, `run_conditions` for every condition x
model) answers each question with the rollout core (`supersede_lib.agent.rollout`), driven one call
per turn by `eval.rollout_driver`; `eval.scheduling` runs the questions concurrently, longest first,
on one progress bar. Each question becomes one tidy row (`eval.rows.ResultRow`: matcher verdict,
optional judge verdict, tokens, latency, calls), each rollout one trajectory record (the notes after
every session and whether they still held the current / a stale value). `RunSettings` holds how a
condition is run; `RunResult` hands back the rows, the trajectories and the files written
(`eval.run_files`).

Reliability: a question whose model call fails for good (`ModelCallError`: retries used up, a
rejected request, a lost server) fails alone: its row's `error` says why, `failed` is true, the
manifest counts it, and the other questions finish and every file is written. Failures are never
cached, so a re-run through a `models.cache.CachedChatModel` replays every finished call and
retries only what failed (a crash, too, loses nothing already paid for). A setting that is wrong
for every call (`ModelConfigError`: a bad key, an unknown model, a damaged response cache) stops
the run, but nothing paid is dropped: no new call starts, the calls already in flight finish (and
are cached), the finished questions' rows, trajectories and manifest (`stopped`) are written, and
then `RunStoppedError` says why, what was written and that a re-run pays only for the rest.
Replies cut at the token limit or empty are recorded per call and counted per run, with a
logged warning naming the model.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib.agent.episode import Episode
from supersede_lib.agent.memory import DEFAULT_MEMORY, get_memory_policy
from supersede_lib.agent.rollout import make_rollout
from supersede_lib.agent.settings import AUTO, RolloutSettings
from supersede_lib.eval.matcher import score_episode_answer  # read here per question: tests swap it
from supersede_lib.eval.progress import StudyProgress, progress_bar
from supersede_lib.eval.rollout_driver import CallRecord, RolloutOutcome, arun_rollout
from supersede_lib.eval.rows import ROW_COLUMNS, QuestionResult, judge_tallies, question_row, rows_frame
from supersede_lib.eval.run_files import (
    build_manifest,
    default_run_name,
    model_stats_snapshot,
    now_utc,
    write_run_outputs,
)
from supersede_lib.eval.scheduling import calls_per_question, run_questions, run_sync, start_order
from supersede_lib.models.chat import ChatModel, ModelCallError, ModelConfigError, missing_capabilities

__all__ = [  # what other modules import from here, wherever it is defined
    "DEFAULT_CONCURRENCY",
    "MissingCapabilityError",
    "NOTES_TOKEN_MARGIN",
    "ROW_COLUMNS",
    "CallRecord",
    "RolloutOutcome",
    "RunResult",
    "RunSettings",
    "RunStoppedError",
    "arun_condition",
    "arun_rollout",
    "calls_per_question",
    "notes_max_tokens_for",
    "run_condition",
    "run_conditions",
    "run_sync",
    "start_order",
]

logger = logging.getLogger(__name__)

NOTES_TOKEN_MARGIN = 32  # room for a model that overshoots the budget a little (the cap cuts it anyway)
DEFAULT_CONCURRENCY = 8  # questions in flight at once; a local CPU model serves them one by one anyway


def notes_max_tokens_for(notes_budget_chars: int) -> int:
    """A notes reply needs about budget/3 tokens (≈3-4 characters per token) plus a margin."""
    return max(16, notes_budget_chars // 3 + NOTES_TOKEN_MARGIN)


@dataclass(frozen=True)
class RunSettings(RolloutSettings):
    """How a condition is run: the rollout's settings (budget, prompt variant, token caps), plus
    how many questions are in flight, the sampling seed and temperature (0: greedy, as every study;
    > 0 samples, e.g. to measure the success a GRPO policy sees), the grading weight of a stale
    value, and whether the trajectories keep every prompt (`store_messages`)."""

    concurrency: int = DEFAULT_CONCURRENCY
    stale_penalty_weight: float = 1.0
    seed: int = 0
    store_messages: bool = False
    temperature: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency}")


@dataclass(frozen=True)
class RunResult:
    """One condition x model run: a row per question, a trajectory per rollout, the files written."""

    run_name: str
    frame: pd.DataFrame
    trajectories: list[dict[str, Any]]
    manifest: dict[str, Any]
    paths: dict[str, Path]  # csv / trajectories / manifest; empty when nothing was written


class RunStoppedError(ModelConfigError):
    """A setting wrong for every call stopped the run; the finished questions were kept and written."""


async def _judge_answer(
    judge: Any, episode: Episode, outcome: RolloutOutcome, result: QuestionResult
) -> bool | None:
    """The judge's verdict on a finished answer (None when the judge call failed: the question then
    fails, with the judge's error, like a failed model call); its reply and tokens go on `result`."""
    try:
        verdict = await judge.ajudge_result(episode, outcome.answer)
    except ModelCallError as error:
        outcome.error = f"judge failed: {type(error).__name__}: {error}"
        outcome.failed = True
        result.trajectory.update(error=outcome.error, failed=True)
        return None
    result.trajectory["judge_reply"] = verdict.reply
    result.judge_calls = 1
    result.judge_prompt_tokens = verdict.prompt_tokens
    result.judge_completion_tokens = verdict.completion_tokens
    result.judge_cached = int(verdict.cached)
    return verdict.correct


async def _run_question(
    episode: Episode, condition: str, model: ChatModel, settings: RunSettings, judge: Any
) -> QuestionResult:
    """One question: its rollout driven to an answer, graded by the matcher (and the judge), as a row."""
    rollout = make_rollout(episode, condition, settings=settings)
    notes_tokens = settings.max_tokens_notes
    if notes_tokens == AUTO:
        notes_tokens = notes_max_tokens_for(rollout.notes_budget_chars) if rollout.bounded else None
    outcome = await arun_rollout(
        rollout,
        model,
        max_tokens_notes=notes_tokens,
        max_tokens_answer=settings.max_tokens_answer,
        seed=settings.seed,
        condition=condition,
        temperature=settings.temperature,
    )
    score = score_episode_answer(episode, outcome.answer, stale_penalty_weight=settings.stale_penalty_weight)
    trajectory = outcome.trajectory(store_messages=settings.store_messages)
    result = QuestionResult(row={}, trajectory=trajectory)
    judge_correct = None
    if judge is not None and not outcome.failed:
        judge_correct = await _judge_answer(judge, episode, outcome, result)
    trajectory.update(
        verdict=score.verdict,
        answered_current=bool(score.answered_current),
        asserted_stale=bool(score.asserted_stale),
        reward=float(score.reward),
        score_reason=score.reason,
        judge_correct=judge_correct,
    )
    row = question_row(
        outcome,
        score,
        judge_correct=judge_correct,
        chars_per_session=settings.chars_per_session,
        prompt_variant=settings.prompt_variant,
        memory=trajectory["memory"],
    )
    result.row = row.as_dict()
    return result


async def arun_condition(
    episodes: Sequence[Episode],
    condition: str,
    model: ChatModel,
    settings: RunSettings = RunSettings(),
    *,
    judge: Any = None,
    output_dir: str | Path | None = None,
    run_name: str | None = None,
    progress: bool | StudyProgress = True,
) -> RunResult:
    """`run_condition` for callers already inside an event loop (`await arun_condition(...)`)."""
    episodes = list(episodes)
    _check_episodes(episodes)
    await _check_capabilities(condition, model, settings)
    started_at, started = now_utc(), time.perf_counter()
    run_name = run_name or default_run_name(
        condition, model.name, settings.notes_budget_chars, settings.chars_per_session, settings.memory
    )
    stats_before = model_stats_snapshot(model)

    async def answer(episode: Episode, gated_model: ChatModel) -> QuestionResult:
        return await _run_question(episode, condition, gated_model, settings, judge)

    # a study's bar is shared by all its runs; `progress=True` alone gives this run a bar of its own
    scheduled = await run_questions(
        episodes,
        condition,
        model,
        answer,
        concurrency=settings.concurrency,
        run_name=run_name,
        progress=progress,
    )
    wall_s = time.perf_counter() - started
    stopped_by, results = scheduled.stopped_by, scheduled.finished
    if stopped_by is not None and not results:
        raise _stopped_error(stopped_by, run_name, 0, len(episodes), {}) from stopped_by
    rows = [result.row for result in results]
    trajectories = [result.trajectory for result in results]
    frame = rows_frame(rows)
    config = {"condition": condition, **asdict(settings)}
    if config["memory"] == DEFAULT_MEMORY:  # as every run made before policies: a replay is the same run
        del config["memory"]
    if config["notes_system"] is None:  # the variant's own notes text, as every run made before overrides
        del config["notes_system"]
    manifest = build_manifest(
        config,
        model,
        judge,
        rows,
        trajectories,
        judge_tallies(results),
        episodes,
        started_at=started_at,
        wall_s=wall_s,
        concurrency=scheduled.concurrency,
        stats_before=stats_before,
    )
    if stopped_by is not None:
        _mark_stopped(manifest, stopped_by, episodes, rows)
    for warning in manifest["warnings"]:
        logger.warning("%s: %s", run_name, warning)
    paths = {}
    if output_dir is not None:
        paths = write_run_outputs(Path(output_dir), run_name, frame, trajectories, manifest=manifest)
    if stopped_by is not None:
        raise _stopped_error(stopped_by, run_name, len(rows), len(episodes), paths) from stopped_by
    return RunResult(
        run_name=run_name, frame=frame, trajectories=trajectories, manifest=manifest, paths=paths
    )


class MissingCapabilityError(ModelConfigError):
    """The run's memory policy needs what the server does not offer (tools, embeddings)."""


async def _check_capabilities(condition: str, model: ChatModel, settings: RunSettings) -> None:
    """Refuse, before any paid call, a bounded-memory run whose memory policy needs a capability
    ("tools", "embeddings") the model's server lacks, naming the capability and the policy."""
    if condition != "bounded_memory":
        return
    needs = get_memory_policy(settings.memory).needs
    missing = await asyncio.to_thread(missing_capabilities, model, needs) if needs else {}
    if missing:
        why = "; ".join(f"{need}: {reason}" for need, reason in sorted(missing.items()))
        raise MissingCapabilityError(
            f"memory policy {settings.memory!r} needs {', '.join(sorted(missing))}, which {model.name} "
            f"does not offer ({why}); no call was made"
        )


def _stopped_error(
    error: ModelConfigError, run_name: str, finished: int, total: int, paths: dict[str, Path]
) -> RunStoppedError:
    where = f"their rows are in {paths['csv']}" if paths else "no files were asked for"
    return RunStoppedError(
        f"{run_name} stopped: {error} -- {finished} of {total} questions finished ({where}); "
        "every reply received is in the response cache, so a re-run after the fix pays only for the rest"
    )


def _mark_stopped(
    manifest: dict[str, Any], error: ModelConfigError, episodes: list[Episode], rows: list[dict[str, Any]]
) -> None:
    """Say in the manifest that the run stopped early, why, and which questions it never finished."""
    done = {row["episode_id"] for row in rows}
    unfinished = [episode.episode_id for episode in episodes if episode.episode_id not in done]
    manifest["stopped"] = {"error": str(error), "unfinished_episode_ids": unfinished}
    manifest["warnings"].insert(
        0,
        f"run stopped early by a setting wrong for every call ({error}); {len(rows)} of {len(episodes)} "
        "questions finished: these results are incomplete",
    )


def run_condition(
    episodes: Sequence[Episode],
    condition: str,
    model: ChatModel,
    settings: RunSettings = RunSettings(),
    *,
    judge: Any = None,
    output_dir: str | Path | None = None,
    run_name: str | None = None,
    progress: bool | StudyProgress = True,
) -> RunResult:
    """Run one condition over `episodes` with one model; one row per question.

    `condition` is "bounded_memory" or "full_context". `judge` is an `eval.judge.LongMemEvalJudge`
    (or None): its verdict lands in `judge_correct` beside the matcher's `verdict`. With
    `output_dir` the run's CSV, trajectories and manifest are written there as `run_name`.
    `progress`: a study's `eval.progress.StudyProgress` to count this run on, True for a bar of
    this run's own, False for none. Safe to call from Jupyter: the work runs on the runner's own
    event loop thread.
    """
    return run_sync(
        arun_condition(
            episodes,
            condition,
            model,
            settings,
            judge=judge,
            output_dir=output_dir,
            run_name=run_name,
            progress=progress,
        )
    )


def run_conditions(
    episodes: Sequence[Episode],
    conditions: Iterable[str],
    models: Iterable[ChatModel],
    settings: RunSettings = RunSettings(),
    *,
    run_name_prefix: str | None = None,
    progress: bool | StudyProgress = True,
    **kwargs: Any,
) -> pd.DataFrame:
    """Every condition x model on the same episodes, concatenated (one run's files per pair, one bar)."""
    conditions, models = list(conditions), list(models)
    frames = []
    total = len(episodes) * len(conditions) * len(models)
    with progress_bar(progress, total=total, description="run_conditions") as bar:
        for model in models:
            for condition in conditions:
                run_name = None
                if run_name_prefix is not None:
                    suffix = default_run_name(
                        condition,
                        model.name,
                        settings.notes_budget_chars,
                        settings.chars_per_session,
                        settings.memory,
                    )
                    run_name = f"{run_name_prefix}__{suffix}"
                frames.append(
                    run_condition(
                        episodes, condition, model, settings, run_name=run_name, progress=bar, **kwargs
                    ).frame
                )
    if not frames:
        raise ValueError("run_conditions needs at least one condition and one model")
    return pd.concat(frames, ignore_index=True)


def _check_episodes(episodes: list[Episode]) -> None:
    if not episodes:
        raise ValueError("run_condition needs at least one episode")
    seen: set[str] = set()
    for index, episode in enumerate(episodes):
        if not isinstance(episode, Episode):
            raise TypeError(f"episodes[{index}] is a {type(episode).__name__}, not an Episode")
        if not episode.sessions:
            raise ValueError(f"episode {episode.episode_id!r} (episodes[{index}]): field 'sessions' is empty")
        if episode.episode_id in seen:
            raise ValueError(f"episode {episode.episode_id!r} (episodes[{index}]): duplicate 'episode_id'")
        seen.add(episode.episode_id)
