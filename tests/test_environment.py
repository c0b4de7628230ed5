"""The verifiers environment: no re-feed on the wire, the two-part reward, and the entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

vf = pytest.importorskip("verifiers")

from supersede_lib.agent.episode import Episode, Session, Turn  # noqa: E402
from supersede_lib.environment import (  # noqa: E402
    SupersedeEnv,
    episodes_to_dataset,
    load_environment,
    make_environment,
    rollout_from_info,
)
from supersede_lib.models.local_server import LocalOpenAIServer  # noqa: E402

CITIES = ("Lisbon", "Oslo", "Kyoto")  # the city of session k; the last one is current


def _episode(n_sessions: int = 3, episode_id: str = "ep-env") -> Episode:
    sessions = tuple(
        Session(
            session_id=f"s{index}",
            date=f"2023/05/0{index + 1} (Mon) 10:00",
            turns=(
                Turn("user", f"SESSION-{index}-TEXT I just moved, I live in {CITIES[index]} now."),
                Turn("assistant", f"SESSION-{index}-REPLY Noted."),
            ),
        )
        for index in range(n_sessions)
    )
    return Episode(
        episode_id=episode_id,
        sessions=sessions,
        question="Which city do I live in?",
        question_date="2023/06/01 (Thu) 10:00",
        gold_answers=(CITIES[n_sessions - 1],),
        superseded_values=CITIES[: n_sessions - 1],
    )


def _notes_from(prompt_text: str) -> str:
    """Fake memory policy: keep the city the newest session mentions."""
    for city in CITIES:
        if f"I live in {city}" in prompt_text:
            return f"lives in {city}"
    return "no facts"


def _responder(answer: str):
    """Messages -> reply: the newest city as notes on notes turns, `answer` on the question turn."""

    def respond(messages: list[dict]) -> str:
        last_user = messages[-1]["content"]
        return answer if "Question:" in last_user else _notes_from(last_user)

    return respond


def _evaluate(env: SupersedeEnv, server: LocalOpenAIServer, **kwargs) -> list[dict]:
    client = vf.ClientConfig(api_key_var="SUPERSEDE_TEST_KEY", api_base_url=server.base_url)
    results = env.evaluate_sync(
        client=client, model="fake-model", state_columns=["supersede_turns"], **kwargs
    )
    return results["outputs"]


def _role_content(body: dict) -> list[dict[str, str]]:
    return [{"role": message["role"], "content": message["content"]} for message in body["messages"]]


def _wire_text(body: dict) -> str:
    return "\n".join(message["content"] for message in body["messages"])


def test_dataset_rows_hold_first_prompt_gold_and_episode() -> None:
    episode = _episode(3)
    dataset = episodes_to_dataset([episode], chars_per_session=50)
    row = dataset[0]
    info = json.loads(row["info"])
    assert Episode.from_dict(info["episode"]) == episode
    assert (info["condition"], info["notes_budget_chars"]) == ("bounded_memory", 150)
    assert row["answer"] == "Kyoto"
    assert row["prompt"][-1]["content"] == row["question"]
    assert "SESSION-0-TEXT" in row["question"] and "SESSION-1-TEXT" not in row["question"]
    rollout = rollout_from_info(info)
    assert rollout.notes_budget_chars == 150 and rollout.current_messages() == row["prompt"]


def test_bad_input_names_the_record_and_field() -> None:
    with pytest.raises(ValueError, match="no episodes"):
        episodes_to_dataset([])
    no_gold = Episode("ep-nogold", _episode(1).sessions, "q?", "2023/06/01 (Thu) 10:00", ())
    with pytest.raises(ValueError, match="ep-nogold.*gold_answers"):
        episodes_to_dataset([no_gold])
    odd_metadata = Episode("ep-odd", _episode(1).sessions, "q?", "d", ("x",), metadata={"when": object()})
    with pytest.raises(ValueError, match="ep-odd.*metadata"):
        episodes_to_dataset([odd_metadata])
    with pytest.raises(TypeError, match=r"episodes\[0\]"):
        episodes_to_dataset([{"episode_id": "x"}])
    with pytest.raises(ValueError, match="example 7.*'episode'"):
        rollout_from_info({"condition": "bounded_memory"}, example_id=7)
    with pytest.raises(ValueError, match="mode"):
        load_environment(mode="pretrain")


def test_bounded_memory_sends_each_session_once_and_answers_from_notes() -> None:
    env = make_environment([_episode(3)], stale_penalty_weight=0.5)
    with LocalOpenAIServer(responder=_responder("You live in Kyoto.")) as server:
        (output,) = _evaluate(env, server)
        sent = [body for body in server.requests if "messages" in body]

    assert len(sent) == 3 + 1  # one call per session, one for the answer
    for turn_index, body in enumerate(sent[:3]):
        text = _wire_text(body)
        assert f"SESSION-{turn_index}-TEXT" in text
        for other in range(3):
            if other != turn_index:
                assert f"SESSION-{other}-TEXT" not in text, (turn_index, other)
        # the previous reply arrives as notes, not as a chat turn: the prompt does not grow
        assert len(body["messages"]) == len(sent[0]["messages"])
        if turn_index > 0:
            assert f"lives in {CITIES[turn_index - 1]}" in body["messages"][-1]["content"]
    answer_text = _wire_text(sent[3])
    assert "SESSION-" not in answer_text
    assert "lives in Kyoto" in answer_text and "Which city do I live in?" in answer_text

    # the saved per-turn records are exactly what went over the wire
    turns = output["supersede_turns"]
    assert [turn["kind"] for turn in turns] == ["notes", "notes", "notes", "answer"]
    assert [turn["messages"] for turn in turns] == [_role_content(body) for body in sent]
    assert output["stop_condition"] == "rollout_done" and output["error"] is None
    assert output["metrics"]["answered_current"] == 1.0
    assert output["metrics"]["stale_penalty"] == 0.0
    assert output["metrics"]["num_turns"] == 4
    assert output["reward"] == pytest.approx(1.0)


def test_full_context_is_one_call_with_every_session() -> None:
    env = make_environment([_episode(3)], full_context=True)
    with LocalOpenAIServer(responder=_responder("Kyoto")) as server:
        (output,) = _evaluate(env, server)
        sent = [body for body in server.requests if "messages" in body]
    assert len(sent) == 1
    text = _wire_text(sent[0])
    assert all(f"SESSION-{index}-TEXT" in text for index in range(3))
    assert output["reward"] == pytest.approx(1.0)


def test_stale_answer_is_penalised_with_lambda() -> None:
    env = make_environment([_episode(3)], stale_penalty_weight=0.5)
    with LocalOpenAIServer(responder=_responder("You live in Oslo.")) as server:
        (output,) = _evaluate(env, server)
    assert output["metrics"]["answered_current"] == 0.0
    assert output["metrics"]["stale_penalty"] == -1.0
    assert output["reward"] == pytest.approx(-0.5)


def test_abstention_item_rewards_saying_unknown() -> None:
    abstention = Episode(
        "ep-abs",
        _episode(2).sessions,
        "Which city does my sister live in?",
        "2023/06/01 (Thu) 10:00",
        ("The information provided is not enough: you never mentioned your sister's city.",),
        is_abstention=True,
    )
    env = make_environment([abstention])
    with LocalOpenAIServer(responder=_responder("I don't know, you never told me.")) as server:
        (output,) = _evaluate(env, server)
    assert output["metrics"]["answered_current"] == 1.0
    assert output["reward"] == pytest.approx(1.0)


def test_env_response_steps_the_rollout_and_prompts_come_from_the_core() -> None:
    """Both override points run: every reply goes through env_response, every prompt is rebuilt."""
    env = make_environment([_episode(3)])
    calls = {"env_response": 0, "get_prompt_messages": 0}
    original_env_response, original_prompt = env.env_response, env.get_prompt_messages

    async def counting_env_response(messages, state, **kwargs):
        calls["env_response"] += 1
        return await original_env_response(messages, state, **kwargs)

    async def counting_prompt(state):
        calls["get_prompt_messages"] += 1
        return await original_prompt(state)

    env.env_response, env.get_prompt_messages = counting_env_response, counting_prompt
    with LocalOpenAIServer(responder=_responder("Kyoto")) as server:
        (output,) = _evaluate(env, server)
    assert calls == {"env_response": 4, "get_prompt_messages": 5}  # 4 replies fed; 4 prompts + final
    assert [turn["notes_after"] for turn in output["supersede_turns"][:3]] == [
        f"lives in {city}" for city in CITIES
    ]
    # the readable transcript shows the replies and each later turn's new user message
    completion = output["completion"]
    assert [message["role"] for message in completion] == ["assistant", "user"] * 3 + ["assistant"]
    assert completion[-1]["content"] == "Kyoto"


def test_empty_reply_ends_rollout_with_zero_reward() -> None:
    env = make_environment([_episode(2)])
    with LocalOpenAIServer(responder=lambda messages: "") as server:
        (output,) = _evaluate(env, server)
        sent = [body for body in server.requests if "messages" in body]
    assert len(sent) == 1
    assert output["stop_condition"] == "has_error"
    assert "EmptyModelResponseError" in json.dumps(output["error"])
    assert output["reward"] == 0.0
    assert output["metrics"]["answered_current"] == 0.0 and output["metrics"]["stale_penalty"] == 0.0


def _write_longmemeval_file(directory: Path) -> Path:
    """Two knowledge-update records in the upstream oracle layout (sessions out of date order)."""

    def record(question_id: str, old: str, new: str) -> dict:
        return {
            "question_id": question_id,
            "question_type": "knowledge-update",
            "question": "Which city do I live in?",
            "answer": new,
            "question_date": "2023/06/01 (Thu) 10:00",
            "haystack_dates": ["2023/05/20 (Sat) 09:00", "2023/05/02 (Tue) 09:00"],
            "haystack_session_ids": [f"{question_id}_b", f"{question_id}_a"],
            "answer_session_ids": [f"{question_id}_b", f"{question_id}_a"],
            "haystack_sessions": [
                [
                    {"role": "user", "content": f"We moved, I live in {new} now.", "has_answer": True},
                    {"role": "assistant", "content": "Congratulations!", "has_answer": False},
                ],
                [
                    {"role": "user", "content": f"I live in {old}.", "has_answer": True},
                    {"role": "assistant", "content": "Nice city.", "has_answer": False},
                ],
            ],
        }

    path = directory / "longmemeval_oracle.json"
    path.write_text(json.dumps([record("q1", "Lisbon", "Oslo"), record("q2", "Oslo", "Kyoto")]))
    return path


def test_vf_load_environment_finds_the_supersede_module(tmp_path: Path) -> None:
    data_file = _write_longmemeval_file(tmp_path)
    env = vf.load_environment("supersede", data_path=str(data_file), max_examples=1)
    assert isinstance(env, SupersedeEnv)
    assert len(env.get_eval_dataset()) == 1
    train_env = vf.load_environment("supersede", mode="train", num_train_examples=3, seed=1)
    assert len(train_env.get_dataset()) == 3
    assert json.loads(train_env.get_dataset()[0]["info"])["episode"]["superseded_values"]


@pytest.mark.parametrize(
    ("env_args", "extra_flags"),
    [
        ({"mode": "eval"}, []),  # the default path: vf-eval runs the env in its own server process
        pytest.param(
            {"mode": "train", "num_train_examples": 2}, ["--disable-env-server"], marks=pytest.mark.slow
        ),
    ],
)
def test_vf_eval_cli_runs_offline_against_the_fake_server(
    tmp_path: Path, env_args: dict, extra_flags: list
) -> None:
    if env_args["mode"] == "eval":
        env_args = {**env_args, "data_path": str(_write_longmemeval_file(tmp_path))}
    vf_eval = Path(sys.executable).with_name("vf-eval")
    output_dir = tmp_path / "runs"
    with LocalOpenAIServer() as server:
        command = [
            str(vf_eval), "supersede", "-m", "fake-model", "-b", server.base_url, "-k", "SUPERSEDE_TEST_KEY",
            "-n", "2", "-r", "1", "-c", "2", "--disable-tui", "-s", "-o", str(output_dir),
            "-C", "supersede_turns", "-a", json.dumps(env_args), *extra_flags,
        ]  # fmt: skip
        completed = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=240,
            env={**os.environ, "SUPERSEDE_TEST_KEY": "x"},
        )
        chat_requests = [body for body in server.requests if "messages" in body]
    assert completed.returncode == 0, completed.stderr[-3000:]
    (results_file,) = output_dir.glob("evals/supersede--fake-model/*/results.jsonl")
    rows = [json.loads(line) for line in results_file.read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert {"answered_current", "stale_penalty"} <= set(row)
        assert row["stop_condition"] == "rollout_done"
        assert len(row["supersede_turns"]) == len(row["info"]["episode"]["sessions"]) + 1
    assert len(chat_requests) == sum(len(row["supersede_turns"]) for row in rows)
    # llama.cpp's server (and Ollama) answer 500 to a null reasoning_content on an assistant message
    sent = [message for body in chat_requests for message in body["messages"]]
    assert any(message["role"] == "assistant" for message in sent)  # the worked example is one
    assert all(message.get("reasoning_content", "") is not None for message in sent)


def test_offline_eval_mode_tells_a_vf_eval_user_what_to_pass(tmp_path: Path, monkeypatch) -> None:
    """Without the hub or a local copy, the advice is vf-eval's (-a data_path or mode train), not make's."""
    import supersede_lib.environment as environment_module
    from supersede_lib.data.longmemeval import DataUnavailableError

    monkeypatch.delenv("SUPERSEDE_LONGMEMEVAL_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def offline(**kwargs):
        raise DataUnavailableError(
            "LongMemEval file 'longmemeval_oracle.json' is not available locally and could not be downloaded "
            "(OSError: offline). Set SUPERSEDE_LONGMEMEVAL_DIR ... or run: make reproduce PROFILE=offline."
        )

    monkeypatch.setattr(environment_module, "load_longmemeval", offline)
    with pytest.raises(DataUnavailableError) as raised:
        load_environment(mode="eval")
    message = str(raised.value)
    assert "could not be downloaded" in message and "make reproduce" not in message
    assert '"data_path"' in message and '"mode": "train"' in message
