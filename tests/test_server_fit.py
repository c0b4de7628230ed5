"""Fit to the server (issue 24, item 7): concurrency sized to what a self-hosted server offers,
timeouts as back-pressure, retries as manifest warnings, per-run (not cumulative) stats, and what
served each call (model id, system fingerprint, cached prompt tokens); on the fake and on llama.cpp's
own HTTP server."""

from __future__ import annotations

import json

import pytest
from conftest import make_episode

from supersede_lib.eval.run_files import read_trajectories
from supersede_lib.eval.runner import RunSettings, run_condition
from supersede_lib.models import rate_limit
from supersede_lib.models.cache import CachedChatModel, ResponseCache
from supersede_lib.models.local_server import FAKE_FINGERPRINT, LocalOpenAIServer
from supersede_lib.models.openai_api import OpenAIChatModel
from tests.test_runner import city_responder

NO_KEY_ENV = "SUPERSEDE_TEST_UNSET_KEY"


def _model(base_url: str, **options) -> OpenAIChatModel:
    return OpenAIChatModel("fake-model", base_url=base_url, api_key_env=NO_KEY_ENV, **options)


def test_concurrency_is_sized_to_the_slots_the_server_offers_and_the_manifest_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    episodes = [make_episode(f"ep-{index}") for index in range(6)]
    with LocalOpenAIServer(latency_s=0.02, responder=city_responder, slots=2) as server:
        result = run_condition(episodes, "bounded_memory", _model(server.base_url), RunSettings(concurrency=8),
                               output_dir=tmp_path, progress=False)  # fmt: skip
        assert server.max_in_flight <= 2
    manifest = json.loads(result.paths["manifest"].read_text())
    assert manifest["concurrency"]["server_slots"] == 2 and manifest["concurrency"]["initial"] == 2
    assert manifest["concurrency"]["requested"] == 8
    assert any("serves 2 request(s) at once" in warning for warning in manifest["warnings"])
    assert manifest["model_stats"]["server"] == {"total_slots": 2, "models": ["fake-model"]}


def test_a_server_that_does_not_say_keeps_the_concurrency_asked_for(tmp_path, monkeypatch):
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    with LocalOpenAIServer(responder=city_responder) as server:  # no /props, like vLLM or OpenAI
        result = run_condition([make_episode()], "full_context", _model(server.base_url), RunSettings(concurrency=3), progress=False)  # fmt: skip
    assert (
        result.manifest["concurrency"]["initial"] == 3
        and result.manifest["concurrency"]["server_slots"] is None
    )
    assert not result.manifest["warnings"]


def test_timeouts_lower_the_concurrency_and_retries_are_manifest_warnings(tmp_path, monkeypatch):
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    monkeypatch.setattr(rate_limit, "DEFAULT_COOLDOWN_S", 0.0)
    episodes = [make_episode(f"ep-{index}") for index in range(6)]
    failures = [("sleep", 0.5)] * 4  # a queueing server: the first requests wait past the timeout
    with LocalOpenAIServer(responder=city_responder, failures=failures) as server:
        model = _model(server.base_url, timeout_s=0.2, backoff_base_s=0.001, backoff_max_s=0.002)
        result = run_condition(episodes, "bounded_memory", model, RunSettings(concurrency=4), progress=False)
    concurrency, stats = result.manifest["concurrency"], result.manifest["model_stats"]
    assert (
        concurrency["timed_out_attempts"] == 4 and concurrency["decreases"] >= 1 and concurrency["lowest"] < 4
    )
    assert stats["timeouts"] == 4 and stats["retries"] == 4
    assert any("4 retries this run (4 after a timeout" in warning for warning in result.manifest["warnings"])


def test_a_manifest_counts_its_own_run_not_every_run_of_the_model_and_says_what_served(tmp_path, monkeypatch):
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    with LocalOpenAIServer(responder=city_responder, model="served-model-v2") as server:
        model = CachedChatModel(_model(server.base_url), ResponseCache(tmp_path / "c.db"))
        first = run_condition(
            [make_episode("a")], "bounded_memory", model, output_dir=tmp_path, progress=False
        )
        second = run_condition([make_episode("a"), make_episode("b")], "full_context", model, output_dir=tmp_path, progress=False)  # fmt: skip
    assert first.manifest["model_stats"]["calls"] == first.manifest["totals"]["calls"] == 4
    assert second.manifest["model_stats"]["calls"] == second.manifest["totals"]["calls"] == 2
    assert (
        second.manifest["model_stats"]["prompt_tokens"] == second.manifest["totals"]["uncached_prompt_tokens"]
    )
    assert second.manifest["cache"]["misses"] == 2 and second.manifest["cache"]["hits"] == 0
    assert second.manifest["model_stats"]["served_models"] == {"fake-model": 2}  # the request's model echoed
    assert second.manifest["model_stats"]["system_fingerprints"] == [FAKE_FINGERPRINT]
    (turn,) = read_trajectories(second.paths["trajectories"])[0]["turns"]
    assert turn["served_model"] == "fake-model" and turn["system_fingerprint"] == FAKE_FINGERPRINT
    assert turn["cached_prompt_tokens"] == 0


@pytest.mark.realmodel
def test_llama_cpps_own_server_is_read_for_its_slots_and_what_served(tmp_path, llama_server):
    base_url, model_file = llama_server
    model = OpenAIChatModel(model_file.stem, base_url=base_url, api_key_env=NO_KEY_ENV, timeout_s=300)
    episodes = [make_episode(f"ep-{index}", n_sessions=2) for index in range(2)]
    settings = RunSettings(concurrency=8, max_tokens_answer=16)
    result = run_condition(episodes, "bounded_memory", model, settings, output_dir=tmp_path, progress=False)
    manifest = result.manifest
    assert manifest["concurrency"]["server_slots"] == 1 and manifest["concurrency"]["initial"] == 1
    assert manifest["model_stats"]["server"]["models"] == [str(model_file)]
    assert manifest["model_stats"]["served_models"] == {str(model_file): 6}
    assert manifest["model_stats"]["system_fingerprints"]  # llama.cpp names its build
    turns = [
        turn for trajectory in read_trajectories(result.paths["trajectories"]) for turn in trajectory["turns"]
    ]
    assert all(isinstance(turn["cached_prompt_tokens"], int) for turn in turns)
    assert manifest["model_stats"]["cached_prompt_tokens"] == sum(
        turn["cached_prompt_tokens"] for turn in turns
    )
