"""The runner: rows, trajectories, output files, concurrency, judge columns, Jupyter-safe sync call.

The first part drives a small scripted in-process ChatModel; the second goes over HTTP to
`local_server.LocalOpenAIServer` through `openai_api.OpenAIChatModel`: the exact requests on the wire
(no re-feed), cached re-runs, and a run killed with SIGKILL then resumed from the cache.
"""

from __future__ import annotations

import asyncio
import json
import logging
import platform
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from conftest import make_episode

from supersede_lib.agent.episode import Episode
from supersede_lib.agent.rollout import BoundedMemoryRollout
from supersede_lib.eval import runner, scheduling
from supersede_lib.eval.judge import LongMemEvalJudge
from supersede_lib.eval.memory_metrics import notes_holdings
from supersede_lib.eval.rows import MEMORY_COLUMNS
from supersede_lib.eval.run_files import read_trajectories
from supersede_lib.eval.runner import (
    ROW_COLUMNS,
    RunSettings,
    arun_rollout,
    notes_max_tokens_for,
    run_condition,
    run_conditions,
)
from supersede_lib.models import rate_limit
from supersede_lib.models.cache import CachedChatModel, ResponseCache
from supersede_lib.models.chat import ChatModel, ChatResult, ModelConfigError
from supersede_lib.models.local_server import LocalOpenAIServer, ScriptedFailure
from supersede_lib.models.openai_api import OpenAIChatModel

CITY_PATTERN = re.compile(r"my city is (\w+)")
EPISODE_TAG = re.compile(r"\[([\w-]+)\]")


class CityModel:
    """Scripted agent: notes = 'city: X' from the newest session; answer = the city in the notes.

    `forget_after` makes the notes drop the city at that notes turn (to exercise holds_current).
    Tracks how many calls are in flight overall and per episode.
    """

    def __init__(self, name: str = "city-model", delay_s: float = 0.005, stale: bool = False) -> None:
        self.name = name
        self.delay_s = delay_s
        self.stale = stale  # keep the FIRST city ever seen instead of overwriting
        self.calls: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.in_flight_per_episode: dict[str, int] = {}
        self.max_in_flight_per_episode: dict[str, int] = {}

    async def achat(self, messages, *, max_tokens=None, temperature=0.0, seed=0) -> ChatResult:
        tag = EPISODE_TAG.search(messages[-1]["content"])
        episode_id = tag.group(1) if tag else "?"
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.in_flight_per_episode[episode_id] = self.in_flight_per_episode.get(episode_id, 0) + 1
        self.max_in_flight_per_episode[episode_id] = max(
            self.max_in_flight_per_episode.get(episode_id, 0), self.in_flight_per_episode[episode_id]
        )
        self.calls.append(
            {"messages": messages, "max_tokens": max_tokens, "seed": seed, "temperature": temperature}
        )
        try:
            await asyncio.sleep(self.delay_s)
            return ChatResult(
                text=self._reply(messages), prompt_tokens=10, completion_tokens=3, latency_s=0.01
            )
        finally:
            self.in_flight -= 1
            self.in_flight_per_episode[episode_id] -= 1

    def _reply(self, messages) -> str:
        user = messages[-1]["content"]
        if "New conversation" in user:
            notes = user.split("Current notes", 1)[1].split("\n", 1)[1].split("\n\nNew conversation")[0]
            notes = "" if notes == "(empty)" else notes
            session = user.split("New conversation", 1)[1]
            found = CITY_PATTERN.search(session)
            if found and not (self.stale and notes):
                return f"[{EPISODE_TAG.search(session).group(1)}] city: {found.group(1)}"
            return notes
        found = re.search(r"city: (\w+)", user)
        return f"You live in {found.group(1)}." if found else "I don't know."


def test_fake_model_satisfies_protocol() -> None:
    assert isinstance(CityModel(), ChatModel)


def test_notes_max_tokens_scale_with_budget() -> None:
    assert notes_max_tokens_for(300) == 300 // 3 + runner.NOTES_TOKEN_MARGIN
    assert notes_max_tokens_for(6000) > notes_max_tokens_for(300)


def test_arun_rollout_accumulates_accounting_and_passes_max_tokens() -> None:
    model = CityModel()
    rollout = BoundedMemoryRollout(make_episode(n_sessions=3), notes_budget_chars=300)
    outcome = asyncio.run(arun_rollout(rollout, model, max_tokens_notes=77, max_tokens_answer=11, seed=5))
    assert outcome.answer == "You live in city2."
    assert (outcome.n_calls, outcome.prompt_tokens, outcome.completion_tokens) == (4, 40, 12)
    assert outcome.latency_s == pytest.approx(0.04)
    assert [call["max_tokens"] for call in model.calls] == [77, 77, 77, 11]
    assert {call["seed"] for call in model.calls} == {5}
    assert outcome.notes_history == ["[ep-0] city: city0", "[ep-0] city: city1", "[ep-0] city: city2"]


def test_studies_are_greedy_and_a_sampling_temperature_reaches_every_call(tmp_path) -> None:
    greedy, sampled = CityModel(), CityModel()
    episodes = [make_episode("ep-0"), make_episode("ep-1")]
    run_condition(episodes, "bounded_memory", greedy, RunSettings(), progress=False)
    result = run_condition(
        episodes,
        "bounded_memory",
        sampled,
        RunSettings(temperature=0.7, seed=3),
        output_dir=tmp_path,
        progress=False,
    )
    assert {call["temperature"] for call in greedy.calls} == {0.0}
    assert {(call["temperature"], call["seed"]) for call in sampled.calls} == {(0.7, 3)}
    assert result.manifest["config"]["temperature"] == 0.7  # the manifest says how it was asked


def test_rows_one_per_question_with_all_columns() -> None:
    episodes = [make_episode(f"ep-{index}", n_sessions=2 + index % 3) for index in range(6)]
    frame = run_condition(
        episodes, "bounded_memory", CityModel(), RunSettings(concurrency=3), progress=False
    ).frame
    assert list(frame.columns) == list(ROW_COLUMNS)
    assert list(frame["episode_id"]) == [episode.episode_id for episode in episodes]
    assert (frame["verdict"] == "correct").all() and frame["answered_current"].all()
    assert list(frame["n_calls"]) == [len(episode.sessions) + 1 for episode in episodes]
    assert (frame["notes_budget_chars"] == 300).all()
    assert frame["judge_correct"].isna().all()
    assert list(frame["final_notes"]) == [
        f"[{episode.episode_id}] city: city{len(episode.sessions) - 1}" for episode in episodes
    ]


def test_the_memory_columns_copy_the_trajectorys_memory_record_and_are_empty_under_full_context() -> None:
    assert ROW_COLUMNS[-len(MEMORY_COLUMNS) :] == tuple(MEMORY_COLUMNS)  # the row's last columns
    bounded = run_condition([make_episode()], "bounded_memory", CityModel(), progress=False)
    memory = bounded.trajectories[0]["memory"]
    assert set(MEMORY_COLUMNS.values()) <= set(memory)  # every column names a key of the record
    assert {column: bounded.frame.iloc[0][column] for column in MEMORY_COLUMNS} == {
        column: memory[key] for column, key in MEMORY_COLUMNS.items()
    }
    full = run_condition([make_episode()], "full_context", CityModel(), progress=False)
    assert full.frame[list(MEMORY_COLUMNS)].isna().all(axis=None)


def test_concurrency_is_bounded_and_sessions_stay_sequential() -> None:
    model = CityModel(delay_s=0.01)
    episodes = [make_episode(f"ep-{index}", n_sessions=3) for index in range(10)]
    frame = run_condition(episodes, "bounded_memory", model, RunSettings(concurrency=4), progress=False).frame
    assert model.max_in_flight == 4
    assert set(model.max_in_flight_per_episode) == {episode.episode_id for episode in episodes}
    assert set(model.max_in_flight_per_episode.values()) == {1}
    assert (frame["verdict"] == "correct").all()


def test_longest_chains_start_first_when_several_run_at_once() -> None:
    sessions = [2, 4, 3, 4, 1]
    episodes = [make_episode(f"ep-{index}", n_sessions=n) for index, n in enumerate(sessions)]
    model = CityModel(delay_s=0.01)
    frame = run_condition(episodes, "bounded_memory", model, RunSettings(concurrency=2), progress=False).frame
    first_two = [EPISODE_TAG.search(call["messages"][-1]["content"]).group(1) for call in model.calls[:2]]
    assert first_two == ["ep-1", "ep-3"]  # the two longest chains, ties in the given order
    assert list(frame["episode_id"]) == [episode.episode_id for episode in episodes]  # rows keep it


def test_start_order_keeps_the_given_order_at_concurrency_one_and_weighs_history_for_one_call() -> None:
    short, long_ = make_episode("short", n_sessions=2), make_episode("long-history", n_sessions=5)
    assert scheduling.start_order([short, long_], "bounded_memory", 1) == [0, 1]
    assert scheduling.start_order([short, long_], "bounded_memory", 4) == [1, 0]
    assert scheduling.start_order([short, long_], "full_context", 4) == [1, 0]  # one call, longer prompt


def test_stale_agent_is_scored_stale_and_trajectory_shows_it(tmp_path) -> None:
    episode = make_episode("ep-stale", n_sessions=3)
    frame = run_condition(
        [episode],
        "bounded_memory",
        CityModel(stale=True),
        output_dir=tmp_path,
        run_name="stale",
        progress=False,
    ).frame
    row = frame.iloc[0]
    assert row["answer"] == "You live in city0."
    assert row["verdict"] == "stale" and bool(row["asserted_stale"]) and not bool(row["answered_current"])
    assert row["reward"] == pytest.approx(-1.0)
    (trajectory,) = read_trajectories(tmp_path / "stale.trajectories.jsonl")
    assert trajectory["holds_current"] == [False, False, False]
    assert trajectory["holds_stale"] == [True, True, True]
    assert trajectory["verdict"] == "stale"


def test_notes_holdings_track_entering_and_leaving() -> None:
    episode = make_episode(n_sessions=3)
    holds_current, holds_stale = notes_holdings(["city: city0", "city: city2", "nothing"], episode)
    assert holds_current == [False, True, False]
    assert holds_stale == [True, False, False]


def test_holdings_none_for_abstention_and_without_stale_values() -> None:
    episode = make_episode(n_sessions=2)
    abstention = Episode(**{**episode.__dict__, "is_abstention": True, "superseded_values": ()})
    assert notes_holdings(["x"], abstention) == (None, None)


def test_full_context_row_has_one_call_and_no_budget() -> None:
    class EchoLast:
        name = "echo-last"

        async def achat(self, messages, *, max_tokens=None, temperature=0.0, seed=0):
            cities = CITY_PATTERN.findall(messages[-1]["content"])
            return ChatResult(text=f"You live in {cities[-1]}.")

    frame = run_condition([make_episode(n_sessions=4)], "full_context", EchoLast(), progress=False).frame
    row = frame.iloc[0]
    assert row["n_calls"] == 1 and row["verdict"] == "correct"
    assert pd.isna(row["notes_budget_chars"]) and row["final_notes"] is None


def test_output_files_and_manifest(tmp_path) -> None:
    episodes = [make_episode(f"ep-{index}") for index in range(3)]
    frame = run_condition(
        episodes,
        "bounded_memory",
        CityModel(),
        RunSettings(seed=7),
        output_dir=tmp_path,
        run_name="run1",
        progress=False,
    ).frame
    written = pd.read_csv(tmp_path / "run1.csv")
    assert list(written.columns) == list(ROW_COLUMNS)
    assert list(written["episode_id"]) == list(frame["episode_id"])
    trajectories = read_trajectories(tmp_path / "run1.trajectories.jsonl")
    assert [trajectory["episode_id"] for trajectory in trajectories] == list(frame["episode_id"])
    first = trajectories[0]
    assert first["notes_history"] == ["[ep-0] city: city0", "[ep-0] city: city1", "[ep-0] city: city2"]
    assert first["holds_current"] == [False, False, True]
    assert [turn["kind"] for turn in first["turns"]] == ["notes", "notes", "notes", "answer"]
    assert "messages" not in first["turns"][0]

    manifest = json.loads((tmp_path / "run1.manifest.json").read_text())
    for key in ("config", "model", "git", "packages", "started_at", "finished_at", "totals", "seed", "cache"):
        assert key in manifest, key
    assert manifest["seed"] == 7 and manifest["condition"] == "bounded_memory"
    assert manifest["model"]["name"] == "city-model"
    assert manifest["config"]["notes_budget_chars"] == 300
    assert manifest["totals"]["calls"] == 12 and manifest["totals"]["prompt_tokens"] == 120
    assert manifest["packages"]["pandas"] == pd.__version__
    assert manifest["machine"]["machine"] == platform.machine()  # the instruction set decides bit-identity
    assert set(manifest["machine"]) == {"cpu", "machine", "torch_cpu_capability"}
    assert "commit" in manifest["git"]
    assert manifest["episodes"]["episode_ids"] == ["ep-0", "ep-1", "ep-2"]
    assert manifest["accuracy"]["matcher"] == 1.0


def test_store_messages_keeps_exact_prompts(tmp_path) -> None:
    run_condition(
        [make_episode()],
        "bounded_memory",
        CityModel(),
        RunSettings(store_messages=True),
        output_dir=tmp_path,
        run_name="m",
        progress=False,
    )
    (trajectory,) = read_trajectories(tmp_path / "m.trajectories.jsonl")
    assert trajectory["turns"][1]["messages"][-1]["content"].count("SESSION-1-TEXT") == 1


def test_judge_verdict_stored_beside_matcher_verdict() -> None:
    class SaysNo:
        name = "judge-no"

        async def achat(self, messages, *, max_tokens=None, temperature=0.0, seed=0):
            return ChatResult(text="no")

    frame = run_condition([make_episode()], "bounded_memory", CityModel(), judge=LongMemEvalJudge(SaysNo()), progress=False).frame  # fmt: skip
    row = frame.iloc[0]
    assert row["verdict"] == "correct"
    assert not pd.isna(row["judge_correct"]) and not row["judge_correct"]


def test_works_inside_a_running_event_loop() -> None:
    """Jupyter runs cells inside an event loop; the sync call must still work there."""

    async def notebook_cell():
        return run_condition([make_episode()], "bounded_memory", CityModel(), progress=False).frame

    frame = asyncio.run(notebook_cell())
    assert frame.iloc[0]["verdict"] == "correct"


def test_model_error_propagates_unchanged() -> None:
    class Broken:
        name = "broken"

        async def achat(self, messages, *, max_tokens=None, temperature=0.0, seed=0):
            raise RuntimeError("backend exploded")

    with pytest.raises(RuntimeError, match="^backend exploded$"):
        run_condition(
            [make_episode(f"e{index}") for index in range(4)], "bounded_memory", Broken(), progress=False
        )


def test_a_prompt_too_long_for_the_model_fails_that_question_only(tmp_path) -> None:
    from supersede_lib.models.chat import ContextOverflowError

    class SmallWindow(CityModel):
        """Fits one session, not a whole history: full context overflows on the long episode."""

        async def achat(self, messages, **kwargs) -> ChatResult:
            if messages[-1]["content"].count("SESSION-") > 3:
                raise ContextOverflowError("prompt of 900 tokens exceeds n_ctx=512")
            return await super().achat(messages, **kwargs)

    episodes = [make_episode("short", n_sessions=2), make_episode("long", n_sessions=5)]
    frame = run_condition(
        episodes, "full_context", SmallWindow(), output_dir=tmp_path, run_name="fc", progress=False
    ).frame.set_index("episode_id")
    assert (
        frame.loc["short", "n_calls"] == 1
        and frame.loc["short", "answer"]
        and pd.isna(frame.loc["short", "error"])
    )
    assert frame.loc["long", "verdict"] == "wrong" and frame.loc["long", "answer"] == ""
    assert "context overflow at the answer turn" in frame.loc["long", "error"]
    assert frame.loc["long", "n_calls"] == 0
    manifest = json.loads((tmp_path / "fc.manifest.json").read_text())
    assert manifest["totals"]["errors"] == 1
    trajectories = {row["episode_id"]: row for row in read_trajectories(tmp_path / "fc.trajectories.jsonl")}
    assert "n_ctx=512" in trajectories["long"]["error"] and trajectories["short"]["error"] is None
    bounded = run_condition(episodes, "bounded_memory", SmallWindow(), progress=False).frame
    assert bounded["error"].isna().all()  # one session per prompt always fits


def test_bad_input_names_the_record() -> None:
    with pytest.raises(ValueError, match="'dup'.*episodes\\[1\\].*episode_id"):
        run_condition(
            [make_episode("dup"), make_episode("dup")], "bounded_memory", CityModel(), progress=False
        )
    with pytest.raises(ValueError, match="at least one episode"):
        run_condition([], "bounded_memory", CityModel(), progress=False)
    with pytest.raises(ValueError, match="unknown condition"):
        run_condition([make_episode()], "half_context", CityModel(), progress=False)


def test_run_conditions_concatenates_every_pair(tmp_path) -> None:
    episodes = [make_episode(f"ep-{index}") for index in range(2)]
    frame = run_conditions(
        episodes,
        ["full_context", "bounded_memory"],
        [CityModel("a"), CityModel("b")],
        output_dir=tmp_path,
        run_name_prefix="study",
        progress=False,
    )
    assert len(frame) == 8
    assert set(zip(frame["model"], frame["condition"], strict=True)) == {
        ("a", "full_context"), ("a", "bounded_memory"), ("b", "full_context"), ("b", "bounded_memory"),
    }  # fmt: skip
    assert len(list(tmp_path.glob("study__*.csv"))) == 4


# --------------------------------------------------------------------------------------------
# Against the fake OpenAI-compatible server, over HTTP
# --------------------------------------------------------------------------------------------

SESSION_MARKER = re.compile(r"\[([\w-]+)\] SESSION-(\d+)-TEXT")
NO_KEY_ENV = "SUPERSEDE_TEST_UNSET_KEY"  # never set: local servers get a placeholder key


def city_responder(messages) -> str:
    """Server-side twin of CityModel: notes never copy session text, so re-feeding would show."""
    return CityModel()._reply(messages)


def _http_model(server: LocalOpenAIServer, name: str = "fake-model") -> OpenAIChatModel:
    return OpenAIChatModel(name, base_url=server.base_url, api_key_env=NO_KEY_ENV)


def _request_text(body: dict) -> str:
    return "\n".join(str(message["content"]) for message in body["messages"])


def test_http_run_rows_files_and_no_refeed_on_the_wire(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    episodes = [make_episode(f"ep-{index}", n_sessions=3 + index % 2) for index in range(6)]
    with LocalOpenAIServer(latency_s=0.02, responder=city_responder) as server:
        frame = run_condition(episodes, "bounded_memory", _http_model(server), RunSettings(concurrency=4), output_dir=tmp_path, run_name="http", progress=False).frame  # fmt: skip
        requests = list(server.requests)
        max_in_flight = server.max_in_flight
    assert len(frame) == 6 and (frame["verdict"] == "correct").all()
    assert max_in_flight <= 4
    assert len(requests) == sum(len(episode.sessions) + 1 for episode in episodes)
    assert (tmp_path / "http.csv").exists() and (tmp_path / "http.manifest.json").exists()
    assert len(read_trajectories(tmp_path / "http.trajectories.jsonl")) == 6

    sessions_seen: dict[str, list[int]] = {}
    answer_prompts = 0
    for body in requests:
        text = _request_text(body)
        markers = SESSION_MARKER.findall(text)
        if "New conversation (" in body["messages"][-1]["content"]:
            # a notes turn shows exactly ONE raw session: the new one, never an earlier one
            assert len(markers) == 1, text
            episode_id, index = markers[0]
            sessions_seen.setdefault(episode_id, []).append(int(index))
            assert "ASSISTANT-" in text and text.count("ASSISTANT-") == 1
        else:
            answer_prompts += 1
            assert markers == [] and "ASSISTANT-" not in text, text
            assert "My notes:" in text
    assert answer_prompts == len(episodes)
    for episode in episodes:
        assert sessions_seen[episode.episode_id] == list(range(len(episode.sessions)))


def test_cached_rerun_makes_zero_server_calls(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    episodes = [make_episode(f"ep-{index}") for index in range(4)]
    with LocalOpenAIServer(latency_s=0.0) as server:
        cache_path = tmp_path / "cache.sqlite"
        first = run_condition(
            episodes,
            "bounded_memory",
            CachedChatModel(_http_model(server), ResponseCache(cache_path)),
            progress=False,
        ).frame
        after_first = server.request_count
        second = run_condition(
            episodes,
            "bounded_memory",
            CachedChatModel(_http_model(server), ResponseCache(cache_path)),
            output_dir=tmp_path,
            run_name="cached",
            progress=False,
        ).frame
        assert server.request_count == after_first == 16
    assert (second["cached_calls"] == second["n_calls"]).all() and first["cached_calls"].sum() == 0
    assert list(second["answer"]) == list(first["answer"])
    manifest = json.loads((tmp_path / "cached.manifest.json").read_text())
    assert manifest["cache"]["hits"] == 16 and manifest["totals"]["cached_calls"] == 16


KILLABLE_RUN = """
import json, sys
from supersede_lib.eval.runner import RunSettings, run_condition
from supersede_lib.models.cache import CachedChatModel, ResponseCache
from supersede_lib.models.openai_api import OpenAIChatModel
from supersede_lib.agent.episode import Episode

base_url, cache_path, episodes_path = sys.argv[1:4]
episodes = [Episode.from_dict(record) for record in json.load(open(episodes_path))]
model = CachedChatModel(
    OpenAIChatModel("fake-model", base_url=base_url, api_key_env="SUPERSEDE_TEST_UNSET_KEY"), ResponseCache(cache_path)
)
run_condition(episodes, "bounded_memory", model, RunSettings(concurrency=2), progress=False)
print("FINISHED")
"""

COMPARED_COLUMNS = ["episode_id", "answer", "verdict", "reward", "final_notes", "n_calls", "truncations"]


def test_killed_run_resumes_without_repeating_finished_calls(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    episodes = [make_episode(f"ep-{index}", n_sessions=5) for index in range(8)]
    total_calls = sum(len(episode.sessions) + 1 for episode in episodes)
    episodes_path = tmp_path / "episodes.json"
    episodes_path.write_text(json.dumps([episode.to_dict() for episode in episodes]))
    cache_path = tmp_path / "cache.sqlite"
    script = tmp_path / "killable_run.py"
    script.write_text(KILLABLE_RUN)

    with LocalOpenAIServer(latency_s=0.05, responder=city_responder) as server:
        process = subprocess.Popen(
            [sys.executable, str(script), server.base_url, str(cache_path), str(episodes_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 120
        while server.request_count < 12 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        stdout, stderr = process.communicate(timeout=30)
        assert process.returncode == -signal.SIGKILL, stderr.decode()[-2000:]
        assert b"FINISHED" not in stdout
        requests_before_kill = server.request_count
        finished_before_kill = len(ResponseCache(cache_path))
        assert 0 < finished_before_kill < total_calls
        assert requests_before_kill - finished_before_kill <= 2  # at most the in-flight calls were lost

        resumed = run_condition(
            episodes,
            "bounded_memory",
            CachedChatModel(_http_model(server), ResponseCache(cache_path)),
            RunSettings(concurrency=2),
            progress=False,
        ).frame
        requests = list(server.requests)

    prompt_counts = Counter(json.dumps(body["messages"], sort_keys=True) for body in requests)
    assert len(prompt_counts) == total_calls
    # finished work is never asked again: only the calls in flight at the kill can repeat
    assert len(requests) - requests_before_kill == total_calls - finished_before_kill
    assert sum(count - 1 for count in prompt_counts.values()) == requests_before_kill - finished_before_kill
    assert int(resumed["cached_calls"].sum()) == finished_before_kill

    with LocalOpenAIServer(latency_s=0.0, responder=city_responder) as fresh_server:
        uninterrupted = run_condition(
            episodes,
            "bounded_memory",
            CachedChatModel(_http_model(fresh_server), ResponseCache(tmp_path / "fresh.sqlite")),
            progress=False,
        ).frame
    pd.testing.assert_frame_equal(resumed[COMPARED_COLUMNS], uninterrupted[COMPARED_COLUMNS])


def test_missing_key_is_one_line_naming_the_variable(monkeypatch) -> None:
    monkeypatch.delenv("SUPERSEDE_TEST_MISSING_KEY", raising=False)
    with pytest.raises(ModelConfigError) as caught:
        OpenAIChatModel("gpt-4.1-mini", api_key_env="SUPERSEDE_TEST_MISSING_KEY")
    assert "\n" not in str(caught.value) and "SUPERSEDE_TEST_MISSING_KEY" in str(caught.value)


def test_rejected_key_surfaces_from_run_condition_as_one_line(monkeypatch) -> None:
    monkeypatch.setenv("SUPERSEDE_TEST_WRONG_KEY", "wrong-key-0000")
    episodes = [make_episode(f"ep-{index}") for index in range(5)]
    with LocalOpenAIServer(api_key="right") as server:
        model = OpenAIChatModel(
            "fake-model", base_url=server.base_url, api_key_env="SUPERSEDE_TEST_WRONG_KEY"
        )
        with pytest.raises(ModelConfigError) as caught:
            run_condition(episodes, "bounded_memory", model, RunSettings(concurrency=3), progress=False)
    message = str(caught.value)
    assert "\n" not in message and "401" in message and "SUPERSEDE_TEST_WRONG_KEY" in message


# --------------------------------------------------------------------------------------------
# Reliability: one failing question fails alone; cut replies are surfaced; 429s lower concurrency
# --------------------------------------------------------------------------------------------


def _fast_http_model(server: LocalOpenAIServer, **overrides) -> OpenAIChatModel:
    options = {"max_retries": 3, "backoff_base_s": 0.001, "backoff_max_s": 0.005, "api_key_env": NO_KEY_ENV}
    options.update(overrides)
    return OpenAIChatModel("fake-model", base_url=server.base_url, **options)


def _poisoning(action, poisoned: str = "ep-3"):
    """A city responder whose every request for `poisoned` fails with `action`."""

    def responder(messages) -> str:
        if f"[{poisoned}]" in messages[-1]["content"]:
            raise ScriptedFailure(action)
        return city_responder(messages)

    return responder


@pytest.mark.parametrize(
    "action",
    [("status", 429), ("status", 500), ("empty_choices", None), ("status", 400), ("close", None)],
    ids=["429 storm", "500s", "choices []", "400", "connection dropped"],
)
def test_a_question_whose_calls_keep_failing_fails_alone_and_is_retried_next_run(
    tmp_path, monkeypatch, action
):
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    episodes = [make_episode(f"ep-{index}") for index in range(6)]
    cache_path = tmp_path / "cache.sqlite"
    with LocalOpenAIServer(responder=_poisoning(action)) as server:
        result = run_condition(
            episodes,
            "bounded_memory",
            CachedChatModel(_fast_http_model(server), ResponseCache(cache_path)),
            RunSettings(concurrency=3),
            output_dir=tmp_path,
            run_name="run",
            progress=False,
        )
    frame = result.frame.set_index("episode_id")
    assert frame["failed"].sum() == 1 and frame.loc["ep-3", "failed"]
    assert "notes turn failed" in frame.loc["ep-3", "error"] and frame.loc["ep-3", "verdict"] == "wrong"
    healthy = frame.drop(index="ep-3")
    assert (healthy["verdict"] == "correct").all() and healthy["error"].isna().all()
    for key in ("csv", "trajectories", "manifest"):
        assert result.paths[key].exists()
    manifest = json.loads(result.paths["manifest"].read_text())
    assert manifest["totals"]["failed_questions"] == 1 and manifest["failed_episode_ids"] == ["ep-3"]
    assert manifest["accuracy"]["matcher_completed_only"] == 1.0
    assert any("1 of 6 questions failed" in warning for warning in manifest["warnings"])
    assert {row["episode_id"]: row["failed"] for row in read_trajectories(result.paths["trajectories"])}[
        "ep-3"
    ]

    # the same server, recovered, on its port (another port may serve another model)
    with LocalOpenAIServer(port=server.port, responder=city_responder) as healthy_server:
        rerun = run_condition(
            episodes,
            "bounded_memory",
            CachedChatModel(_fast_http_model(healthy_server), ResponseCache(cache_path)),
            progress=False,
        ).frame
        asked = [SESSION_MARKER.findall(_request_text(body)) for body in healthy_server.requests]
    assert not rerun["failed"].any() and (rerun["verdict"] == "correct").all()
    assert healthy_server.request_count == 4  # only ep-3's three notes turns and its answer
    assert {marker[0][0] for marker in asked if marker} == {"ep-3"}


def test_a_configuration_error_still_stops_the_run(monkeypatch) -> None:
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    with LocalOpenAIServer(responder=_poisoning(("status", 404), poisoned="ep-0")) as server:
        with pytest.raises(ModelConfigError, match="404"):
            run_condition([make_episode(f"ep-{i}") for i in range(3)], "bounded_memory", _fast_http_model(server), progress=False)  # fmt: skip


def test_cut_and_empty_replies_are_recorded_per_call_and_surfaced_per_run(
    tmp_path, monkeypatch, caplog
) -> None:
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    failures = [("null_content", "length"), ("cut", 4)]
    with LocalOpenAIServer(failures=failures, responder=city_responder) as server:
        with caplog.at_level(logging.WARNING, logger="supersede_lib.eval.runner"):
            result = run_condition(
                [make_episode("ep-0"), make_episode("ep-1")],
                "bounded_memory",
                _fast_http_model(server),
                RunSettings(concurrency=1),
                output_dir=tmp_path,
                run_name="cut",
                progress=False,
            )
    turns = result.trajectories[0]["turns"]
    assert (turns[0]["finish_reason"], turns[0]["cut"], turns[0]["empty_reply"]) == ("length", True, True)
    assert (turns[1]["finish_reason"], turns[1]["cut"], turns[1]["empty_reply"]) == ("length", True, False)
    assert turns[2]["finish_reason"] == "stop" and not turns[2]["cut"]
    row = result.frame.iloc[0]
    assert (row["cut_calls"], row["empty_replies"], row["failed"]) == (2, 1, False)
    totals = result.manifest["totals"]
    assert (totals["cut_calls"], totals["empty_replies"], totals["calls"]) == (2, 1, 8)
    warning = next(w for w in result.manifest["warnings"] if "cut at the token limit" in w)
    assert "model fake-model: 2 of 8 calls" in warning and "1 replies were empty" in warning
    assert any(warning in record.getMessage() for record in caplog.records)


def test_sustained_429s_lower_concurrency_and_it_recovers(tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    monkeypatch.setattr(rate_limit, "DEFAULT_COOLDOWN_S", 0.0)
    episodes = [make_episode(f"ep-{index}") for index in range(16)]
    with LocalOpenAIServer(
        latency_s=0.005, failures=[("status", 429)] * 6, responder=city_responder
    ) as server:
        with caplog.at_level(logging.INFO, logger="supersede_lib.models.rate_limit"):
            result = run_condition(
                episodes, "bounded_memory", _fast_http_model(server, max_retries=10), RunSettings(concurrency=8), progress=False
            )  # fmt: skip
    history = result.manifest["concurrency"]
    assert history["initial"] == 8 and history["rate_limited_attempts"] == 6
    assert history["decreases"] >= 2 and history["lowest"] <= 2
    assert history["increases"] >= 1 and history["final"] > history["lowest"]
    messages = [record.getMessage() for record in caplog.records]
    assert any("lowering concurrency 8 -> 4" in message for message in messages)
    assert any("raising concurrency" in message for message in messages)
    assert (result.frame["verdict"] == "correct").all() and not result.frame["failed"].any()


def test_credentials_in_the_base_url_never_reach_the_files(monkeypatch) -> None:
    """Refused before any call (tests/test_secrets.py sweeps a run's files for an echoed key)."""
    monkeypatch.delenv(NO_KEY_ENV, raising=False)
    with (
        LocalOpenAIServer(responder=city_responder) as server,
        pytest.raises(ModelConfigError, match="Bearer"),
    ):
        OpenAIChatModel(
            "fake-model",
            base_url=server.base_url.replace("http://", "http://alice:s3cret@"),
            api_key_env=NO_KEY_ENV,
        )


def test_manifest_says_which_calls_were_live_and_which_commit_made_the_replayed_ones(tmp_path) -> None:
    cache = ResponseCache(tmp_path / "cache.db")
    episodes = [make_episode(f"ep-{index}") for index in range(3)]
    first = run_condition(
        episodes, "bounded_memory", CachedChatModel(CityModel(), cache, commit="c0ffee"), progress=False
    )
    assert (
        first.manifest["provenance"]["live_calls"] == 12
        and first.manifest["provenance"]["replayed_calls"] == 0
    )
    second = run_condition(
        episodes, "bounded_memory", CachedChatModel(CityModel(), cache), output_dir=tmp_path, progress=False
    )
    provenance = second.manifest["provenance"]
    assert provenance == {
        "live_calls": 0,
        "replayed_calls": 12,
        "live_answers": 0,
        "replayed_answers": 3,
        "replayed_from_commits": ["c0ffee"],
    }
    assert second.trajectories[0]["turns"][0]["made_by_commit"] == "c0ffee"
    written = json.loads(next(tmp_path.glob("*.manifest.json")).read_text())
    assert not written["cache"]["path"].startswith("/")  # committed results carry no machine paths


def test_portable_path_never_returns_an_absolute_path(tmp_path) -> None:
    from supersede_lib.eval.run_files import REPO_ROOT, portable_path

    assert portable_path(REPO_ROOT / "outputs" / "x.db") == "outputs/x.db"
    assert portable_path(Path.home() / "m" / "x.gguf") == "~/m/x.gguf"
    assert not portable_path("/somewhere/else/x.db").startswith("/")


def test_rows_and_trajectories_carry_memory_metrics_and_the_prompt_variant() -> None:
    episodes = [make_episode(f"ep-{index}") for index in range(2)]
    bounded = run_condition(episodes, "bounded_memory", CityModel(), progress=False)
    row = bounded.frame.iloc[0]
    assert row["prompt_variant"] == RunSettings().prompt_variant
    assert row["notes_empty_share"] == 0 and row["notes_hold_current"] and not row["notes_echo_example"]
    assert bounded.trajectories[0]["memory"]["n_rewrites"] == 3
    full = run_condition(episodes, "full_context", CityModel(), progress=False)
    assert full.frame["notes_hold_current"].isna().all() and full.trajectories[0]["memory"] is None
    with pytest.raises(ValueError, match="v1_worked_example"):
        RunSettings(prompt_variant="no-such-variant")
