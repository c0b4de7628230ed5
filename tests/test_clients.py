"""Model backends: the OpenAI-compatible retry policy (against the fake server), the embedded
backend's reply parsing, model-file lookup and the spec factory. No network, no model load."""

import asyncio
import inspect
import socket
import sys
import types

import pytest

from supersede_lib.models import openai_api as clients
from supersede_lib.models.cache import CachedChatModel
from supersede_lib.models.chat import ChatModel
from supersede_lib.models.local_server import LocalOpenAIServer
from supersede_lib.models.openai_api import (
    ContextOverflowError,
    EmbeddedGGUFModel,
    ModelCallError,
    ModelConfigError,
    OpenAIChatModel,
    chat_result_from_llamacpp,
    estimate_cost_usd,
    make_chat_model,
    resolve_default_gguf,
)

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
        model = OpenAIChatModel("gpt-5.4", base_url=server.base_url, reasoning_effort="low")
        asyncio.run(model.achat(MESSAGES, max_tokens=64, temperature=0.0, seed=2))
    body = server.requests[0]
    assert body["max_completion_tokens"] == 64 and body["reasoning_effort"] == "low" and body["seed"] == 2
    assert "temperature" not in body and "max_tokens" not in body


def test_extra_params_are_sent():
    with LocalOpenAIServer() as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, extra_params={"top_p": 0.5})
        asyncio.run(model.achat(MESSAGES))
    assert server.requests[0]["top_p"] == 0.5


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
    assert model.backoff_delay(0, retry_after_s=99.0) <= 5  # ... capped at backoff_max_s


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
    "status, fragment", [(401, "OPENAI_API_KEY"), (403, "permission"), (404, "model name"), (400, "rejected")]
)
def test_permanent_errors_raise_config_error_without_retry(status, fragment):
    sleep = RecordedSleep()
    with LocalOpenAIServer(failures=[("status", status)]) as server:
        with pytest.raises(ModelConfigError, match=fragment) as raised:
            asyncio.run(_model(server, sleep).achat(MESSAGES))
    assert server.request_count == 1
    assert sleep.delays == []
    assert "\n" not in str(raised.value)


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
    monkeypatch.setenv("MY_KEY", "sk-test")
    with LocalOpenAIServer(api_key="sk-test") as server:
        result = asyncio.run(
            OpenAIChatModel("fake-model", base_url=server.base_url, api_key_env="MY_KEY").achat(MESSAGES)
        )
    assert result.text


def test_unreachable_server_raises_config_error_naming_the_url():
    sleep = RecordedSleep()
    base_url = f"http://127.0.0.1:{_free_port()}/v1"
    model = OpenAIChatModel("fake-model", base_url=base_url, max_retries=2, sleep=sleep, timeout_s=5)
    with pytest.raises(ModelConfigError, match="cannot reach") as raised:
        asyncio.run(model.achat(MESSAGES))
    assert base_url in str(raised.value) and "running" in str(raised.value)
    assert len(sleep.delays) == 2


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
    assert clients.is_reasoning_model("gpt-5.4") and clients.is_reasoning_model("o4-mini")
    assert not clients.is_reasoning_model("gpt-4.1-mini")


# --------------------------------------------------------------------------- embedded backend


def test_embedded_reply_parsing_reads_text_and_usage():
    response = {
        "choices": [{"message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3},
    }
    result = chat_result_from_llamacpp(response, model="tiny", latency_s=0.5)
    assert (result.text, result.prompt_tokens, result.completion_tokens, result.model) == (
        "hello",
        12,
        3,
        "tiny",
    )


def test_embedded_error_dicts_become_clear_errors():
    overflow = {
        "error": {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": 900, "n_ctx": 512}
    }
    with pytest.raises(ContextOverflowError, match="900 tokens exceeds n_ctx=512"):
        chat_result_from_llamacpp(overflow, model="tiny", latency_s=0)
    with pytest.raises(ModelCallError, match="server_error"):
        chat_result_from_llamacpp(
            {"code": 500, "type": "server_error", "message": "bad"}, model="tiny", latency_s=0
        )
    with pytest.raises(ModelCallError, match="no choices"):
        chat_result_from_llamacpp({"choices": []}, model="tiny", latency_s=0)


def test_embedded_model_checks_the_file_but_loads_lazily(tmp_path):
    with pytest.raises(ModelConfigError, match="not found"):
        EmbeddedGGUFModel(tmp_path / "missing.gguf")
    model_file = tmp_path / "tiny.gguf"
    model_file.write_bytes(b"not really a model")
    model = EmbeddedGGUFModel(model_file, n_ctx=1024, default_max_tokens=33)
    assert model.name == "tiny" and not model.loaded
    body = model.request_body(MESSAGES, None, 0.0, 5)
    assert body["max_tokens"] == 33 and body["seed"] == 5 and body["temperature"] == 0.0


def test_embedded_threads_come_from_the_spec_then_the_environment(tmp_path, monkeypatch):
    model_file = tmp_path / "tiny.gguf"
    model_file.write_bytes(b"not really a model")
    monkeypatch.delenv(clients.THREADS_ENV, raising=False)
    assert EmbeddedGGUFModel(model_file).n_threads is None  # llama.cpp's own choice
    monkeypatch.setenv(clients.THREADS_ENV, "1")
    assert EmbeddedGGUFModel(model_file).n_threads == 1
    assert EmbeddedGGUFModel(model_file, n_threads=3).n_threads == 3
    monkeypatch.setenv(clients.THREADS_ENV, "two")
    with pytest.raises(ModelConfigError, match="SUPERSEDE_N_THREADS.*'two'"):
        EmbeddedGGUFModel(model_file)


def test_embedded_model_with_a_broken_file_raises_config_error(tmp_path):
    pytest.importorskip("xllamacpp")
    model_file = tmp_path / "broken.gguf"
    model_file.write_bytes(b"GGUF but truncated")
    with pytest.raises(ModelConfigError, match="could not load"):
        asyncio.run(EmbeddedGGUFModel(model_file, n_ctx=256).achat(MESSAGES))


# --------------------------------------------------------------------------- model files


@pytest.fixture
def empty_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(clients.MODEL_DIR_ENV, raising=False)
    return home


def _refuse_download(**kwargs):
    raise AssertionError(f"unexpected download {kwargs}")


def test_resolve_prefers_explicit_file_then_dir_then_env_then_home(tmp_path, empty_home, monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _refuse_download)
    name = clients.DEFAULT_GGUF_FILE
    home_file = empty_home / ".cache" / "supersede" / "models" / name
    home_file.parent.mkdir(parents=True)
    home_file.write_bytes(b"home")
    assert resolve_default_gguf() == home_file

    env_dir = tmp_path / "env"
    env_dir.mkdir()
    (env_dir / name).write_bytes(b"env")
    monkeypatch.setenv(clients.MODEL_DIR_ENV, str(env_dir))
    assert resolve_default_gguf() == env_dir / name

    explicit_dir = tmp_path / "explicit"
    explicit_dir.mkdir()
    (explicit_dir / name).write_bytes(b"explicit")
    assert resolve_default_gguf(explicit_dir) == explicit_dir / name

    other = tmp_path / "other.gguf"
    other.write_bytes(b"x")
    assert resolve_default_gguf(other) == other
    with pytest.raises(ModelConfigError, match="not found"):
        resolve_default_gguf(tmp_path / "absent.gguf")


def test_resolve_downloads_into_the_model_dir_when_nothing_is_local(tmp_path, empty_home, monkeypatch):
    import huggingface_hub

    calls = []

    def fake_download(repo_id, filename, local_dir):
        calls.append((repo_id, filename, local_dir))
        target = local_dir / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"downloaded")
        return str(target)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    monkeypatch.setenv(clients.MODEL_DIR_ENV, str(tmp_path / "models"))
    path = resolve_default_gguf()
    assert path == tmp_path / "models" / clients.DEFAULT_GGUF_FILE and path.read_bytes() == b"downloaded"
    assert calls == [(clients.DEFAULT_GGUF_REPO, clients.DEFAULT_GGUF_FILE, tmp_path / "models")]
    assert resolve_default_gguf() == path and len(calls) == 1  # found locally the second time


def test_resolve_failure_says_what_to_set(empty_home, monkeypatch):
    import huggingface_hub

    def offline(**kwargs):
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    with pytest.raises(ModelConfigError, match=clients.MODEL_DIR_ENV) as raised:
        resolve_default_gguf()
    assert "no network" in str(raised.value) and "\n" not in str(raised.value)


# --------------------------------------------------------------------------- factory


def test_make_openai_model_from_spec(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = make_chat_model({"backend": "openai", "model": "gpt-4.1-mini", "max_retries": 2})
    assert isinstance(model, OpenAIChatModel) and model.name == "gpt-4.1-mini" and model.max_retries == 2
    inferred = make_chat_model({"model": "m", "base_url": "http://localhost:8000/v1"})
    assert isinstance(inferred, OpenAIChatModel) and inferred.base_url == "http://localhost:8000/v1"


def test_make_embedded_model_from_path_and_default(tmp_path, empty_home, monkeypatch):
    model_file = tmp_path / "small.gguf"
    model_file.write_bytes(b"x")
    model = make_chat_model({"backend": "embedded", "model_path": str(model_file), "n_ctx": 2048})
    assert isinstance(model, EmbeddedGGUFModel) and model.n_ctx == 2048 and not model.loaded

    monkeypatch.setenv(clients.MODEL_DIR_ENV, str(tmp_path))
    (tmp_path / clients.DEFAULT_GGUF_FILE).write_bytes(b"x")
    default = make_chat_model({})
    assert (
        isinstance(default, EmbeddedGGUFModel) and default.model_path == tmp_path / clients.DEFAULT_GGUF_FILE
    )
    (tmp_path / "other.gguf").write_bytes(b"x")
    by_file = make_chat_model({"backend": "embedded", "model_file": "other.gguf", "name": "Other"})
    assert by_file.model_path == tmp_path / "other.gguf" and by_file.name == "Other"


def test_make_model_rejects_unknown_backends_and_keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with pytest.raises(ValueError, match="openai, embedded, hf"):
        make_chat_model({"backend": "carrier-pigeon"})
    with pytest.raises(ValueError, match="unknown key.*temprature"):
        make_chat_model({"backend": "openai", "model": "m", "temprature": 0})
    with pytest.raises(ValueError, match="needs a 'model'"):
        make_chat_model({"backend": "openai"})


def test_make_hf_model_delegates_lazily(monkeypatch):
    from supersede_lib.models.hf import HFChatModel as real_hf_chat_model

    received = {}

    class FakeHFChatModel:
        def __init__(self, **kwargs):
            received.update(kwargs)
            self.name = "hf"

    fake_module = types.ModuleType("supersede_lib.models.hf")
    fake_module.HFChatModel = FakeHFChatModel
    monkeypatch.setitem(sys.modules, "supersede_lib.models.hf", fake_module)
    model = make_chat_model({"backend": "hf", "model": "Qwen/Qwen2.5-0.5B-Instruct", "adapter_path": "lora/"})
    assert isinstance(model, FakeHFChatModel)
    assert received == {"model_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct", "adapter_path": "lora/"}
    # the keywords must fit the real class, not only this fake
    inspect.signature(real_hf_chat_model).bind(**received)


def test_make_model_with_cache_path_wraps_in_cache(tmp_path):
    with LocalOpenAIServer() as server:
        model = make_chat_model(
            {"model": "fake-model", "base_url": server.base_url, "cache_path": tmp_path / "c.db"}
        )
        assert isinstance(model, CachedChatModel) and model.name == "fake-model"
        asyncio.run(model.achat(MESSAGES))
        asyncio.run(model.achat(MESSAGES))
    assert server.request_count == 1
    assert model.cache.hits == 1 and model.cache.misses == 1
