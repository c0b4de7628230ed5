"""A local OpenAI-compatible server: scripted fakes for tests and `make bench`, real models for `vf-eval`.

`LocalOpenAIServer` answers `POST /v1/chat/completions`, `POST /v1/embeddings` (deterministic
bag-of-words vectors; `embeddings=False` answers 501 as llama.cpp does when started without them),
`GET /v1/models` (and, given `slots` or `tools=False`, llama.cpp's `GET /props` with `total_slots` and
`chat_template_caps.supports_tools`) on 127.0.0.1 from a
background thread, one thread per connection, so many requests can wait out `latency_s` at
once. It logs every request body, and can play a script of failures first::

    with LocalOpenAIServer(latency_s=0.05, failures=[("status", 429), ("malformed", None)]) as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url)
        ...
        server.request_count  # every chat request received, failed ones included
        server.get_paths  # every GET's path (/v1/models, /props, ...), in order

Failure actions, consumed one per chat request in order (then normal replies):
`("status", code)` an OpenAI-style error body with that HTTP status; `("retry_after", seconds)`
a 429 with a `Retry-After` header; `("sleep", seconds)` wait before answering (client timeouts);
`("malformed", None)` a 200 whose body is not JSON; `("missing_choices", None)` a 200 JSON body
without `choices`; `("empty_choices", None)` a 200 with `choices: []`; `("close", None)` drop the
connection without answering; `("null_content", finish_reason)` a 200 whose message content is
null (finish_reason "length" is how a reasoning model that spent its budget answers);
`("cut", n)` the responder's reply cut to its first n characters with finish_reason "length";
`("echo_key", status)` an error with that status whose message quotes the request's API key, as
some servers do ("Incorrect API key provided: sk-..."): what a run stores must never hold it.

A responder can also fail one request on its own terms, e.g. every request of one question:
`raise ScriptedFailure(("status", 429))` (any kind but "sleep" and "cut").

A client that drops its connection (a timeout, a killed run) is normal here: the server says
nothing about it instead of printing a traceback.

Every reply is whatever the `responder` callable returns for the request's messages: reply text, or
a dict `{"content": text, "tool_calls": [{"name": ..., "arguments": "<json text>"}]}` for a reply with
tool calls. A request with `tools` to the default responder is answered by `default_tool_responder`;
with `tools=False` such a request gets llama.cpp's 400 for a server without tool support. The default,
`default_responder`, is a deterministic fake (see its docstring), so bench runs exercise the whole
rollout with realistic-looking notes and answers; a responder that calls a real `ChatModel`
(`studies.environment_validation.ModelEndpoint`) serves an in-process model to clients that only speak HTTP.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[list[dict[str, Any]]], str | dict[str, Any]]
EMBEDDING_DIMENSIONS = 16
FailureAction = tuple[str, Any]
FAILURE_KINDS = (
    "status",
    "retry_after",
    "sleep",
    "malformed",
    "missing_choices",
    "empty_choices",
    "close",
    "null_content",
    "cut",
    "echo_key",
)
_IMMEDIATE_KINDS = frozenset(FAILURE_KINDS) - {"sleep", "cut"}
_CLIENT_GONE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
DEFAULT_NOTES_CAP_CHARS = 300
UNKNOWN_ANSWER = "I don't know"
FAKE_FINGERPRINT = "fp_supersede_fake"

_BUDGET_PATTERN = re.compile(r"at most (\d+) characters")


def approx_token_count(text: str) -> int:
    """Rough token count (4 characters per token) for the `usage` block; the server has no tokenizer."""
    return max(1, (len(text) + 3) // 4)


def _last_user_content(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def _user_lines(text: str) -> list[str]:
    return [line[len("user:") :].strip() for line in text.splitlines() if line.startswith("user:")]


def default_responder(messages: list[dict[str, Any]]) -> str:
    """Deterministic replies keyed on the last user message (the prompts in `prompts.py`).

    - notes update ("New conversation (...)"): the conversation's user lines joined with "; ",
      cut to the budget named in the prompt ("at most N characters", else 300);
    - answer from notes ("My notes:"): the first line of the notes, or "I don't know" when empty;
    - full context ("Conversation history:"): the last user line of the history;
    - Mem0's fact extraction ("Input:" + its conversation): {"facts": the user lines}; Mem0's update
      decision: ADD every new fact;
    - a yes/no judge prompt: "yes"; anything else: "OK".
    """
    text = _last_user_content(messages)
    if "New conversation (" in text:
        conversation = text.split("New conversation (", 1)[1]
        budget_match = _BUDGET_PATTERN.search(text)
        budget = int(budget_match.group(1)) if budget_match else DEFAULT_NOTES_CAP_CHARS
        return "; ".join(_user_lines(conversation))[:budget]
    if "My notes:" in text:
        notes = text.split("My notes:", 1)[1].split("\nCurrent date:", 1)[0].split("\nQuestion:", 1)[0]
        first_line = next((line.strip() for line in notes.splitlines() if line.strip()), "")
        return first_line if first_line and first_line != "(empty)" else UNKNOWN_ANSWER
    if "Conversation history:" in text:
        lines = _user_lines(text)
        return lines[-1] if lines else UNKNOWN_ANSWER
    if "Reply with the JSON list." in text:  # the latest-value policy's extraction
        date = text.split("Conversation (", 1)[1].split(")", 1)[0][:10] if "Conversation (" in text else ""
        return json.dumps([{"key": "said", "value": line, "date": date} for line in _user_lines(text)[-1:]])
    if text.startswith("Input:\n"):  # Mem0's fact extraction: each user line a fact
        return json.dumps({"facts": _user_lines(text)})
    if "The new retrieved facts are mentioned in the triple backticks" in text:  # Mem0's update: ADD each
        facts = ast.literal_eval(text.split("triple backticks", 1)[1].split("```")[1].strip())
        return json.dumps(
            {"memory": [{"id": str(i), "text": fact, "event": "ADD"} for i, fact in enumerate(facts)]}
        )
    if "Conversation (" in text:  # the other memory policies' extraction and observation calls
        return "\n".join(_user_lines(text.split("Conversation (", 1)[1]))
    if "Observation log (" in text:  # the reflector: the newest half of the log
        log = text.split(":\n", 1)[1].split("\n\nWrite the tidied log.", 1)[0].splitlines()
        return "\n".join(log[len(log) // 2 :])
    if "yes or no" in text.lower():
        return "yes"
    return "OK"


def default_tool_responder(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A reply with one tool call: the first tool that takes `content`, given the conversation's last
    user line (how the core-memory policy appends), else no tool call and "OK"."""
    takes_content = [
        tool["function"]["name"]
        for tool in tools
        if "content" in tool.get("function", {}).get("parameters", {}).get("properties", {})
    ]
    lines = _user_lines(_last_user_content(messages))
    if not takes_content or not lines:
        return {"content": "OK", "tool_calls": []}
    return {
        "content": "",
        "tool_calls": [{"name": takes_content[0], "arguments": json.dumps({"content": lines[-1]})}],
    }


def fake_embedding(text: str) -> list[float]:
    """A deterministic unit vector for `text`: its words hashed into `EMBEDDING_DIMENSIONS` buckets."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for word in re.findall(r"\w+", text.lower()):
        vector[sum(word.encode("utf-8")) % EMBEDDING_DIMENSIONS] += 1.0
    norm = sum(value * value for value in vector) ** 0.5 or 1.0
    return [value / norm for value in vector]


class ScriptedFailure(Exception):
    """Raised by a responder to answer this one request with a failure action instead of text."""

    def __init__(self, action: FailureAction) -> None:
        (checked,) = _validate_failures([action])
        if checked[0] not in _IMMEDIATE_KINDS:
            raise ValueError(
                f"a responder cannot raise {checked[0]!r}; use one of {sorted(_IMMEDIATE_KINDS)}"
            )
        super().__init__(f"scripted {checked[0]}")
        self.action = checked


def _validate_failures(failures: Iterable[FailureAction]) -> list[FailureAction]:
    checked = []
    for index, action in enumerate(failures):
        if not (isinstance(action, tuple | list) and len(action) == 2 and action[0] in FAILURE_KINDS):
            raise ValueError(
                f"failures[{index}] = {action!r}: expected (kind, value) with kind in {', '.join(FAILURE_KINDS)}"
            )
        kind, value = action
        if kind in ("status", "echo_key") and not (isinstance(value, int) and 400 <= value <= 599):
            raise ValueError(f"failures[{index}] = {action!r}: status must be an HTTP error code 400-599")
        if kind in ("sleep", "retry_after") and not (isinstance(value, int | float) and value >= 0):
            raise ValueError(f"failures[{index}] = {action!r}: {kind} needs a number of seconds >= 0")
        if kind == "cut" and not (isinstance(value, int) and value >= 0):
            raise ValueError(f"failures[{index}] = {action!r}: cut needs a number of characters >= 0")
        checked.append((kind, value))
    return checked


class LocalOpenAIServer:
    """OpenAI-compatible chat server on 127.0.0.1 with fixed latency, scripted failures and a request log.

    It serves scripted fakes (the default heuristic `default_responder`, a test's lambda, the
    `failures` script) and real models alike: `responder` may be any function from messages to
    reply text, such as one that calls an embedded, transformers or remote `ChatModel`.
    """

    def __init__(
        self,
        latency_s: float = 0.0,
        responder: Responder | None = None,
        failures: list[FailureAction] | None = None,
        port: int = 0,
        model: str = "fake-model",
        api_key: str | None = None,
        slots: int | None = None,
        embeddings: bool = True,
        tools: bool = True,
    ) -> None:
        self.latency_s = latency_s
        self.responder = responder or default_responder
        self.port = port
        self.model = model
        self.api_key = api_key  # when set, requests without "Bearer <api_key>" get 401
        self.slots = slots  # when set, GET /props says total_slots like llama.cpp's server (else 404)
        self.embeddings = embeddings  # False: POST /v1/embeddings answers 501, as llama.cpp without them
        self.tools = tools  # False: a chat request with tools gets llama.cpp's 400 (no --jinja)
        self.requests: list[dict[str, Any]] = []
        self.embedding_requests: list[dict[str, Any]] = []
        self.get_paths: list[str] = []  # every GET's path, in order (how often a client probes)
        self.max_in_flight = 0
        self._in_flight = 0
        self._failures: deque[FailureAction] = deque(_validate_failures(failures or []))
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle
    def start(self) -> LocalOpenAIServer:
        if self._httpd is not None:
            return self
        httpd = _QuietHTTPServer(("127.0.0.1", self.port), _Handler, bind_and_activate=False)
        httpd.daemon_threads = True
        httpd.request_queue_size = 256  # accept bursts of concurrent clients
        httpd.allow_reuse_address = True
        httpd.server_bind()
        httpd.server_activate()
        httpd.owner = self  # type: ignore[attr-defined]
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="local-openai-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> LocalOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- inspection
    @property
    def base_url(self) -> str:
        if self.port == 0:  # the OS picks the port on start()
            raise RuntimeError(
                "LocalOpenAIServer is not running: use it as a context manager or call start()"
            )
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    @property
    def pending_failures(self) -> int:
        with self._lock:
            return len(self._failures)

    def add_failures(self, failures: list[FailureAction]) -> None:
        checked = _validate_failures(failures)
        with self._lock:
            self._failures.extend(checked)

    # -- used by the handler
    def _record(self, body: dict[str, Any]) -> FailureAction | None:
        with self._lock:
            self.requests.append(body)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            return self._failures.popleft() if self._failures else None

    def _finish(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def completion_body(
        self,
        request: dict[str, Any],
        text: str | None,
        index: int,
        finish_reason: str = "stop",
        tool_calls: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A chat.completion object the openai SDK (and verifiers) parse without complaint."""
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{index}_{number}", "type": "function", "function": dict(call)}
                for number, call in enumerate(tool_calls)
            ]
            finish_reason = "tool_calls" if finish_reason == "stop" else finish_reason
        prompt_text = "".join(str(message.get("content", "")) for message in request.get("messages", []))
        prompt_tokens = approx_token_count(prompt_text)
        completion_tokens = approx_token_count(text or "")
        return {
            "id": f"chatcmpl-fake-{index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model") or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": finish_reason,
                    "logprobs": None,
                }
            ],
            "system_fingerprint": FAKE_FINGERPRINT,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": 0},
            },
        }


class _QuietHTTPServer(ThreadingHTTPServer):
    """Stays silent when a client hangs up; any other handler error is still printed."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], _CLIENT_GONE):
            return
        super().handle_error(request, client_address)


def _error_body(status: int, message: str) -> dict[str, Any]:
    error_type = {401: "invalid_request_error", 429: "rate_limit_exceeded"}.get(status, "fake_error")
    return {"error": {"message": message, "type": error_type, "code": str(status), "param": None}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # headers and body go out as two writes; with Nagle on, the body waits for the client's
    # delayed ACK of the headers (~40 ms on Linux), a stall no real server adds to every call
    disable_nagle_algorithm = True

    @property
    def owner(self) -> LocalOpenAIServer:
        return self.server.owner  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return  # keep test output clean

    def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except _CLIENT_GONE:
            self.close_connection = True  # the client gave up (e.g. its timeout fired)

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode("utf-8"), headers)

    def _authorised(self) -> bool:
        expected = self.owner.api_key
        return expected is None or self.headers.get("Authorization") == f"Bearer {expected}"

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        with self.owner._lock:
            self.owner.get_paths.append(self.path)
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            model = {"id": self.owner.model, "object": "model", "created": 0, "owned_by": "supersede-fake"}
            self._send_json(200, {"object": "list", "data": [model]})
        elif self.path.rstrip("/") == "/props" and (self.owner.slots is not None or not self.owner.tools):
            props = {"total_slots": self.owner.slots or 1, "model_alias": self.owner.model}
            self._send_json(200, {**props, "chat_template_caps": {"supports_tools": self.owner.tools}})
        elif self.path.rstrip("/") in ("/health", "/v1/health"):
            self._send_json(200, {"status": "ok"})
        else:
            self._send_json(404, _error_body(404, f"no route GET {self.path}"))

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") in ("/v1/embeddings", "/embeddings"):
            self._embed(raw)
            return
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, _error_body(404, f"no route POST {self.path}"))
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as error:
            self._send_json(400, _error_body(400, f"request body is not JSON: {error}"))
            return
        action = self.owner._record(body)
        try:
            self._answer(body, action)
        finally:
            self.owner._finish()

    def _answer(self, body: dict[str, Any], action: FailureAction | None) -> None:
        owner = self.owner
        if not self._authorised():
            self._send_json(401, _error_body(401, "invalid api key"))
            return
        kind, value = action if action is not None else (None, None)
        if kind in _IMMEDIATE_KINDS:
            self._fail(body, kind, value)
            return
        time.sleep(owner.latency_s + (value if kind == "sleep" else 0.0))
        if body.get("stream"):
            self._send_json(400, _error_body(400, "the local server does not stream; send stream=false"))
            return
        messages = body.get("messages")
        if not isinstance(messages, list):
            self._send_json(400, _error_body(400, "'messages' must be a list of {role, content}"))
            return
        tools = body.get("tools")
        if tools and not owner.tools:
            self._send_json(400, _error_body(400, "tools param requires --jinja flag"))
            return
        try:
            if tools and owner.responder is default_responder:
                reply: str | dict[str, Any] = default_tool_responder(messages, tools)
            else:
                reply = owner.responder(messages)
        except ScriptedFailure as failure:
            self._fail(body, *failure.action)
            return
        except Exception as error:  # a test responder bug should show up as a readable 500
            self._send_json(500, _error_body(500, f"responder failed: {type(error).__name__}: {error}"))
            return
        text, calls = (
            (reply.get("content"), reply.get("tool_calls")) if isinstance(reply, dict) else (reply, None)
        )
        if kind == "cut":
            cut = (text or "")[:value]
            self._send_json(200, owner.completion_body(body, cut, owner.request_count, "length", calls))
            return
        self._send_json(200, owner.completion_body(body, text, owner.request_count, tool_calls=calls))

    def _embed(self, raw: bytes) -> None:
        """Answer POST /v1/embeddings: one `fake_embedding` per input text (501 without embeddings)."""
        if not self._authorised():
            self._send_json(401, _error_body(401, "invalid api key"))
            return
        if not self.owner.embeddings:
            message = "This server does not support embeddings. Start it with `--embeddings`"
            self._send_json(501, _error_body(501, message))
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as error:
            self._send_json(400, _error_body(400, f"request body is not JSON: {error}"))
            return
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            self._send_json(400, _error_body(400, "'input' must be a string or a list of strings"))
            return
        with self.owner._lock:
            self.owner.embedding_requests.append(body)
        data = [
            {"object": "embedding", "index": i, "embedding": fake_embedding(t)} for i, t in enumerate(texts)
        ]
        tokens = sum(approx_token_count(text) for text in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        self._send_json(200, {"object": "list", "data": data, "model": body.get("model"), "usage": usage})

    def _fail(self, body: dict[str, Any], kind: str, value: Any) -> None:
        """Answer with one of the immediate failure actions (see the module docstring)."""
        if kind == "status":
            self._send_json(value, _error_body(value, f"scripted failure {value}"))
        elif kind == "echo_key":
            key = self.headers.get("Authorization", "").removeprefix("Bearer ")
            self._send_json(value, _error_body(value, f"Incorrect API key provided: {key}"))
        elif kind == "retry_after":
            self._send_json(429, _error_body(429, "scripted rate limit"), {"Retry-After": str(value)})
        elif kind == "malformed":
            self._send(200, b'{"id": "chatcmpl-broken", "choices": [')
        elif kind == "missing_choices":
            self._send_json(
                200, {"id": "chatcmpl-empty", "object": "chat.completion", "created": 0, "model": "x"}
            )
        elif kind == "empty_choices":
            self._send_json(200, {**self.owner.completion_body(body, "", 0), "choices": []})
        elif kind == "null_content":
            self._send_json(200, self.owner.completion_body(body, None, 0, finish_reason=value or "stop"))
        elif kind == "close":
            self.close_connection = True
