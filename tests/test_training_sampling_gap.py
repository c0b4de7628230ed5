"""The sampler's log-probs beside the rollouts, their gap to the training forward, and TRL's
importance-sampling correction for it (`train.sampling_logps`, `SupersedeGRPOTrainer`).

Every trainer here is the tiny random model of `tiny_smoke_config`; float32 where two engines must
agree to float noise.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

import torch  # noqa: E402

from supersede_lib.agent.rollout import BoundedMemoryRollout, make_rollout  # noqa: E402
from supersede_lib.data import synthetic  # noqa: E402
from supersede_lib.eval.provenance import config_sha256  # noqa: E402
from supersede_lib.train import grpo  # noqa: E402
from supersede_lib.train.config import CONFIG_FIELDS_RECORDED_WHEN_SET, tiny_smoke_config  # noqa: E402
from supersede_lib.train.gpu_check import reply_hash_reward as _varied_scorer  # noqa: E402
from supersede_lib.train.run import _config_record, build_trainer, config_changes, load_metrics  # noqa: E402
from supersede_lib.train.samples import TrajectoryRecord, TurnSample, expand_to_turn_samples  # noqa: E402
from supersede_lib.train.sampling_logps import (  # noqa: E402
    importance_sampling_ratio,
    logp_gap_totals,
)

GAP_MEAN = "sampling/sampling_logp_difference/mean"
GAP_MAX = "sampling/sampling_logp_difference/max"


@pytest.fixture(scope="module", autouse=True)
def _restore_torch_threads():
    """The smoke preset pins torch to 1 thread; give other test modules theirs back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _trainer(tiny_path: Path, output_dir: Path, **changes: object):  # noqa: ANN202
    settings: dict[str, object] = dict(
        max_steps=1, save_steps=1, max_completion_length=6, cpu_dtype="float32", temperature=0.7
    )
    return build_trainer(
        tiny_smoke_config(tiny_path, output_dir, **{**settings, **changes}), seed=0, scorer=_varied_scorer
    )


def _training_logps(trainer, batch: dict) -> torch.Tensor:  # noqa: ANN001
    """The training forward's log-probs of the batch's completions (no gradient)."""
    input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, input_ids, mask, batch["completion_ids"].size(1)
        )
    return logps


# --------------------------------------------------------------------------- the pure pieces


def test_the_ratio_follows_trls_modes_and_ignores_unknown_and_masked_tokens() -> None:
    training = torch.tensor([[-1.0, -2.0, -3.0, -4.0]])
    sampling = torch.tensor([[-1.0, -3.0, math.nan, -1.0]])  # gaps: 0, +1, unknown, -3
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    token = importance_sampling_ratio(training, sampling, mask, "token_truncate", clip_max=2.0)
    assert token.tolist()[0] == pytest.approx([1.0, 2.0, 1.0, math.exp(-3.0)])  # e^1 clipped at 2
    masked = importance_sampling_ratio(training, sampling, mask, "token_mask", clip_max=2.0)
    assert masked.tolist()[0] == pytest.approx([1.0, 0.0, 1.0, math.exp(-3.0)])
    sequence = importance_sampling_ratio(training, sampling, mask, "sequence_truncate", clip_max=3.0)
    assert sequence.shape == (1, 1) and sequence.item() == pytest.approx(math.exp(-2.0))
    assert importance_sampling_ratio(training, sampling, mask, "sequence_mask", clip_min=0.5).item() == 0.0
    outside = torch.tensor([[1.0, 0.0, 1.0, 0.0]])  # a masked-out token has no gap
    assert importance_sampling_ratio(training, sampling, outside, "token_truncate").tolist()[0][1] == 1.0
    with pytest.raises(ValueError, match="token_truncate"):
        importance_sampling_ratio(training, sampling, mask, "none")


def test_the_gap_counts_known_masked_tokens_only() -> None:
    training = torch.tensor([[-1.0, -2.0, -3.0], [-1.0, -1.0, -1.0]])
    sampling = torch.tensor([[-1.5, math.nan, -3.0], [-4.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    total, count, largest = logp_gap_totals(training, sampling, mask).tolist()
    assert (total, count, largest) == pytest.approx((3.5, 3.0, 3.0))


def test_new_fields_at_their_defaults_leave_a_runs_record_and_hash_as_they_were(tmp_path: Path) -> None:
    config = tiny_smoke_config(tmp_path / "tiny", tmp_path)
    record = _config_record(config, seed=0)
    every_field = json.loads(json.dumps({**dataclasses.asdict(config), "seed": 0}, default=str))
    before = {key: value for key, value in every_field.items() if key not in CONFIG_FIELDS_RECORDED_WHEN_SET}
    assert record == before and config_sha256(record) == config_sha256(before)
    assert config_changes(before, config, 0) == ""  # a run recorded before the fields: the same run
    corrected = config.replace(rollout_is_correction="token_truncate")
    assert _config_record(corrected, 0)["rollout_is_correction"] == "token_truncate"
    assert "rollout_is_correction" in config_changes(before, corrected, 0)
    assert config_changes(before, config.replace(sampling_gap_every=5), 0) == ""  # a measurement only
    with pytest.raises(ValueError, match="rollout_is_correction"):
        config.replace(rollout_is_correction="token")


# --------------------------------------------------------------------------- both engines on the tiny model


@pytest.mark.parametrize("share", [False, True])
def test_the_samplers_logps_are_the_training_forwards_in_float32(
    tiny_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, share: bool
) -> None:
    trainer = _trainer(tiny_path, tmp_path, sampling_gap_every=1, max_completion_length=8)
    trainer.share_prompt_prefix = share
    paths = []
    for name in ("generate_with_shared_prefix", "generate_left_padded"):
        original = getattr(grpo, name)
        monkeypatch.setattr(
            grpo, name, lambda *a, _name=name, _f=original, **k: (paths.append(_name), _f(*a, **k))[1]
        )
    episodes = synthetic.generate_episodes(3, seed=5, difficulty="easy")
    prompt_ids, _, _ = trainer._tokenize_prompts(
        [BoundedMemoryRollout(episode, 200).current_messages() for episode in episodes]
    )
    completions, sampling_logps = trainer._generate_turn(prompt_ids)
    assert paths == ["generate_with_shared_prefix" if share else "generate_left_padded"]
    assert [len(row) for row in sampling_logps] == [len(row) for row in completions]
    samples = [
        TurnSample(index, 0, prompt, completion, 1.0, logps)
        for index, (prompt, completion, logps) in enumerate(
            zip(prompt_ids, completions, sampling_logps, strict=True)
        )
    ]
    batch = trainer._samples_to_tensors(samples, 1, loss_tokens=1)
    mask = batch["completion_mask"].bool()
    sampled = batch["sampling_per_token_logps"]
    assert sampled.shape == batch["completion_ids"].shape and bool((sampled[mask] < 0).all())
    training = _training_logps(trainer, batch)
    assert torch.allclose(training[mask], sampled[mask], atol=1e-4)
    trainer.temperature = 1.0  # the recorder divided the logits by the run's temperature (0.7)
    assert not torch.allclose(_training_logps(trainer, batch)[mask], sampled[mask], atol=1e-2)


def test_the_gap_is_logged_and_recording_changes_neither_the_samples_nor_the_update(
    tiny_path: Path, tmp_path: Path
) -> None:
    runs = {}
    for every in (0, 1):
        config = tiny_smoke_config(
            tiny_path, tmp_path / f"every-{every}", max_steps=1, save_steps=1, max_completion_length=6
        )
        trainer = build_trainer(config.replace(sampling_gap_every=every), seed=0, scorer=_varied_scorer)
        trainer.train()
        weights = {
            name: p.detach().clone() for name, p in trainer.model.named_parameters() if p.requires_grad
        }
        turns = [turn.completion_ids for t in trainer.last_trajectories for turn in t.turns]
        metrics = load_metrics(Path(trainer.args.output_dir) / "metrics.jsonl")
        runs[every] = (turns, weights, metrics)
    (turns_off, weights_off, metrics_off), (turns_on, weights_on, metrics_on) = runs[0], runs[1]
    assert turns_on == turns_off
    assert weights_on.keys() == weights_off.keys()
    assert all(torch.equal(weights_on[name], weights_off[name]) for name in weights_off)
    assert GAP_MEAN not in metrics_off.columns
    gap_mean, gap_max = metrics_on[GAP_MEAN].iloc[0], metrics_on[GAP_MAX].iloc[0]
    assert 0.0 <= gap_mean <= gap_max < 0.1  # the same policy: near zero, but measured


@pytest.fixture(scope="module")
def corrected(tiny_path: Path, tmp_path_factory: pytest.TempPathFactory):
    """A float32 trainer with token_truncate after one step, and that step's samples with advantages."""
    trainer = _trainer(
        tiny_path,
        tmp_path_factory.mktemp("corrected"),
        rollout_is_correction="token_truncate",
        num_generations=4,
    )
    trainer.train()
    trainer.mask_truncated_completions = False  # 6-token replies are all cut short: keep them in the loss
    # rolled out again by the weights the loss will see (the step's own rollouts predate its update)
    episodes = [trajectory.episode for trajectory in trainer.last_trajectories]
    rollouts = [
        make_rollout(episode, "bounded_memory", settings=trainer.rollout_settings) for episode in episodes
    ]
    trajectories = [
        TrajectoryRecord(0, episode, rollout, turns)
        for episode, rollout, turns in zip(episodes, rollouts, trainer._run_rollouts(rollouts), strict=True)
    ]
    samples = [
        dataclasses.replace(sample, advantage=(index % 3) - 0.8)
        for index, sample in enumerate(expand_to_turn_samples(trajectories))
    ]
    assert all(sample.sampling_logps is not None for sample in samples)
    return trainer, samples


def _loss_and_gradient(trainer, batch: dict) -> tuple[float, torch.Tensor]:  # noqa: ANN001
    trainer.model.train()
    trainer.model.zero_grad()
    loss = trainer._compute_loss(trainer.model, batch)
    loss.backward()
    gradient = torch.cat(
        [p.grad.flatten() for p in trainer.model.parameters() if p.requires_grad and p.grad is not None]
    )
    trainer.model.zero_grad()
    return loss.item(), gradient


def _weighted_batch(trainer, samples) -> dict:  # noqa: ANN001
    batch = trainer._samples_to_tensors(samples, 1, loss_tokens=trainer._loss_token_count(samples))
    trainer.state.global_step = 0
    trainer._add_logps(batch, "train")
    return batch


def test_the_correction_with_one_engine_leaves_the_loss_unchanged(corrected) -> None:
    trainer, samples = corrected
    batch = _weighted_batch(trainer, samples)
    ratio = batch["importance_sampling_ratio"]
    assert ratio.shape == batch["completion_ids"].shape
    assert float((ratio - 1.0).abs().max()) < 1e-4
    loss_weighted, gradient_weighted = _loss_and_gradient(trainer, batch)
    plain = {key: value for key, value in batch.items() if key != "importance_sampling_ratio"}
    loss_plain, gradient_plain = _loss_and_gradient(trainer, plain)
    assert loss_plain != 0.0 and gradient_plain.abs().sum() > 0
    assert loss_weighted == pytest.approx(loss_plain, rel=1e-4)
    assert torch.allclose(
        gradient_weighted, gradient_plain, rtol=1e-3, atol=1e-4 * float(gradient_plain.abs().max())
    )


def test_a_perturbed_sampling_logp_moves_its_weight_up_to_the_cap_as_trl_weights_the_loss(corrected) -> None:
    trainer, samples = corrected
    perturbed = list(samples)
    first = next(index for index, sample in enumerate(samples) if sample.advantage != 0)
    logps = list(samples[first].sampling_logps)
    logps[0] -= 1.0  # the sampler thought the token e times less likely: weight e (under the cap 3)
    logps[1] -= 2.0  # e^2 > 3: clipped at the cap
    perturbed[first] = dataclasses.replace(samples[first], sampling_logps=logps)
    batch = _weighted_batch(trainer, perturbed)
    row = first  # the batch's rows are the samples, in order
    ratio = batch["importance_sampling_ratio"]
    assert ratio[row, 0].item() == pytest.approx(math.e, rel=1e-3)
    assert ratio[row, 1].item() == pytest.approx(trainer.rollout_is_clip_max)
    assert trainer._metrics["train"]["sampling/importance_sampling_ratio/max"][-1] == pytest.approx(3.0)
    assert trainer._metrics["train"][GAP_MAX][-1] == pytest.approx(2.0, abs=1e-3)

    loss_weighted, gradient_weighted = _loss_and_gradient(trainer, batch)
    plain = {key: value for key, value in batch.items() if key != "importance_sampling_ratio"}
    loss_plain, gradient_plain = _loss_and_gradient(trainer, plain)
    assert not torch.allclose(
        gradient_weighted, gradient_plain, rtol=1e-3, atol=1e-4 * float(gradient_plain.abs().max())
    )
    # TRL's own vLLM path multiplies the per-token loss by the same weight: the same loss and gradient
    trainer.use_vllm, trainer.vllm_importance_sampling_correction = True, True
    try:
        loss_trl, gradient_trl = _loss_and_gradient(trainer, batch)
    finally:
        trainer.use_vllm = False
    assert loss_weighted == pytest.approx(loss_trl, rel=1e-5)
    assert torch.allclose(
        gradient_weighted, gradient_trl, rtol=1e-4, atol=1e-6 * float(gradient_trl.abs().max())
    )


def test_without_a_correction_the_sampling_logps_leave_the_gradient_bit_identical(corrected) -> None:
    trainer, samples = corrected
    trainer.rollout_is_correction, trainer.sampling_gap_every = "none", 1
    try:
        batch = _weighted_batch(trainer, samples)
    finally:
        trainer.rollout_is_correction, trainer.sampling_gap_every = "token_truncate", 0
    assert "importance_sampling_ratio" not in batch and "sampling_per_token_logps" in batch
    loss_with, gradient_with = _loss_and_gradient(trainer, batch)
    without = {key: value for key, value in batch.items() if key != "sampling_per_token_logps"}
    loss_without, gradient_without = _loss_and_gradient(trainer, without)
    assert loss_with == loss_without and torch.equal(gradient_with, gradient_without)
