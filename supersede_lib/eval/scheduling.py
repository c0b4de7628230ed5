"""Scheduling a run's questions: how many at once, in what order, the progress bar, and stopping.

`run_questions` answers every question of a run with the caller's `answer` coroutine: questions run
concurrently, bounded by a `models.rate_limit.AdaptiveLimit` (which halves while the server answers
429 and grows back after) and by the slots the model's server says it has; the longest call chains
start first (`start_order`); each finished question is counted on the progress bar. The sessions of
one question stay strictly in order because one `answer` call drives them.

Resume and stop: a question whose call fails for good fails alone (the caller's row says so), and a
re-run through a response cache replays every finished call. A setting wrong for every call
(`ModelConfigError`) stops the run without dropping anything paid: the model is wrapped in a
`StopGate` that refuses new calls once the error is seen, the calls in flight finish (and are
cached), and the questions that finished are handed back beside the error.

`run_sync` runs a coroutine from synchronous code, in or out of Jupyter, on one long-lived loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from supersede_lib.agent.episode import Episode
from supersede_lib.eval.progress import StudyProgress, progress_bar
from supersede_lib.eval.rows import QuestionResult
from supersede_lib.models.chat import ChatModel, ChatResult, EmbedResult, Message, ModelConfigError
from supersede_lib.models.openai_api import mark_long_lived
from supersede_lib.models.rate_limit import AdaptiveLimit

T = TypeVar("T")

logger = logging.getLogger(__name__)

AnswerQuestion = Callable[[Episode, ChatModel], Coroutine[Any, Any, QuestionResult]]


class Stopped(Exception):
    """Raised in place of a new model call once the run is stopping (never leaves the scheduler)."""


class StopGate:
    """The run's model, refusing new calls once `error` is set (calls in flight finish and are cached)."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.name = model.name
        self.error: ModelConfigError | None = None

    async def achat(self, messages: list[Message], **options: Any) -> ChatResult:
        if self.error is not None:
            raise Stopped()
        return await self.model.achat(messages, **options)

    async def aembed(self, texts: list[str]) -> EmbedResult:
        """The model's embedding call, refused like a chat call once the run is stopping."""
        if self.error is not None:
            raise Stopped()
        aembed = getattr(self.model, "aembed", None)
        if aembed is None:
            raise ModelConfigError(f"{self.name} serves no embeddings, which this memory policy needs")
        return await aembed(texts)

    def stop(self, error: ModelConfigError) -> None:
        if self.error is None:
            self.error = error
            logger.error("%s: stopping the run; calls already in flight finish and are kept", error)


@dataclass(frozen=True)
class ScheduledQuestions:
    """The questions that finished (in the given order), why the run stopped early if it did, and
    the concurrency limit's history for the manifest."""

    finished: list[QuestionResult]
    stopped_by: ModelConfigError | None
    concurrency: dict[str, Any]


async def run_questions(
    episodes: list[Episode],
    condition: str,
    model: ChatModel,
    answer: AnswerQuestion,
    *,
    concurrency: int,
    run_name: str,
    progress: bool | StudyProgress,
) -> ScheduledQuestions:
    """Answer every question with `answer(episode, gated_model)`, at most `concurrency` at once.

    `progress`: a study's bar to count on (left open), True for a bar of this run's own, False for none.
    """
    label = f"{condition} | {model.name}"
    server_slots = await _server_slots(model, concurrency, label)
    limit = AdaptiveLimit(min(concurrency, server_slots or concurrency), label=label)
    gate = StopGate(model)

    async def one(episode: Episode, bar: StudyProgress) -> QuestionResult | None:
        async with limit:
            if gate.error is not None:
                return None
            try:
                result = await answer(episode, gate)
            except Stopped:
                return None
            except ModelConfigError as error:
                gate.stop(error)
                return None
        bar.question_done(result.trajectory)
        return result

    with (
        progress_bar(progress, total=len(episodes), description=label, leave=False) as bar,
        bar.running(run_name),
    ):
        with limit.installed():  # the tasks below copy this context: their 429s reach `limit`
            tasks = _start_in_order(episodes, condition, limit.maximum, lambda episode: one(episode, bar))
        results = await _gather_or_cancel_all(tasks)
    return ScheduledQuestions(
        finished=[result for result in results if result is not None],
        stopped_by=gate.error,
        concurrency={**limit.stats(), "requested": concurrency, "server_slots": server_slots},
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
