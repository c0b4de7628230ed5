"""Rollouts sampled by llama.cpp with the policy's LoRA (`train.llamacpp_rollouts`, `rollout_engine`).

The pure pieces run everywhere; the trainer runs on SmolLM2-135M's GGUF where it is provisioned
(transformers dequantises it for the loss, llama.cpp samples from the file itself).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from supersede_lib.models.chat import ModelCallError, ModelConfigError
from supersede_lib.train.config import tiny_smoke_config
from supersede_lib.train.llamacpp_rollouts import LlamaCppRolloutSampler, completion_body, read_completion

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _reply(*entries: tuple[int, float]) -> dict:
    return {"choices": [{"logprobs": {"content": [{"id": token, "prob": prob} for token, prob in entries]}}]}


def test_a_request_samples_at_the_temperature_alone_and_asks_for_the_drawn_tokens_probabilities() -> None:
    body = completion_body([1, 2, 3], max_new_tokens=8, temperature=0.7, seed=11)
    assert body["prompt"] == [1, 2, 3] and body["n_predict"] == 8 and body["seed"] == 11
    assert (body["top_k"], body["top_p"], body["min_p"]) == (0, 1.0, 0.0)  # nothing cut, as TRL samples
    assert body["post_sampling_probs"] and body["n_probs"] == 1
    with pytest.raises(ValueError, match="temperature above 0"):
        completion_body([1], max_new_tokens=8, temperature=0.0, seed=0)


def test_a_reply_gives_token_ids_and_log_probs_and_a_malformed_one_is_named() -> None:
    tokens, logps = read_completion(_reply((5, 0.5), (2, 0.25)))
    assert tokens == [5, 2] and logps == pytest.approx([math.log(0.5), math.log(0.25)])
    with pytest.raises(ModelCallError, match="per-token ids"):
        read_completion({"choices": [{"text": "no logprobs"}]})
    with pytest.raises(ModelCallError, match="outside"):
        read_completion(_reply((5, 0.0)))


def test_the_config_names_the_engine_and_refuses_greedy_llamacpp_sampling(tmp_path: Path) -> None:
    config = tiny_smoke_config(tmp_path / "tiny", tmp_path)
    assert config.rollout_engine == "policy"
    with pytest.raises(ValueError, match="rollout_engine must be one of"):
        config.replace(rollout_engine="vllm")
    with pytest.raises(ValueError, match="temperature above 0"):
        config.replace(rollout_engine="llamacpp", temperature=0.0)


def test_a_model_without_a_gguf_file_is_refused_before_any_rollout(tmp_path: Path) -> None:
    with pytest.raises(ModelConfigError, match="not one: train from a .gguf model"):
        LlamaCppRolloutSampler(tmp_path / "tiny-random-qwen2", n_threads=1, n_ctx=512)


# --------------------------------------------------------------------------- the trainer on SmolLM2


def _smollm2() -> Path:
    from supersede_lib.models.gguf import default_model_dir, find_local_gguf

    found = find_local_gguf(None, SMOLLM2_FILE)
    if found is None:
        pytest.skip(f"no {SMOLLM2_FILE} in $SUPERSEDE_MODEL_DIR or {default_model_dir()}")
    return found


def _alternating_reward():  # noqa: ANN202
    """1, 0, 1, 0, ... whatever the replies: every group of two has a spread, so its rows train."""
    calls = iter(range(1_000_000))
    return lambda episode, rollout: float(next(calls) % 2 == 0)


@pytest.fixture
def smollm2_trainer(tmp_path: Path):  # noqa: ANN201
    """A one-step float32 trainer on SmolLM2 whose rollouts llama.cpp samples."""
    pytest.importorskip("xllamacpp")
    pytest.importorskip("trl")
    pytest.importorskip("peft")
    import torch

    from supersede_lib.train.run import build_trainer

    threads = torch.get_num_threads()
    config = tiny_smoke_config(
        _smollm2(),
        tmp_path,
        rollout_engine="llamacpp",
        max_steps=1,
        save_steps=1,
        episodes_per_step=1,  # one group of two: the least a step trains on
        cpu_threads=2,
        max_completion_length=12,  # long enough for the groups' replies (and rewards) to differ
        cpu_dtype="float32",
        temperature=0.7,
    )
    trainer = build_trainer(config, seed=0, scorer=_alternating_reward())
    yield trainer
    trainer.rollout_sampler.close()
    torch.set_num_threads(threads)


def _gap_to_the_training_forward(trainer, prompt_ids, completions, logps) -> float:  # noqa: ANN001
    """Mean |training - llama.cpp| log-prob over the sampled tokens, at the trainer's temperature."""
    import torch

    from supersede_lib.train.samples import TurnSample

    samples = [
        TurnSample(index, 0, prompt, completion, 1.0, row)
        for index, (prompt, completion, row) in enumerate(zip(prompt_ids, completions, logps, strict=True))
    ]
    batch = trainer._samples_to_tensors(samples, 1, loss_tokens=1)
    mask = batch["completion_mask"].bool()
    input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    with torch.no_grad():
        training, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, input_ids, attention, batch["completion_ids"].size(1)
        )
    return float((training[mask] - batch["sampling_per_token_logps"][mask]).abs().mean())


def test_llamacpp_samples_what_the_policy_would_and_reloads_the_lora_after_a_step(smollm2_trainer) -> None:  # noqa: ANN001
    from supersede_lib.agent.rollout import BoundedMemoryRollout
    from supersede_lib.data import synthetic
    from supersede_lib.train.run import load_metrics

    trainer = smollm2_trainer
    episodes = synthetic.generate_episodes(3, seed=5, difficulty="easy")
    prompt_ids, _, _ = trainer._tokenize_prompts(
        [BoundedMemoryRollout(episode, 200).current_messages() for episode in episodes]
    )
    completions, logps = trainer._generate_turn(prompt_ids)
    assert [len(row) for row in logps] == [len(row) for row in completions] and all(completions)
    assert trainer.rollout_sampler.version == 0
    first_adapter = trainer.rollout_sampler.adapter_gguf
    # measured: 0.03 (quantised activations); 0.25 if the temperature were left out of either side
    gap = _gap_to_the_training_forward(trainer, prompt_ids, completions, logps)
    assert gap < 0.1
    trainer.temperature = 1.0
    assert _gap_to_the_training_forward(trainer, prompt_ids, completions, logps) > gap + 0.1
    trainer.temperature = 0.7

    trainer.train()
    metrics = load_metrics(Path(trainer.args.output_dir) / "metrics.jsonl")
    assert metrics["sampling/sampling_logp_difference/mean"].iloc[0] < 0.1  # measured every step
    trainer._generate_turn(prompt_ids[:1])  # after the step: the trained LoRA, converted again
    assert trainer.rollout_sampler.version == 1 and trainer.rollout_sampler.adapter_gguf != first_adapter
