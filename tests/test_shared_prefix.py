"""The shared prompt prefix in training: rows grouped right, and the same loss and gradient as TRL's path."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

import torch  # noqa: E402

from supersede_lib.bench.train_prefix import window_gradient, with_advantages  # noqa: E402
from supersede_lib.train import grpo  # noqa: E402
from supersede_lib.train.config import TrainingConfig  # noqa: E402
from supersede_lib.train.gpu_check import reply_hash_reward as _varied_scorer  # noqa: E402
from supersede_lib.train.run import build_trainer  # noqa: E402
from supersede_lib.train.samples import expand_to_turn_samples  # noqa: E402
from supersede_lib.train.shared_prefix import remainder_batch, shared_prefix_groups  # noqa: E402

PAD = 0


def _batch(prompts: list[list[int]], completions: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, int]:
    """TRL's layout: prompts left-padded, completions right-padded."""
    prompt_width = max(map(len, prompts))
    completion_width = max(map(len, completions))
    rows, masks = [], []
    for prompt, completion in zip(prompts, completions, strict=True):
        left = prompt_width - len(prompt)
        right = completion_width - len(completion)
        rows.append([PAD] * left + prompt + completion + [PAD] * right)
        masks.append([0] * left + [1] * len(prompt) + [1] * len(completion) + [0] * right)
    return torch.tensor(rows), torch.tensor(masks), completion_width


def test_rows_group_by_their_common_prompt_prefix() -> None:
    head = list(range(10, 90))  # 80 shared tokens
    prompts = [
        head + [1, 2, 3],
        head + [1, 2, 4, 5, 6],
        head + [7],
        list(range(200, 290)),  # another prompt: alone
        [PAD],  # an inert row (one pad token as its prompt)
    ]
    completions = [[5, 5], [6], [7, 7, 7], [8], [PAD]]
    ids, mask, keep = _batch(prompts, completions)
    mask[4] = torch.tensor([0] * (mask.size(1) - 4) + [1, 0, 0, 0])  # attended pad prompt, masked completion
    groups, alone = shared_prefix_groups(ids, mask, keep, min_shared=64)
    assert alone == [3, 4]
    (group,) = groups
    assert group.rows == [0, 1, 2]
    # the common prefix is head + [1, 2] for rows 0 and 1, but row 2 diverges after head
    assert group.prefix_ids == head
    assert group.starts == [7, 5, 9]  # left padding to the 90-token prompt of row 3


def test_a_prefix_leaves_every_row_its_last_prompt_token() -> None:
    head = list(range(10, 90))
    ids, mask, keep = _batch([head, head + [1]], [[5], [6]])
    (group,), alone = shared_prefix_groups(ids, mask, keep, min_shared=64)
    assert alone == [] and group.prefix_ids == head[:-1]


def test_remainders_keep_completions_aligned_and_positions_contiguous() -> None:
    head = list(range(10, 90))
    ids, mask, keep = _batch([head + [1, 2, 3], head + [4]], [[5, 5], [6]])
    (group,), _ = shared_prefix_groups(ids, mask, keep, min_shared=64)
    rest, full_mask, positions = remainder_batch(ids, mask, group, [0, 1], PAD)
    shared = len(group.prefix_ids)
    assert torch.equal(rest[:, -keep:], ids[:, -keep:])  # completion columns unchanged
    assert rest[0].tolist() == [1, 2, 3, 5, 5]
    assert rest[1].tolist() == [PAD, PAD, 4, 6, PAD]
    assert full_mask.shape == (2, shared + rest.size(1))
    assert full_mask[1].tolist() == [1] * shared + [0, 0, 1, 1, 0]
    assert positions[0].tolist() == [shared + k for k in range(5)]
    assert positions[1, 2:].tolist() == [shared, shared + 1, shared + 2]  # no gap after the prefix


def _fp32_tiny_trainer(tiny_path: Path, output_dir: Path, **changes: object):  # noqa: ANN202
    """The smoke preset on the tiny model in float32, where both paths must agree to float noise."""
    config = TrainingConfig.preset(
        "smoke",
        model_name_or_path=str(tiny_path),
        output_dir=str(output_dir),
        disable_tqdm=True,
        cpu_dtype="float32",
        **changes,
    )
    return build_trainer(config, seed=0, scorer=_varied_scorer)


@pytest.fixture(scope="module")
def trained_tiny(tiny_path: Path, tmp_path_factory: pytest.TempPathFactory):
    """A float32 tiny trainer after one step, and that step's turn samples, every one with an advantage."""
    trainer = _fp32_tiny_trainer(
        tiny_path,
        tmp_path_factory.mktemp("run"),
        max_steps=1,
        save_steps=1,
        max_completion_length=6,
        episode_overrides={"n_sessions": (2, 3), "trailing_distractors": (0, 0)},
        num_generations=4,
    )
    trainer.train()
    trainer.mask_truncated_completions = False  # 6-token replies are all cut short: keep them in the loss
    samples = expand_to_turn_samples(trainer.last_trajectories)
    return trainer, with_advantages(samples)


def _window_gradient(trainer, samples, micro_batches: int, share: bool):  # noqa: ANN001, ANN202
    losses, gradient, _ = window_gradient(trainer, samples, micro_batches, share)
    return losses, gradient


def _assert_same_gradient(plain, shared) -> None:  # noqa: ANN001
    assert plain.abs().sum() > 0 and plain.shape == shared.shape
    assert torch.allclose(plain, shared, rtol=1e-3, atol=1e-4 * float(plain.abs().max()))


def test_the_shared_prefix_gives_trls_loss_and_gradient(
    trained_tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer, samples = trained_tiny
    batch = trainer._samples_to_tensors(samples, 1, loss_tokens=trainer._loss_token_count(samples))
    groups, _ = shared_prefix_groups(
        torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1),
        torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1),
        batch["completion_ids"].size(1),
    )
    assert groups and sum(len(group.rows) for group in groups) >= len(samples) // 2  # the rewrite turns share
    shared_calls = []
    original = grpo.logps_with_shared_prefix

    def counting(*args, **kwargs):  # noqa: ANN002, ANN003
        shared_calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(grpo, "logps_with_shared_prefix", counting)
    (loss_plain,), grads_plain = _window_gradient(trainer, samples, 1, share=False)
    (loss_shared,), grads_shared = _window_gradient(trainer, samples, 1, share=True)
    assert shared_calls == [1]  # the second pass really took the shared-prefix path
    assert loss_plain != 0.0
    assert loss_shared == pytest.approx(loss_plain, rel=1e-4, abs=1e-7)
    _assert_same_gradient(grads_plain, grads_shared)


def test_a_prefix_runs_once_per_accumulation_window_with_the_same_gradient(
    trained_tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    from supersede_lib.train import shared_prefix

    trainer, samples = trained_tiny
    runs = []
    original = shared_prefix.WindowPrefix.run

    def counting(model, prefix):  # noqa: ANN001, ANN202
        runs.append(tuple(prefix[0].tolist()))
        return original(model, prefix)

    monkeypatch.setattr(shared_prefix.WindowPrefix, "run", staticmethod(counting))
    plain_losses, grads_plain = _window_gradient(trainer, samples, 4, share=False)
    shared_losses, grads_shared = _window_gradient(trainer, samples, 4, share=True)
    assert (
        len(shared_losses) == 4 and runs and len(runs) == len(set(runs))
    )  # each prefix ran once, not per micro-batch
    assert shared_losses == pytest.approx(plain_losses, rel=1e-4, abs=1e-7)
    _assert_same_gradient(grads_plain, grads_shared)
    assert trainer._window_prefixes == {}  # flushed: the next window computes its own


def test_without_the_flush_the_prefix_gradient_would_be_missing(trained_tiny) -> None:
    """The flush is what carries the prefix's share of the gradient: skipping it changes the result."""
    trainer, samples = trained_tiny
    _, grads_plain = _window_gradient(trainer, samples, 2, share=False)
    trainer._flush_window_prefixes = lambda: trainer._window_prefixes.clear()
    try:
        _, grads_unflushed = _window_gradient(trainer, samples, 2, share=True)
    finally:
        del trainer._flush_window_prefixes
    assert not torch.allclose(
        grads_plain, grads_unflushed, rtol=1e-3, atol=1e-4 * float(grads_plain.abs().max())
    )


def test_a_training_step_sends_the_prefix_gradient_before_the_optimiser_steps(
    tiny_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from supersede_lib.train import shared_prefix

    events = []
    backward = shared_prefix.WindowPrefix.backward
    monkeypatch.setattr(
        shared_prefix.WindowPrefix, "backward", lambda self: (events.append("prefix"), backward(self))[1]
    )
    trainer = _fp32_tiny_trainer(
        tiny_path,
        tmp_path,
        max_steps=1,
        max_completion_length=6,
        num_generations=4,
        episode_overrides={"n_sessions": (2, 3), "trailing_distractors": (0, 0)},
        share_prompt_prefix=True,
    )
    trainer.mask_truncated_completions = False
    original_clip = torch.nn.utils.clip_grad_norm_

    def clip(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        events.append("clip")
        return original_clip(*args, **kwargs)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", clip)
    trainer.train()
    assert "prefix" in events and trainer._window_prefixes == {}
    if (
        "clip" in events
    ):  # the Trainer clips after the window's last micro-batch: the prefix share is in by then
        assert events.index("prefix") < events.index("clip")


def test_generation_with_the_shared_prefix_matches_trls(
    tiny_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from supersede_lib.agent.rollout import BoundedMemoryRollout
    from supersede_lib.data import synthetic

    trainer = _fp32_tiny_trainer(tiny_path, tmp_path, max_completion_length=8)
    episodes = synthetic.generate_episodes(3, seed=5, difficulty="easy")
    conversations = [BoundedMemoryRollout(episode, 200).current_messages() for episode in episodes]
    prompt_ids, _, _ = trainer._tokenize_prompts(conversations)
    assert len({len(ids) for ids in prompt_ids}) > 1  # unequal lengths: the remainders get padded
    trainer.generation_config.do_sample = False  # greedy, so both paths must pick the same tokens
    calls = []
    original = grpo.generate_with_shared_prefix

    def counting(*args, **kwargs):  # noqa: ANN002, ANN003
        calls.append(kwargs["shared"])
        return original(*args, **kwargs)

    monkeypatch.setattr(grpo, "generate_with_shared_prefix", counting)
    replies = {}
    for share in (False, True):
        trainer.share_prompt_prefix = share
        replies[share], _ = trainer._generate_turn(prompt_ids)
    assert len(calls) == 1 and calls[0] >= 64
    assert replies[True] == replies[False]
    assert all(0 < len(reply) <= 8 for reply in replies[True])


def test_gradient_checkpointing_turns_the_shared_prefix_off(tiny_path: Path, tmp_path: Path) -> None:
    """Checkpointed layers drop every cache in training mode (seen on a GPU: the prefix forward returned
    none), so a run with both trains without the prefix, and the trainer refuses to be built with both."""
    trainer = _fp32_tiny_trainer(
        tiny_path, tmp_path / "run", share_prompt_prefix=True, gradient_checkpointing=True, max_steps=1
    )
    assert trainer.args.gradient_checkpointing and not trainer.share_prompt_prefix
    trainer.train()  # the plain path: no prefix forward to come back empty
    assert trainer.state.global_step == 1
    with pytest.raises(ValueError, match="gradient checkpointing"):
        grpo.SupersedeGRPOTrainer(
            model=trainer.model,
            reward_funcs=trainer.reward_funcs,
            args=trainer.args,
            train_dataset=trainer.train_dataset,
            processing_class=trainer.processing_class,
            episode_source=trainer.episode_source,
            scorer=trainer.scorer,
            curriculum=trainer.curriculum,
            zero_advantage_stop=trainer.zero_advantage_stop,
            share_prompt_prefix=True,
        )
