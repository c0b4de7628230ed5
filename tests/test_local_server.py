"""The local OpenAI-compatible server: SDK-valid replies, concurrency, scripted failures, default replies."""

import json
import socket
import struct
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from supersede_lib.agent import prompts
from supersede_lib.agent.episode import Session, Turn
from supersede_lib.models.local_server import (
    UNKNOWN_ANSWER,
    LocalOpenAIServer,
    ScriptedFailure,
    default_responder,
)


def _post(url: str, body: bytes, timeout: float = 10) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _chat_body(content: str = "hello") -> bytes:
    return json.dumps({"model": "fake-model", "messages": [{"role": "user", "content": content}]}).encode()


def test_sdk_parses_reply_and_models_list():
    with LocalOpenAIServer(responder=lambda messages: "pong") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        completion = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "ping"}], seed=3
        )
        models = client.models.list()
    assert server.base_url.endswith("/v1")
    assert completion.choices[0].message.content == "pong"
    assert completion.choices[0].finish_reason == "stop"
    assert (
        completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    assert [model.id for model in models.data] == ["fake-model"]
    assert server.request_count == 1
    assert server.requests[0]["seed"] == 3


def test_handles_sixteen_concurrent_requests():
    # Every request blocks until all 16 are inside the server at once; a server that handled
    # fewer at a time would break the barrier (BrokenBarrierError -> 500) instead of answering.
    barrier = threading.Barrier(16, timeout=20)

    def responder(messages):
        barrier.wait()
        return "together"

    with LocalOpenAIServer(responder=responder) as server:
        url = server.base_url + "/chat/completions"
        with ThreadPoolExecutor(max_workers=16) as pool:
            replies = list(pool.map(lambda index: _post(url, _chat_body(str(index)), timeout=30), range(16)))
    assert [status for status, _ in replies] == [200] * 16
    assert server.max_in_flight == 16
    assert all(json.loads(body)["choices"][0]["message"]["content"] == "together" for _, body in replies)


def test_scripted_failures_are_consumed_in_order_then_normal_replies():
    failures = [("status", 429), ("status", 503), ("malformed", None), ("missing_choices", None)]
    with LocalOpenAIServer(failures=failures, responder=lambda messages: "fine") as server:
        url = server.base_url + "/chat/completions"
        replies = [_post(url, _chat_body()) for _ in range(5)]
        assert server.pending_failures == 0
    assert [status for status, _ in replies] == [429, 503, 200, 200, 200]
    assert json.loads(replies[0][1])["error"]["message"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(replies[2][1])
    assert "choices" not in json.loads(replies[3][1])
    assert json.loads(replies[4][1])["choices"][0]["message"]["content"] == "fine"
    assert server.request_count == 5


def test_null_content_empty_choices_and_cut_replies():
    failures = [("null_content", "length"), ("empty_choices", None), ("cut", 4)]
    with LocalOpenAIServer(failures=failures, responder=lambda messages: "a long reply") as server:
        url = server.base_url + "/chat/completions"
        null, empty, cut = (json.loads(_post(url, _chat_body())[1]) for _ in range(3))
    assert null["choices"][0]["message"]["content"] is None
    assert null["choices"][0]["finish_reason"] == "length"
    assert empty["choices"] == []
    assert (
        cut["choices"][0]["message"]["content"] == "a lo" and cut["choices"][0]["finish_reason"] == "length"
    )


def test_a_responder_can_fail_one_request_on_its_own_terms():
    def responder(messages):
        if messages[-1]["content"] == "poisoned":
            raise ScriptedFailure(("status", 429))
        return "fine"

    with LocalOpenAIServer(responder=responder) as server:
        url = server.base_url + "/chat/completions"
        assert _post(url, _chat_body("poisoned"))[0] == 429
        assert _post(url, _chat_body("healthy"))[0] == 200
    with pytest.raises(ValueError, match="cannot raise 'sleep'"):
        ScriptedFailure(("sleep", 1))


def _reset_mid_request(port: int) -> None:
    """Send half a request, then hang up with a TCP reset (what a killed client does)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        client.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 5000\r\n\r\n{"model": '
        )
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_a_client_that_hangs_up_prints_no_traceback(capfd):
    with LocalOpenAIServer() as server:
        for _ in range(3):
            _reset_mid_request(server.port)
        time.sleep(0.3)  # let the handler threads notice
        status, _ = _post(server.base_url + "/chat/completions", _chat_body())
    captured = capfd.readouterr()
    assert status == 200
    assert "Traceback" not in captured.err and "ConnectionResetError" not in captured.err


def test_retry_after_header_and_api_key_check():
    with LocalOpenAIServer(failures=[("retry_after", 2)], api_key="secret") as server:
        request = urllib.request.Request(
            server.base_url + "/chat/completions",
            data=_chat_body(),
            headers={"Content-Type": "application/json", "Authorization": "Bearer secret"},
        )
        with pytest.raises(urllib.error.HTTPError) as rate_limited:
            urllib.request.urlopen(request, timeout=10)
        status, _ = _post(server.base_url + "/chat/completions", _chat_body())  # no key
    assert rate_limited.value.code == 429
    assert rate_limited.value.headers["Retry-After"] == "2"
    assert status == 401


@pytest.mark.parametrize(
    "bad_failures, fragment",
    [
        ([("explode", 1)], "failures[0]"),
        ([("status", 200)], "400-599"),
        ([("sleep", -1)], "seconds"),
        ([("cut", -1)], "characters"),
    ],
)
def test_bad_failure_scripts_are_rejected(bad_failures, fragment):
    with pytest.raises(ValueError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        LocalOpenAIServer(failures=bad_failures)


def test_bad_request_bodies_get_400_not_a_crash():
    with LocalOpenAIServer() as server:
        not_json = _post(server.base_url + "/chat/completions", b"{oops")
        no_messages = _post(server.base_url + "/chat/completions", json.dumps({"model": "m"}).encode())
        wrong_route = _post(server.base_url + "/nowhere", _chat_body())
    assert not_json[0] == 400
    assert no_messages[0] == 400 and "messages" in json.loads(no_messages[1])["error"]["message"]
    assert wrong_route[0] == 404


def test_base_url_before_start_is_a_clear_error():
    with pytest.raises(RuntimeError, match="not running"):
        LocalOpenAIServer().base_url  # noqa: B018


def _session(*user_lines: str) -> Session:
    turns = []
    for line in user_lines:
        turns += [Turn("user", line), Turn("assistant", "Noted!")]
    return Session(session_id="s1", date="2023/05/30 (Tue) 23:40", turns=tuple(turns))


def test_default_responder_writes_capped_notes_from_user_lines():
    messages = prompts.notes_update_messages(
        "(old notes)", _session("I moved to Denver.", "My dog is Rex."), 20
    )
    reply = default_responder(messages)
    assert reply == "I moved to Denver.; My dog is Rex."[:20]
    uncapped = default_responder(prompts.notes_update_messages("", _session("I moved to Denver."), 300))
    assert uncapped == "I moved to Denver."


def test_default_responder_answers_from_first_notes_line_or_says_unknown():
    with_notes = prompts.answer_from_notes_messages(
        "lives in Denver\ndog Rex", "Where do I live?", "2023/06/01"
    )
    assert default_responder(with_notes) == "lives in Denver"
    assert (
        default_responder(prompts.answer_from_notes_messages("", "Where do I live?", "2023/06/01"))
        == UNKNOWN_ANSWER
    )


def test_default_responder_full_context_and_judge_prompts():
    sessions = [_session("I live in Austin."), _session("I moved to Denver.")]
    assert (
        default_responder(prompts.full_context_messages(sessions, "Where?", "2023/06/01"))
        == "I moved to Denver."
    )
    assert default_responder([{"role": "user", "content": "Is it correct? Answer yes or no only."}]) == "yes"
    assert default_responder([{"role": "user", "content": "anything else"}]) == "OK"
