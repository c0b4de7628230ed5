"""The model spec factory: backend inference, key checks, each backend built from a plain dict, and
the response-cache wrapper. No network, no model load."""

import asyncio
import inspect
from pathlib import Path

import pytest

from supersede_lib.models import spec
from supersede_lib.models.cache import CachedChatModel
from supersede_lib.models.gguf import DEFAULT_GGUF_FILE, MODEL_DIR_ENV, EmbeddedGGUFModel
from supersede_lib.models.hf import HFChatModel
from supersede_lib.models.local_server import LocalOpenAIServer
from supersede_lib.models.openai_api import OpenAIChatModel
from supersede_lib.models.spec import make_chat_model

MESSAGES = [{"role": "user", "content": "hello"}]


def test_make_openai_model_from_spec(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-model-spec")
    model = make_chat_model({"backend": "openai", "model": "gpt-4.1-mini", "max_retries": 2})
    assert isinstance(model, OpenAIChatModel) and model.name == "gpt-4.1-mini" and model.max_retries == 2
    inferred = make_chat_model({"model": "m", "base_url": "http://localhost:8000/v1"})
    assert isinstance(inferred, OpenAIChatModel) and inferred.base_url == "http://localhost:8000/v1"


def test_make_embedded_model_from_path_and_default(tmp_path, empty_home, monkeypatch):
    model_file = tmp_path / "small.gguf"
    model_file.write_bytes(b"x")
    model = make_chat_model({"backend": "embedded", "model_path": str(model_file), "n_ctx": 2048})
    assert isinstance(model, EmbeddedGGUFModel) and model.n_ctx == 2048 and not model.loaded

    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path))
    (tmp_path / DEFAULT_GGUF_FILE).write_bytes(b"x")
    default = make_chat_model({})
    assert isinstance(default, EmbeddedGGUFModel) and default.model_path == tmp_path / DEFAULT_GGUF_FILE
    (tmp_path / "other.gguf").write_bytes(b"x")
    by_file = make_chat_model({"backend": "embedded", "model_file": "other.gguf", "name": "Other"})
    assert by_file.model_path == tmp_path / "other.gguf" and by_file.name == "Other"


def test_an_embedded_model_without_its_file_is_built_at_its_first_call(tmp_path, empty_home, monkeypatch):
    """A replay answers from the cache without the GGUF file; the first live call looks it up."""
    from supersede_lib.models import engine, gguf
    from supersede_lib.models.cache import ResponseCache
    from supersede_lib.models.chat import ChatResult, ModelConfigError

    def offline(**_):
        raise OSError("no network in this test")

    monkeypatch.setattr(gguf.huggingface_hub, "hf_hub_download", offline)
    deferred = make_chat_model(
        {"backend": "embedded", "model_file": "absent.gguf", "name": "Absent", "engine": "llamacpp"}
    )
    assert isinstance(deferred, engine.DeferredEmbeddedModel) and not deferred.built
    assert (deferred.name, deferred.cache_namespace) == ("Absent", "embedded")  # the built model's
    cached = CachedChatModel(deferred, ResponseCache(tmp_path / "c.sqlite"))
    key = cached.key_for(MESSAGES, None, 0.0, 0)
    cached.cache.put(key, ChatResult(text="recorded", prompt_tokens=1, completion_tokens=1, latency_s=0.1))
    assert asyncio.run(cached.achat(MESSAGES)).text == "recorded" and not deferred.built
    with pytest.raises(ModelConfigError, match=r"absent\.gguf is not in"):
        asyncio.run(cached.achat([{"role": "user", "content": "not recorded"}]))

    (empty_home / ".cache" / "supersede" / "models").mkdir(parents=True)
    (empty_home / ".cache" / "supersede" / "models" / "absent.gguf").write_bytes(b"x")
    built = deferred._build()  # the file arrived: the first live call builds the chosen engine
    assert isinstance(built, EmbeddedGGUFModel) and built.name == "Absent"
    assert built.cache_namespace == deferred.cache_namespace  # replies recorded by either are shared
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path / "none"))
    assert make_chat_model({}).name == Path(DEFAULT_GGUF_FILE).stem  # the default file's name, unbuilt
    with pytest.raises(ModelConfigError, match="not found"):  # an explicit path stays a typo, not a deferral
        make_chat_model({"backend": "embedded", "model_dir": str(tmp_path / "typo.gguf")})


def test_make_model_rejects_unknown_backends_and_keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-model-spec")
    with pytest.raises(ValueError, match="openai, embedded, hf"):
        make_chat_model({"backend": "carrier-pigeon"})
    with pytest.raises(ValueError, match="unknown key.*temprature"):
        make_chat_model({"backend": "openai", "model": "m", "temprature": 0})
    with pytest.raises(ValueError, match="needs a 'model'"):
        make_chat_model({"backend": "openai"})


def test_make_hf_model_passes_the_spec_as_keywords(monkeypatch):
    received = {}

    class FakeHFChatModel:
        def __init__(self, **kwargs):
            received.update(kwargs)
            self.name = "hf"

    monkeypatch.setattr(spec, "HFChatModel", FakeHFChatModel)
    model = make_chat_model({"backend": "hf", "model": "Qwen/Qwen2.5-0.5B-Instruct", "adapter_path": "lora/"})
    assert isinstance(model, FakeHFChatModel)
    assert received == {"model_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct", "adapter_path": "lora/"}
    # the keywords must fit the real class, not only this fake
    inspect.signature(HFChatModel).bind(**received)


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


@pytest.mark.parametrize(
    "key_and_value",
    [("max_retries", 2.5), ("max_retries", 2.0), ("reasoning_token_floor", 4096.0), ("max_retries", True)],
)
def test_a_count_given_as_a_float_is_refused_naming_the_key_before_any_call(key_and_value) -> None:
    key, value = key_and_value
    options = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", key: value}
    with pytest.raises(ValueError, match=f"^{key} must be an integer .*got {value!r}"):
        spec.check_model_spec(options)
    with pytest.raises(ValueError, match=f"^{key} must be an integer"):
        make_chat_model(options)  # built from code, not a profile: refused the same way
    assert spec.INTEGER_KEYS <= set(spec.NUMBER_BOUNDS)
