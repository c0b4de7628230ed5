"""Adaptive concurrency: fewer requests in flight while a server keeps answering 429 or timing out.

A runner holds an `AdaptiveLimit` (an async context manager bounding how many questions run at
once) and installs it for the length of a run with `limit.installed()`. Backends report every
rate-limited attempt (`report_rate_limited`), every timed-out one (`report_timeout`: a server
that queues requests pushes back with time) and every successful call (`report_success`); the
reports reach the limit installed in the current context (a `ContextVar`, so two runs on one
event loop never share a limit) and do nothing when none is installed.

The limit follows AIMD, as TCP does: halve on rate limiting (at most once per `cooldown_s`, so
one burst of 429s from every request in flight counts once), add one back after a full window
of successes (as many successes in a row as the current limit). Changes are logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

logger = logging.getLogger(__name__)

DEFAULT_COOLDOWN_S = 1.0

_installed: ContextVar[AdaptiveLimit | None] = ContextVar("supersede_adaptive_limit", default=None)


def report_rate_limited() -> None:
    """Tell the installed limit (if any) that a request was rate limited (HTTP 429)."""
    limit = _installed.get()
    if limit is not None:
        limit.on_rate_limited()


def report_timeout() -> None:
    """Tell the installed limit (if any) that a request timed out: a server that queues requests
    (one llama.cpp slot, a busy vLLM) pushes back with time, not with 429s."""
    limit = _installed.get()
    if limit is not None:
        limit.on_rate_limited(reason="timeout")


def report_success() -> None:
    """Tell the installed limit (if any) that a call succeeded."""
    limit = _installed.get()
    if limit is not None:
        limit.on_success()


class AdaptiveLimit:
    """An async semaphore whose size shrinks under rate limiting and grows back on success."""

    def __init__(
        self, maximum: int, *, minimum: int = 1, cooldown_s: float | None = None, label: str = ""
    ) -> None:
        if not 1 <= minimum <= maximum:
            raise ValueError(f"need 1 <= minimum <= maximum, got minimum={minimum}, maximum={maximum}")
        self.maximum = maximum
        self.minimum = minimum
        self.cooldown_s = DEFAULT_COOLDOWN_S if cooldown_s is None else cooldown_s
        self.label = label
        self.limit = maximum
        self.lowest = maximum
        self.in_flight = 0
        self.rate_limited = 0
        self.timeouts = 0
        self.decreases = 0
        self.increases = 0
        self._successes_in_a_row = 0
        self._last_decrease = float("-inf")
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def __aenter__(self) -> AdaptiveLimit:
        if self.in_flight < self.limit and not self._waiters:
            self.in_flight += 1
            return self
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # granted just as it was cancelled
                self._release()
            else:
                self._waiters.remove(waiter)
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._release()

    def _release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    def on_rate_limited(self, reason: str = "HTTP 429") -> None:
        """Back-pressure: a 429 (`reason` "HTTP 429") or a timeout ("timeout")."""
        if reason == "timeout":
            self.timeouts += 1
        else:
            self.rate_limited += 1
        self._successes_in_a_row = 0
        now = time.monotonic()
        if self.limit <= self.minimum or now - self._last_decrease < self.cooldown_s:
            return
        previous, self.limit = self.limit, max(self.minimum, self.limit // 2)
        self.lowest = min(self.lowest, self.limit)
        self.decreases += 1
        self._last_decrease = now
        logger.warning(
            "%s: back-pressure (%s); lowering concurrency %d -> %d", self.label, reason, previous, self.limit
        )

    def on_success(self) -> None:
        self._successes_in_a_row += 1
        if self.limit >= self.maximum or self._successes_in_a_row < self.limit:
            return
        self._successes_in_a_row = 0
        self.limit += 1
        self.increases += 1
        logger.info("%s: no rate limiting for a while; raising concurrency to %d", self.label, self.limit)
        self._wake()

    @contextmanager
    def installed(self) -> Iterator[AdaptiveLimit]:
        """Route `report_rate_limited` / `report_success` in this context to this limit."""
        token = _installed.set(self)
        try:
            yield self
        finally:
            _installed.reset(token)

    def stats(self) -> dict[str, Any]:
        """The limit's history for a run manifest."""
        return {
            "initial": self.maximum,
            "final": self.limit,
            "lowest": self.lowest,
            "rate_limited_attempts": self.rate_limited,
            "timed_out_attempts": self.timeouts,
            "decreases": self.decreases,
            "increases": self.increases,
        }
