"""The evaluation runner every study notebook uses.

`run_condition` drives the rollout core (`supersede_lib.rollout`) over many questions at once:
questions run concurrently (bounded by an `asyncio.Semaphore`), the sessions of one question
strictly in order. Each question becomes one tidy row (matcher verdict, optional judge verdict,
tokens, latency, calls), each rollout one trajectory record (the notes after every session and
whether they still held the current / a stale value). Results are files: `<run_name>.csv`,
`<run_name>.trajectories.jsonl` and `<run_name>.manifest.json` under `output_dir`.

A crash loses nothing already paid for when the model is a `cache.CachedChatModel`: a re-run
replays every finished call from the cache.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import platform
import re
import subprocess
import threading
import time
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, TypeVar

import pandas as pd
from tqdm.auto import tqdm

from supersede_lib.episode import Episode
from supersede_lib.eval.matcher import conveys_value, score_answer
from supersede_lib.models.chat import ChatModel, ChatResult
from supersede_lib.rollout import (
    PAPER_NOTES_BUDGET_CHARS,
    BoundedMemoryRollout,
    Rollout,
    make_rollout,
)

T = TypeVar("T")

DEFAULT_MAX_TOKENS_ANSWER = 64
NOTES_TOKEN_MARGIN = 32  # room for a model that overshoots the budget a little (the cap cuts it anyway)
AUTO: Literal["auto"] = "auto"

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
)

KEY_PACKAGES = (
    "supersede",
    "openai",
    "pandas",
    "numpy",
    "tqdm",
    "xllamacpp",
    "transformers",
    "torch",
    "trl",
    "peft",
    "verifiers",
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


@dataclass
class RolloutOutcome:
    """A finished rollout plus what it cost."""

    rollout: Rollout
    condition: str
    model_name: str
    calls: list[CallRecord] = field(default_factory=list)
    wall_s: float = 0.0
    error: str | None = None  # why the rollout ended without an answer (a prompt too long for the model)

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
            "turns": turns,
            "error": self.error,
        }


def notes_holdings(
    notes_history: Sequence[str], episode: Episode
) -> tuple[list[bool] | None, list[bool] | None]:
    """After each session: did the notes still convey the current gold value / any stale value?

    `None` where the answer is not a value the notes could hold (abstention items, whose gold
    is an explanation) or where no stale values are known.
    """
    holds_current = None
    if not episode.is_abstention and episode.gold_answers:
        holds_current = [
            any(conveys_value(notes, gold) for gold in episode.gold_answers) for notes in notes_history
        ]
    holds_stale = None
    if episode.superseded_values:
        holds_stale = [
            any(conveys_value(notes, stale) for stale in episode.superseded_values) for notes in notes_history
        ]
    return holds_current, holds_stale


async def arun_rollout(
    rollout: Rollout,
    model: ChatModel,
    *,
    max_tokens_notes: int | None,
    max_tokens_answer: int | None,
    seed: int = 0,
    condition: str | None = None,
) -> RolloutOutcome:
    """Drive one rollout to its answer, one model call at a time (sessions strictly in order).

    A prompt longer than the model's context window ends the rollout without an answer (scored
    as wrong) and is recorded in `outcome.error`: that is the model's limit, not a crash of the run.
    """
    from supersede_lib.models.chat import ContextOverflowError

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
                rollout.current_messages(), max_tokens=max_tokens, temperature=0.0, seed=seed
            )
        except ContextOverflowError as error:
            outcome.error = f"context overflow at the {kind} turn: {error}"
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
            )
        )
    outcome.wall_s = time.perf_counter() - started
    return outcome


# --------------------------------------------------------------------------------------------
# Many questions
# --------------------------------------------------------------------------------------------


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


async def _run_question(
    episode: Episode,
    condition: str,
    model: ChatModel,
    *,
    notes_budget_chars: int | None,
    chars_per_session: int | None,
    stale_penalty_weight: float,
    judge: Any,
    seed: int,
    max_tokens_notes: int | None | Literal["auto"],
    max_tokens_answer: int | None,
    store_messages: bool,
) -> _QuestionResult:
    rollout = make_rollout(episode, condition, notes_budget_chars, chars_per_session)
    is_bounded = isinstance(rollout, BoundedMemoryRollout)
    notes_tokens = max_tokens_notes
    if notes_tokens == AUTO:
        notes_tokens = notes_max_tokens_for(rollout.notes_budget_chars) if is_bounded else None
    outcome = await arun_rollout(
        rollout,
        model,
        max_tokens_notes=notes_tokens,
        max_tokens_answer=max_tokens_answer,
        seed=seed,
        condition=condition,
    )
    score = score_answer(
        outcome.answer,
        episode.gold_answers,
        episode.superseded_values,
        is_abstention=episode.is_abstention,
        stale_penalty_weight=stale_penalty_weight,
        asks_previous_value=episode.asks_previous_value,
    )
    trajectory = outcome.trajectory(store_messages=store_messages)
    result = _QuestionResult(row={}, trajectory=trajectory)
    judge_correct = None
    if judge is not None:
        verdict = await judge.ajudge_result(episode, outcome.answer)
        judge_correct = verdict.correct
        trajectory["judge_reply"] = verdict.reply
        result.judge_calls = 1
        result.judge_prompt_tokens = verdict.prompt_tokens
        result.judge_completion_tokens = verdict.completion_tokens
        result.judge_cached = int(verdict.cached)
    trajectory.update(
        verdict=score.verdict,
        answered_current=bool(score.answered_current),
        asserted_stale=bool(score.asserted_stale),
        reward=float(score.reward),
        score_reason=getattr(score, "reason", ""),
        judge_correct=judge_correct,
    )
    result.row = {
        "episode_id": episode.episode_id,
        "source": episode.source,
        "question_type": episode.question_type,
        "condition": condition,
        "model": model.name,
        "notes_budget_chars": rollout.notes_budget_chars if is_bounded else None,
        "chars_per_session": chars_per_session if is_bounded else None,
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
    }
    return result


async def arun_condition(
    episodes: Sequence[Episode],
    condition: str,
    model: ChatModel,
    *,
    notes_budget_chars: int | None = PAPER_NOTES_BUDGET_CHARS,
    chars_per_session: int | None = None,
    concurrency: int = 8,
    stale_penalty_weight: float = 1.0,
    judge: Any = None,
    output_dir: str | Path | None = None,
    run_name: str | None = None,
    seed: int = 0,
    max_tokens_notes: int | None | Literal["auto"] = AUTO,
    max_tokens_answer: int | None = DEFAULT_MAX_TOKENS_ANSWER,
    progress: bool = True,
    store_messages: bool = False,
) -> pd.DataFrame:
    """`run_condition` for callers already inside an event loop (`await arun_condition(...)`)."""
    episodes = list(episodes)
    _check_episodes(episodes)
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    started_at = _now()
    started = time.perf_counter()
    semaphore = asyncio.Semaphore(concurrency)
    bar = tqdm(total=len(episodes), desc=f"{condition} | {model.name}", disable=not progress, leave=False)

    async def one(episode: Episode) -> _QuestionResult:
        async with semaphore:
            result = await _run_question(
                episode,
                condition,
                model,
                notes_budget_chars=notes_budget_chars,
                chars_per_session=chars_per_session,
                stale_penalty_weight=stale_penalty_weight,
                judge=judge,
                seed=seed,
                max_tokens_notes=max_tokens_notes,
                max_tokens_answer=max_tokens_answer,
                store_messages=store_messages,
            )
        bar.update(1)
        return result

    tasks = [asyncio.ensure_future(one(episode)) for episode in episodes]
    try:
        results = await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        bar.close()
    wall_s = time.perf_counter() - started
    frame = pd.DataFrame([result.row for result in results], columns=list(ROW_COLUMNS))
    if output_dir is not None:
        config = {
            "condition": condition,
            "notes_budget_chars": notes_budget_chars,
            "chars_per_session": chars_per_session,
            "concurrency": concurrency,
            "stale_penalty_weight": stale_penalty_weight,
            "seed": seed,
            "max_tokens_notes": max_tokens_notes,
            "max_tokens_answer": max_tokens_answer,
            "temperature": 0.0,
        }
        write_run_outputs(
            Path(output_dir),
            run_name or default_run_name(condition, model.name, notes_budget_chars, chars_per_session),
            frame,
            [result.trajectory for result in results],
            manifest=_manifest(config, model, judge, results, episodes, started_at=started_at, wall_s=wall_s),
        )
    return frame


def run_condition(
    episodes: Sequence[Episode],
    condition: str,
    model: ChatModel,
    *,
    notes_budget_chars: int | None = PAPER_NOTES_BUDGET_CHARS,
    chars_per_session: int | None = None,
    concurrency: int = 8,
    stale_penalty_weight: float = 1.0,
    judge: Any = None,
    output_dir: str | Path | None = None,
    run_name: str | None = None,
    seed: int = 0,
    max_tokens_notes: int | None | Literal["auto"] = AUTO,
    max_tokens_answer: int | None = DEFAULT_MAX_TOKENS_ANSWER,
    progress: bool = True,
    store_messages: bool = False,
) -> pd.DataFrame:
    """Run one condition over `episodes` with one model; one row per question.

    `condition` is "bounded_memory" or "full_context". `max_tokens_notes="auto"` gives each
    notes reply about budget/3 tokens plus a margin. `judge` is a `judge.LongMemEvalJudge` (or
    None): its verdict lands in `judge_correct` beside the matcher's `verdict`. Safe to call from
    Jupyter: the work runs on the runner's own event loop thread.
    """
    return run_sync(
        arun_condition(
            episodes,
            condition,
            model,
            notes_budget_chars=notes_budget_chars,
            chars_per_session=chars_per_session,
            concurrency=concurrency,
            stale_penalty_weight=stale_penalty_weight,
            judge=judge,
            output_dir=output_dir,
            run_name=run_name,
            seed=seed,
            max_tokens_notes=max_tokens_notes,
            max_tokens_answer=max_tokens_answer,
            progress=progress,
            store_messages=store_messages,
        )
    )


def run_conditions(
    episodes: Sequence[Episode],
    conditions: Iterable[str],
    models: Iterable[ChatModel],
    *,
    run_name_prefix: str | None = None,
    **kwargs: Any,
) -> pd.DataFrame:
    """Every condition x model on the same episodes, concatenated (one run's files per pair)."""
    frames = []
    for model in models:
        for condition in conditions:
            run_name = None
            if run_name_prefix is not None:
                suffix = default_run_name(
                    condition,
                    model.name,
                    kwargs.get("notes_budget_chars", PAPER_NOTES_BUDGET_CHARS),
                    kwargs.get("chars_per_session"),
                )
                run_name = f"{run_name_prefix}__{suffix}"
            frames.append(run_condition(episodes, condition, model, run_name=run_name, **kwargs))
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


# --------------------------------------------------------------------------------------------
# Output files
# --------------------------------------------------------------------------------------------


def default_run_name(
    condition: str, model_name: str, notes_budget_chars: int | None, chars_per_session: int | None
) -> str:
    """A file-safe run name such as `bounded_memory__gpt-4.1-mini__B300`."""
    parts = [condition, re.sub(r"[^A-Za-z0-9._-]+", "-", model_name).strip("-") or "model"]
    if condition == "bounded_memory":
        if chars_per_session is not None:
            parts.append(f"C{chars_per_session}")
        elif notes_budget_chars is not None:
            parts.append(f"B{notes_budget_chars}")
    return "__".join(parts)


def write_run_outputs(
    output_dir: Path,
    run_name: str,
    frame: pd.DataFrame,
    trajectories: list[dict[str, Any]],
    manifest: dict[str, Any],
) -> dict[str, Path]:
    """Write `<run_name>.csv`, `.trajectories.jsonl` and `.manifest.json`; return their paths."""
    output_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "csv": output_dir / f"{run_name}.csv",
        "trajectories": output_dir / f"{run_name}.trajectories.jsonl",
        "manifest": output_dir / f"{run_name}.manifest.json",
    }
    frame.to_csv(paths["csv"], index=False)
    with paths["trajectories"].open("w", encoding="utf-8") as handle:
        for trajectory in trajectories:
            handle.write(json.dumps(trajectory, ensure_ascii=False) + "\n")
    manifest = {**manifest, "run_name": run_name, "files": {key: path.name for key, path in paths.items()}}
    paths["manifest"].write_text(json.dumps(manifest, indent=2, default=str) + "\n", encoding="utf-8")
    return paths


def read_trajectories(path: str | Path) -> list[dict[str, Any]]:
    """Load a `<run_name>.trajectories.jsonl` file."""
    with Path(path).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def git_commit(repo_dir: Path | None = None) -> dict[str, Any]:
    """The checkout's commit and whether it has uncommitted changes; nulls without git."""
    repo_dir = repo_dir or Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo_dir, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=repo_dir,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit or None, "dirty": bool(status.strip())}


def package_versions(names: Iterable[str] = KEY_PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _model_stats(model: Any) -> dict[str, Any] | None:
    """`model.stats()` when the backend keeps counters (CachedChatModel: cache hits/misses/entries)."""
    stats = getattr(model, "stats", None)
    if not callable(stats):
        return None
    try:
        return dict(stats())
    except Exception as error:  # a manifest must never sink a finished run
        return {"error": f"{type(error).__name__}: {error}"}


def _manifest(
    config: dict[str, Any],
    model: ChatModel,
    judge: Any,
    results: list[_QuestionResult],
    episodes: list[Episode],
    *,
    started_at: str,
    wall_s: float,
) -> dict[str, Any]:
    rows = [result.row for result in results]
    fresh_prompt = sum(
        call["prompt_tokens"]
        for result in results
        for call in result.trajectory["turns"]
        if not call["cached"]
    )
    fresh_completion = sum(
        call["completion_tokens"]
        for result in results
        for call in result.trajectory["turns"]
        if not call["cached"]
    )
    judge_model = getattr(judge, "model", None)
    judge_name = getattr(judge_model, "name", None)
    totals = {
        "questions": len(rows),
        "calls": sum(row["n_calls"] for row in rows),
        "cached_calls": sum(row["cached_calls"] for row in rows),
        "prompt_tokens": sum(row["prompt_tokens"] for row in rows),
        "completion_tokens": sum(row["completion_tokens"] for row in rows),
        "uncached_prompt_tokens": fresh_prompt,
        "uncached_completion_tokens": fresh_completion,
        "model_latency_s": round(sum(row["latency_s"] for row in rows), 6),
        "errors": sum(1 for row in rows if row["error"]),
        "judge_calls": sum(result.judge_calls for result in results),
        "judge_cached_calls": sum(result.judge_cached for result in results),
        "judge_prompt_tokens": sum(result.judge_prompt_tokens for result in results),
        "judge_completion_tokens": sum(result.judge_completion_tokens for result in results),
    }
    from supersede_lib.models.openai_api import estimate_cost_usd

    model_cost = estimate_cost_usd(model.name, fresh_prompt, fresh_completion)
    judge_cost = (
        estimate_cost_usd(judge_name, totals["judge_prompt_tokens"], totals["judge_completion_tokens"])
        if judge_name
        else None
    )
    return {
        "config": config,
        "condition": config["condition"],
        "model": {"name": model.name, "class": type(model).__name__},
        "judge": {"name": judge_name, "class": type(judge_model).__name__} if judge is not None else None,
        "episodes": {
            "n": len(episodes),
            "sources": sorted({episode.source for episode in episodes}),
            "episode_ids": [episode.episode_id for episode in episodes],
        },
        "seed": config["seed"],
        "git": git_commit(),
        "packages": package_versions(),
        "started_at": started_at,
        "finished_at": _now(),
        "wall_s": round(wall_s, 3),
        "cache": _model_stats(model) if hasattr(model, "cache") else None,
        "model_stats": _model_stats(getattr(model, "inner", model)),
        "totals": totals,
        "accuracy": {
            "matcher": sum(row["verdict"] == "correct" for row in rows) / len(rows),
            "judge": (
                sum(bool(row["judge_correct"]) for row in rows) / len(rows) if judge is not None else None
            ),
        },
        "cost_usd_estimate": {
            "model": model_cost,
            "judge": judge_cost,
            "note": "list prices; uncached calls",
        },
    }
