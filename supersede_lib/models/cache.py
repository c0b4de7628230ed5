"""A persistent response cache, so reruns and resumed runs never repeat a finished model call.

Responses live in one SQLite file (WAL mode, busy timeout), written one row per call as soon
as the call returns: a run killed at any moment resumes from where it stopped. Many threads
and processes may read and write the same file at once.

The key is a SHA-256 of canonical JSON over everything that decides the reply: the backend's
cache namespace, the model name, messages, sampling parameters (plus any backend settings that
shape the reply, `cache_params`) and seed. It never holds the server's address, so a local server
on a new port still hits; two different servers serving the same model name need different
namespaces (`cache_namespace` in the model spec). Caching sampled calls (temperature > 0) is
sound only because the seed is part of the key; draw new samples with new seeds.

Recorded responses travel with results: `export_responses` writes every row to a gzipped JSONL
file (sorted, byte-stable) that can be committed beside a profile's outputs, and
`import_responses` loads one into a fresh cache, so a clone replays the calls instead of making
them. Each row keeps the git commit of the run that made the call (`made_by_commit`).
`CachedChatModel(..., replay=False)` makes every call live (and records it) without reading.

A damaged cache file is named with the way out (move it aside or delete it): at open time as a
`CacheCorruptError`; mid-run, `CachedChatModel` logs a warning and goes on without the cache, so
the run's own results are never lost to it.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import json
import logging
import os
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from supersede_lib.models.chat import ChatModel, ChatResult, Message, ModelConfigError

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 60.0
BEFORE_PROVENANCE = "recorded-before-provenance"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    latency_s REAL NOT NULL,
    model TEXT NOT NULL,
    created_at REAL NOT NULL,
    finish_reason TEXT,
    made_by_commit TEXT
)
"""
_EXPORTED_COLUMNS = (
    "key",
    "text",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "model",
    "finish_reason",
    "made_by_commit",
)


class CacheCorruptError(ModelConfigError):
    """The cache file cannot be read as a SQLite database; the message names it and the way out."""

    def __init__(self, path: Path, error: BaseException) -> None:
        super().__init__(
            f"response cache {path} is damaged or not a cache file ({type(error).__name__}: {error}): "
            f"move it aside (mv '{path}' '{path}.damaged') or delete it, then run again; "
            "the calls it held will be made again"
        )


def cache_key(backend: str, model: str, messages: list[Message], params: dict[str, Any], seed: int) -> str:
    """SHA-256 hex of the canonical JSON of one request (dict key order does not matter)."""
    payload = {"backend": backend, "model": model, "messages": messages, "params": params, "seed": seed}
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class ResponseCache:
    """SQLite-backed `key -> ChatResult` store; `hits`/`misses` count this instance's lookups."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        if self.path.is_dir():
            raise ValueError(
                f"cache path {self.path} is a folder: give a file such as {self.path / 'responses.db'}"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_file() and self.path.stat().st_size == 0:  # SQLite would read it as an empty cache
            raise CacheCorruptError(
                self.path, ValueError("the file is empty (0 bytes), so every call would be paid again")
            )
        self.hits = 0
        self.misses = 0
        self._counter_lock = threading.Lock()
        self._local = threading.local()  # one connection per thread (and per process, see _connection)
        try:
            connection = self._connection()
            connection.execute(_SCHEMA)
            self._add_missing_columns(connection)
        except sqlite3.DatabaseError as error:
            self.close()
            raise CacheCorruptError(self.path, error) from error

    @staticmethod
    def _add_missing_columns(connection: sqlite3.Connection) -> None:
        """Files written before a column existed get it (NULL for old rows)."""
        columns = {row[1] for row in connection.execute("PRAGMA table_info(responses)")}
        for column in ("finish_reason", "made_by_commit"):
            if column in columns:
                continue
            try:
                connection.execute(f"ALTER TABLE responses ADD COLUMN {column} TEXT")
            except sqlite3.OperationalError as error:  # another process added it first
                if "duplicate column" not in str(error):
                    raise

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

    def _fetchone(self, sql: str, parameters: tuple[Any, ...] = ()) -> Any:
        try:
            return self._connection().execute(sql, parameters).fetchone()
        except sqlite3.DatabaseError as error:
            raise CacheCorruptError(self.path, error) from error

    def get(self, key: str) -> ChatResult | None:
        """The stored result for `key`, or None; `CacheCorruptError` when the file cannot be read."""
        row = self._fetchone(
            "SELECT text, prompt_tokens, completion_tokens, latency_s, model, finish_reason, made_by_commit"
            " FROM responses WHERE key = ?",
            (key,),
        )
        with self._counter_lock:
            if row is None:
                self.misses += 1
            else:
                self.hits += 1
        if row is None:
            return None
        text, prompt_tokens, completion_tokens, latency_s, model, finish_reason, made_by_commit = row
        return ChatResult(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=latency_s,
            cached=True,
            model=model,
            finish_reason=finish_reason,
            made_by_commit=made_by_commit,
        )

    def put(self, key: str, result: ChatResult, *, made_by_commit: str | None = None) -> None:
        """Store one result (committed immediately; a later put for the same key wins)."""
        try:
            self._connection().execute(
                "INSERT OR REPLACE INTO responses (key, text, prompt_tokens, completion_tokens, latency_s,"
                " model, created_at, finish_reason, made_by_commit) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    result.text,
                    result.prompt_tokens,
                    result.completion_tokens,
                    result.latency_s,
                    result.model,
                    time.time(),
                    result.finish_reason,
                    made_by_commit,
                ),
            )
        except sqlite3.DatabaseError as error:
            raise CacheCorruptError(self.path, error) from error

    def export_responses(self, path: str | Path) -> int:
        """Write every stored response to a gzipped JSONL file, sorted by key; return the row count.

        The file is byte-stable (no timestamps, sorted rows), so re-exporting an unchanged cache
        leaves a committed file unchanged.
        """
        try:
            rows = (
                self._connection()
                .execute(f"SELECT {', '.join(_EXPORTED_COLUMNS)} FROM responses ORDER BY key")
                .fetchall()
            )
        except sqlite3.DatabaseError as error:
            raise CacheCorruptError(self.path, error) from error
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as handle:
            for row in rows:
                record = dict(zip(_EXPORTED_COLUMNS, row, strict=True))
                handle.write((json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
        # write-then-rename: two processes sharing a cache may export at once; neither leaves half a file
        partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
        partial.write_bytes(buffer.getvalue())
        os.replace(partial, target)
        return len(rows)

    def import_responses(self, path: str | Path) -> int:
        """Load an `export_responses` file; rows already present are kept. Returns rows added."""
        source = Path(path)
        added = 0
        try:
            with gzip.open(source, "rt", encoding="utf-8") as handle:
                records = [json.loads(line) for line in handle if line.strip()]
        except (OSError, EOFError, json.JSONDecodeError) as error:
            raise ValueError(
                f"{source}: not a recorded-responses file ({type(error).__name__}: {error})"
            ) from error
        connection = self._connection()
        try:
            connection.execute("BEGIN")
            for number, record in enumerate(records, start=1):
                missing = [column for column in _EXPORTED_COLUMNS if column not in record]
                if missing:
                    connection.execute("ROLLBACK")
                    raise ValueError(f"{source}: line {number} lacks {', '.join(missing)}")
                cursor = connection.execute(
                    "INSERT OR IGNORE INTO responses (key, text, prompt_tokens, completion_tokens, latency_s,"
                    " model, created_at, finish_reason, made_by_commit) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        record["key"],
                        record["text"],
                        record["prompt_tokens"],
                        record["completion_tokens"],
                        record["latency_s"],
                        record["model"],
                        time.time(),
                        record["finish_reason"],
                        record["made_by_commit"],
                    ),
                )
                added += cursor.rowcount
            connection.execute("COMMIT")
        except sqlite3.DatabaseError as error:
            raise CacheCorruptError(self.path, error) from error
        return added

    def __len__(self) -> int:
        return self._fetchone("SELECT COUNT(*) FROM responses")[0]

    def __contains__(self, key: str) -> bool:
        return self._fetchone("SELECT 1 FROM responses WHERE key = ?", (key,)) is not None

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
    time share one inner call (`deduplicated` counts the ones that waited). Failures are never
    stored, so a re-run tries them again. When the cache file turns out damaged mid-run, a
    warning names it and every later call goes straight to the inner model (`disabled` says why).
    """

    def __init__(
        self,
        inner: ChatModel,
        cache: ResponseCache,
        backend: str | None = None,
        *,
        replay: bool = True,
        commit: str | None = None,
    ) -> None:
        self.inner = inner
        self.cache = cache
        self.replay = replay  # False: every call is made live (and recorded), nothing is read back
        self.commit = commit  # the git commit recorded with each live call
        self.backend = backend or getattr(inner, "cache_namespace", None) or type(inner).__name__
        self.name = inner.name
        self.deduplicated = 0
        self.disabled: str | None = None  # why the cache stopped being used mid-run
        self._in_flight: dict[str, asyncio.Future[ChatResult]] = {}

    def key_for(self, messages: list[Message], max_tokens: int | None, temperature: float, seed: int) -> str:
        params = {"max_tokens": max_tokens, "temperature": temperature}
        params.update(getattr(self.inner, "cache_params", None) or {})
        return cache_key(self.backend, self.inner.name, messages, params, seed)

    def _disable(self, error: CacheCorruptError) -> None:
        if self.disabled is None:
            self.disabled = str(error)
            logger.warning("%s; continuing this run without the cache", error)

    def _lookup(self, key: str) -> ChatResult | None:
        if self.disabled is not None or not self.replay:
            return None
        try:
            return self.cache.get(key)
        except CacheCorruptError as error:
            self._disable(error)
            return None

    def _store(self, key: str, result: ChatResult) -> None:
        if self.disabled is not None:
            return
        try:
            self.cache.put(key, result, made_by_commit=self.commit)
        except CacheCorruptError as error:
            self._disable(error)

    async def achat(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> ChatResult:
        key = self.key_for(messages, max_tokens, temperature, seed)
        stored = self._lookup(key)
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
            self._store(key, result)
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
        extra = {
            "deduplicated": self.deduplicated,
            "backend": self.backend,
            "disabled": self.disabled,
            "replay": self.replay,
        }
        try:
            return {**self.cache.stats(), **extra}
        except CacheCorruptError as error:
            return {"path": str(self.cache.path), "error": str(error), **extra}


class RecordedRepliesOnly:
    """Stands in for a model whose weights are not here: the cache answers, a miss is an error.

    It carries the name and cache namespace the model had when its replies were recorded, so
    `CachedChatModel` computes the same keys.
    """

    def __init__(self, name: str, cache_namespace: str) -> None:
        self.name = name
        self.cache_namespace = cache_namespace

    async def achat(self, messages: list, **_: Any) -> Any:
        raise ModelConfigError(
            f"{self.name}: no recorded reply for this call and the model's weights are not in this "
            "checkout; train and evaluate again with `python -m supersede_lib reproduce --live --only 06,07`"
        )
