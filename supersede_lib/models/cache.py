"""A persistent response cache, so reruns and resumed runs never repeat a finished model call.

Responses live in one SQLite file (WAL mode, busy timeout), written one row per call as soon
as the call returns: a run killed at any moment resumes from where it stopped. Many threads
and processes may read and write the same file at once.

The key is a SHA-256 of canonical JSON over everything that decides the reply: backend,
model, messages, sampling parameters and seed. Caching sampled calls (temperature > 0) is
sound only because the seed is part of the key; draw new samples with new seeds.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from supersede_lib.models.chat import ChatModel, ChatResult, Message

BUSY_TIMEOUT_S = 60.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    latency_s REAL NOT NULL,
    model TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""


def cache_key(backend: str, model: str, messages: list[Message], params: dict[str, Any], seed: int) -> str:
    """SHA-256 hex of the canonical JSON of one request (dict key order does not matter)."""
    payload = {"backend": backend, "model": model, "messages": messages, "params": params, "seed": seed}
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """SQLite-backed `key -> ChatResult` store; `hits`/`misses` count this instance's lookups."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        if self.path.is_dir():
            raise ValueError(
                f"cache path {self.path} is a folder: give a file such as {self.path / 'responses.db'}"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0
        self._counter_lock = threading.Lock()
        self._local = threading.local()  # one connection per thread (and per process, see _connection)
        with self._connection() as connection:
            connection.execute(_SCHEMA)

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection; reopened after a fork, since SQLite handles must not cross processes."""
        connection = getattr(self._local, "connection", None)
        if connection is not None and self._local.pid == os.getpid():
            return connection
        connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        self._local.connection = connection
        self._local.pid = os.getpid()
        return connection

    def get(self, key: str) -> ChatResult | None:
        row = (
            self._connection()
            .execute(
                "SELECT text, prompt_tokens, completion_tokens, latency_s, model FROM responses WHERE key = ?",
                (key,),
            )
            .fetchone()
        )
        with self._counter_lock:
            if row is None:
                self.misses += 1
            else:
                self.hits += 1
        if row is None:
            return None
        text, prompt_tokens, completion_tokens, latency_s, model = row
        return ChatResult(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=latency_s,
            cached=True,
            model=model,
        )

    def put(self, key: str, result: ChatResult) -> None:
        """Store one result (committed immediately; a later put for the same key wins)."""
        self._connection().execute(
            "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                result.text,
                result.prompt_tokens,
                result.completion_tokens,
                result.latency_s,
                result.model,
                time.time(),
            ),
        )

    def __len__(self) -> int:
        return self._connection().execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def __contains__(self, key: str) -> bool:
        return (
            self._connection().execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone() is not None
        )

    def stats(self) -> dict[str, Any]:
        lookups = self.hits + self.misses
        return {
            "path": str(self.path),
            "entries": len(self),
            "hits": self.hits,
            "misses": self.misses,
            "hit_rate": self.hits / lookups if lookups else 0.0,
        }

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        connection = getattr(self._local, "connection", None)
        if connection is not None and self._local.pid == os.getpid():
            connection.close()
        self._local = threading.local()


class CachedChatModel:
    """A `ChatModel` that answers repeated requests from a `ResponseCache`.

    A hit returns the stored reply with `cached=True` and `latency_s=0`. A miss calls the inner
    model and stores the reply before returning it. Identical requests in flight at the same
    time share one inner call (`deduplicated` counts the ones that waited).
    """

    def __init__(self, inner: ChatModel, cache: ResponseCache, backend: str | None = None) -> None:
        self.inner = inner
        self.cache = cache
        self.backend = backend or getattr(inner, "cache_namespace", None) or type(inner).__name__
        self.name = inner.name
        self.deduplicated = 0
        self._in_flight: dict[str, asyncio.Future[ChatResult]] = {}

    def key_for(self, messages: list[Message], max_tokens: int | None, temperature: float, seed: int) -> str:
        params = {"max_tokens": max_tokens, "temperature": temperature}
        return cache_key(self.backend, self.inner.name, messages, params, seed)

    async def achat(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> ChatResult:
        key = self.key_for(messages, max_tokens, temperature, seed)
        stored = self.cache.get(key)
        if stored is not None:
            return replace(stored, cached=True, latency_s=0.0)
        pending = self._in_flight.get(key)
        if pending is not None:
            self.deduplicated += 1
            result = await asyncio.shield(pending)
            return replace(result, cached=True, latency_s=0.0)
        future: asyncio.Future[ChatResult] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            result = await self.inner.achat(
                messages, max_tokens=max_tokens, temperature=temperature, seed=seed
            )
            self.cache.put(key, result)
            future.set_result(result)
            return result
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # mark retrieved: no "never retrieved" warning when nobody waited
            raise
        finally:
            del self._in_flight[key]

    def stats(self) -> dict[str, Any]:
        return {**self.cache.stats(), "deduplicated": self.deduplicated, "backend": self.backend}
