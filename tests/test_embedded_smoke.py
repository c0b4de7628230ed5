"""Real embedded inference on a tiny GGUF model (SmolLM2-135M or Qwen2.5-Coder-0.5B).

Skipped when no such file is in $SUPERSEDE_MODEL_DIR or ~/.cache/supersede/models
(see provision-models.sh). Three short calls: two in-process, one over the HTTP port.
"""

import asyncio
from pathlib import Path

import pytest
from conftest import SMALL_MODEL_FILES, small_model_file

from supersede_lib.agent.episode import Episode, Session, Turn
from supersede_lib.eval.memory_metrics import embedding_calls
from supersede_lib.eval.runner import RunSettings, run_condition
from supersede_lib.models.gguf import MODEL_DIR_ENV, EmbeddedGGUFModel, default_model_dir
from supersede_lib.models.openai_api import OpenAIChatModel

pytestmark = pytest.mark.realmodel


@pytest.fixture(scope="module")
def small_model():
    pytest.importorskip("xllamacpp", reason="embedded backend needs xllamacpp")
    model_file = small_model_file()
    if model_file is None:
        pytest.skip(f"no {' or '.join(SMALL_MODEL_FILES)} in ${MODEL_DIR_ENV} or {default_model_dir()}")
    model = EmbeddedGGUFModel(model_file, n_ctx=1024, n_threads=1)
    yield model
    model.close()


MESSAGES = [
    {"role": "system", "content": "Answer in a few words."},
    {"role": "user", "content": "What colour is the sky on a clear day?"},
]


def test_embedded_model_replies_greedily_with_token_counts(small_model):
    async def twice():
        return await asyncio.gather(
            small_model.achat(MESSAGES, max_tokens=12, seed=0),
            small_model.achat(MESSAGES, max_tokens=12, seed=0),
        )

    first, second = asyncio.run(twice())
    assert first.text.strip()
    assert first.prompt_tokens > 0 and 0 < first.completion_tokens <= 12
    assert first.model == small_model.name and first.latency_s > 0
    assert second.text == first.text  # temperature 0 is greedy: same prompt, same reply


def test_parallel_slots_answer_requests_in_flight_together(small_model):
    """Three slots, three different questions at once: each gets the reply the one-slot model gives
    it alone (greedy, short replies): no slot mix-up, and here no change from batching."""
    questions = ["Name a yellow fruit.", "What is 2 + 2?", "What colour is snow?"]
    asked = [[MESSAGES[0], {"role": "user", "content": question}] for question in questions]
    slots = EmbeddedGGUFModel(small_model.model_path, n_ctx=1024, n_threads=1, n_parallel=3)

    async def together():
        return await asyncio.gather(*(slots.achat(messages, max_tokens=8) for messages in asked))

    try:
        batched = asyncio.run(together())
    finally:
        slots.close()
    alone = [small_model.chat(messages, max_tokens=8) for messages in asked]
    assert len({reply.text for reply in alone}) > 1  # a mix-up of slots would show
    assert [reply.text for reply in batched] == [reply.text for reply in alone]


BERLIN = Episode(
    episode_id="berlin",
    sessions=(Session("s0", "2023/05/09 (Tue) 10:00", (Turn("user", "I just moved to Berlin."),)),),
    question="Which city do I live in?",
    question_date="2023/06/01 (Thu) 10:00",
    gold_answers=("Berlin",),
)


@pytest.mark.parametrize("memory", ["mem0", "core_memory"])
def test_the_in_process_engine_serves_the_policies_that_need_tools_or_embeddings(small_model, memory):
    """Mem0 (embeddings) and the core-memory block (tool calls) run on the embedded llama.cpp model
    through the runner, never refused: the engine notebook 08's profiles name. Mem0's prompts take
    ~1,500 tokens, so this model gets a 4,096-token context."""
    model = EmbeddedGGUFModel(small_model.model_path, n_ctx=4096, n_threads=1)
    assert model.missing_capabilities(frozenset({"tools", "embeddings"})) == {}
    try:
        run = run_condition(
            [BERLIN], "bounded_memory", model, RunSettings(memory=memory, concurrency=1), progress=False
        )
    finally:
        model.close()
    row = run.frame.iloc[0]
    assert not row["error"] and isinstance(row["answer"], str)
    assert (embedding_calls(run.trajectories[0]["turns"]) > 0) == (memory == "mem0")


def test_a_context_overflow_inside_mem0_is_the_questions_error_not_a_crash(small_model):
    """The answer closes Mem0's store; the row still reads the memory it held (a 1,024-token context
    overflows at Mem0's first prompt, ending the rollout early)."""
    run = run_condition(
        [BERLIN], "bounded_memory", small_model, RunSettings(memory="mem0", concurrency=1), progress=False
    )
    assert "context overflow" in run.frame.iloc[0]["error"]


def test_embeddings_come_back_one_vector_per_text(small_model):
    result = asyncio.run(small_model.aembed(["I live in Berlin.", "My cat is Tofu."]))
    assert len(result.vectors) == 2 and len(result.vectors[0]) == len(result.vectors[1]) > 0
    assert result.vectors[0] != result.vectors[1] and result.prompt_tokens > 0


def test_embedded_model_serves_openai_compatible_http(small_model):
    base_url = small_model.serve()
    assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
    client = OpenAIChatModel(
        "local-gguf", base_url=base_url, api_key_env="SUPERSEDE_UNSET_KEY", timeout_s=120
    )
    result = asyncio.run(client.achat(MESSAGES, max_tokens=8))
    assert result.text.strip() and result.completion_tokens > 0


def test_vf_eval_runs_the_environment_against_the_embedded_model_over_http(small_model, tmp_path):
    """The standard verifiers entry point, end to end on a real local model: every rollout terminates."""
    import json
    import subprocess
    import sys

    vf_eval = Path(sys.executable).with_name("vf-eval")
    env_args = {"mode": "train", "num_train_examples": 1, "difficulty": "easy", "seed": 3}
    command = [
        str(vf_eval), "supersede", "-m", small_model.name, "-b", small_model.serve(), "-k", "SUPERSEDE_UNSET_KEY",
        "-n", "1", "-r", "1", "-t", "48", "-T", "0", "--disable-tui", "-s", "-o", str(tmp_path),
        "-C", "supersede_turns", "-a", json.dumps(env_args), "--disable-env-server",
    ]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    (results_file,) = tmp_path.glob("evals/supersede--*/*/results.jsonl")
    (row,) = [json.loads(line) for line in results_file.read_text().splitlines()]
    sessions = row["info"]["episode"]["sessions"]
    assert row["stop_condition"] == "rollout_done"
    assert [turn["kind"] for turn in row["supersede_turns"]] == ["notes"] * len(sessions) + ["answer"]
    assert {"answered_current", "stale_penalty"} <= set(row)
