"""Mem0 end to end against llama.cpp's real HTTP server, one server for chat and /v1/embeddings.

llama.cpp serves both from one process when started with embeddings on and a pooling type (mean): chat
completions still work, and /v1/embeddings answers instead of "start it with --embeddings" (501) or
"pooling type 'none' is not OAI compatible" (400). The test plays the driver: each `PolicyCall` goes to
the server as it would from the runner. Skips when xllamacpp or the small model is missing.
"""

from __future__ import annotations

import importlib.util

import httpx
import pytest
from conftest import SMALL_MODEL_FILES, small_model_file

from supersede_lib.agent.episode import Episode, Session, Turn
from supersede_lib.agent.memory import PolicyReply, PolicyRollout
from supersede_lib.models.gguf import serve_embeddings

if importlib.util.find_spec("mem0") is None:
    pytest.skip("the Mem0 policy needs the mem0ai package (requirements.txt)", allow_module_level=True)

from supersede_lib.agent.memory.mem0_policy import Mem0Policy  # noqa: E402 - after the skip

pytestmark = [pytest.mark.realmodel, pytest.mark.slow]
MAX_TOKENS = 64  # each of Mem0's chat calls; enough for a fact list or one action on this model


def serve_chat_and_embeddings(model_file, n_ctx: int = 4096, threads: int = 2):
    """llama.cpp's server on `model_file` with /v1/embeddings on (mean pooling) beside chat."""
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = str(model_file)
    params.n_ctx = n_ctx
    params.cpuparams.n_threads = threads
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    serve_embeddings(params)  # the same switch the embedded engine throws
    server = xlc.Server(params)
    return server, server.listening_address.rstrip("/") + "/v1"


@pytest.fixture
def chat_and_embedding_server():
    pytest.importorskip("xllamacpp", reason="the real server is llama.cpp's, from xllamacpp")
    model_file = small_model_file()
    if model_file is None:
        pytest.skip(f"no {' or '.join(SMALL_MODEL_FILES)} provisioned")
    server, base_url = serve_chat_and_embeddings(model_file)
    try:
        yield base_url
    finally:
        del server


def answer(client: httpx.Client, call) -> PolicyReply:
    """One `PolicyCall` sent to the server the way the runner sends it."""
    if call.kind == "embed":
        response = client.post("/embeddings", json={"input": list(call.texts), "model": "local"})
        response.raise_for_status()
        return PolicyReply(vectors=[item["embedding"] for item in response.json()["data"]])
    body = {"messages": list(call.messages), "temperature": 0.0, "seed": 0}
    body["max_tokens"] = MAX_TOKENS if call.max_tokens in (None, "auto") else min(call.max_tokens, MAX_TOKENS)
    if call.response_format:
        body["response_format"] = call.response_format
    response = client.post("/chat/completions", json=body)
    response.raise_for_status()
    return PolicyReply(text=response.json()["choices"][0]["message"]["content"] or "")


def test_mem0_runs_one_episode_against_llama_cpp(chat_and_embedding_server):
    episode = Episode(
        episode_id="mem0-live",
        # one session: Mem0's two prompts are ~1,000 and ~1,500 tokens, the cost of this test
        sessions=(Session("s0", "2023/05/09 (Tue) 10:00", (Turn("user", "I just moved to Berlin."),)),),
        question="Which city do I live in?",
        question_date="2023/06/01 (Thu) 10:00",
        gold_answers=("Berlin",),
    )
    policy = Mem0Policy(budget_chars=300, max_tokens=MAX_TOKENS)
    rollout = PolicyRollout(episode, policy)
    kinds = []
    with httpx.Client(base_url=chat_and_embedding_server, timeout=600) as client:
        while not rollout.done:
            call = rollout.current_call()
            kinds.append(call.kind if rollout.current_kind == "notes" else "answer")
            rollout.step(answer(client, call))

    # the size probe and the extraction call first, the question's search and the answer last
    assert kinds[:2] == ["embed", "chat"] and kinds[-2:] == ["embed", "answer"]
    assert len(rollout.notes_history) == 1 and len(rollout.notes_history[0]) <= 300
    assert rollout.answer is not None
    # whatever the small model wrote, Mem0 either stored it or said why (a memory failure), never both silent
    stored = [operation.text for operation in policy.operations if operation.event in ("ADD", "UPDATE")]
    assert all(text[:20] in rollout.turns[-1].messages[-1]["content"] for text in stored[:1])
    assert stored or rollout.memory_failures or "facts" in rollout.turns[1].reply
