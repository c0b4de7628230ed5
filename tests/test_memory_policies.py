"""Every memory policy keeps the rollout's rules: each session shown once, the answer from a memory of
at most B characters, a reply it cannot use recorded (never a crash, never a silent empty memory); end
to end through the runner, the fake HTTP server and llama.cpp's own server."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest
from conftest import make_episode

from supersede_lib.agent import memory as memory_package
from supersede_lib.agent import prompts
from supersede_lib.agent.memory import MEMORY_POLICIES, MemoryPolicy, PolicyCall, PolicyReply, PolicyRollout
from supersede_lib.agent.memory.notes import NotesPolicy
from supersede_lib.agent.rollout import BoundedMemoryRollout, make_rollout
from supersede_lib.eval.runner import MissingCapabilityError, RunSettings, run_condition
from supersede_lib.models.cache import CachedChatModel, ResponseCache
from supersede_lib.models.local_server import LocalOpenAIServer
from supersede_lib.models.openai_api import OpenAIChatModel

POLICIES = sorted(MEMORY_POLICIES)


def _text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(message.get("content") or "") for message in messages)


def _reply_for(call: PolicyCall, long: bool = False) -> PolicyReply:
    """A well-formed reply to any policy's call: lines, a JSON list, tool calls or vectors."""
    if call.kind == "embed":
        return PolicyReply(vectors=[[1.0, 0.0] for _ in call.texts])
    said = "x" * 400 if long else f"fact {len(_text(call.messages)) % 97}"
    if call.tools:
        return PolicyReply(
            tool_calls=[{"name": "core_memory_append", "arguments": json.dumps({"content": said})}]
        )
    if "Personal Information Organizer" in _text(call.messages):  # Mem0's fact extraction
        return PolicyReply(text=json.dumps({"facts": [said]}))
    if "smart memory manager" in _text(call.messages):  # Mem0's update decision
        return PolicyReply(text=json.dumps({"memory": [{"id": "new", "text": said, "event": "ADD"}]}))
    if "JSON list" in _text(call.messages):
        return PolicyReply(text=json.dumps([{"key": f"k{len(said)}", "value": said, "date": "2023/05/01"}]))
    return PolicyReply(text=said)


def _drive(rollout: Any, reply=_reply_for) -> list[tuple[str, int | None, str]]:
    seen = []
    while not rollout.done:
        call = rollout.current_call()
        seen.append((rollout.current_kind, getattr(rollout, "sessions_consumed", None), _text(call.messages)))
        rollout.step(reply(call))
    return seen


@pytest.mark.parametrize("name", POLICIES)
def test_every_policy_shows_each_session_once_and_never_again(name: str) -> None:
    episode = make_episode("ep-1", 3)
    rollout = make_rollout(episode, "bounded_memory", memory=name)
    seen = _drive(rollout) if isinstance(rollout, PolicyRollout) else _drive_notes(rollout)
    assert seen[-1][0] == "answer" and [kind for kind, _, _ in seen[:-1]] == ["notes"] * (len(seen) - 1)
    for session_index in range(3):
        shown_in = [
            index for index, (_, consumed, text) in enumerate(seen) if f"SESSION-{session_index}-TEXT" in text
        ]
        assert len(shown_in) == 1, f"{name}: session {session_index} shown at turns {shown_in}"
        assert seen[shown_in[0]][1] == session_index
    assert episode.question in seen[-1][2]


def _drive_notes(rollout: BoundedMemoryRollout) -> list[tuple[str, int | None, str]]:
    seen = []
    while not rollout.done:
        seen.append((rollout.current_kind, rollout.sessions_consumed, _text(rollout.current_messages())))
        rollout.step("fact")
    return seen


@pytest.mark.parametrize("name", POLICIES)
def test_every_policys_memory_is_capped_at_b_when_the_answer_is_asked(name: str) -> None:
    policy = MEMORY_POLICIES[name](40, prompts.DEFAULT_PROMPT_VARIANT)
    rollout = PolicyRollout(make_episode("ep-1", 4), policy)
    while rollout.current_kind == "notes":
        rollout.step(_reply_for(rollout.current_call(), long=True))
    answer_prompt = _text(rollout.current_messages())
    assert len(policy.render()) <= 40 and all(len(notes) <= 40 for notes in rollout.notes_history)
    assert policy.render() in answer_prompt
    assert rollout.truncation_count >= 1  # 400-character facts never fit in 40: the cap says so


@pytest.mark.parametrize("name", POLICIES)
def test_the_answer_ends_every_policys_rollout_and_further_steps_fail(name: str) -> None:
    rollout = PolicyRollout(
        make_episode("ep-1", 2), MEMORY_POLICIES[name](300, prompts.DEFAULT_PROMPT_VARIANT)
    )
    _drive(
        rollout,
        lambda call: _reply_for(call) if rollout.current_kind == "notes" else PolicyReply(text=" city1 "),
    )
    assert rollout.done and rollout.answer == "city1" and rollout.turns[-1].kind == "answer"
    with pytest.raises(RuntimeError):
        rollout.step("again")
    with pytest.raises(RuntimeError):
        rollout.current_messages()


MALFORMED = {  # a reply each policy cannot use
    "append_truncate": PolicyReply(text=""),
    "observation_log": PolicyReply(text=""),
    "latest_value": PolicyReply(text='[{"key": "city", "value": '),
    "core_memory": PolicyReply(tool_calls=[{"name": "core_memory_append", "arguments": "{not json"}]),
}


@pytest.mark.parametrize("name", POLICIES)
def test_a_reply_the_policy_cannot_use_is_recorded_and_leaves_the_memory(name: str) -> None:
    if name not in MALFORMED:
        pytest.skip(f"{name}: every reply is usable (the notes' reply is the notes)")
    rollout = PolicyRollout(
        make_episode("ep-1", 2), MEMORY_POLICIES[name](300, prompts.DEFAULT_PROMPT_VARIANT)
    )
    rollout.step(_reply_for(rollout.current_call()))
    held = rollout.policy.render()
    assert held  # the first session wrote something
    rollout.step(MALFORMED[name])
    while rollout.current_kind == "notes":  # the reflector, when the log asks for one
        rollout.step(_reply_for(rollout.current_call()))
    assert rollout.memory_failures == 1 and rollout.turns[1].memory_failure
    assert rollout.policy.render() == held  # kept as it was, never silently emptied


def test_core_memory_replace_needs_the_exact_old_text_and_the_block_stays_within_b() -> None:
    policy = MEMORY_POLICIES["core_memory"](30, prompts.DEFAULT_PROMPT_VARIANT)

    def calls(*pairs: tuple[str, dict[str, str]]) -> PolicyReply:
        return PolicyReply(tool_calls=[{"name": name, "arguments": json.dumps(args)} for name, args in pairs])

    policy.begin_session(make_episode().sessions[0], 0)
    assert policy.take_reply(calls(("core_memory_append", {"content": "city: Paris"}))) is None
    failure = policy.take_reply(
        calls(("core_memory_replace", {"old_content": "city: Rome", "new_content": "x"}))
    )
    assert "not in the block" in failure and policy.render() == "city: Paris"
    assert (
        policy.take_reply(calls(("core_memory_replace", {"old_content": "Paris", "new_content": "Lyon"})))
        is None
    )
    assert "rejected" in policy.take_reply(calls(("core_memory_append", {"content": "y" * 40})))
    assert policy.render() == "city: Lyon"
    assert "unknown tool" in policy.take_reply(calls(("archival_memory_insert", {"content": "z"})))


def test_latest_value_renders_the_newest_value_per_key_whatever_the_order_said() -> None:
    policy = MEMORY_POLICIES["latest_value"](300, prompts.DEFAULT_PROMPT_VARIANT)
    episode = make_episode("ep", 3)
    replies = [
        [{"key": "City", "value": "Paris", "date": "2023/05/01"}],
        [{"key": "city ", "value": "Lyon", "date": "2023/05/03"}, {"key": "dog", "value": "Rex"}],
        [{"key": "city", "value": "Rome", "date": "2023/04/01"}],  # said later, true earlier: not current
    ]
    for index, reply in enumerate(replies):
        policy.begin_session(episode.sessions[index], index)
        assert policy.take_reply(PolicyReply(text=f"```json\n{json.dumps(reply)}\n```")) is None
    assert policy.render().splitlines() == ["dog: Rex (2023/05/02)", "city: Lyon (2023/05/03)"][::-1] or (
        policy.render().splitlines()[0].startswith("city: Lyon")
    )
    assert "Rome" not in policy.render() and "Paris" not in policy.render()


@pytest.mark.parametrize("variant", sorted(prompts.PROMPT_VARIANTS))
def test_the_notes_policy_is_the_bounded_memory_rollout_turn_for_turn(variant: str) -> None:
    episode = make_episode("ep-1", 3)
    replies = ["lives in city0", "city: city1\nplan: move", "x" * 500]
    bounded = BoundedMemoryRollout(episode, notes_budget_chars=60, prompt_variant=variant)
    policy = PolicyRollout(episode, NotesPolicy(60, variant))
    for reply in [*replies, "city2"]:
        assert bounded.current_messages() == policy.current_messages()
        bounded.step(reply)
        policy.step(reply)
    assert bounded.notes_history == policy.notes_history and bounded.answer == policy.answer
    assert bounded.truncation_count == policy.truncation_count


def test_notes_is_the_default_and_an_unknown_policy_is_named() -> None:
    assert isinstance(make_rollout(make_episode(), "bounded_memory"), BoundedMemoryRollout)
    with pytest.raises(ValueError, match="unknown memory policy 'mem-x'.*core_memory"):
        RunSettings(memory="mem-x")


@pytest.mark.parametrize("name", POLICIES)
def test_every_policy_runs_end_to_end_over_http_and_never_resends_a_session(tmp_path, name: str) -> None:
    episode = make_episode("ep-1", 3)
    with LocalOpenAIServer() as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url)
        result = run_condition([episode], "bounded_memory", model, RunSettings(memory=name), progress=False)
        bodies = [body for body in server.requests if body.get("max_tokens") != 1]  # not the tools probe
        embeddings = sum(
            body.get("input") != ["probe"] for body in server.embedding_requests
        )  # not the probe
    row = result.frame.iloc[0]
    assert row.memory_policy == name and not row.failed and row.memory_failures == 0
    assert row.n_calls == len(bodies) + embeddings and len(row.final_notes) <= 300
    for session_index in range(3):  # the session itself (its raw turns), sent once and never again
        raw_session = f"user: [ep-1] SESSION-{session_index}-TEXT"
        assert sum(raw_session in json.dumps(body["messages"]) for body in bodies) == 1
    if name == "core_memory":
        assert all(body.get("tools") for body in bodies[:-1]) and "tools" not in bodies[-1]
    assert result.trajectories[0]["memory_policy"] == name


def test_a_policy_needing_tools_is_refused_before_any_call_when_the_server_has_none() -> None:
    with LocalOpenAIServer(tools=False) as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url)
        with pytest.raises(MissingCapabilityError, match="core_memory.*needs tools"):
            run_condition(
                [make_episode()], "bounded_memory", model, RunSettings(memory="core_memory"), progress=False
            )
        assert [body for body in server.requests if "probe" not in json.dumps(body.get("tools"))] == []


class _EmbeddingPolicy(MemoryPolicy):
    """A test policy: one embedding of the session's first turn, one chat call; memory = the vector's size."""

    name = "embeds"
    needs: ClassVar[frozenset[str]] = frozenset({"embeddings"})

    def __init__(self, budget_chars: int, prompt_variant: str = prompts.DEFAULT_PROMPT_VARIANT) -> None:
        super().__init__(budget_chars, prompt_variant)
        self.memory, self.queue = "", []

    def begin_session(self, session, session_index: int) -> None:
        self.queue = [
            PolicyCall(kind="embed", texts=[session.turns[0].content]),
            PolicyCall(kind="chat", messages=prompts.memory_policy_messages("append_truncate", session)),
        ]

    def next_call(self):
        return self.queue[0] if self.queue else None

    def take_reply(self, reply: PolicyReply):
        self.queue.pop(0)
        self.memory = self.cap(f"{len(reply.vectors[0])} dims" if reply.vectors else reply.text)
        return None

    def render(self) -> str:
        return self.memory


def test_embedding_calls_go_through_the_cache_and_a_server_without_them_is_refused(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setitem(memory_package.MEMORY_POLICIES, "embeds", _EmbeddingPolicy)
    settings = RunSettings(memory="embeds")
    with LocalOpenAIServer(embeddings=False) as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url)
        with pytest.raises(MissingCapabilityError, match="needs embeddings.*501"):
            run_condition([make_episode()], "bounded_memory", model, settings, progress=False)
        assert server.request_count == 0
    with LocalOpenAIServer() as server:
        cache = ResponseCache(tmp_path / "cache.db")
        cached = CachedChatModel(OpenAIChatModel("fake-model", base_url=server.base_url), cache)
        first = run_condition([make_episode()], "bounded_memory", cached, settings, progress=False)
        embedded = len(server.embedding_requests)
        second = run_condition([make_episode()], "bounded_memory", cached, settings, progress=False)
    assert embedded == 1 + 3  # the probe, then one per session; the replay made none
    assert len(server.embedding_requests) == embedded + 1  # the second run's probe only
    kinds = [turn["kind"] for turn in first.trajectories[0]["turns"]]
    assert kinds.count("notes") == 6 and first.frame.iloc[0].n_calls == 7
    assert (
        second.frame.iloc[0].cached_calls == 7 and second.frame.iloc[0].answer == first.frame.iloc[0].answer
    )


def test_tool_calls_are_cached_under_a_key_with_the_tools_and_replayed(tmp_path) -> None:
    from supersede_lib.models.cache import cache_key

    cache = ResponseCache(tmp_path / "cache.db")
    with LocalOpenAIServer() as server:
        cached = CachedChatModel(
            OpenAIChatModel("fake-model", base_url=server.base_url, cache_namespace="t"), cache
        )
        plain_key = cached.key_for([{"role": "user", "content": "hi"}], 10, 0.0, 0)
        assert plain_key == cache_key(
            "t", "fake-model", [{"role": "user", "content": "hi"}], {"max_tokens": 10, "temperature": 0.0}, 0
        )
        episode = make_episode("ep-1", 2)
        run_condition([episode], "bounded_memory", cached, RunSettings(memory="core_memory"), progress=False)
        sent = server.request_count
        again = run_condition(
            [episode], "bounded_memory", cached, RunSettings(memory="core_memory"), progress=False
        )
    assert server.request_count == sent + 1  # the tools probe; every call replayed
    turns = again.trajectories[0]["turns"]
    assert "core_memory_append" in turns[0]["reply"] and again.frame.iloc[0].final_notes
    exported = tmp_path / "responses.jsonl.gz"
    cache.export_responses(exported)
    fresh = ResponseCache(tmp_path / "fresh.db")
    fresh.import_responses(exported)
    keys = [
        key
        for key in (
            cached.key_for(body["messages"], 132, 0.0, 0, body.get("tools"))
            for body in server.requests
            if body.get("tools") and body.get("max_tokens") != 1
        )
        if key in fresh
    ]
    assert keys and fresh.get(keys[0]).tool_calls


@pytest.mark.realmodel
def test_every_policy_finishes_against_llama_cpps_own_http_server(llama_server) -> None:
    """Real replies (a 135M model writes bad JSON and tool calls often): every policy's run finishes with
    a row, and what the policy could not use is counted, not raised. One server for all, one short
    episode each, short replies: CI time. A policy that needs embeddings (Mem0) has its own real test
    against a server started with them (`tests/test_mem0_llama_server.py`); this server has none."""
    base_url, model_file = llama_server
    model = OpenAIChatModel(model_file.stem, base_url=base_url, timeout_s=120, max_retries=1)
    for name in [name for name in POLICIES if "embeddings" not in MEMORY_POLICIES[name].needs]:
        settings = RunSettings(memory=name, max_tokens_notes=32, max_tokens_answer=12, concurrency=1)
        result = run_condition([make_episode("ep-1", 2)], "bounded_memory", model, settings, progress=False)
        row, turns = result.frame.iloc[0], result.trajectories[0]["turns"]
        assert row.memory_policy == name and not row.failed and row.error is None, name
        assert row.memory_failures == sum(bool(turn.get("memory_failure")) for turn in turns), name
        assert len(row.final_notes or "") <= 300 and turns[-1]["kind"] == "answer", name


def test_verify_reads_the_new_row_columns_as_older_records_imply_and_no_further(tmp_path) -> None:
    from supersede_lib.reproduce.verify import compare_csv

    committed = tmp_path / "committed.csv"
    committed.write_text("episode_id,verdict\nep-1,correct\nep-2,wrong\n")
    replayed = tmp_path / "replay.csv"
    replayed.write_text(
        "episode_id,verdict,memory_policy,memory_failures\nep-1,correct,notes,0\nep-2,wrong,,0\n"
    )
    assert compare_csv(committed, replayed) is None
    replayed.write_text(
        "episode_id,verdict,memory_policy,memory_failures\nep-1,correct,core_memory,0\nep-2,wrong,,0\n"
    )
    assert "memory_policy added with ['core_memory']" in compare_csv(committed, replayed)


def test_a_rollout_that_ends_early_releases_its_policy() -> None:
    """A call that fails for good ends the rollout before its answer; the driver then closes the
    policy (Mem0's worker thread and store), instead of leaving them to the process's exit."""
    import asyncio

    from supersede_lib.eval.rollout_driver import arun_rollout
    from supersede_lib.models.chat import ModelCallError

    class FailingModel:
        name = "failing"

        async def achat(self, *args: Any, **kwargs: Any) -> Any:
            raise ModelCallError("retries used up")

    rollout = make_rollout(make_episode("e1"), "bounded_memory", memory="append_truncate")
    closed: list[bool] = []
    rollout.policy.close = lambda: closed.append(True)
    outcome = asyncio.run(arun_rollout(rollout, FailingModel(), max_tokens_notes=32, max_tokens_answer=32))
    assert outcome.failed and not rollout.done and closed == [True]
