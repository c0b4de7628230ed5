"""Mem0 as a memory policy: the real `mem0ai` package, with every model call answered by the rollout's driver.

Mem0 (`mem0ai`, pinned in requirements.txt) runs unchanged: its `Memory.add` extracts facts from a session
with one chat call, embeds each fact, looks up similar memories in its vector store and asks a second chat
call to ADD, UPDATE, DELETE or leave (NONE) each one; `Memory.search` embeds the question and ranks the
memories by similarity. Only three things are ours:

- **the model behind it**: Mem0's LLM and embedder are two small bridge classes registered with Mem0's
  own factories. Each hands its request to this policy as a `PolicyCall` and blocks until the driver's
  reply comes back through `take_reply`, so the runner's cache, call counts and replay see every call
  and no second HTTP client exists. `Memory` runs in a worker thread of the policy for that reason.
- **where it keeps things**: Qdrant's in-process client (`QdrantClient(":memory:")`) as the vector store
  and SQLite `:memory:` as Mem0's history database, both gone when the episode ends; Mem0's telemetry
  is off (`MEM0_TELEMETRY=False` before the import, and checked after it) and its home folder
  (`MEM0_DIR`, where it writes an anonymous id at import) is a temporary folder of this process.
- **the date**: Mem0's extraction prompt says "Today's date is <the machine's date at import>"; we pass
  the same prompt (Mem0's `USER_MEMORY_EXTRACTION_PROMPT`) with the session's date instead, through
  Mem0's `custom_fact_extraction_prompt`, so a session is read as of when it happened and a rerun on
  another day asks the same calls (replay from the cache works).

A reply Mem0 cannot use (malformed JSON from a small model, an UPDATE naming no known memory) is what
Mem0 itself logs and skips; the policy catches those log records from its own threads and returns them
as the memory failure of that reply. An embedding reply of the wrong shape, or Mem0 raising, fails the
episode (`Mem0Error`, with the cause), never the run.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar

from supersede_lib.agent import prompts
from supersede_lib.agent.episode import Session
from supersede_lib.agent.memory.base import MemoryPolicy, PolicyCall, PolicyReply

BRIDGE_PROVIDER = "supersede_bridge"  # the name our LLM and embedder classes have in Mem0's factories
MEM0_USER_ID = "episode"  # one episode is one Mem0 user; every add and search is scoped to it
DIMENSION_PROBE_TEXT = "memory"  # embedded once per episode: Qdrant needs the vector size before any insert
MEM0_SEARCH_LIMIT = 100  # Mem0's own default for search and get_all
WORKER_WAIT_SECONDS = 900.0  # Mem0 between two model calls does only local work; this long means it hung
JSON_REPLY = {"type": "json_object"}  # what both of Mem0's chat calls ask for

# A B-character memory holds about ten facts; Mem0's update reply names each with its event, about
# 30 tokens apiece, so 384 tokens never cuts a reply it needs (a cut reply is a recorded failure).
MEM0_MAX_TOKENS = 384


class Mem0Error(RuntimeError):
    """Mem0 raised, its embedder got an unusable reply, or its worker stopped: the episode fails with this cause."""


@dataclass
class Mem0Operation:
    """One memory operation Mem0 reported for a session: ADD, UPDATE or DELETE of `text`."""

    session_index: int
    event: str
    text: str
    previous_text: str | None = None


def import_mem0() -> Any:
    """`mem0` imported with its telemetry off and its home folder in a temporary folder of this process.

    Mem0 reads MEM0_TELEMETRY and MEM0_DIR when its modules are first imported, and writes an anonymous
    id under MEM0_DIR at that moment; both are set first. If something imported Mem0 earlier with
    telemetry on, the module flags are turned off here all the same and its idle PostHog client closed."""
    os.environ["MEM0_TELEMETRY"] = "False"
    if "MEM0_DIR" not in os.environ:
        home = tempfile.mkdtemp(prefix="supersede-mem0-")
        atexit.register(shutil.rmtree, home, ignore_errors=True)
        os.environ["MEM0_DIR"] = home
    import mem0
    import mem0.memory.main as mem0_main
    import mem0.memory.telemetry as mem0_telemetry

    mem0_telemetry.MEM0_TELEMETRY = False
    mem0_main.MEM0_TELEMETRY = False
    mem0_telemetry.client_telemetry.close()  # made at import when telemetry was on; nothing queued to send
    return mem0


class _Closed(Exception):
    """Raised inside Mem0's thread when the policy closed while Mem0 waited for a reply."""


class _Bridge:
    """Mem0's side of the hand-over: put a `PolicyCall` out, block until its reply comes in.

    Remembers the names of the threads that asked (Mem0 runs `add` in a thread pool of its own), so the
    log watcher can tell this episode's Mem0 records from another episode's."""

    def __init__(self) -> None:
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()  # to the policy: call / done / error
        self.replies: queue.Queue[PolicyReply | None] = queue.Queue()  # from the policy; None: closed
        self.thread_names: set[str] = set()
        self.embedder_error: str | None = None
        self.closed = False

    def ask(self, call: PolicyCall) -> PolicyReply:
        if self.closed:
            raise _Closed("the memory policy was closed")
        self.thread_names.add(threading.current_thread().name)
        self.events.put(("call", call))
        reply = self.replies.get()
        if reply is None:
            raise _Closed("the memory policy was closed")
        return reply


class BridgeLLM:
    """Mem0's LLM: `generate_response` becomes a chat `PolicyCall` answered by the rollout's driver."""

    def __init__(
        self, config: Any = None, bridge: _Bridge | None = None, max_tokens: int | None = None
    ) -> None:
        self.config = config
        self.bridge = bridge
        self.max_tokens = max_tokens

    def generate_response(
        self,
        messages: list[dict[str, Any]],
        response_format: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str = "auto",
        **kwargs: Any,
    ) -> str:
        if self.bridge is None:
            raise Mem0Error("Mem0's LLM is not connected to a memory policy")
        call = PolicyCall(
            kind="chat",
            messages=list(messages),
            tools=tools,
            max_tokens=self.max_tokens,
            response_format=response_format,
        )
        return self.bridge.ask(call).text


class BridgeEmbedder:
    """Mem0's embedder: `embed` becomes an embed `PolicyCall`; a reply without exactly one vector of the
    episode's size is an embedder error that fails the episode (Mem0 alone would sometimes skip it)."""

    def __init__(self, config: Any = None, bridge: _Bridge | None = None, dims: int | None = None) -> None:
        self.config = config
        self.bridge = bridge
        self.dims = dims

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        if self.bridge is None:
            raise Mem0Error("Mem0's embedder is not connected to a memory policy")
        # Mem0's own OpenAI embedder sends the text with newlines as spaces; so do we
        reply = self.bridge.ask(PolicyCall(kind="embed", texts=[text.replace("\n", " ")]))
        vectors = list(reply.vectors)
        problem = _vector_problem(vectors, self.dims)
        if problem:
            self.bridge.embedder_error = problem
            raise Mem0Error(problem)
        return [float(value) for value in vectors[0]]


def _vector_problem(vectors: list[list[float]], dims: int | None) -> str | None:
    """Why an embedding reply for one text is unusable, or None."""
    if len(vectors) != 1:
        return f"the embedder returned {len(vectors)} vectors for 1 text"
    if not vectors[0]:
        return "the embedder returned an empty vector"
    if dims is not None and len(vectors[0]) != dims:
        return f"the embedder returned a vector of size {len(vectors[0])}, not the episode's {dims}"
    return None


def _register_bridge_providers(mem0_utils_factory: Any) -> None:
    """Our two classes in Mem0's factories, so `Memory` builds them like any provider of its own."""
    mem0_utils_factory.LlmFactory.register_provider(
        BRIDGE_PROVIDER, f"{__name__}.BridgeLLM", config_class=dict
    )
    mem0_utils_factory.EmbedderFactory.provider_to_class[BRIDGE_PROVIDER] = f"{__name__}.BridgeEmbedder"


class _FailureWatch(logging.Handler):
    """Mem0's warnings and errors logged from this episode's threads: each is a reply Mem0 could not use."""

    def __init__(self, bridge: _Bridge) -> None:
        super().__init__(level=logging.WARNING)
        self.bridge = bridge
        self.notes: list[str] = []
        self.lock_notes = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        if record.threadName in self.bridge.thread_names:
            with self.lock_notes:
                self.notes.append(f"mem0: {record.getMessage()}"[:500])

    def take(self) -> list[str]:
        with self.lock_notes:
            notes, self.notes = self.notes, []
        return notes


def mem0_date(session_date: str) -> str:
    """A LongMemEval date ("2023/05/30 (Tue) 23:40") in the form Mem0's prompt writes ("2023-05-30")."""
    head = session_date.strip()[:10]
    if (
        len(head) == 10
        and head[4] in "/-"
        and head[7] in "/-"
        and head.replace("/", "").replace("-", "").isdigit()
    ):
        return head.replace("/", "-")
    return session_date.strip()


def extraction_prompt_for(date: str, mem0_prompts: Any) -> str:
    """Mem0's own fact-extraction prompt, dated `date` instead of the day Mem0 was imported."""
    import re

    return re.sub(
        r"Today's date is [0-9]{4}-[0-9]{2}-[0-9]{2}\.",
        f"Today's date is {date}.",
        mem0_prompts.USER_MEMORY_EXTRACTION_PROMPT,
    )


@dataclass
class _Job:
    """One piece of work for Mem0's worker thread: add a session, or search for the question."""

    kind: str  # "add" or "search"
    payload: dict[str, Any] = field(default_factory=dict)


class Mem0Policy(MemoryPolicy):
    """Mem0's memory for one episode: `Memory.add` once per session, `Memory.search(question)` to answer.

    The answer call sees the searched memories in Mem0's own ranking (similarity to the question, best
    first), each line dated with the session that last wrote it, as many as fit in B: Mem0's answer path
    is its search, and ranking is what it offers. Before the question is known (the memory after each
    session, kept for the memory metrics) it renders every memory newest session first."""

    name: ClassVar[str] = "mem0"
    needs: ClassVar[frozenset[str]] = frozenset({"embeddings"})

    def __init__(
        self,
        budget_chars: int,
        prompt_variant: str = prompts.DEFAULT_PROMPT_VARIANT,
        *,
        max_tokens: int | None | str = MEM0_MAX_TOKENS,
    ) -> None:
        """`max_tokens` caps each of Mem0's chat calls (None: Mem0's own default, 2000 tokens, which a
        small model on a CPU server can spend minutes filling)."""
        super().__init__(budget_chars, prompt_variant)
        self._mem0 = import_mem0()
        from mem0.utils import factory as mem0_factory

        _register_bridge_providers(mem0_factory)
        self.max_tokens = max_tokens
        self.operations: list[Mem0Operation] = []
        self._bridge = _Bridge()
        self._watch = _FailureWatch(self._bridge)
        self._mem0_logger = logging.getLogger("mem0")
        self._mem0_logger.addHandler(self._watch)
        if self._mem0_logger.getEffectiveLevel() > logging.WARNING:
            self._mem0_logger.setLevel(logging.WARNING)
        self._memory: Any = None
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._job_running = False
        self._awaiting_reply = False
        self._next_event: tuple[str, Any] | None = None
        self._answer_memories: list[dict[str, Any]] | None = None
        self._closed_render: str | None = None
        self._worker = threading.Thread(target=self._work, name=f"mem0-policy-{id(self):x}", daemon=True)
        self._bridge.thread_names.add(self._worker.name)
        self._worker.start()

    # --- the policy interface -------------------------------------------------------------------

    def begin_session(self, session: Session, session_index: int) -> None:
        date = mem0_date(session.date)
        messages = [{"role": turn.role, "content": turn.content} for turn in session.turns]
        metadata = {"session_date": session.date, "session_index": session_index}
        self._start(
            _Job("add", {"messages": messages, "metadata": metadata, "date": date, "index": session_index})
        )

    def begin_answer(self, question: str, question_date: str) -> None:
        """The question is known: Mem0 searches its memories for it (one embed call)."""
        self._start(_Job("search", {"query": question}))

    def next_call(self) -> PolicyCall | None:
        if self._awaiting_reply:
            raise RuntimeError("next_call before take_reply answered Mem0's last call")
        if not self._job_running:
            return None
        kind, value = self._next_event or self._wait_event()
        self._next_event = None
        if kind == "call":
            self._awaiting_reply = True
            return value
        self._job_running = False
        if kind == "error":
            raise value
        return None

    def take_reply(self, reply: PolicyReply) -> str | None:
        if not self._awaiting_reply:
            raise RuntimeError("take_reply without a call from Mem0 waiting for it")
        self._awaiting_reply = False
        self._bridge.replies.put(reply)
        # wait until Mem0 has used the reply (its next call, or the end of the job), so what it logged
        # about this reply is this reply's memory failure
        self._next_event = self._wait_event()
        notes = self._watch.take()
        return "; ".join(notes) if notes else None

    def render(self) -> str:
        # between two calls Mem0's thread is parked in the bridge, so reading its store here is safe
        if self._memory is None:
            return ""
        if self._closed_render is not None:  # the store is gone: what it held when the policy closed
            return self._closed_render
        if self._answer_memories is not None:
            ranked = self._answer_memories
        else:
            everything = self._memory.get_all(user_id=MEM0_USER_ID, limit=MEM0_SEARCH_LIMIT)["results"]
            ranked = sorted(everything, key=_newest_first)
        return self._fit([_memory_line(item) for item in ranked])

    def close(self) -> None:
        if self._memory is not None and self._closed_render is None:
            # the runner reads the final memory after the answer closed the policy (the row's notes)
            self._closed_render = self.render()
        self._bridge.closed = True
        self._bridge.replies.put(None)
        self._jobs.put(None)
        self._worker.join(timeout=30)
        self._mem0_logger.removeHandler(self._watch)
        if self._memory is not None:
            self._memory.close()
            self._memory.vector_store.client.close()

    # --- the worker thread --------------------------------------------------------------------

    def _start(self, job: _Job) -> None:
        if self._job_running:
            raise RuntimeError("a new Mem0 job while the last one is still running")
        self._job_running = True
        self._jobs.put(job)

    def _wait_event(self) -> tuple[str, Any]:
        try:
            return self._bridge.events.get(timeout=WORKER_WAIT_SECONDS)
        except queue.Empty:
            return (
                "error",
                Mem0Error(f"Mem0 asked for nothing and did not finish in {WORKER_WAIT_SECONDS:.0f} s"),
            )

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                if self._memory is None:
                    self._memory = self._build_memory()
                result = self._run(job)
                if self._bridge.embedder_error:
                    raise Mem0Error(self._bridge.embedder_error)
                self._bridge.events.put(("done", result))
            except _Closed:
                return
            except Exception as error:  # noqa: BLE001 - whatever Mem0 raised fails this episode, with its cause
                cause = (
                    error
                    if isinstance(error, Mem0Error)
                    else Mem0Error(f"mem0 raised {type(error).__name__}: {error}")
                )
                cause.__cause__ = error if cause is not error else None
                self._bridge.events.put(("error", cause))
            finally:
                self._bridge.thread_names.intersection_update({self._worker.name})

    def _build_memory(self) -> Any:
        """Mem0's `Memory` for this episode, once the embedder's vector size is known."""
        from mem0.configs.base import MemoryConfig
        from mem0.embeddings.configs import EmbedderConfig
        from mem0.llms.configs import LlmConfig

        probe = list(self._bridge.ask(PolicyCall(kind="embed", texts=[DIMENSION_PROBE_TEXT])).vectors)
        problem = _vector_problem(probe, None)
        if problem:
            raise Mem0Error(problem)
        dims = len(probe[0])
        config = MemoryConfig(
            vector_store={"provider": "qdrant", "config": {"path": ":memory:", "embedding_model_dims": dims}},
            # Mem0's config checks provider names against its own list; ours is registered with its
            # factories, so these two sections are built without that check
            llm=LlmConfig.model_construct(provider=BRIDGE_PROVIDER, config={}),
            embedder=EmbedderConfig.model_construct(
                provider=BRIDGE_PROVIDER, config={"embedding_dims": dims}
            ),
            history_db_path=":memory:",
        )
        memory = self._mem0.Memory(config)
        memory.llm.bridge, memory.llm.max_tokens = self._bridge, self.max_tokens or _mem0_default_max_tokens()
        memory.embedding_model.bridge, memory.embedding_model.dims = self._bridge, dims
        return memory

    def _run(self, job: _Job) -> Any:
        if job.kind == "search":
            found = self._memory.search(job.payload["query"], user_id=MEM0_USER_ID, limit=MEM0_SEARCH_LIMIT)
            self._answer_memories = sorted(found["results"], key=_best_first)
            return None
        from mem0.configs import prompts as mem0_prompts

        self._memory.config.custom_fact_extraction_prompt = extraction_prompt_for(
            job.payload["date"], mem0_prompts
        )
        added = self._memory.add(
            job.payload["messages"], user_id=MEM0_USER_ID, metadata=job.payload["metadata"]
        )
        for item in added.get("results", []):
            self.operations.append(
                Mem0Operation(
                    job.payload["index"],
                    str(item.get("event")),
                    str(item.get("memory")),
                    item.get("previous_memory"),
                )
            )
        return added

    def _fit(self, lines: list[str]) -> str:
        """The lines, in order, that fit together in B (a line that does not fit is passed over for a
        shorter one after it); a first line longer than B alone is cut rather than leave the memory empty."""
        kept: list[str] = []
        used = 0
        for line in lines:
            cost = len(line) + (1 if kept else 0)
            if used + cost <= self.budget_chars:
                kept.append(line)
                used += cost
        if not kept and lines:
            return self.cap(lines[0])
        return "\n".join(kept)


def _mem0_default_max_tokens() -> int:
    from mem0.configs.llms.base import BaseLlmConfig

    return BaseLlmConfig().max_tokens


def _memory_line(item: dict[str, Any]) -> str:
    """One memory as the answer call sees it: the date of the session that last wrote it, then the text."""
    date = (item.get("metadata") or {}).get("session_date", "")
    return f"[{date[:10]}] {item.get('memory', '')}" if date else str(item.get("memory", ""))


def _session_index(item: dict[str, Any]) -> int:
    return int((item.get("metadata") or {}).get("session_index", -1))


def _newest_first(item: dict[str, Any]) -> tuple[int, str]:
    """Newest session first; within a session by text, so the order never depends on Mem0's random ids."""
    return (-_session_index(item), str(item.get("memory", "")))


def _best_first(item: dict[str, Any]) -> tuple[float, int, str]:
    """Mem0's ranking (highest score first); equal scores newest first, then by text, for a fixed order."""
    return (-float(item.get("score") or 0.0), -_session_index(item), str(item.get("memory", "")))
