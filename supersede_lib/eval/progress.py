"""One progress bar per study: questions done of all its runs, live calls vs cache hits, live tokens/s.

A study makes one `StudyProgress` with the number of questions all its runs will answer and
passes it to every `run_condition` call; a direct `run_condition(..., progress=True)` gets a bar
of its own (`progress_bar`). The runner reports each finished question's trajectory here, so the
counting lives in one place.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from tqdm.auto import tqdm


class StudyProgress:
    """One tqdm bar over a whole study; counts every run's questions and model calls.

    Tokens/s counts only live tokens (a cache hit costs none) over the time runs were in
    progress, so loading a model between runs does not drag the rate down. The counts are
    kept when the bar is disabled, which writes nothing.
    """

    def __init__(self, total: int, description: str, *, enabled: bool = True, leave: bool = True) -> None:
        self.total = total
        self.description = description
        self.done = 0  # questions finished, across every run
        self.live_calls = 0
        self.cached_calls = 0
        self.live_tokens = 0  # prompt + completion tokens of live calls
        self.current_run: str | None = None
        self._earlier_runs_s = 0.0
        self._run_started: float | None = None
        self._bar = tqdm(total=total, desc=description, disable=not enabled, leave=leave)

    def __enter__(self) -> StudyProgress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._bar.close()

    @contextmanager
    def running(self, run_label: str) -> Iterator[None]:
        """Name `run_label` (a condition, model or checkpoint) as the run in progress and time it."""
        self.current_run = run_label
        self._run_started = time.perf_counter()
        self._show()
        try:
            yield
        finally:
            self._earlier_runs_s += time.perf_counter() - self._run_started
            self._run_started = None

    def question_done(self, trajectory: dict[str, Any]) -> None:
        """Count one finished question from the runner's trajectory (its `turns` say live or cached)."""
        for turn in trajectory["turns"]:
            if turn["cached"]:
                self.cached_calls += 1
            else:
                self.live_calls += 1
                self.live_tokens += turn["prompt_tokens"] + turn["completion_tokens"]
        self.done += 1
        self._show()
        self._bar.update(1)

    @property
    def live_tokens_per_s(self) -> float:
        running_s = self._earlier_runs_s
        if self._run_started is not None:
            running_s += time.perf_counter() - self._run_started
        return self.live_tokens / max(running_s, 1e-9)

    def _show(self) -> None:
        postfix = {  # a dict keeps this order; tqdm sorts keyword arguments
            "live": self.live_calls,
            "cached": self.cached_calls,
            "tok_s": f"{self.live_tokens_per_s:.0f}",
            "run": self.current_run,
        }
        self._bar.set_postfix(postfix, refresh=False)


@contextmanager
def progress_bar(
    progress: bool | StudyProgress, *, total: int, description: str, leave: bool = True
) -> Iterator[StudyProgress]:
    """The study's bar when one was passed down (left open); else a bar of this call's own, closed after."""
    if isinstance(progress, StudyProgress):
        yield progress
        return
    with StudyProgress(total, description, enabled=progress, leave=leave) as own_bar:
        yield own_bar
