"""Mem0 through the real `mem0ai` package, driven by scripted replies (no server).

Every call Mem0 makes must reach the test as a `PolicyCall` (so the runner's cache and counts see it),
an ADD then an UPDATE must leave only the new value, Mem0's unusable replies are memory failures, an
embedder fault fails the episode, and nothing leaves the machine.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import re
import socket

import pytest

from supersede_lib.agent.episode import Episode, Session, Turn
from supersede_lib.agent.memory import PolicyCall, PolicyReply, PolicyRollout, get_memory_policy

# found, not imported: the policy must be the first to import Mem0 (its telemetry switch is read then)
if importlib.util.find_spec("mem0") is None:
    pytest.skip("the Mem0 policy needs the mem0ai package (requirements.txt)", allow_module_level=True)

from supersede_lib.agent.memory.mem0_policy import (  # noqa: E402 - after the skip
    BridgeEmbedder,
    BridgeLLM,
    Mem0Error,
    Mem0Policy,
    mem0_date,
)

DIMS = 64
JSON = {"type": "json_object"}  # what Mem0 asks of both its chat calls


def word_vector(text: str) -> list[float]:
    """A bag-of-words vector: texts that share words are near, as a real embedder would make them."""
    vector = [0.0] * DIMS
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIMS] += 1.0
    norm = math.sqrt(sum(value * value for value in vector)) or 1.0
    return [value / norm for value in vector]


def city_episode() -> Episode:
    sessions = (
        Session(
            "s0", "2023/05/01 (Mon) 10:00", (Turn("user", "I live in Paris."), Turn("assistant", "Nice."))
        ),
        Session(
            "s1", "2023/05/02 (Tue) 10:00", (Turn("user", "I moved to Berlin."), Turn("assistant", "Oh!"))
        ),
    )
    return Episode(
        episode_id="mem0-city",
        sessions=sessions,
        question="Which city do I live in?",
        question_date="2023/06/01 (Thu) 10:00",
        gold_answers=("Berlin",),
        superseded_values=("Paris",),
    )


ADD_THEN_UPDATE = [
    json.dumps({"facts": ["Lives in Paris"]}),
    json.dumps({"memory": [{"id": "0", "text": "Lives in Paris", "event": "ADD"}]}),
    json.dumps({"facts": ["Lives in Berlin"]}),
    json.dumps(
        {
            "memory": [
                {"id": "0", "text": "Lives in Berlin", "event": "UPDATE", "old_memory": "Lives in Paris"}
            ]
        }
    ),
]


def drive(rollout: PolicyRollout, chat_replies: list[str], embed=word_vector) -> list[PolicyCall]:
    """Answer every call of the rollout: chat calls from the script in order, embed calls with `embed`."""
    calls: list[PolicyCall] = []
    script = iter(chat_replies)
    while not rollout.done:
        call = rollout.current_call()
        calls.append(call)
        if rollout.current_kind == "answer":
            rollout.step("Berlin")
        elif call.kind == "embed":
            rollout.step(PolicyReply(vectors=[embed(text) for text in call.texts]))
        else:
            rollout.step(PolicyReply(text=next(script)))
    return calls


@pytest.fixture
def no_network(monkeypatch):
    """Any socket connection to anything but this machine fails the test."""
    real_connect = socket.socket.connect

    def local_only(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if (
            isinstance(host, str)
            and host not in ("127.0.0.1", "::1", "localhost")
            and not host.startswith("/")
        ):
            raise AssertionError(f"Mem0 tried to reach {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", local_only)


def test_mem0_is_a_registered_policy_that_needs_embeddings():
    assert get_memory_policy("mem0") is Mem0Policy
    assert Mem0Policy.needs == frozenset({"embeddings"})


def test_every_mem0_call_goes_through_the_policy_and_update_supersedes(no_network, monkeypatch):
    import openai

    def no_client(*args, **kwargs):
        raise AssertionError("Mem0 built an HTTP client of its own")

    monkeypatch.setattr(openai.OpenAI, "__init__", no_client)
    policy = Mem0Policy(budget_chars=300)
    rollout = PolicyRollout(city_episode(), policy)
    calls = drive(rollout, ADD_THEN_UPDATE)
    assert isinstance(policy._memory.llm, BridgeLLM) and isinstance(
        policy._memory.embedding_model, BridgeEmbedder
    )

    kinds = [call.kind for call in calls]
    # probe; session 0: extract, embed fact, update; session 1: the same; the question's embed; the answer
    assert kinds == ["embed", "chat", "embed", "chat", "chat", "embed", "chat", "embed", "chat"]
    extraction = calls[1]
    assert extraction.response_format == {"type": "json_object"}
    assert "Today's date is 2023-05-01." in extraction.messages[0]["content"]
    assert "I live in Paris." in extraction.messages[1]["content"]
    assert "Today's date is 2023-05-02." in calls[4].messages[0]["content"]
    assert calls[7].texts == ["Which city do I live in?"]

    assert [(op.session_index, op.event, op.text) for op in policy.operations] == [
        (0, "ADD", "Lives in Paris"),
        (1, "UPDATE", "Lives in Berlin"),
    ]
    assert rollout.notes_history == ["[2023/05/01] Lives in Paris", "[2023/05/02] Lives in Berlin"]
    answer_prompt = calls[-1].messages[-1]["content"]
    assert "Lives in Berlin" in answer_prompt and "Paris" not in answer_prompt
    assert rollout.memory_failures == 0


def test_the_same_episode_asks_the_same_calls_in_the_same_order():
    """Replay from the cache needs this: Mem0's random ids and today's date never reach a prompt."""
    first = drive(PolicyRollout(city_episode(), Mem0Policy(budget_chars=300)), ADD_THEN_UPDATE)
    second = drive(PolicyRollout(city_episode(), Mem0Policy(budget_chars=300)), ADD_THEN_UPDATE)
    assert first == second


def test_malformed_json_is_that_reply_s_memory_failure_and_the_episode_goes_on():
    policy = Mem0Policy(budget_chars=300)
    rollout = PolicyRollout(city_episode(), policy)
    replies = [
        "I think the user lives in Paris",
        *ADD_THEN_UPDATE[2:3],
        ADD_THEN_UPDATE[3].replace('"0"', '"7"'),
    ]
    drive(rollout, replies)
    failures = [turn.memory_failure for turn in rollout.turns if turn.memory_failure]
    assert len(failures) == 2 and rollout.memory_failures == 2
    assert "new_retrieved_facts" in failures[0]  # Mem0's own words for an extraction it could not parse
    assert "memory action" in failures[1]  # an UPDATE naming a memory Mem0 never showed
    assert rollout.answer == "Berlin"


def test_a_vector_of_another_size_fails_the_episode_with_its_cause():
    rollout = PolicyRollout(city_episode(), Mem0Policy(budget_chars=300))
    with pytest.raises(Mem0Error, match="size 3, not the episode's 64"):
        drive(
            rollout,
            ADD_THEN_UPDATE,
            embed=lambda text: word_vector(text) if text == "memory" else [1.0, 0.0, 0.0],
        )


def test_a_wrong_vector_count_fails_the_episode():
    policy = Mem0Policy(budget_chars=300)
    rollout = PolicyRollout(city_episode(), policy)
    call = rollout.current_call()
    assert call.kind == "embed" and call.texts == ["memory"]
    rollout.step(PolicyReply(vectors=[word_vector("memory")]))
    assert rollout.current_call().kind == "chat"
    rollout.step(PolicyReply(text=ADD_THEN_UPDATE[0]))
    with pytest.raises(Mem0Error, match="vectors for 1 text"):
        rollout.step(PolicyReply(vectors=[]))
    policy.close()


def test_telemetry_is_off():
    Mem0Policy(budget_chars=300).close()
    import mem0.memory.main as mem0_main
    import mem0.memory.telemetry as mem0_telemetry

    assert mem0_telemetry.MEM0_TELEMETRY is False and mem0_main.MEM0_TELEMETRY is False
    assert mem0_telemetry.client_telemetry.posthog is None


def test_the_rendered_memory_fits_the_budget_best_first():
    policy = Mem0Policy(budget_chars=40)
    rollout = PolicyRollout(city_episode(), policy)
    long_fact = "Lives in a very long street name in Paris that never ends"
    replies = [
        json.dumps({"facts": [long_fact]}),
        json.dumps({"memory": [{"id": "0", "text": long_fact, "event": "ADD"}]}),
        json.dumps({"facts": ["Lives in Berlin"]}),
        json.dumps({"memory": [{"id": "0", "text": "Lives in Berlin", "event": "ADD"}]}),
    ]
    drive(rollout, replies)
    assert all(len(notes) <= 40 for notes in rollout.notes_history)
    assert (
        rollout.notes_history[0] == f"[2023/05/01] {long_fact}"[:40]
    )  # alone and too long: cut, not dropped
    assert rollout.turns[-1].messages[-1]["content"].count("Lives in Berlin") == 1


@pytest.mark.parametrize(
    ("date", "expected"),
    [("2023/05/30 (Tue) 23:40", "2023-05-30"), ("2023-05-30", "2023-05-30"), ("sometime", "sometime")],
)
def test_mem0_date(date, expected):
    assert mem0_date(date) == expected


def test_mem0_through_the_runner_asks_for_json_keys_it_and_replays_every_call(tmp_path):
    from conftest import make_episode

    from supersede_lib.eval.runner import RunSettings, run_condition
    from supersede_lib.models.cache import CachedChatModel, ResponseCache
    from supersede_lib.models.local_server import LocalOpenAIServer
    from supersede_lib.models.openai_api import OpenAIChatModel

    episode, settings = make_episode("ep-1", 2), RunSettings(memory="mem0")
    with LocalOpenAIServer() as server:
        cached = CachedChatModel(
            OpenAIChatModel("fake-model", base_url=server.base_url, cache_namespace="t"),
            ResponseCache(tmp_path / "cache.db"),
        )
        hi = [{"role": "user", "content": "hi"}]
        assert cached.key_for(hi, 10, 0.0, 0) != cached.key_for(hi, 10, 0.0, 0, response_format=JSON)
        first = run_condition([episode], "bounded_memory", cached, settings, progress=False)
        chats, embeds = list(server.requests), len(server.embedding_requests)
        second = run_condition([episode], "bounded_memory", cached, settings, progress=False)
    mem0_calls = [body for body in chats if "Personal Information Organizer" in json.dumps(body["messages"])]
    assert len(mem0_calls) == 2 and all(body.get("response_format") == JSON for body in mem0_calls)
    assert "response_format" not in chats[-1]  # the answer call is every policy's, plain
    row = first.frame.iloc[0]
    assert not row.failed and row.memory_failures == 0 and "city1" in row.final_notes
    assert len(server.requests) == len(chats) and len(server.embedding_requests) == embeds + 1  # the probe
    assert second.frame.iloc[0].cached_calls == row.n_calls and second.frame.iloc[0].answer == row.answer
