"""Nothing paid is lost or paid twice (issue 24, item 4): fault injection against the local fake server.

- a 401 mid-run keeps every reply already received (in the cache), writes the finished rows and
  manifest, then stops with a clear error; a re-run after the fix pays only for the rest;
- a cache damaged mid-run stops the run naming the file and the way out, or (when allowed) runs
  uncached with a warning in the manifest and a hit rate that does not claim what it did not hit;
- two processes running the same study on one cache pay for each call once;
- a run where every question fails is written and named failed, never a result.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import threading

import pytest
from conftest import make_episode

from supersede_lib.eval.runner import RunSettings, RunStoppedError, arun_condition, run_condition
from supersede_lib.models.cache import CacheCorruptError, CachedChatModel, ResponseCache
from supersede_lib.models.local_server import LocalOpenAIServer, ScriptedFailure
from supersede_lib.models.openai_api import OpenAIChatModel
from tests.test_cache import damaged_after_opening
from tests.test_runner import city_responder

NO_KEY_ENV = "SUPERSEDE_TEST_UNSET_KEY"


def _prompt(messages) -> str:
    return json.dumps(messages, sort_keys=True)


class RevokedKeyResponder:
    """City replies until `good_replies` were sent, then 401 for everything (a key revoked mid-run)."""

    def __init__(self, good_replies: int) -> None:
        self.good_replies = good_replies
        self.served: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, messages) -> str:
        with self._lock:
            if len(self.served) >= self.good_replies:
                raise ScriptedFailure(("status", 401))
            self.served.append(_prompt(messages))
        return city_responder(messages)


def _model(server: LocalOpenAIServer, cache_path, **options) -> CachedChatModel:
    inner = OpenAIChatModel("fake-model", base_url=server.base_url, api_key_env=NO_KEY_ENV, max_retries=0)
    return CachedChatModel(inner, ResponseCache(cache_path), **options)


def test_a_401_mid_run_keeps_every_reply_received_and_writes_the_finished_rows(tmp_path, monkeypatch):
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    episodes = [make_episode(f"ep-{index}") for index in range(12)]  # 4 calls each
    cache_path = tmp_path / "responses.db"
    responder = RevokedKeyResponder(good_replies=22)
    with LocalOpenAIServer(latency_s=0.01, responder=responder) as server:
        with pytest.raises(RunStoppedError) as raised:
            run_condition(episodes, "bounded_memory", _model(server, cache_path), RunSettings(concurrency=6),
                          output_dir=tmp_path, run_name="revoked", progress=False)  # fmt: skip
    message = str(raised.value)
    assert "401" in message and "revoked.csv" in message and "pays only for the rest" in message
    # every reply the server sent is in the cache
    assert len(ResponseCache(cache_path)) == len(responder.served) == 22
    manifest = json.loads((tmp_path / "revoked.manifest.json").read_text())
    rows = (tmp_path / "revoked.csv").read_text().strip().splitlines()[1:]
    unfinished = manifest["stopped"]["unfinished_episode_ids"]
    assert 0 < len(rows) == manifest["totals"]["questions"] < 12 and len(rows) + len(unfinished) == 12
    assert "401" in manifest["stopped"]["error"] and "stopped early" in manifest["warnings"][0]

    # the key fixed, the same server on its port (another port may serve another model): only the rest is paid
    with LocalOpenAIServer(port=server.port, responder=city_responder) as healthy:
        again = run_condition(episodes, "bounded_memory", _model(healthy, cache_path), RunSettings(concurrency=6),
                              output_dir=tmp_path, run_name="revoked", progress=False)  # fmt: skip
        repeated = {_prompt(body["messages"]) for body in healthy.requests} & set(responder.served)
    assert not repeated and len(again.frame) == 12 and (again.frame["verdict"] == "correct").all()
    assert "stopped" not in json.loads(again.paths["manifest"].read_text())


def _run_on_a_cache_damaged_mid_run(tmp_path, **options):
    """A 4-question run whose cache opens fine and is damaged before the first call; the server too."""
    path = tmp_path / "responses.db"
    episodes = [make_episode(f"ep-{index}") for index in range(4)]
    with LocalOpenAIServer(responder=city_responder) as server:
        inner = OpenAIChatModel("fake-model", base_url=server.base_url, api_key_env=NO_KEY_ENV)
        model = damaged_after_opening(path, inner, **options)
        try:
            return run_condition(
                episodes, "bounded_memory", model, output_dir=tmp_path, progress=False
            ), server
        except RunStoppedError as error:
            return error, server


def test_a_cache_damaged_mid_run_stops_the_run_naming_the_file_and_the_way_out(tmp_path, monkeypatch):
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    error, server = _run_on_a_cache_damaged_mid_run(tmp_path)
    assert isinstance(error, RunStoppedError) and server.request_count == 0
    assert isinstance(error.__cause__, CacheCorruptError)
    assert str(tmp_path / "responses.db") in str(error) and "move it aside" in str(error)


def test_a_cache_damaged_mid_run_runs_uncached_only_when_allowed_and_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    result, server = _run_on_a_cache_damaged_mid_run(tmp_path, on_damage="run_uncached")
    assert server.request_count == 16
    manifest = json.loads(result.paths["manifest"].read_text())
    assert (result.frame["verdict"] == "correct").all()
    assert manifest["cache"]["hit_rate"] == 0.0 and manifest["cache"]["hits"] == 0
    assert manifest["cache"]["misses"] >= 16
    assert any("damaged mid-run" in warning and "responses.db" in warning for warning in manifest["warnings"])


def _shared_cache_study(cache_path, base_url, barrier, output_dir) -> None:
    barrier.wait()  # both processes start together
    episodes = [make_episode(f"ep-{index}") for index in range(8)]
    inner = OpenAIChatModel("fake-model", base_url=base_url, api_key_env=NO_KEY_ENV, max_retries=0)
    model = CachedChatModel(inner, ResponseCache(cache_path))
    asyncio.run(
        arun_condition(
            episodes,
            "bounded_memory",
            model,
            RunSettings(concurrency=4),
            output_dir=output_dir,
            progress=False,
        )
    )


def test_two_processes_sharing_one_cache_pay_for_each_call_once(tmp_path, monkeypatch):
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    context = multiprocessing.get_context("fork")
    with LocalOpenAIServer(latency_s=0.05, responder=city_responder) as server:
        barrier = context.Barrier(2)
        workers = [
            context.Process(
                target=_shared_cache_study,
                args=(tmp_path / "responses.db", server.base_url, barrier, tmp_path / f"run{index}"),
            )
            for index in range(2)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=120)
        assert [worker.exitcode for worker in workers] == [0, 0]
        prompts = [_prompt(body["messages"]) for body in server.requests]
    assert len(prompts) == len(set(prompts)) == 8 * 4  # every call paid once, by one of the two
    for index in range(2):
        (manifest,) = (tmp_path / f"run{index}").glob("*.manifest.json")
        assert json.loads(manifest.read_text())["totals"]["questions"] == 8


def test_a_run_where_every_call_fails_is_written_and_named_failed(tmp_path, monkeypatch):
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    episodes = [make_episode(f"ep-{index}") for index in range(3)]
    with LocalOpenAIServer(failures=[("status", 503)] * 100) as server:
        result = run_condition(episodes, "full_context", _model(server, tmp_path / "c.db"),
                               output_dir=tmp_path, run_name="down", progress=False)  # fmt: skip
    manifest = json.loads(result.paths["manifest"].read_text())
    assert result.frame["failed"].all() and manifest["totals"]["failed_questions"] == 3
    assert manifest["accuracy"]["matcher_completed_only"] is None
    assert "3 of 3 questions failed" in manifest["warnings"][0]
    assert len(ResponseCache(tmp_path / "c.db")) == 0  # failures are never cached


def test_a_profile_may_allow_running_uncached_and_refuses_other_words(tmp_path, monkeypatch):
    from supersede_lib import profiles

    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    profile = profiles.load_profile("smoke", {"cache_on_damage": "run_uncached"})
    assert profiles.model_for(profile.model, profile).on_damage == "run_uncached"
    assert profiles.model_for(profile.model, profiles.load_profile("smoke")).on_damage == "stop"
    with pytest.raises(ValueError, match="cache_on_damage"):
        profiles.load_profile("smoke", {"cache_on_damage": "ignore"})
