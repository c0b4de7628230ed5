"""The evaluation runner every study notebook uses.

`run_condition` drives the rollout core (`supersede_lib.agent.rollout`) over many questions at once:
questions run concurrently (bounded by a `models.rate_limit.AdaptiveLimit`, which halves while
the server answers 429 and grows back after), the sessions of one question strictly in order. Each question becomes one tidy row (matcher verdict, optional judge verdict,
tokens, latency, calls), each rollout one trajectory record (the notes after every session and
whether they still held the current / a stale value). `RunSettings` holds how a condition is run;
`RunResult` hands back the rows, the trajectories and the files written (`eval.run_files`).

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
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import pandas as pd

from supersede_lib.agent.episode import Episode
from supersede_lib.agent.prompts import DEFAULT_PROMPT_VARIANT, get_prompt_variant
from supersede_lib.agent.rollout import (
    PAPER_NOTES_BUDGET_CHARS,
    BoundedMemoryRollout,
    Rollout,
    make_rollout,
)
from supersede_lib.eval.matcher import score_episode_answer
from supersede_lib.eval.memory_metrics import MemoryMetrics, notes_holdings, trajectory_memory_metrics
from supersede_lib.eval.progress import StudyProgress, progress_bar
from supersede_lib.eval.run_files import (
    build_manifest,
    default_run_name,
    model_stats_snapshot,
    now_utc,
    write_run_outputs,
)
from supersede_lib.models.chat import (
    ChatModel,
    ChatResult,
    ContextOverflowError,
    Message,
    ModelCallError,
    ModelConfigError,
)
from supersede_lib.models.openai_api import mark_long_lived
from supersede_lib.models.rate_limit import AdaptiveLimit

T = TypeVar("T")

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS_ANSWER = 64
NOTES_TOKEN_MARGIN = 32  # room for a model that overshoots the budget a little (the cap cuts it anyway)
AUTO: Literal["auto"] = "auto"
DEFAULT_CONCURRENCY = 8  # questions in flight at once; a local CPU model serves them one by one anyway

ROW_COLUMNS = (
    "episode_id",
    "source",
    "question_type",
    "condition",
    "model",
    "notes_budget_chars",
    "chars_per_session",
    "n_sessions",
    "question",
    "answer",
    "gold",
    "verdict",
    "answered_current",
    "asserted_stale",
    "reward",
    "is_abstention",
    "asks_previous_value",
    "judge_correct",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "n_calls",
    "cached_calls",
    "truncations",
    "final_notes",
    "error",
    "failed",
    "cut_calls",
    "empty_replies",
    # memory metrics of a bounded-memory rollout (eval.memory_metrics); empty for full context
    "prompt_variant",
    "notes_changed_share",
    "notes_empty_share",
    "notes_echo_example",
    "notes_hold_current",
    "notes_hold_stale",
    "notes_hold_current_keyed",
)


def notes_max_tokens_for(notes_budget_chars: int) -> int:
    """A notes reply needs about budget/3 tokens (≈3-4 characters per token) plus a margin."""
    return max(16, notes_budget_chars // 3 + NOTES_TOKEN_MARGIN)


# --------------------------------------------------------------------------------------------
# One rollout
# --------------------------------------------------------------------------------------------


@dataclass
class CallRecord:
    """Accounting for one model call (one rollout turn)."""

    kind: str
    session_index: int | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    finish_reason: str | None = None
    empty_reply: bool = False
    made_by_commit: str | None = None  # a replayed call: the commit of the run that made it live
    served_model: str | None = None  # a live call: the model id the server said answered it
    system_fingerprint: str | None = None
    cached_prompt_tokens: int | None = None  # a live call: prompt tokens the server had cached

    @property
    def was_cut(self) -> bool:
        return self.finish_reason == "length"


@dataclass
class RolloutOutcome:
    """A finished rollout plus what it cost."""

    rollout: Rollout
    condition: str
    model_name: str
    calls: list[CallRecord] = field(default_factory=list)
    wall_s: float = 0.0
    error: str | None = None  # why the rollout ended without an answer
    failed: bool = False  # a model call failed for good (a re-run retries it), not a context overflow

    @property
    def episode(self) -> Episode:
        return self.rollout.episode

    @property
    def answer(self) -> str:
        return self.rollout.answer or ""

    @property
    def prompt_tokens(self) -> int:
        return sum(call.prompt_tokens for call in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(call.completion_tokens for call in self.calls)

    @property
    def latency_s(self) -> float:
        """Time spent inside model calls (cache hits count as zero)."""
        return sum(call.latency_s for call in self.calls)

    @property
    def n_calls(self) -> int:
        return len(self.calls)

    @property
    def cached_calls(self) -> int:
        return sum(1 for call in self.calls if call.cached)

    @property
    def cut_calls(self) -> int:
        """Replies that stopped at the token limit (finish_reason "length")."""
        return sum(1 for call in self.calls if call.was_cut)

    @property
    def empty_replies(self) -> int:
        return sum(1 for call in self.calls if call.empty_reply)

    @property
    def notes_history(self) -> list[str]:
        return list(self.rollout.notes_history)

    @property
    def final_notes(self) -> str | None:
        if not isinstance(self.rollout, BoundedMemoryRollout):
            return None
        return self.rollout.notes

    def trajectory(self, *, store_messages: bool = False) -> dict[str, Any]:
        """A JSON-able record of the rollout: per-turn notes, holdings and accounting."""
        episode = self.episode
        holds_current, holds_stale = notes_holdings(self.notes_history, episode)
        turns = []
        for turn, call in zip(self.rollout.turns, self.calls, strict=True):
            record: dict[str, Any] = {
                "kind": turn.kind,
                "session_index": turn.session_index,
                "reply": turn.reply,
                "notes_after": turn.notes_after,
                "truncated_chars": turn.truncated_chars,
                "prompt_chars": sum(len(message["content"]) for message in turn.messages),
                "prompt_tokens": call.prompt_tokens,
                "completion_tokens": call.completion_tokens,
                "latency_s": round(call.latency_s, 6),
                "cached": call.cached,
                "made_by_commit": call.made_by_commit,
                "served_model": call.served_model,
                "system_fingerprint": call.system_fingerprint,
                "cached_prompt_tokens": call.cached_prompt_tokens,
                "finish_reason": call.finish_reason,
                "cut": call.was_cut,
                "empty_reply": call.empty_reply,
            }
            if store_messages:
                record["messages"] = turn.messages
            turns.append(record)
        return {
            "episode_id": episode.episode_id,
            "source": episode.source,
            "question_type": episode.question_type,
            "condition": self.condition,
            "model": self.model_name,
            "notes_budget_chars": self.rollout.notes_budget_chars or None,
            "question": episode.question,
            "gold_answers": list(episode.gold_answers),
            "superseded_values": list(episode.superseded_values),
            "is_abstention": episode.is_abstention,
            "asks_previous_value": episode.asks_previous_value,
            "n_sessions": len(episode.sessions),
            "notes_history": self.notes_history,
            "holds_current": holds_current,
            "holds_stale": holds_stale,
            "answer": self.answer,
            "truncations": self.rollout.truncation_count,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": round(self.latency_s, 6),
            "wall_s": round(self.wall_s, 6),
            "n_calls": self.n_calls,
            "cached_calls": self.cached_calls,
            "cut_calls": self.cut_calls,
            "empty_replies": self.empty_replies,
            "turns": turns,
            "error": self.error,
            "failed": self.failed,
            "prompt_variant": self.rollout.prompt_variant,
            "memory": self.memory_metrics().as_dict()
            if isinstance(self.rollout, BoundedMemoryRollout)
            else None,
        }

    def memory_metrics(self) -> MemoryMetrics:
        """Did this rollout write, update and keep its notes (`eval.memory_metrics`)?"""
        return trajectory_memory_metrics(
            self.notes_history, self.episode, truncated_rewrites=self.rollout.truncation_count
        )


async def arun_rollout(
    rollout: Rollout,
    model: ChatModel,
    *,
    max_tokens_notes: int | None,
    max_tokens_answer: int | None,
    seed: int = 0,
    condition: str | None = None,
    temperature: float = 0.0,
) -> RolloutOutcome:
    """Drive one rollout to its answer, one model call at a time (sessions strictly in order).

    A prompt longer than the model's context window ends the rollout without an answer (scored
    as wrong) and is recorded in `outcome.error`: that is the model's limit, not a crash of the run.
    Any other `ModelCallError` (retries used up, a rejected request) ends it the same way with
    `outcome.failed` set: the question failed and a re-run should try it again.
    """
    if condition is None:
        condition = "bounded_memory" if isinstance(rollout, BoundedMemoryRollout) else "full_context"
    outcome = RolloutOutcome(rollout=rollout, condition=condition, model_name=model.name)
    started = time.perf_counter()
    while not rollout.done:
        kind = rollout.current_kind
        session_index = getattr(rollout, "sessions_consumed", None) if kind == "notes" else None
        max_tokens = max_tokens_notes if kind == "notes" else max_tokens_answer
        try:
            result: ChatResult = await model.achat(
                rollout.current_messages(), max_tokens=max_tokens, temperature=temperature, seed=seed
            )
        except ContextOverflowError as error:
            outcome.error = f"context overflow at the {kind} turn: {error}"
            break
        except ModelCallError as error:
            outcome.error = f"{kind} turn failed: {type(error).__name__}: {error}"
            outcome.failed = True
            break
        rollout.step(result.text)
        outcome.calls.append(
            CallRecord(
                kind=kind,
                session_index=session_index,
                prompt_tokens=int(result.prompt_tokens or 0),
                completion_tokens=int(result.completion_tokens or 0),
                latency_s=float(result.latency_s or 0.0),
                cached=bool(result.cached),
                finish_reason=result.finish_reason,
                empty_reply=not result.text.strip(),
                made_by_commit=result.made_by_commit if result.cached else None,
                served_model=result.served_model,
                system_fingerprint=result.system_fingerprint,
                cached_prompt_tokens=result.cached_prompt_tokens,
            )
        )
    outcome.wall_s = time.perf_counter() - started
    return outcome


# --------------------------------------------------------------------------------------------
# Many questions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSettings:
    """How a condition is run: the memory budget, concurrency, token limits and grading weight.

    `chars_per_session` (when set) gives bounded memory a budget that grows with the history
    instead of the fixed `notes_budget_chars`. `max_tokens_notes="auto"` gives each notes reply
    about budget/3 tokens plus a margin. `store_messages` keeps every prompt in the trajectories.
    """

    notes_budget_chars: int | None = PAPER_NOTES_BUDGET_CHARS
    chars_per_session: int | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    stale_penalty_weight: float = 1.0
    seed: int = 0
    max_tokens_notes: int | None | Literal["auto"] = AUTO
    max_tokens_answer: int | None = DEFAULT_MAX_TOKENS_ANSWER
    store_messages: bool = False
    prompt_variant: str = DEFAULT_PROMPT_VARIANT  # prompts.PROMPT_VARIANTS: how the agent is asked
    # 0: greedy, as every study; > 0 samples (with `seed`), e.g. to measure the success a GRPO
    # policy sees at its sampling temperature
    temperature: float = 0.0

    def __post_init__(self) -> None:
        get_prompt_variant(self.prompt_variant)  # an unknown name fails here, listing the known ones
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


@dataclass
class _QuestionResult:
    row: dict[str, Any]
    trajectory: dict[str, Any]
    judge_prompt_tokens: int = 0
    judge_completion_tokens: int = 0
    judge_cached: int = 0
    judge_calls: int = 0


def _gold_text(episode: Episode) -> str:
    return episode.gold_text or " | ".join(episode.gold_answers)


async def _judge_answer(
    judge: Any, episode: Episode, outcome: RolloutOutcome, result: _QuestionResult
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
) -> _QuestionResult:
    rollout = make_rollout(
        episode,
        condition,
        settings.notes_budget_chars,
        settings.chars_per_session,
        prompt_variant=settings.prompt_variant,
    )
    is_bounded = isinstance(rollout, BoundedMemoryRollout)
    notes_tokens = settings.max_tokens_notes
    if notes_tokens == AUTO:
        notes_tokens = notes_max_tokens_for(rollout.notes_budget_chars) if is_bounded else None
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
    result = _QuestionResult(row={}, trajectory=trajectory)
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
    result.row = {
        "episode_id": episode.episode_id,
        "source": episode.source,
        "question_type": episode.question_type,
        "condition": condition,
        "model": model.name,
        "notes_budget_chars": rollout.notes_budget_chars if is_bounded else None,
        "chars_per_session": settings.chars_per_session if is_bounded else None,
        "n_sessions": len(episode.sessions),
        "question": episode.question,
        "answer": outcome.answer,
        "gold": _gold_text(episode),
        "verdict": score.verdict,
        "answered_current": bool(score.answered_current),
        "asserted_stale": bool(score.asserted_stale),
        "reward": float(score.reward),
        "is_abstention": episode.is_abstention,
        "asks_previous_value": episode.asks_previous_value,
        "judge_correct": judge_correct,
        "prompt_tokens": outcome.prompt_tokens,
        "completion_tokens": outcome.completion_tokens,
        "latency_s": outcome.latency_s,
        "n_calls": outcome.n_calls,
        "cached_calls": outcome.cached_calls,
        "truncations": rollout.truncation_count,
        "final_notes": outcome.final_notes,
        "error": outcome.error,
        "failed": outcome.failed,
        "cut_calls": outcome.cut_calls,
        "empty_replies": outcome.empty_replies,
        "prompt_variant": settings.prompt_variant,
        **_memory_columns(trajectory["memory"]),
    }
    return result


_MEMORY_COLUMNS = {  # row column -> key of the trajectory's `memory` record (MemoryMetrics.as_dict)
    "notes_changed_share": "changed_share",
    "notes_empty_share": "empty_share",
    "notes_echo_example": "echoes_example",
    "notes_hold_current": "holds_current",
    "notes_hold_stale": "holds_stale",
    "notes_hold_current_keyed": "holds_current_keyed",
}


def _memory_columns(memory: dict[str, Any] | None) -> dict[str, Any]:
    return {column: (memory or {}).get(key) for column, key in _MEMORY_COLUMNS.items()}


class RunStoppedError(ModelConfigError):
    """A setting wrong for every call stopped the run; the finished questions were kept and written."""


class _Stopped(Exception):
    """Raised in place of a new model call once the run is stopping (never leaves the runner)."""


class _StopGate:
    """The run's model, refusing new calls once `error` is set (calls in flight finish and are cached)."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.name = model.name
        self.error: ModelConfigError | None = None

    async def achat(self, messages: list[Message], **options: Any) -> ChatResult:
        if self.error is not None:
            raise _Stopped()
        return await self.model.achat(messages, **options)

    def stop(self, error: ModelConfigError) -> None:
        if self.error is None:
            self.error = error
            logger.error("%s: stopping the run; calls already in flight finish and are kept", error)


def _stopped_error(
    gate: _StopGate, run_name: str, finished: int, total: int, paths: dict[str, Path]
) -> RunStoppedError:
    where = f"their rows are in {paths['csv']}" if paths else "no files were asked for"
    return RunStoppedError(
        f"{run_name} stopped: {gate.error} -- {finished} of {total} questions finished ({where}); "
        "every reply received is in the response cache, so a re-run after the fix pays only for the rest"
    )


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
    started_at, started, label = now_utc(), time.perf_counter(), f"{condition} | {model.name}"
    run_name = run_name or default_run_name(
        condition, model.name, settings.notes_budget_chars, settings.chars_per_session
    )
    stats_before = model_stats_snapshot(model)
    server_slots = await _server_slots(model, settings.concurrency, label)
    limit = AdaptiveLimit(min(settings.concurrency, server_slots or settings.concurrency), label=label)
    gate = _StopGate(model)

    async def one(episode: Episode, bar: StudyProgress) -> _QuestionResult | None:
        async with limit:
            if gate.error is not None:
                return None
            try:
                result = await _run_question(episode, condition, gate, settings, judge)
            except _Stopped:
                return None
            except ModelConfigError as error:
                gate.stop(error)
                return None
        bar.question_done(result.trajectory)
        return result

    # a study's bar is shared by all its runs; `progress=True` alone gives this run a bar of its own
    with (
        progress_bar(progress, total=len(episodes), description=label, leave=False) as bar,
        bar.running(run_name),
    ):
        with limit.installed():  # the tasks below copy this context: their 429s reach `limit`
            tasks = _start_in_order(episodes, condition, limit.maximum, lambda episode: one(episode, bar))
        results = await _gather_or_cancel_all(tasks)
    wall_s = time.perf_counter() - started
    finished = [result for result in results if result is not None]
    if gate.error is not None and not finished:
        raise _stopped_error(gate, run_name, 0, len(episodes), {}) from gate.error
    results = finished
    rows = [result.row for result in results]
    trajectories = [result.trajectory for result in results]
    frame = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    config = {"condition": condition, **asdict(settings)}
    manifest = build_manifest(
        config,
        model,
        judge,
        rows,
        trajectories,
        _judge_tallies(results),
        episodes,
        started_at=started_at,
        wall_s=wall_s,
        concurrency={**limit.stats(), "requested": settings.concurrency, "server_slots": server_slots},
        stats_before=stats_before,
    )
    if gate.error is not None:
        _mark_stopped(manifest, gate.error, episodes, rows)
    for warning in manifest["warnings"]:
        logger.warning("%s: %s", run_name, warning)
    paths = {}
    if output_dir is not None:
        paths = write_run_outputs(Path(output_dir), run_name, frame, trajectories, manifest=manifest)
    if gate.error is not None:
        raise _stopped_error(gate, run_name, len(rows), len(episodes), paths) from gate.error
    return RunResult(
        run_name=run_name, frame=frame, trajectories=trajectories, manifest=manifest, paths=paths
    )


def start_order(episodes: Sequence[Episode], condition: str, concurrency: int) -> list[int]:
    """The order in which questions are started: longest work first when several run at once.

    A bounded-memory question is a strict chain of calls (one per session, then the answer), so the
    run cannot end before its longest chain does. Started first, the longest chains also send first at
    every step and their replies are handled first, instead of waiting behind the others' replies
    (the classic longest-processing-time-first rule). Ties go to the longer history. At concurrency 1
    the order is the given one: the total is the same, and a server's prompt cache then sees the
    questions in the order they were always asked. Results keep the given order either way.
    """
    if concurrency <= 1:
        return list(range(len(episodes)))

    def work(index: int) -> tuple[int, int]:
        episode = episodes[index]
        return calls_per_question(episode, condition), sum(session.char_count for session in episode.sessions)

    return sorted(range(len(episodes)), key=work, reverse=True)


def calls_per_question(episode: Episode, condition: str = "bounded_memory") -> int:
    """A question's strictly sequential call chain: one notes rewrite per session plus the answer
    under bounded memory; one call with the whole history under full context."""
    return len(episode.sessions) + 1 if condition == "bounded_memory" else 1


def _start_in_order(
    episodes: list[Episode],
    condition: str,
    concurrency: int,
    question: Callable[[Episode], Coroutine[Any, Any, T]],
) -> list[asyncio.Future[T]]:
    """Start one task per question in `start_order`; the list keeps the given order."""
    started = {
        index: asyncio.ensure_future(question(episodes[index]))
        for index in start_order(episodes, condition, concurrency)
    }
    return [started[index] for index in range(len(episodes))]


async def _server_slots(model: ChatModel, concurrency: int, label: str) -> int | None:
    """How many requests the model's server serves at once, when it says (llama.cpp: /props); logged
    when that is fewer than `concurrency` (more in flight would only queue, and time out, there)."""
    server_info = getattr(getattr(model, "inner", model), "server_info", None)
    slots = (await asyncio.to_thread(server_info)).get("total_slots") if callable(server_info) else None
    if slots is not None and slots < concurrency:
        logger.info(
            "%s: the server serves %d request(s) at once (GET /props total_slots): concurrency %d, not %d",
            label, slots, slots, concurrency,
        )  # fmt: skip
    return slots


async def _gather_or_cancel_all(tasks: list[asyncio.Future[T]]) -> list[T]:
    """Every task's result; on an exception (or cancellation) the others are cancelled first."""
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _judge_tallies(results: list[_QuestionResult]) -> dict[str, int]:
    return {
        "judge_calls": sum(result.judge_calls for result in results),
        "judge_cached_calls": sum(result.judge_cached for result in results),
        "judge_prompt_tokens": sum(result.judge_prompt_tokens for result in results),
        "judge_completion_tokens": sum(result.judge_completion_tokens for result in results),
    }


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
                        condition, model.name, settings.notes_budget_chars, settings.chars_per_session
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


# --------------------------------------------------------------------------------------------
# Sync entry point that works with or without a running event loop (Jupyter)
# --------------------------------------------------------------------------------------------

_loop_lock = threading.Lock()
_runner_loop: asyncio.AbstractEventLoop | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    """One long-lived event loop on a daemon thread, shared by every sync call.

    Reusing a single loop keeps async HTTP clients (whose connection pools belong to the loop
    that opened them) valid across runs, and sidesteps Jupyter's already-running loop.
    """
    global _runner_loop
    with _loop_lock:
        if _runner_loop is None or _runner_loop.is_closed():
            loop = asyncio.new_event_loop()
            mark_long_lived(loop)  # its HTTP clients may use aiohttp (closed here at exit)
            thread = threading.Thread(target=loop.run_forever, name="supersede-runner-loop", daemon=True)
            thread.start()
            _runner_loop = loop
        return _runner_loop


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code, in or out of Jupyter."""
    future = asyncio.run_coroutine_threadsafe(coroutine, _background_loop())
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise
