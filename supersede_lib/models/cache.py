"""A persistent response cache, so reruns and resumed runs never repeat a finished model call.

Responses live in one SQLite file (WAL mode, busy timeout), written one row per call as soon
as the call returns: a run killed at any moment resumes from where it stopped. Many threads
and processes may read and write the same file at once.

The key is a SHA-256 of canonical JSON over everything that decides the reply: the backend's
cache namespace, the model name, messages, sampling parameters (plus any backend settings that
shape the reply, `cache_params`) and seed and, for a model behind a self-hosted server, what served
it (`served_identity`: the endpoint, credentials stripped, and what the server reports it serves),
since llama.cpp and vLLM answer under any name. In-process models and OpenAI's own endpoint are
keyed without it (their name says what answers), so recorded replies keep their keys. A
`cache_namespace` given in the model spec shares replies on purpose across endpoints. Caching
sampled calls (temperature > 0) is sound only because the seed is part of the key; draw new samples
with new seeds.

Recorded responses travel with results: `export_responses` writes every row to a gzipped JSONL
file (sorted, byte-stable) that can be committed beside a profile's outputs, and
`import_responses` loads one into a fresh cache, so a clone replays the calls instead of making
them. Each row keeps the git commit of the run that made the call (`made_by_commit`).
`CachedChatModel(..., replay=False)` makes every call live (and records it) without reading.

A damaged cache file is named with the way out (move it aside or delete it): at open time as a
`CacheCorruptError`; mid-run, `CachedChatModel` raises it too (a `ModelConfigError`: the runner
keeps the finished questions, writes them and stops), unless the user allowed
`on_damage="run_uncached"`: then a warning names the file, every later call is made live and
counted as a miss (`bypassed`), and the run's manifest carries the warning.

Nothing is paid twice. Identical requests in flight in one process share one call; across
processes sharing one file, a miss is claimed with an OS file lock (`filelock`, `<cache>.locks/<key>.lock`)
before the call is made: a second process asking the same thing waits for the lock, then reads the
first one's reply from the cache. A process that dies releases its locks with it. The lock file is
removed after use; a process that raced that removal re-reads the cache once it holds a lock, so it
too finds the stored reply (only a call that failed can then be made twice). An empty reply is stored as tentative and asked
again by the next run; only a second empty reply for the same request is final (a transient
`content: null` is never replayed forever). Recorded responses are always final.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from typing import Any, Literal

import filelock

from supersede_lib.models.chat import (
    ChatModel,
    ChatResult,
    EmbedResult,
    Message,
    ModelConfigError,
    missing_capabilities,
)

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 60.0
BEFORE_PROVENANCE = "recorded-before-provenance"
CLAIM_POLL_S = 0.05  # how often a process waiting for another's call looks again
# how long a server that did not say what it serves is keyed as unidentified before it is asked again:
# asking at every call would hold each call for the probe's timeout
IDENTITY_RETRY_S = 30.0
DAMAGE_POLICIES = ("stop", "run_uncached")
DamagePolicy = Literal["stop", "run_uncached"]

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
    made_by_commit TEXT,
    tentative INTEGER,
    tool_calls TEXT
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


def cache_key(
    backend: str,
    model: str,
    messages: list[Message],
    params: dict[str, Any],
    seed: int,
    served_by: dict[str, Any] | None = None,
) -> str:
    """SHA-256 hex of the canonical JSON of one request (dict key order does not matter). `served_by`
    (what answered) enters the payload only when given, so keys without it never change."""
    payload = {"backend": backend, "model": model, "messages": messages, "params": params, "seed": seed}
    if served_by is not None:
        payload["served_by"] = served_by
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _tool_calls_text(tool_calls: tuple[dict[str, str], ...]) -> str | None:
    """A reply's tool calls as stored (JSON text), None for a reply without any."""
    return json.dumps(list(tool_calls), ensure_ascii=False, sort_keys=True) if tool_calls else None


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
        # another process creating the file leaves it empty until its schema is written: open under a lock
        with filelock.FileLock(self._locks_folder() / "open.lock"):
            if self.path.is_file() and self.path.stat().st_size == 0:  # SQLite would read it as empty
                raise CacheCorruptError(
                    self.path, ValueError("the file is empty (0 bytes), so every call would be paid again")
                )
            try:
                connection = self._connection()
                connection.execute(_SCHEMA)
                self._add_missing_columns(connection)
            except sqlite3.DatabaseError as error:
                self.close()
                raise CacheCorruptError(self.path, error) from error

    def _locks_folder(self) -> Path:
        folder = self.path.with_name(self.path.name + ".locks")
        folder.mkdir(exist_ok=True)
        return folder

    @staticmethod
    def _add_missing_columns(connection: sqlite3.Connection) -> None:
        """Files written before a column existed get it (NULL for old rows)."""
        columns = {row[1] for row in connection.execute("PRAGMA table_info(responses)")}
        for column, sql_type in (
            ("finish_reason", "TEXT"),
            ("made_by_commit", "TEXT"),
            ("tentative", "INTEGER"),
            ("tool_calls", "TEXT"),
        ):
            if column in columns:
                continue
            try:
                connection.execute(f"ALTER TABLE responses ADD COLUMN {column} {sql_type}")
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

    def get(self, key: str, *, count: bool = True) -> ChatResult | None:
        """The final result stored for `key`, or None (a tentative empty reply is a miss);
        `CacheCorruptError` when the file cannot be read. `count=False` leaves hits/misses alone."""
        row = self._fetchone(
            "SELECT text, prompt_tokens, completion_tokens, latency_s, model, finish_reason, made_by_commit,"
            " tool_calls FROM responses WHERE key = ? AND NOT coalesce(tentative, 0)",
            (key,),
        )
        if count:
            with self._counter_lock:
                if row is None:
                    self.misses += 1
                else:
                    self.hits += 1
        if row is None:
            return None
        (
            text,
            prompt_tokens,
            completion_tokens,
            latency_s,
            model,
            finish_reason,
            made_by_commit,
            tool_calls,
        ) = row
        return ChatResult(
            tool_calls=tuple(json.loads(tool_calls)) if tool_calls else (),
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=latency_s,
            cached=True,
            model=model,
            finish_reason=finish_reason,
            made_by_commit=made_by_commit,
        )

    def recorded_latencies(self, limit: int) -> list[float]:
        """Seconds each of the latest `limit` live calls took, newest first (replies imported without
        a latency left out): how long a call to this cache's model takes, for a time estimate."""
        try:
            rows = (
                self._connection()
                .execute(
                    "SELECT latency_s FROM responses WHERE latency_s > 0 AND NOT coalesce(tentative, 0)"
                    " ORDER BY created_at DESC LIMIT ?",
                    (limit,),
                )
                .fetchall()
            )
        except sqlite3.DatabaseError as error:
            raise CacheCorruptError(self.path, error) from error
        return [float(row[0]) for row in rows]

    def is_tentative(self, key: str) -> bool:
        """Whether `key` holds a tentative (once-seen empty) reply."""
        return self._fetchone("SELECT 1 FROM responses WHERE key = ? AND tentative", (key,)) is not None

    def lock_for(self, key: str) -> filelock.FileLock:
        """The cross-process lock that claims `key` (one file per key: a lock shared by several keys
        would make unrelated calls of one process wait for each other)."""
        return filelock.FileLock(self._locks_folder() / f"{key}.lock")

    def put(
        self, key: str, result: ChatResult, *, made_by_commit: str | None = None, tentative: bool = False
    ) -> None:
        """Store one result (committed immediately; a later put for the same key wins). A tentative
        row is not a hit (`get` skips it): the next run asks again."""
        try:
            self._connection().execute(
                "INSERT OR REPLACE INTO responses (key, text, prompt_tokens, completion_tokens, latency_s,"
                " model, created_at, finish_reason, made_by_commit, tentative, tool_calls)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                    int(tentative),
                    _tool_calls_text(result.tool_calls),
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
                .execute(f"SELECT {', '.join(_EXPORTED_COLUMNS)}, tool_calls FROM responses ORDER BY key")
                .fetchall()
            )
        except sqlite3.DatabaseError as error:
            raise CacheCorruptError(self.path, error) from error
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as handle:
            for row in rows:
                record = dict(zip(_EXPORTED_COLUMNS, row[:-1], strict=True))
                if (
                    row[-1] is not None
                ):  # only replies with tool calls carry the key: other rows stay as they were
                    record["tool_calls"] = row[-1]
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
                    " model, created_at, finish_reason, made_by_commit, tool_calls)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                        record.get("tool_calls"),
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
    time share one inner call (`deduplicated` counts the ones that waited); across processes a
    miss is claimed with the cache's file lock first (`shared` counts replies another process
    paid for while this one waited). Failures are never stored, so a re-run tries them again;
    an empty reply is stored tentatively until it repeats.

    When the cache file turns out damaged mid-run, `on_damage` decides: "stop" (the default)
    raises `CacheCorruptError` (naming the file and the way out) at this call or the next;
    "run_uncached" logs a warning and makes every later call live (`disabled` says why,
    `bypassed` counts those calls, and the hit rate counts them as misses).
    """

    def __init__(
        self,
        inner: ChatModel,
        cache: ResponseCache,
        backend: str | None = None,
        *,
        replay: bool = True,
        commit: str | None = None,
        on_damage: DamagePolicy = "stop",
    ) -> None:
        if on_damage not in DAMAGE_POLICIES:
            raise ValueError(f"on_damage must be one of {', '.join(DAMAGE_POLICIES)}, got {on_damage!r}")
        self.inner = inner
        self.cache = cache
        self.replay = replay  # False: every call is made live (and recorded), nothing is read back
        self.commit = commit  # the git commit recorded with each live call
        self.on_damage = on_damage
        self.backend = backend or getattr(inner, "cache_namespace", None) or type(inner).__name__
        self.name = inner.name
        self.deduplicated = 0
        self.shared = 0
        self.bypassed = 0
        self.disabled: str | None = None  # why the cache stopped being used mid-run
        self._damage: CacheCorruptError | None = None
        self._in_flight: dict[str, asyncio.Future[ChatResult]] = {}
        self._served_by: dict[str, Any] | None = None
        self._served_by_known = False  # asked, and the answer keeps (a server not reached is asked again)
        self._served_by_asked_at: float | None = None  # monotonic time of the last unanswered probe
        self._identity_lock = threading.Lock()  # one probe at a time, however many calls start at once

    def served_by(self) -> dict[str, Any] | None:
        """What answers the inner model's calls (its `served_identity`), part of every key; None for a
        model whose name says it (in-process models, OpenAI's endpoint, a chosen `cache_namespace`).
        A server that did not say is asked again `IDENTITY_RETRY_S` later, its calls keyed apart meanwhile."""
        if self._served_by_known:
            return self._served_by
        identify = getattr(self.inner, "served_identity", None)
        if not callable(identify):
            self._served_by_known = True
            return None
        with self._identity_lock:
            asked_at = self._served_by_asked_at
            if not self._served_by_known and (
                asked_at is None or time.monotonic() - asked_at >= IDENTITY_RETRY_S
            ):
                self._served_by = identify()
                self._served_by_known = self._served_by is None or not self._served_by.get("unreachable")
                self._served_by_asked_at = time.monotonic()
            return self._served_by

    def key_for(
        self,
        messages: list[Message],
        max_tokens: int | None,
        temperature: float,
        seed: int,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> str:
        return self._key(messages, max_tokens, temperature, seed, self.served_by(), tools, response_format)

    def _key(
        self,
        messages: list[Message],
        max_tokens: int | None,
        temperature: float,
        seed: int,
        served_by: dict[str, Any] | None,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> str:
        """The request's key; `tools` and `response_format` enter it only when given, so a call without
        them keeps its key."""
        params: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature}
        params.update(getattr(self.inner, "cache_params", None) or {})
        params.update(_chat_options(tools, response_format))
        return cache_key(self.backend, self.inner.name, messages, params, seed, served_by)

    def embed_key(self, texts: list[str], served_by: dict[str, Any] | None) -> str:
        """The key of an embedding call: the texts and the embedding model, never a chat call's key."""
        params = {"embed": list(texts), "embedding_model": getattr(self.inner, "embedding_model", None)}
        return cache_key(self.backend, self.inner.name, [], params, 0, served_by)

    def missing_capabilities(self, needs: frozenset[str]) -> dict[str, str]:
        """What the wrapped model cannot serve (`models.chat.missing_capabilities`)."""
        return missing_capabilities(self.inner, needs)

    async def aembed(self, texts: list[str]) -> EmbedResult:
        """The wrapped model's `aembed` through the cache: a stored call is replayed (vectors kept as
        JSON text in the reply column), a new one made once and stored."""
        served_by = self._served_by if self._served_by_known else await asyncio.to_thread(self.served_by)
        key = self.embed_key(texts, served_by)
        usable = self._check_usable()
        stored = self._lookup(key) if usable else None
        if stored is None and usable and self.replay:
            async with self._claim(key) as stored:
                if stored is None:
                    return await self._embed_and_store(key, texts)
        if stored is None:
            return await self._embed_and_store(key, texts)
        vectors = tuple(tuple(vector) for vector in json.loads(stored.text))
        return EmbedResult(
            vectors=vectors,
            prompt_tokens=stored.prompt_tokens,
            cached=True,
            model=stored.model,
            made_by_commit=stored.made_by_commit,
        )

    async def _embed_and_store(self, key: str, texts: list[str]) -> EmbedResult:
        aembed = getattr(self.inner, "aembed", None)
        if aembed is None:
            raise ModelConfigError(f"{self.name}: this backend serves no embeddings")
        result: EmbedResult = await aembed(texts)
        stored = ChatResult(
            text=json.dumps([list(vector) for vector in result.vectors]),
            prompt_tokens=result.prompt_tokens,
            latency_s=result.latency_s,
            model=result.model or self.name,
        )
        if self._damage is None:
            self._store(key, stored)
        return result

    def _damaged(self, error: CacheCorruptError) -> None:
        """Remember the damage; under "run_uncached" warn once and go on without the cache."""
        if self._damage is None:
            self._damage = error
            if self.on_damage == "run_uncached":
                self.disabled = str(error)
                logger.warning("%s; continuing this run without the cache (on_damage=run_uncached)", error)

    def _check_usable(self) -> bool:
        """False when the cache is bypassed; raises the damage under the "stop" policy."""
        if self._damage is None:
            return True
        if self.on_damage == "stop":
            raise self._damage
        self.bypassed += 1
        return False

    def _lookup(self, key: str, *, count: bool = True) -> ChatResult | None:
        if not self.replay or self.disabled is not None:
            return None
        try:
            return self.cache.get(key, count=count)
        except CacheCorruptError as error:
            self._damaged(error)
            self._check_usable()  # "stop" raises here
            return None

    def _store(self, key: str, result: ChatResult) -> None:
        """Store a reply; an empty one is final only when the same request was empty before."""
        try:
            empty = not result.text.strip() and not result.tool_calls
            tentative = empty and not self.cache.is_tentative(key)
            self.cache.put(key, result, made_by_commit=self.commit, tentative=tentative)
        except CacheCorruptError as error:
            self._damaged(error)  # this reply is returned; "stop" raises at the next call

    @contextlib.asynccontextmanager
    async def _claim(self, key: str) -> Any:
        """Hold the key's cross-process lock; yields a reply another process stored meanwhile, or None."""
        lock = self.cache.lock_for(key)
        while True:
            try:
                lock.acquire(timeout=0)  # never blocks the event loop: poll instead
                break
            except filelock.Timeout:
                await asyncio.sleep(CLAIM_POLL_S)
        try:
            stored = self._lookup(key, count=False)  # stored by another process meanwhile?
            if stored is not None:
                self.shared += 1
            yield stored
        finally:
            lock.release()
            with contextlib.suppress(OSError):
                os.unlink(lock.lock_file)  # one file per call made would pile up otherwise

    async def achat(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> ChatResult:
        # the first call asks the server what it serves: off the event loop, the other calls go on
        served_by = self._served_by if self._served_by_known else await asyncio.to_thread(self.served_by)
        key = self._key(messages, max_tokens, temperature, seed, served_by, tools, response_format)
        usable = self._check_usable()
        stored = self._lookup(key) if usable else None
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
            result = await self._call(
                key,
                messages,
                max_tokens,
                temperature,
                seed,
                _chat_options(tools, response_format),
                claim=usable and self.replay,
            )
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

    async def _call(
        self,
        key: str,
        messages: list[Message],
        max_tokens: int | None,
        temperature: float,
        seed: int,
        options: dict[str, Any],
        *,
        claim: bool,
    ) -> ChatResult:
        """The inner call (under the key's cross-process claim when the cache is read), stored."""
        async with self._claim(key) if claim else contextlib.nullcontext() as stored:
            if stored is not None:
                return replace(stored, cached=True, latency_s=0.0)
            result = await self.inner.achat(  # a backend without tools is never sent the keyword
                messages, max_tokens=max_tokens, temperature=temperature, seed=seed, **options
            )
            if self._damage is None:
                self._store(key, result)
            return result

    def stats(self) -> dict[str, Any]:
        extra = {
            "deduplicated": self.deduplicated,
            "shared": self.shared,
            "bypassed": self.bypassed,
            "backend": self.backend,
            "disabled": self.disabled,
            "replay": self.replay,
        }
        if self._served_by is not None:  # only self-hosted servers: other models' manifests stay as they were
            # one JSON string, not a dict: a manifest's per-run counters would subtract its numbers
            extra["served_by"] = json.dumps(self._served_by, sort_keys=True)
        hits, misses = self.cache.hits, self.cache.misses + self.bypassed
        counts = {
            "hits": hits,
            "misses": misses,
            "hit_rate": hits / (hits + misses) if hits + misses else 0.0,
        }
        try:
            return {**self.cache.stats(), **counts, **extra}
        except CacheCorruptError as error:
            return {"path": str(self.cache.path), "error": str(error), **counts, **extra}


class RecordedRepliesOnly:
    """Stands in for a model whose weights are not here: the cache answers, a miss is an error.

    It carries the name and cache namespace the model had when its replies were recorded, so
    `CachedChatModel` computes the same keys.
    """

    def __init__(self, name: str, cache_namespace: str) -> None:
        self.name = name
        self.cache_namespace = cache_namespace

    def missing_capabilities(self, needs: frozenset[str]) -> dict[str, str]:
        """Nothing is missing: recorded replies answer every call they hold, tool calls and vectors too."""
        return {}

    async def aembed(self, texts: list[str]) -> Any:
        return await self.achat([])

    async def achat(self, messages: list, **_: Any) -> Any:
        raise ModelConfigError(
            f"{self.name}: no recorded reply for this call and the model's weights are not in this "
            "checkout; train and evaluate again with `python -m supersede_lib reproduce --live --only 06,07`"
        )


def _chat_options(
    tools: list[dict[str, Any]] | None, response_format: dict[str, Any] | None
) -> dict[str, Any]:
    """The optional keywords of a chat call that were given (tools, a response format), and only those."""
    return {name: value for name, value in (("tools", tools), ("response_format", response_format)) if value}
