"""Reliability under fire: the adaptive concurrency limit, and one fault-injection run.

The fault-injection test runs 40 questions against the local fake server while it answers with
429 storms, 500s, timeouts, malformed bodies, empty `choices`, dropped connections, null content
and cut replies, and one question fails on every call. The run must finish, mark exactly that
question failed, write every file, and a re-run through the response cache must repeat no
finished call. Backoff and latencies are milliseconds, so it takes a few seconds.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time

import pytest
from conftest import make_episode

from supersede_lib.eval.run_files import read_trajectories
from supersede_lib.eval.runner import RunSettings, run_condition
from supersede_lib.models import rate_limit
from supersede_lib.models.cache import CachedChatModel, ResponseCache
from supersede_lib.models.local_server import LocalOpenAIServer, ScriptedFailure
from supersede_lib.models.openai_api import OpenAIChatModel
from supersede_lib.models.rate_limit import AdaptiveLimit
from tests.test_runner import SESSION_MARKER, city_responder

NO_KEY_ENV = "SUPERSEDE_TEST_UNSET_KEY"


# --------------------------------------------------------------------------------------------
# AdaptiveLimit
# --------------------------------------------------------------------------------------------


def test_limit_halves_under_rate_limiting_and_grows_back_after_a_window_of_successes():
    limit = AdaptiveLimit(8, minimum=2, cooldown_s=0.0, label="test")
    for expected in (4, 2, 2):
        limit.on_rate_limited()
        assert limit.limit == expected
    for _ in range(2):
        limit.on_success()
    assert limit.limit == 3
    for _ in range(3):
        limit.on_success()
    assert limit.limit == 4
    assert limit.stats() == {
        "initial": 8,
        "final": 4,
        "lowest": 2,
        "rate_limited_attempts": 3,
        "timed_out_attempts": 0,
        "decreases": 2,
        "increases": 2,
    }


def test_one_burst_of_429s_counts_once_within_the_cooldown():
    limit = AdaptiveLimit(8, cooldown_s=60.0)
    for _ in range(8):  # every request in flight hit the same rate limit
        limit.on_rate_limited()
    assert (limit.limit, limit.decreases, limit.rate_limited) == (4, 1, 8)


def test_in_flight_work_never_exceeds_the_lowered_limit_and_waiters_can_be_cancelled():
    limit = AdaptiveLimit(6, cooldown_s=0.0)
    observed: list[tuple[int, int]] = []

    async def work(index: int) -> None:
        async with limit:
            observed.append((limit.in_flight, limit.limit))
            if index == 0:
                limit.on_rate_limited()  # 6 -> 3
            await asyncio.sleep(0.002)

    async def main() -> None:
        first_wave = [asyncio.ensure_future(work(index)) for index in range(6)]
        await asyncio.sleep(0)  # the first six start before the limit drops
        later = [asyncio.ensure_future(work(index)) for index in range(6, 20)]
        later[-1].cancel()  # a cancelled waiter gives its place back
        await asyncio.gather(*first_wave, *later, return_exceptions=True)

    asyncio.run(main())
    assert len(observed) == 19
    assert all(in_flight <= 3 for in_flight, _ in observed[6:])
    assert limit.in_flight == 0


def test_reports_reach_only_the_installed_limit():
    outer, inner = AdaptiveLimit(4, cooldown_s=0.0), AdaptiveLimit(4, cooldown_s=0.0)
    rate_limit.report_rate_limited()  # none installed: nothing happens
    with outer.installed():
        with inner.installed():
            rate_limit.report_rate_limited()
        rate_limit.report_success()
    assert (outer.rate_limited, inner.rate_limited) == (0, 1)
    with pytest.raises(ValueError, match="minimum"):
        AdaptiveLimit(2, minimum=3)


# --------------------------------------------------------------------------------------------
# Fault injection: 40 questions, a mix of every failure, one question that never succeeds
# --------------------------------------------------------------------------------------------

POISONED = "ep-17"
STORMS = {*range(30, 38), *range(100, 106)}  # consecutive requests answered 429
FAULT_CYCLE = (
    ("status", 500),
    ("timeout", None),
    ("malformed", None),
    ("status", 503),
    ("null_content", "length"),
    ("empty_choices", None),
    ("close", None),
    ("missing_choices", None),
    ("null_content", None),
    ("retry_after", 0),
)
FAULT_EVERY = 7  # every 7th request (outside the storms) gets the next fault of the cycle
TIMEOUT_S = 0.1


class FaultyResponder:
    """City replies, with faults scheduled by request number and one question always failing."""

    def __init__(self) -> None:
        self._counter = itertools.count()
        self._faults = itertools.cycle(FAULT_CYCLE)
        self._lock = threading.Lock()
        self.injected: list[str] = []

    def __call__(self, messages) -> str:
        if f"[{POISONED}]" in messages[-1]["content"]:
            raise ScriptedFailure(("status", 500))
        with self._lock:
            number = next(self._counter)
            fault = None
            if number in STORMS:
                fault = ("status", 429)
            elif number % FAULT_EVERY == FAULT_EVERY - 1:
                fault = next(self._faults)
            if fault is not None:
                self.injected.append(fault[0] if fault[0] != "status" else str(fault[1]))
        if fault is None:
            return city_responder(messages)
        if fault[0] == "timeout":
            time.sleep(TIMEOUT_S * 3)  # the client gives up first and retries
            return city_responder(messages)
        raise ScriptedFailure(fault)


def _model(server: LocalOpenAIServer, cache_path) -> CachedChatModel:
    inner = OpenAIChatModel(
        "fake-model",
        base_url=server.base_url,
        api_key_env=NO_KEY_ENV,
        timeout_s=TIMEOUT_S,
        max_retries=25,  # more than the longest run of faults one call can meet
        backoff_base_s=0.001,
        backoff_max_s=0.005,
    )
    return CachedChatModel(inner, ResponseCache(cache_path))


def test_forty_questions_under_fire_finish_with_exactly_the_poisoned_one_failed(tmp_path, monkeypatch):
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    monkeypatch.setattr(rate_limit, "DEFAULT_COOLDOWN_S", 0.02)
    episodes = [make_episode(f"ep-{index}") for index in range(40)]
    cache_path = tmp_path / "responses.db"
    settings = RunSettings(concurrency=8)

    responder = FaultyResponder()
    with LocalOpenAIServer(latency_s=0.002, responder=responder) as server:
        first = run_condition(
            episodes,
            "bounded_memory",
            _model(server, cache_path),
            settings,
            output_dir=tmp_path / "first",
            run_name="under_fire",
            progress=False,
        )
    assert {"429", "500", "503", "timeout", "malformed", "null_content", "empty_choices", "close"} <= set(
        responder.injected
    )

    # The run finished, every file is there, and exactly the poisoned question failed.
    frame = first.frame.set_index("episode_id")
    assert len(frame) == 40 and list(frame.index[frame["failed"]]) == [POISONED]
    assert "notes turn failed" in frame.loc[POISONED, "error"] and "500" in frame.loc[POISONED, "error"]
    assert frame.drop(index=POISONED)["error"].isna().all()
    assert len(read_trajectories(first.paths["trajectories"])) == 40
    manifest = json.loads(first.paths["manifest"].read_text())
    assert manifest["failed_episode_ids"] == [POISONED] and manifest["totals"]["failed_questions"] == 1
    assert manifest["totals"]["empty_replies"] >= 1 and manifest["totals"]["cut_calls"] >= 1
    assert manifest["concurrency"]["decreases"] >= 1  # the 429 storms lowered the limit
    # every finished call is stored (identical prompts, e.g. two answers from wiped notes, share one)
    assert manifest["cache"]["entries"] == int(frame["n_calls"].sum() - frame["cached_calls"].sum())
    # Only questions hit by an empty reply can be wrong; the rest are right.
    untouched = frame[(frame["empty_replies"] == 0) & ~frame["failed"]]
    assert (untouched["verdict"] == "correct").all()

    # A re-run through the cache repeats no finished call: the server sees the poisoned question, and
    # the calls that came back empty (stored as tentative: a transient empty reply is asked again).
    emptied = set(frame.index[frame["empty_replies"] > 0])
    with LocalOpenAIServer(port=server.port, responder=city_responder) as healthy_server:  # same endpoint
        second = run_condition(
            episodes,
            "bounded_memory",
            _model(healthy_server, cache_path),
            settings,
            output_dir=tmp_path / "second",
            run_name="under_fire",
            progress=False,
        )
        asked = {marker[0] for body in healthy_server.requests for marker in SESSION_MARKER.findall(body["messages"][-1]["content"])}  # fmt: skip
    assert (
        {POISONED} <= asked <= {POISONED} | emptied
    )  # (an answer prompt from empty notes names no question)
    assert not second.frame["failed"].any()
    again = second.frame.set_index("episode_id").drop(index=[POISONED, *emptied])
    assert (again["cached_calls"] == frame.drop(index=[POISONED, *emptied])["n_calls"]).all()
    for path in second.paths.values():
        assert path.exists()
    assert (again["answer"] == frame.drop(index=[POISONED, *emptied])["answer"]).all()


def test_a_dropped_connection_is_its_own_counted_kind_in_the_manifest(tmp_path, monkeypatch):
    """On the runner's own loop (aiohttp, which reports a closed connection as a connect timeout), a
    connection the server drops mid-run is retried and counted as dropped, not as a timeout."""
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    with LocalOpenAIServer(responder=city_responder) as server:
        server.add_failures([("close", None)])
        model = OpenAIChatModel(
            "fake-model", base_url=server.base_url, api_key_env=NO_KEY_ENV, backoff_base_s=0.001
        )
        result = run_condition(
            [make_episode(f"ep-{index}") for index in range(2)],
            "full_context",
            model,
            RunSettings(concurrency=1),
            output_dir=tmp_path,
            run_name="dropped",
            progress=False,
        )
    manifest = json.loads(result.paths["manifest"].read_text())
    stats = manifest["model_stats"]
    assert (stats["dropped_connections"], stats["timeouts"], stats["retries"]) == (1, 0, 1)
    assert manifest["concurrency"]["timed_out_attempts"] == 0  # not taken for a queueing server
    assert any("1 after a dropped connection" in warning for warning in manifest["warnings"])
    assert not result.frame["failed"].any()
