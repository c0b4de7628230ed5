"""The OpenAI-compatible backend: retry policy, key handling and request shape (against the local
server), cost estimates and reasoning-model detection. No network."""

import asyncio
import gc
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

import httpx
import openai
import pytest

from supersede_lib.eval.scheduling import run_sync
from supersede_lib.models.chat import (
    ChatModel,
    ContextOverflowError,
    ModelCallError,
    ModelConfigError,
    RequestRejectedError,
)
from supersede_lib.models.local_server import LocalOpenAIServer
from supersede_lib.models.openai_api import (
    REASONING_TOKEN_FLOOR,
    OpenAIChatModel,
    _close_on_its_loop,
    estimate_cost_usd,
    is_reasoning_model,
)
from supersede_lib.models.rate_limit import AdaptiveLimit

MESSAGES = [{"role": "user", "content": "hello"}]


class RecordedSleep:
    """Stands in for asyncio.sleep so backoff is observable and tests stay fast."""

    def __init__(self):
        self.delays = []

    async def __call__(self, seconds):
        self.delays.append(seconds)


@pytest.fixture(autouse=True)
def _no_real_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _model(server, sleep, **overrides):
    options = {
        "max_retries": 6,
        "backoff_base_s": 0.5,
        "backoff_max_s": 30,
        "sleep": sleep,
        "jitter": lambda: 1.0,
    }
    options.update(overrides)
    return OpenAIChatModel("fake-model", base_url=server.base_url, **options)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_success_returns_text_tokens_and_sends_seed_and_limits():
    sleep = RecordedSleep()
    with LocalOpenAIServer(responder=lambda messages: "hi there") as server:
        model = _model(server, sleep)
        result = asyncio.run(model.achat(MESSAGES, max_tokens=7, temperature=0.0, seed=11))
    assert isinstance(model, ChatModel)
    assert result.text == "hi there" and result.model == "fake-model" and not result.cached
    assert result.prompt_tokens > 0 and result.completion_tokens > 0
    body = server.requests[0]
    assert body["seed"] == 11 and body["max_tokens"] == 7 and body["temperature"] == 0.0
    assert "max_completion_tokens" not in body
    assert sleep.delays == []
    assert model.stats()["attempts"] == 1 and model.stats()["retries"] == 0


def test_reasoning_models_get_max_completion_tokens_and_no_temperature():
    with LocalOpenAIServer() as server:
        model = OpenAIChatModel(  # the local server stands in for OpenAI: the spec says it reasons
            "gpt-5.4",
            base_url=server.base_url,
            reasoning_effort="low",
            reasoning_token_floor=0,
            reasoning=True,
        )
        asyncio.run(model.achat(MESSAGES, max_tokens=64, temperature=0.0, seed=2))
    body = server.requests[0]
    assert body["max_completion_tokens"] == 64 and body["reasoning_effort"] == "low" and body["seed"] == 2
    assert "temperature" not in body and "max_tokens" not in body


def test_reasoning_models_get_room_to_reason_before_the_answer():
    # A 64-token answer budget is all spent on hidden reasoning by gpt-5.x: the floor leaves room.
    with LocalOpenAIServer() as server:
        asyncio.run(
            OpenAIChatModel("gpt-5.4", base_url=server.base_url, reasoning=True).achat(
                MESSAGES, max_tokens=64
            )
        )
        asyncio.run(
            OpenAIChatModel("o4-mini", base_url=server.base_url, reasoning=True).achat(
                MESSAGES, max_tokens=9000
            )
        )
        asyncio.run(OpenAIChatModel("gpt-4.1-mini", base_url=server.base_url).achat(MESSAGES, max_tokens=64))
    reasoning, large, plain = server.requests
    assert REASONING_TOKEN_FLOOR >= 1024
    assert reasoning["max_completion_tokens"] == REASONING_TOKEN_FLOOR
    assert large["max_completion_tokens"] == 9000
    assert plain["max_tokens"] == 64 and "max_completion_tokens" not in plain


def test_openai_names_mean_openai_models_only_on_openais_endpoint(monkeypatch):
    """A local model named gpt-5-local is sampled greedily like any other (no reasoning rules), one
    named gpt-4o-mini is not priced and does not share OpenAI's cache namespace."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-endpoint-0000")
    with LocalOpenAIServer() as server:
        local_reasoner = OpenAIChatModel("gpt-5-local", base_url=server.base_url)
        asyncio.run(local_reasoner.achat(MESSAGES, max_tokens=64, temperature=0.0))
        local_mini = OpenAIChatModel("gpt-4o-mini", base_url=server.base_url)
    body = server.requests[0]
    assert body["temperature"] == 0.0 and body["max_tokens"] == 64 and "max_completion_tokens" not in body
    assert local_mini.cost_usd(1_000_000, 0) is None and local_mini.cache_namespace == "openai-compatible"
    openai_mini = OpenAIChatModel("gpt-4o-mini")  # OpenAI's own endpoint
    assert openai_mini.cost_usd(1_000_000, 0) == 0.15 and openai_mini.cache_namespace == "openai"
    assert OpenAIChatModel("gpt-5.4").reasoning and not local_reasoner.reasoning


@pytest.mark.parametrize(
    "failure, finish_reason, cut, empty",
    [
        (("null_content", "length"), "length", 1, 1),  # a reasoning model that spent its budget
        (("null_content", None), "stop", 0, 1),
        (("cut", 3), "length", 1, 0),
    ],
)
def test_empty_and_cut_replies_are_reported_not_hidden(failure, finish_reason, cut, empty):
    with LocalOpenAIServer(failures=[failure], responder=lambda messages: "a full answer") as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url)
        result = asyncio.run(model.achat(MESSAGES, max_tokens=5))
    assert result.finish_reason == finish_reason and result.was_cut == bool(cut)
    assert result.text == ("a f" if failure[0] == "cut" else "")
    assert (model.stats()["cut_replies"], model.stats()["empty_replies"]) == (cut, empty)
    assert server.request_count == 1  # a reply, not a failure: nothing is retried


def test_a_reply_with_a_lone_surrogate_is_cleaned_and_can_be_sent_back():
    with LocalOpenAIServer(responder=lambda messages: "abc\ud83d") as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, max_retries=6)
        first = asyncio.run(model.achat(MESSAGES))
        follow_up = [
            *MESSAGES,
            {"role": "assistant", "content": first.text},
            {"role": "user", "content": "?"},
        ]
        asyncio.run(model.achat(follow_up))
    assert first.text == "abc\ufffd"
    first.text.encode("utf-8")
    assert server.request_count == 2  # no retries


def test_a_request_that_cannot_be_encoded_fails_at_once_without_retry():
    sleep = RecordedSleep()
    with LocalOpenAIServer() as server:
        model = _model(server, sleep)
        with pytest.raises(ModelCallError, match="cannot be encoded") as raised:
            asyncio.run(model.achat([{"role": "user", "content": "abc\ud83d"}]))
    assert not isinstance(raised.value, ModelConfigError)
    assert server.request_count == 0 and sleep.delays == []


def test_extra_params_are_sent():
    with LocalOpenAIServer() as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, extra_params={"top_p": 0.5})
        asyncio.run(model.achat(MESSAGES))
    assert server.requests[0]["top_p"] == 0.5


def test_server_specific_options_reach_the_server_instead_of_crashing_the_sdk():
    """llama.cpp's `cache_prompt` is no keyword of the OpenAI SDK: it goes in the JSON body as given."""
    with LocalOpenAIServer() as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, extra_params={"cache_prompt": False})
        asyncio.run(model.achat(MESSAGES))
    assert server.requests[0]["cache_prompt"] is False


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_bursts_of_transient_errors_are_retried_with_growing_backoff(status):
    sleep = RecordedSleep()
    with LocalOpenAIServer(failures=[("status", status)] * 3, responder=lambda messages: "done") as server:
        model = _model(server, sleep)
        result = asyncio.run(model.achat(MESSAGES))
    assert result.text == "done"
    assert server.request_count == 4
    assert sleep.delays == [0.5, 1.0, 2.0]  # jitter pinned to its maximum: base * 2**retry
    assert model.stats()["retries"] == 3


def test_full_jitter_stays_within_the_capped_exponential_window():
    model = OpenAIChatModel("fake-model", base_url="http://127.0.0.1:1/v1", backoff_base_s=1, backoff_max_s=5)
    delays = [model.backoff_delay(retry) for retry in range(8) for _ in range(20)]
    assert all(0 <= delay <= 5 for delay in delays)
    assert len({round(delay, 6) for delay in delays}) > 1  # jittered, not a fixed schedule
    assert model.backoff_delay(0, retry_after_s=3.0) >= 3.0  # Retry-After is a floor
    # the server's Retry-After is honoured in full (retrying sooner only earns another 429) ...
    assert model.backoff_delay(0, retry_after_s=99.0) >= 99.0
    # ... up to its own stated maximum
    assert model.backoff_delay(0, retry_after_s=10**6) == model.retry_after_max_s == 600.0


def test_retry_after_header_sets_the_minimum_wait():
    sleep = RecordedSleep()
    with LocalOpenAIServer(failures=[("retry_after", 4)]) as server:
        asyncio.run(_model(server, sleep, jitter=lambda: 0.0).achat(MESSAGES))
    assert sleep.delays == [4.0]


@pytest.mark.parametrize("failure", [("malformed", None), ("missing_choices", None), ("close", None)])
def test_malformed_or_dropped_replies_are_retried(failure):
    sleep = RecordedSleep()
    with LocalOpenAIServer(failures=[failure, failure], responder=lambda messages: "ok") as server:
        result = asyncio.run(_model(server, sleep).achat(MESSAGES))
    assert result.text == "ok"
    assert server.request_count == 3
    assert len(sleep.delays) == 2


def test_timeouts_are_retried():
    sleep = RecordedSleep()
    with LocalOpenAIServer(failures=[("sleep", 1.5)], responder=lambda messages: "late but fine") as server:
        result = asyncio.run(_model(server, sleep, timeout_s=0.2).achat(MESSAGES))
    assert result.text == "late but fine"
    assert server.request_count == 2
    assert len(sleep.delays) == 1


def test_giving_up_after_max_retries_raises_model_call_error():
    sleep = RecordedSleep()
    with LocalOpenAIServer(failures=[("status", 500)] * 10) as server:
        with pytest.raises(ModelCallError, match="after 3 attempts"):
            asyncio.run(_model(server, sleep, max_retries=2).achat(MESSAGES))
    assert server.request_count == 3
    assert len(sleep.delays) == 2


@pytest.mark.parametrize(
    "status, fragment", [(401, "OPENAI_API_KEY"), (403, "permission"), (404, "model name")]
)
def test_permanent_errors_raise_config_error_without_retry(status, fragment):
    sleep = RecordedSleep()
    with LocalOpenAIServer(failures=[("status", status)]) as server:
        with pytest.raises(ModelConfigError, match=fragment) as raised:
            asyncio.run(_model(server, sleep).achat(MESSAGES))
    assert server.request_count == 1
    assert sleep.delays == []
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("status", [400, 422])
def test_a_rejected_request_fails_that_call_only_without_retry(status):
    # Not a setting: the runner fails this one question and goes on with the others.
    sleep = RecordedSleep()
    with LocalOpenAIServer(failures=[("status", status)]) as server:
        with pytest.raises(RequestRejectedError, match="rejected") as raised:
            asyncio.run(_model(server, sleep).achat(MESSAGES))
    assert isinstance(raised.value, ModelCallError) and not isinstance(raised.value, ModelConfigError)
    assert server.request_count == 1 and sleep.delays == []


def test_context_length_400_is_a_context_overflow():
    class ContextLengthError(Exception):  # the attributes openai.BadRequestError carries
        status_code = 400
        code = "context_length_exceeded"
        message = "This model's maximum context length is 8192 tokens"

    model = OpenAIChatModel("fake-model", base_url="http://127.0.0.1:9/v1")
    assert isinstance(model._status_error(ContextLengthError()), ContextOverflowError)


def test_missing_key_for_a_remote_endpoint_fails_before_any_call(monkeypatch):
    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="set MY_KEY"):
        OpenAIChatModel("gpt-4.1-mini", api_key_env="MY_KEY")
    with pytest.raises(ModelConfigError, match="set OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4.1-mini", base_url="https://example.invalid/v1")


def test_missing_key_is_fine_for_a_local_server_and_a_set_key_is_sent(monkeypatch):
    with LocalOpenAIServer(api_key="EMPTY") as server:
        asyncio.run(OpenAIChatModel("fake-model", base_url=server.base_url).achat(MESSAGES))
    monkeypatch.setenv("MY_KEY", "sk-test-key")
    with LocalOpenAIServer(api_key="sk-test-key") as server:
        result = asyncio.run(
            OpenAIChatModel("fake-model", base_url=server.base_url, api_key_env="MY_KEY").achat(MESSAGES)
        )
    assert result.text


def _on(loop_kind: str, coroutine):
    """Run `coroutine` on a fresh `asyncio.run` loop or on the runner's long-lived one (`run_sync`), whose
    HTTP clients go through aiohttp: the two transports report connection errors differently."""
    return asyncio.run(coroutine) if loop_kind == "asyncio.run" else run_sync(coroutine)


@pytest.mark.parametrize("loop_kind", ["asyncio.run", "runner loop"])
@pytest.mark.parametrize("where", ["closed port", "unknown host"])
def test_an_unreachable_server_stops_at_once_with_one_line_naming_the_url(loop_kind, where, monkeypatch):
    """Connection refused or no such host, with no answer ever received: no retry (retrying only delays
    the one line), whichever transport the loop uses; a refused connection is not counted as a timeout."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-unreachable-0000")  # a remote host needs a key
    sleep = RecordedSleep()
    host = f"127.0.0.1:{_free_port()}" if where == "closed port" else "no-such-host.invalid"
    base_url = f"http://{host}/v1"
    model = OpenAIChatModel("fake-model", base_url=base_url, max_retries=6, sleep=sleep, timeout_s=30)
    started = time.perf_counter()
    with pytest.raises(ModelConfigError, match="cannot reach") as raised:
        _on(loop_kind, model.achat(MESSAGES))
    message = str(raised.value)
    assert time.perf_counter() - started < 5 and sleep.delays == [] and model.timeouts == 0
    assert base_url in message and "running" in message and "\n" not in message
    assert ("refused" if where == "closed port" else "host name not found") in message


@pytest.mark.parametrize("loop_kind", ["asyncio.run", "runner loop"])
def test_a_dropped_connection_is_counted_as_dropped_not_as_a_timeout(loop_kind):
    """The server closes the connection without answering: retried, and counted apart from timeouts
    (the runner loop's aiohttp transport reports it as a connect timeout)."""
    sleep = RecordedSleep()
    with LocalOpenAIServer(responder=lambda messages: "fine") as server:
        model = _model(server, sleep, max_retries=2)
        assert _on(loop_kind, model.achat(MESSAGES)).text == "fine"
        server.add_failures([("close", None)])
        assert _on(loop_kind, model.achat(MESSAGES)).text == "fine"  # the retry got through
    stats = model.stats()
    assert (stats["dropped_connections"], stats["timeouts"], stats["retries"]) == (1, 0, 1)


@pytest.mark.parametrize("loop_kind", ["asyncio.run", "runner loop"])
def test_tls_to_a_plain_http_server_stops_at_once_named_as_tls_not_a_timeout(loop_kind):
    """https:// to a server that speaks plain HTTP: the handshake fails the same way every time, so the
    run stops on the first call, naming TLS (the runner loop's transport calls it a connect timeout)."""
    sleep = RecordedSleep()
    with LocalOpenAIServer() as server:
        base_url = server.base_url.replace("http://", "https://")
        model = OpenAIChatModel("fake-model", base_url=base_url, max_retries=6, sleep=sleep, timeout_s=30)
        started = time.perf_counter()
        with pytest.raises(ModelConfigError, match="TLS failed") as raised:
            _on(loop_kind, model.achat(MESSAGES))
    assert time.perf_counter() - started < 5 and sleep.delays == [] and model.timeouts == 0
    assert base_url in str(raised.value) and "scheme" in str(raised.value)


def _failed_attempt(cause: BaseException, sdk_error: type = openai.APITimeoutError) -> Exception:
    """An SDK error over `cause`, as the runner loop's aiohttp transport raises every connection error."""
    request = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    wrapped = sdk_error(request=request)
    wrapped.__cause__ = cause
    return wrapped


@pytest.mark.parametrize(
    ("cause", "counter"),
    [
        (ssl.SSLCertVerificationError(1, "certificate verify failed"), "tls_errors"),
        (ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number"), "tls_errors"),
        (ValueError("proxy answered 502 to CONNECT"), "transport_errors"),
        (ConnectionResetError(104, "Connection reset by peer"), "dropped_connections"),
        (TimeoutError(), "timeouts"),
    ],
)
def test_each_transport_failure_after_the_server_answered_is_counted_as_its_own_kind(cause, counter):
    """Only a clock running out is a timeout: a TLS error or any other transport error is counted
    apart (and retried, since the server answered before), whatever class the SDK wraps it in."""
    sleep = RecordedSleep()
    with LocalOpenAIServer() as server:
        model = _model(server, sleep, max_retries=0)
        assert asyncio.run(model.achat(MESSAGES)).text  # the server answered: later failures are retried
        assert model._is_retryable(_failed_attempt(cause)) is True
    kinds = ("timeouts", "dropped_connections", "refused_connections", "tls_errors", "transport_errors")
    stats = model.stats()
    assert {kind: stats[kind] for kind in kinds} == {kind: int(kind == counter) for kind in kinds}
    if counter == "transport_errors":
        message = str(model._exhausted_error(_failed_attempt(cause)))
        assert "transport error (ValueError)" in message


def test_a_real_timeout_is_still_counted_as_a_timeout_on_the_runner_loop():
    sleep = RecordedSleep()
    with LocalOpenAIServer(failures=[("sleep", 1.0)]) as server:
        model = _model(server, sleep, max_retries=1, timeout_s=0.2)
        assert run_sync(model.achat(MESSAGES)).text
    assert (model.timeouts, model.dropped_connections) == (1, 0)


def test_a_server_lost_mid_run_fails_the_call_not_the_configuration():
    sleep = RecordedSleep()
    with LocalOpenAIServer(responder=lambda messages: "fine") as server:
        model = _model(server, sleep, max_retries=2)
        assert asyncio.run(model.achat(MESSAGES)).text == "fine"
        server.add_failures([("close", None)] * 3)
        with pytest.raises(ModelCallError, match="after 3 attempts: connection dropped") as raised:
            asyncio.run(model.achat(MESSAGES))
    assert not isinstance(raised.value, ModelConfigError)
    base_url = server.base_url
    with pytest.raises(ModelCallError, match="after 3 attempts: connection refused") as raised:
        run_sync(model.achat(MESSAGES))  # the server is gone: retried, since it may be restarting
    assert not isinstance(raised.value, ModelConfigError) and base_url in str(raised.value)
    assert (model.dropped_connections, model.refused_connections, model.timeouts) == (3, 3, 0)


def test_credentials_in_the_url_are_refused_and_never_echoed():
    """httpx would send user:password@ as Basic auth instead of the key: refused when the model is built."""
    base_url = f"http://alice:s3cret-pass@127.0.0.1:{_free_port()}/v1"
    with pytest.raises(ModelConfigError) as raised:
        OpenAIChatModel("fake-model", base_url=base_url, max_retries=1, timeout_s=5)
    message = str(raised.value)
    assert "s3cret-pass" not in message and "alice" not in message and "http://***@127.0.0.1" in message
    assert "Bearer" in message


def test_each_429_is_reported_to_the_installed_adaptive_limit():
    sleep = RecordedSleep()
    limit = AdaptiveLimit(8, cooldown_s=0.0)
    with LocalOpenAIServer(failures=[("status", 429)] * 3 + [("status", 500)]) as server:

        async def call():
            with limit.installed():
                return await _model(server, sleep).achat(MESSAGES)

        asyncio.run(call())
        asyncio.run(_model(server, sleep).achat(MESSAGES))  # no limit installed: nothing reported
    assert (limit.rate_limited, limit.decreases, limit.lowest) == (3, 3, 1)
    assert (limit.increases, limit.limit) == (1, 2)  # the success that followed counts toward recovery


def test_one_model_survives_several_event_loops():
    with LocalOpenAIServer(responder=lambda messages: "again") as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url)
        first = asyncio.run(model.achat(MESSAGES))
        second = asyncio.run(model.achat(MESSAGES))
    assert first.text == second.text == "again"


def test_concurrent_calls_share_one_model():
    with LocalOpenAIServer(
        latency_s=0.05, responder=lambda messages: messages[-1]["content"].upper()
    ) as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url)

        async def run_all():
            prompts = [[{"role": "user", "content": f"q{index}"}] for index in range(12)]
            return await asyncio.gather(*(model.achat(prompt) for prompt in prompts))

        results = asyncio.run(run_all())
    assert [result.text for result in results] == [f"Q{index}" for index in range(12)]
    assert model.stats()["calls"] == 12


def test_cost_estimates():
    assert estimate_cost_usd("gpt-4.1-mini", 1_000_000, 1_000_000) == pytest.approx(0.40 + 1.60)
    assert estimate_cost_usd("gpt-4.1-mini-2025-04-14", 1000, 0) == pytest.approx(0.0004)
    assert estimate_cost_usd("gpt-4o-mini", 1_000_000, 0) == pytest.approx(0.15)  # not priced as gpt-4o
    assert estimate_cost_usd("gpt-4o-audio-preview", 10, 10) is None
    assert estimate_cost_usd("qwen2.5-coder-1.5b", 10, 10) is None


def test_reasoning_model_detection():
    assert is_reasoning_model("gpt-5.4") and is_reasoning_model("o4-mini")
    assert not is_reasoning_model("gpt-4.1-mini")


_TRANSPORT_SCRIPT = """
import asyncio
from supersede_lib.eval.runner import run_sync
from supersede_lib.models.local_server import LocalOpenAIServer
from supersede_lib.models.openai_api import OpenAIChatModel

with LocalOpenAIServer() as server:
    runner_model = OpenAIChatModel("fake", base_url=server.base_url, api_key_env="NO_SUCH_KEY")
    run_sync(runner_model.achat([{"role": "user", "content": "hi"}], max_tokens=5))
    print("runner loop:", type(runner_model._async_client._client).__name__)
    plain_model = OpenAIChatModel("fake", base_url=server.base_url, api_key_env="NO_SUCH_KEY")
    asyncio.run(plain_model.achat([{"role": "user", "content": "hi"}], max_tokens=5))
    print("asyncio.run:", type(plain_model._async_client._client).__name__)
"""


def test_the_runner_loop_talks_over_aiohttp_and_closes_it_at_exit() -> None:
    """The runner's long-lived loop uses aiohttp (less client CPU with many calls in flight) and
    closes it at exit without the 'Unclosed client session' noise; a loop of `asyncio.run`, which
    ends before a session could be closed there, keeps the SDK's httpx."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", _TRANSPORT_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "runner loop: _InstalledAioHttpClient" in result.stdout
    assert "asyncio.run: _InstalledAioHttpClient" not in result.stdout and "asyncio.run:" in result.stdout
    assert "Unclosed" not in result.stderr, result.stderr


def test_a_client_that_fails_to_close_on_its_own_loop_leaves_no_unretrieved_task_exception():
    """A client garbage-collected on its own running loop is closed by a task; a close that fails is
    logged, not left for asyncio's "Task exception was never retrieved" at exit."""

    class FailingClose:
        async def close(self) -> None:
            raise RuntimeError("session already gone")

    unhandled: list[dict] = []

    async def close_and_settle() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: unhandled.append(context))
        _close_on_its_loop(FailingClose(), loop)
        for _ in range(3):
            await asyncio.sleep(0)

    asyncio.run(close_and_settle())
    gc.collect()
    assert not unhandled, unhandled


@pytest.mark.realmodel
def test_llama_cpps_server_stopped_mid_run_fails_calls_then_stops_a_new_run_at_once():
    """The real server (llama.cpp's own HTTP port): once stopped, a client that had reached it retries
    and fails the call as refused (the server may be restarting), while a new client stops at once."""
    pytest.importorskip("xllamacpp", reason="the embedded backend needs xllamacpp")
    from conftest import small_model_file

    from supersede_lib.models.gguf import EmbeddedGGUFModel

    model_file = small_model_file()
    if model_file is None:
        pytest.skip("no small provisioned GGUF model")
    served = EmbeddedGGUFModel(model_file, n_ctx=2048, n_threads=1)
    base_url = served.serve()
    model = OpenAIChatModel(model_file.stem, base_url=base_url, max_retries=1, backoff_base_s=0.001)
    try:
        assert isinstance(run_sync(model.achat(MESSAGES, max_tokens=4)).text, str)
    finally:
        served.close()
        gc.collect()  # the listener stops with its server object
    with pytest.raises(ModelCallError, match="after 2 attempts: connection refused") as raised:
        run_sync(model.achat(MESSAGES, max_tokens=4))
    assert not isinstance(raised.value, ModelConfigError)
    assert (model.refused_connections, model.timeouts, model.dropped_connections) == (2, 0, 0)
    fresh = OpenAIChatModel(model_file.stem, base_url=base_url, max_retries=6)
    started = time.perf_counter()
    with pytest.raises(ModelConfigError, match=f"cannot reach {base_url}: connection refused"):
        run_sync(fresh.achat(MESSAGES, max_tokens=4))
    assert time.perf_counter() - started < 5


@pytest.mark.realmodel
def test_llama_cpps_server_killed_mid_request_is_a_dropped_connection_not_a_timeout():
    """The real server (`python -m supersede_lib serve`, llama.cpp's HTTP port) killed while it
    generates a reply: on the runner loop the call is counted as dropped, then refused on the retry;
    never as a timeout."""
    pytest.importorskip("xllamacpp", reason="the embedded backend needs xllamacpp")
    from conftest import small_model_file

    model_file = small_model_file()
    if model_file is None:
        pytest.skip("no small provisioned GGUF model")
    served = subprocess.Popen(
        [sys.executable, "-m", "supersede_lib", "serve", str(model_file), "--n-ctx", "2048"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        line = served.stdout.readline()
        assert line.startswith("serving "), line
        base_url = line.split(" at ", 1)[1].split()[0]
        # a long reply (end of text ignored) keeps the request in flight while the server is killed
        model = OpenAIChatModel(
            model_file.stem, base_url=base_url, max_retries=1, backoff_base_s=0.001, timeout_s=120,
            extra_params={"ignore_eos": True},
        )  # fmt: skip
        assert isinstance(run_sync(model.achat(MESSAGES, max_tokens=2)).text, str)
        threading.Timer(1.0, served.send_signal, args=(signal.SIGKILL,)).start()
        started = time.perf_counter()
        with pytest.raises(ModelCallError, match="after 2 attempts: connection refused"):
            run_sync(model.achat(MESSAGES, max_tokens=1500))
        assert time.perf_counter() - started < 30
    finally:
        served.kill()
        served.wait(timeout=30)
    assert (model.dropped_connections, model.refused_connections, model.timeouts) == (1, 1, 0)
