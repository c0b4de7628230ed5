"""GRPO training on the rollout core: per-turn samples, shared advantages, stop, resume, curriculum.

Every run here uses the tiny random Qwen2 model (built offline in about a second) and 2-session
procedural episodes, so a GRPO step takes a few seconds on 2 CPU cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from conftest import make_episode  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from supersede_lib.agent.episode import Episode  # noqa: E402
from supersede_lib.agent.prompts import DEFAULT_PROMPT_VARIANT  # noqa: E402
from supersede_lib.agent.rollout import BoundedMemoryRollout  # noqa: E402
from supersede_lib.data import synthetic  # noqa: E402
from supersede_lib.eval.matcher import score_answer, score_episode_answer  # noqa: E402
from supersede_lib.train import run as training_run  # noqa: E402
from supersede_lib.train.callbacks import ZeroAdvantageStop  # noqa: E402
from supersede_lib.train.config import REWARDS, TrainingConfig, tiny_smoke_config  # noqa: E402
from supersede_lib.train.curriculum import Curriculum  # noqa: E402
from supersede_lib.train.gpu_check import reply_hash_reward as _varied_scorer  # noqa: E402
from supersede_lib.train.rewards import (  # noqa: E402
    group_advantages,
    memory_credit_scorer,
    rollout_record,
    rubric_scorer,
    score_trajectory,
    scorer_for,
)
from supersede_lib.train.run import (  # noqa: E402
    build_trainer,
    list_checkpoints,
    load_metrics,
    resolve_base_model,
    train,
)
from supersede_lib.train.samples import TrajectoryRecord, TurnTokens, expand_to_turn_samples  # noqa: E402

# ----------------------------------------------------------------------------- pure pieces


def test_group_advantages_are_relative_to_the_episode_group() -> None:
    rewards = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    advantages, zero_spread = group_advantages(rewards, group_size=4)
    assert zero_spread == [False, True]
    assert advantages[0] > 0 > advantages[1]
    assert advantages[1] == pytest.approx(advantages[2]) == pytest.approx(advantages[3])
    assert sum(advantages[:4]) == pytest.approx(0.0, abs=1e-5)
    assert advantages[4:] == [0.0, 0.0, 0.0, 0.0]  # a saturated group carries no gradient
    with pytest.raises(ValueError, match="groups of 3"):
        group_advantages(rewards, group_size=3)


def test_every_turn_of_a_trajectory_carries_its_advantage() -> None:
    episode = make_episode("hand-0", 2)
    trajectories = [
        TrajectoryRecord(
            0, episode, BoundedMemoryRollout(episode, 100), [TurnTokens([1], [2])] * 3, 1.0, 0.7
        ),
        TrajectoryRecord(
            0, episode, BoundedMemoryRollout(episode, 100), [TurnTokens([3], [4])] * 3, 0.0, -0.7
        ),
    ]
    samples = expand_to_turn_samples(trajectories)
    assert [(sample.trajectory_index, sample.turn_index) for sample in samples] == [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
        (1, 1),
        (1, 2),
    ]
    assert [sample.advantage for sample in samples] == [0.7] * 3 + [-0.7] * 3


def test_adaptive_curriculum_moves_up_when_groups_saturate() -> None:
    curriculum = Curriculum(
        "easy", adaptive=True, saturation_threshold=0.75, saturated_group_fraction=0.5, patience=2
    )
    mixed = [[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0]]  # no group saturated
    solved = [[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]]  # both groups >= 75% successes
    assert curriculum.observe(mixed, step=1) == "easy"
    assert curriculum.observe(solved, step=2) == "easy"  # patience 2: one saturated batch is not enough
    assert curriculum.observe(mixed, step=3) == "easy"  # the streak resets
    assert curriculum.observe(solved, step=4) == "easy"
    assert curriculum.observe(solved, step=5) == "medium"
    assert curriculum.history == [{"step": 5, "from": "easy", "to": "medium"}]
    for step in range(6, 20):
        curriculum.observe(solved, step=step)
    assert curriculum.difficulty == synthetic.DIFFICULTY_LADDER[-1]  # the top rung stays put
    restored = Curriculum("easy", adaptive=True)
    restored.load_state_dict(json.loads(json.dumps(curriculum.state_dict())))
    assert restored.difficulty == curriculum.difficulty and restored.history == curriculum.history


def test_fixed_curriculum_never_moves() -> None:
    curriculum = Curriculum("easy", adaptive=False, patience=1)
    for step in range(5):
        assert curriculum.observe([[1.0] * 8] * 4, step=step) == "easy"
    assert curriculum.history == []


def test_zero_advantage_stop_needs_consecutive_batches() -> None:
    stop = ZeroAdvantageStop(patience=3)
    for zero in (True, True, False, True, True):
        stop.record_batch(zero)
    assert not stop.should_stop
    stop.record_batch(True)
    assert stop.should_stop


def test_config_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match="curriculum"):
        TrainingConfig.preset("smoke", curriculum="sometimes")
    with pytest.raises(ValueError, match="gradient_accumulation_steps"):
        TrainingConfig.preset("smoke", episodes_per_step=3, num_generations=2, gradient_accumulation_steps=4)
    with pytest.raises(ValueError, match="preset"):
        TrainingConfig.preset("huge")
    paper = TrainingConfig.preset("paper")
    assert paper.requires_cuda and paper.kl_log_every == 10
    assert (paper.lora_r, paper.lora_alpha, paper.learning_rate) == (32, 64, 1e-5)
    assert (paper.trajectories_per_step, paper.num_generations) == (32, 8)


# ----------------------------------------------------------------------------- runs on the tiny model


@pytest.fixture(scope="module", autouse=True)
def _restore_torch_threads():
    """The smoke preset pins torch to 1 thread (fast on busy cores); give other tests theirs back."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _config(tiny_path: Path, output_dir: Path, **changes: object) -> TrainingConfig:
    """The shared tiny smoke run with a checkpoint every step and short replies."""
    settings: dict[str, object] = dict(save_steps=1, max_completion_length=6, disable_tqdm=True)
    return tiny_smoke_config(tiny_path, output_dir, **{**settings, **changes})


@pytest.fixture(scope="module")
def smoke_run(tiny_path: Path, tmp_path_factory: pytest.TempPathFactory):
    config = _config(tiny_path, tmp_path_factory.mktemp("smoke"))
    return config, train(config, seed=0, scorer=_varied_scorer)


def test_a_short_run_writes_metrics_checkpoints_and_rollouts(smoke_run) -> None:
    config, result = smoke_run
    assert result.final_step == 2 and result.stop_reason == "max_steps"
    assert [step for step, _ in result.checkpoints] == [1, 2]
    for _, folder in result.checkpoints:
        assert (folder / "adapter_model.safetensors").exists()
        assert (folder / "supersede_state.json").exists()
    metrics = load_metrics(result.metrics_path)
    assert metrics["step"].tolist() == [1, 2]
    for column in ("reward", "zero_advantage_fraction", "kl", "completions/mean_length", "difficulty"):
        assert column in metrics.columns and metrics[column].notna().all(), column
    rollouts = [json.loads(line) for line in (result.output_dir / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 2 * config.trajectories_per_step
    assert {row["turns"] for row in rollouts} == {3}  # two notes rewrites + the answer
    assert {"answer", "verdict", "reason", "reward"} <= rollouts[0].keys()
    summary = json.loads((result.output_dir / "run_summary.json").read_text())
    assert summary["final_step"] == 2
    assert train(config, seed=0, scorer=_varied_scorer).final_step == 2  # a finished run is not retrained


def test_a_run_directory_refuses_a_different_config(smoke_run) -> None:
    config, result = smoke_run
    saved = json.loads((result.output_dir / "training_config.json").read_text())
    assert saved["learning_rate"] == config.learning_rate and saved["seed"] == 0
    with pytest.raises(ValueError, match=r"different training config \(learning_rate: 0.0001 -> 0.5\)"):
        train(config.replace(learning_rate=0.5), seed=0, scorer=_varied_scorer)
    # more steps or a different display setting is the same experiment, continued
    assert train(config.replace(disable_tqdm=False), seed=0, scorer=_varied_scorer).final_step == 2


def test_saved_adapters_load_for_transfer_evaluation(smoke_run, tiny_path: Path) -> None:
    from supersede_lib.models.hf import HFChatModel

    config, result = smoke_run
    step, adapter = result.checkpoints[-1]
    assert resolve_base_model(config) == str(tiny_path)
    assert resolve_base_model(TrainingConfig.preset("offline")).endswith(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    )
    base = HFChatModel(resolve_base_model(config), device="cpu", max_new_tokens_default=4)
    trained = HFChatModel(str(tiny_path), adapter_path=str(adapter), device="cpu", max_new_tokens_default=4)
    assert trained.name == f"tiny+checkpoint-{step}@{trained.adapter_fingerprint[:12]}"
    assert base.differs_only_by_adapter(trained)
    assert trained.chat([{"role": "user", "content": "Where do I live now?"}]).completion_tokens <= 4


def test_list_checkpoints_orders_by_step_and_skips_other_folders(tmp_path: Path) -> None:
    for name in ("checkpoint-100", "checkpoint-50", "checkpoint-x", "runs"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "adapter_config.json").write_text("{}")
    (tmp_path / "checkpoint-150").mkdir()  # no adapter inside: not a usable checkpoint
    assert [step for step, _ in list_checkpoints(tmp_path)] == [50, 100]
    assert list_checkpoints(tmp_path / "missing") == []


class _Interrupt(Exception):
    pass


class _InterruptAtStep(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise _Interrupt(f"simulated crash at step {self.step}")
        return control


def test_an_interrupted_run_resumes_from_its_last_checkpoint(tiny_path: Path, tmp_path: Path) -> None:
    config = _config(tiny_path, tmp_path, max_steps=3)
    with pytest.raises(_Interrupt):
        train(config, seed=1, scorer=_varied_scorer, callbacks=[_InterruptAtStep(2)])
    assert [step for step, _ in list_checkpoints(tmp_path / "seed-1")] == [1]

    result = train(config, seed=1, scorer=_varied_scorer)
    assert result.final_step == 3
    assert [step for step, _ in result.checkpoints] == [1, 2, 3]
    state = json.loads((result.output_dir / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3
    assert load_metrics(result.metrics_path)["step"].tolist() == [1, 2, 3]  # the crashed step logged once
    rollout_steps = [
        json.loads(line)["step"] for line in (result.output_dir / "rollouts.jsonl").read_text().splitlines()
    ]
    assert rollout_steps == sorted(rollout_steps)
    assert {step: rollout_steps.count(step) for step in set(rollout_steps)} == {
        1: config.trajectories_per_step,
        2: config.trajectories_per_step,
        3: config.trajectories_per_step,
    }


def test_training_stops_after_consecutive_zero_advantage_batches(tiny_path: Path, tmp_path: Path) -> None:
    config = _config(tiny_path, tmp_path, max_steps=8, save_steps=50, zero_advantage_patience=2)
    result = train(config, seed=0, scorer=lambda episode, rollout: 1.0)
    assert result.stop_reason == "zero_advantage"
    assert result.final_step == 2
    assert [step for step, _ in result.checkpoints] == [2]  # the stop saves the final adapter
    metrics = load_metrics(result.metrics_path)
    assert metrics["zero_advantage_fraction"].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("prompt_variant", [DEFAULT_PROMPT_VARIANT, "v10_line_edits_loose_answer"])
def test_the_loss_sees_exactly_the_rollout_core_prompts(
    tiny_path: Path, tmp_path: Path, prompt_variant: str
) -> None:
    pool = [make_episode(f"hand-{index}", 3) for index in range(2)]
    config = _config(
        tiny_path,
        tmp_path,
        max_steps=1,
        episode_overrides={},
        skip_zero_advantage_rows=False,
        prompt_variant=prompt_variant,
    )
    trainer = build_trainer(config, seed=0, episodes=pool, scorer=_varied_scorer)
    captured: list[dict] = []
    generate_and_score = trainer._generate_and_score_completions

    def capture(inputs):
        output = generate_and_score(inputs)
        captured.append(output)
        return output

    trainer._generate_and_score_completions = capture
    trainer.train()
    batch, trajectories, tokenizer = captured[0], trainer.last_trajectories, trainer.processing_class
    assert len(trajectories) == config.trajectories_per_step
    rows = batch["trajectory_index"].tolist()
    assert len(rows) % trainer.args.steps_per_generation == 0  # topped up with inert rows, none dropped
    assert sum(index >= 0 for index in rows) == sum(len(t.rollout.turns) for t in trajectories) == 4 * 4

    for row, (trajectory_index, turn_index) in enumerate(
        zip(rows, batch["turn_index"].tolist(), strict=True)
    ):
        if trajectory_index < 0:
            assert batch["completion_mask"][row].sum() == 0 and batch["advantages"][row] == 0
            continue
        trajectory = trajectories[trajectory_index]
        turn = trajectory.rollout.turns[turn_index]
        prompt = batch["prompt_ids"][row][batch["prompt_mask"][row].bool()].tolist()
        expected = tokenizer.apply_chat_template(
            turn.messages, add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]
        assert prompt == list(expected)
        completion = batch["completion_ids"][row][batch["completion_mask"][row].bool()].tolist()
        assert tokenizer.decode(completion, skip_special_tokens=True) == turn.reply
        assert batch["advantages"][row].item() == pytest.approx(trajectory.advantage)
        text = tokenizer.decode(prompt)
        if turn.kind == "notes":  # one session per prompt: the raw history is never re-fed
            sessions = trajectory.episode.sessions
            assert sessions[turn.session_index].turns[0].content in text
            assert all(
                other.turns[0].content not in text for k, other in enumerate(sessions) if k != turn_index
            )
        else:
            assert all(session.turns[0].content not in text for session in trajectory.episode.sessions)

    for trajectory in trajectories:  # the recorded prompts are what a fresh rollout core would build
        replay = BoundedMemoryRollout(
            trajectory.episode, config.notes_budget_chars, prompt_variant=prompt_variant
        )
        assert trajectory.rollout.prompt_variant == prompt_variant
        for turn in trajectory.rollout.turns:
            assert replay.current_messages() == turn.messages
            replay.step(turn.reply)
        assert replay.answer == trajectory.rollout.answer
    for start in range(0, len(trajectories), config.num_generations):
        group = trajectories[start : start + config.num_generations]
        assert len({trajectory.episode.episode_id for trajectory in group}) == 1


def test_the_default_reward_is_the_environment_rubric() -> None:
    episode = make_episode("hand-0", 2)
    rollout = BoundedMemoryRollout(episode, 100)
    rollout.step("- lives in city0")
    rollout.step("- lives in city1 (moved from city0)")
    rollout.step("You live in city1.")
    expected = score_answer("You live in city1.", episode.gold_answers, episode.superseded_values).reward
    assert rubric_scorer()(episode, rollout).reward == expected == 1.0
    stale = BoundedMemoryRollout(episode, 100)
    for reply in ("- lives in city0", "- lives in city0", "You live in city0."):
        stale.step(reply)
    assert rubric_scorer()(episode, stale).reward < 0.5


def _rollout_with(episode: Episode, notes: str, answer: str) -> BoundedMemoryRollout:
    rollout = BoundedMemoryRollout(episode, 100)
    while not rollout.done:
        rollout.step(answer if rollout.current_kind == "answer" else notes)
    return rollout


@pytest.mark.parametrize(
    ("notes", "answer", "expected"),
    [
        ("- lives in city1", "You live in city1.", 1.5),  # right answer, current notes
        ("- lives in city1", "I don't know.", 0.5),  # the memory did its job, the answer did not
        (
            "- lives in city1 (moved from city0)",
            "You live in city1.",
            1.0,
        ),  # notes still hold the stale value
        ("- lives in city0", "You live in city1.", 1.0),  # a lucky answer from stale notes: no credit
        ("- likes tea", "You live in city0.", -1.0),  # the stale penalty stays
    ],
)
def test_the_memory_reward_adds_credit_only_for_current_notes_without_stale_ones(
    notes: str, answer: str, expected: float
) -> None:
    episode = make_episode("hand-0", 2)
    rollout = _rollout_with(episode, notes, answer)
    sparse = rubric_scorer()(episode, rollout)
    dense = scorer_for("memory", memory_credit=0.5)(episode, rollout)
    assert dense.reward == pytest.approx(expected)
    assert dense.verdict == sparse.verdict  # the answer is graded as in evaluation
    assert (dense.reward >= 1.0) == (sparse.verdict == "correct")  # success still means a right answer
    trajectory = TrajectoryRecord(0, episode, rollout, [])
    score_trajectory(scorer_for("memory"), trajectory)
    record = rollout_record(1, "easy", trajectory)
    assert record["notes_hold_current"] == (expected in (1.5, 0.5))
    assert ("memory credit" in record["reason"]) == (expected in (1.5, 0.5))


@pytest.mark.parametrize("reward", REWARDS)
@pytest.mark.parametrize("weight", [0.0, 1.0])
def test_no_arm_pays_an_ambiguous_answer_what_a_correct_one_earns(reward: str, weight: float) -> None:
    """Reward = evaluation (issue 26, item 4): naming the old and the current value together is never
    +1 under any answer-based reward; the format-only control ignores the answer altogether."""
    episode = make_episode("hand-0", 2)
    notes = "city: city1"
    both = _rollout_with(episode, notes, "Either city0 or city1.")
    right = _rollout_with(episode, notes, "You live in city1.")
    scorer = scorer_for(reward, stale_penalty_weight=weight)
    ambiguous, correct = scorer(episode, both), scorer(episode, right)
    assert ambiguous.verdict == "ambiguous" and correct.verdict == "correct"
    if reward == "format":
        assert ambiguous.reward == correct.reward == 1.0  # well-formed notes, whatever the answer
    else:
        assert ambiguous.reward < 1.0 <= correct.reward
        assert ambiguous.reward - (0.5 if reward == "memory" else 0.0) <= 0.0


@pytest.mark.parametrize(
    ("notes", "answer", "expected"),
    [
        ("city: city1", "You live in city1.", 1.5),  # correct, and the notes it read held the value
        ("city: city1", "I don't know.", 0.0),  # notes alone earn nothing: the answer must use them
        ("city: city0", "You live in city1.", 1.0),  # a lucky answer from stale notes: no credit
        ("likes: tea", "You live in city0.", -1.0),
    ],
)
def test_the_notes_used_reward_pays_for_notes_only_beside_a_correct_answer(notes, answer, expected) -> None:
    episode = make_episode("hand-0", 2)
    assert scorer_for("notes_used")(episode, _rollout_with(episode, notes, answer)).reward == expected


def test_the_format_reward_pays_for_well_formed_notes_replies_only() -> None:
    episode = make_episode("hand-0", 2)
    formatted = _rollout_with(episode, "city: city0", "You live in city0.")
    prose = _rollout_with(episode, "I should remember the city.", "You live in city1.")
    assert scorer_for("format")(episode, formatted).reward == 1.0  # a stale answer, well-formed notes
    assert scorer_for("format")(episode, prose).reward == 0.0  # a correct answer, prose notes
    assert scorer_for("format")(episode, prose).verdict == "correct"  # still graded and logged


def test_reward_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="memory_credit"):
        memory_credit_scorer(memory_credit=1.0)  # a wrong answer would count as a success
    with pytest.raises(ValueError, match="unknown reward"):
        scorer_for("dense")
    with pytest.raises(ValueError, match="reward must be one of"):
        TrainingConfig(reward="dense")
    with pytest.raises(ValueError, match="cpu_dtype must be one of"):
        TrainingConfig(cpu_dtype="float16")


def _previous_value_episode() -> Episode:
    """A generated episode whose question asks for the value that was later superseded."""
    for episode in synthetic.generate_episodes(40, seed=0, difficulty="hard"):
        if episode.asks_previous_value and episode.superseded_values:
            return episode
    raise AssertionError("no previous-value episode among 40 hard ones")


def _answered(episode: Episode, answer: str) -> BoundedMemoryRollout:
    rollout = BoundedMemoryRollout(episode, 100)
    while not rollout.done:
        rollout.step(answer if rollout.current_kind == "answer" else "- notes")
    return rollout


def test_training_grades_previous_value_questions_as_evaluation_does() -> None:
    episode = _previous_value_episode()
    previous, current = episode.gold_answers[0], episode.superseded_values[0]
    answer = f"It used to be {previous}, but now it is {current}."  # names the previous value as past
    rollout = _answered(episode, answer)
    assert rollout.answer == answer

    trained = rubric_scorer(stale_penalty_weight=1.0)(episode, rollout)
    evaluated = score_episode_answer(episode, answer, stale_penalty_weight=1.0)
    grading_without_the_question_kind = score_answer(
        answer, episode.gold_answers, episode.superseded_values, is_abstention=episode.is_abstention
    )
    assert trained == evaluated
    assert trained.reward != grading_without_the_question_kind.reward

    trajectory = TrajectoryRecord(0, episode, rollout, [])
    score_trajectory(rubric_scorer(), trajectory)
    record = rollout_record(1, "hard", trajectory)  # the rollouts file shows what the reward saw
    assert (record["answer"], record["reward"]) == (answer, evaluated.reward)
    assert (record["verdict"], record["reason"]) == (evaluated.verdict, evaluated.reason)
    assert record["asks_previous_value"] is True


def test_a_scorer_may_return_a_bare_reward() -> None:
    episode = make_episode("hand-0", 2)
    trajectory = TrajectoryRecord(0, episode, _answered(episode, "city1"), [])
    score_trajectory(lambda episode, rollout: 0.25, trajectory)
    record = rollout_record(1, "easy", trajectory)
    assert (record["reward"], record["verdict"], record["reason"]) == (0.25, None, None)


def test_skipping_zero_advantage_rows_leaves_the_gradient_unchanged(tiny_path: Path, tmp_path: Path) -> None:
    import torch

    pool = [make_episode("hand-0", 2), make_episode("hand-1", 2)]

    def scorer(episode: Episode, rollout: BoundedMemoryRollout) -> float:  # group of hand-1 is saturated
        return 1.0 if episode.episode_id == "hand-1" else _varied_scorer(episode, rollout)

    config = _config(tiny_path, tmp_path, max_steps=1, episode_overrides={}, num_generations=4)
    trainer = build_trainer(config, seed=0, episodes=pool, scorer=scorer)
    trainer.train()
    trajectories = trainer.last_trajectories
    assert {t.episode.episode_id for t in trajectories if t.advantage == 0.0} >= {"hand-1"}
    samples = expand_to_turn_samples(trajectories)
    kept = [sample for sample in samples if sample.advantage != 0.0]
    assert trainer._can_skip_zero_advantage and 0 < len(kept) < len(samples)
    tokens = trainer._loss_token_count(samples)
    full = trainer._samples_to_tensors(samples, 0, loss_tokens=tokens)
    skipped = trainer._samples_to_tensors(kept, 0, loss_tokens=tokens)
    assert (
        int(full["num_items_in_batch"]) == int(skipped["num_items_in_batch"]) == full["completion_mask"].sum()
    )

    trainer.model.train()
    gradients = []
    for batch in (full, skipped):
        trainer.model.zero_grad()
        loss = trainer._compute_loss(trainer.model, batch)
        loss.backward()
        gradients.append(
            (
                loss.item(),
                [
                    p.grad.clone()
                    for p in trainer.model.parameters()
                    if p.requires_grad and p.grad is not None
                ],
            )
        )
    (loss_full, grads_full), (loss_skipped, grads_skipped) = gradients
    assert loss_full == pytest.approx(loss_skipped, rel=1e-5, abs=1e-9)
    assert len(grads_full) == len(grads_skipped) > 0
    assert any(gradient.abs().sum() > 0 for gradient in grads_full)  # a real, non-zero update
    for left, right in zip(grads_full, grads_skipped, strict=True):
        # batches of different shapes sum in a different order: compare at float32 noise of this tensor's scale
        assert torch.allclose(left, right, rtol=1e-4, atol=1e-5 * float(left.abs().max()))


def test_on_cuda_the_policy_is_loaded_and_patched_by_unsloth(
    fake_unsloth: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wiring of the CUDA branch, with a stand-in `unsloth` module: this machine has no GPU.

    It checks what load_policy hands Unsloth (4-bit, the paper's LoRA, Unsloth's checkpointing)
    and that no PEFT config is returned (the adapter is already on); not Unsloth itself.
    """
    import torch

    calls = fake_unsloth
    config = TrainingConfig.preset("paper", output_dir="unused")
    model, tokenizer, peft_config = training_run.load_policy(config, seed=3)

    assert peft_config is None and tokenizer.padding_side == "left"
    loaded = calls["from_pretrained"]
    assert loaded["model_name"] == config.model_name_or_path and loaded["load_in_4bit"] is True
    assert loaded["dtype"] == torch.bfloat16
    assert "fast_inference" not in loaded  # no idle vLLM engine holding GPU memory
    lora = calls["get_peft_model"]
    assert (lora["r"], lora["lora_alpha"], lora["random_state"]) == (32, 64, 3)
    assert lora["use_gradient_checkpointing"] == "unsloth"
    assert lora["target_modules"] == list(config.lora_target_modules)

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", _t4_is_bf16_supported)
    training_run.load_policy(config, seed=3)
    assert calls["from_pretrained"]["dtype"] == torch.float16  # a T4 has no bf16 units: Unsloth loads fp16


def test_asking_for_unsloth_without_cuda_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        training_run.load_policy(
            TrainingConfig.preset("paper", output_dir="unused", use_unsloth=True, requires_cuda=False)
        )


@pytest.mark.parametrize("preset", ["paper", "colab"])
def test_gpu_presets_refuse_to_train_on_a_cpu(
    preset: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    config = TrainingConfig.preset(preset, output_dir=str(tmp_path))
    with pytest.raises(RuntimeError, match="needs a CUDA GPU.*offline"):
        train(config, seed=0)
    assert not list_checkpoints(tmp_path / "seed-0")


def _t4_is_bf16_supported(including_emulation: bool = True) -> bool:
    """torch on a T4: bf16 'supported' by emulation only."""
    return including_emulation


def test_mixed_precision_is_bf16_with_bf16_units_and_fp16_on_a_t4(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert training_run.mixed_precision() == "no"
    assert training_run.mixed_precision(torch.float32) == "no"
    assert training_run.mixed_precision(torch.bfloat16) == "bf16"  # a CPU whose base weights are bf16
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert training_run.mixed_precision() == "bf16"  # A100, L4, H100
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", _t4_is_bf16_supported)
    assert training_run.mixed_precision() == "fp16"  # T4, V100: fp16 autocast with a grad scaler


def test_a_t4_picks_the_colab_preset(monkeypatch: pytest.MonkeyPatch) -> None:
    from supersede_lib import profiles
    from supersede_lib.studies import training as training_study
    from supersede_lib.train import config as training_config

    assert training_config.preset_for_device("Tesla T4", default="local") == "colab"
    assert training_config.preset_for_device("NVIDIA A100-SXM4-40GB", default="local") == "local"
    assert training_config.preset_for_device(None, default="local") == "local"
    monkeypatch.setattr(training_config.shutil, "which", lambda name: None)
    assert training_config.cuda_device_name() is None
    colab, paper = TrainingConfig.preset("colab"), TrainingConfig.preset("paper")
    assert colab.num_generations == paper.num_generations == 8 and colab.requires_cuda
    assert (colab.lora_r, colab.lora_alpha, colab.learning_rate) == (32, 64, 1e-5)
    assert colab.kl_log_every == paper.kl_log_every == 10
    profile = profiles.load_profile("colab")  # the profile notebook 06 runs on a T4
    assert profile.training.preset == "colab"
    assert training_study.training_config_for(profile, "fixed").model_name_or_path == colab.model_name_or_path


def test_fast_inference_is_rejected_with_the_reason() -> None:
    with pytest.raises(ValueError, match="vLLM engine.*leave fast_inference=False"):
        TrainingConfig.preset("paper", fast_inference=True)


def _quantized_policy(config: TrainingConfig, seed: int = 0, run_dir: Path | None = None):
    """Stands in for Unsloth's loader: an already LoRA-patched model that says it is loaded in 4 bit."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from supersede_lib.models.hf import prepare_chat_tokenizer

    base = AutoModelForCausalLM.from_pretrained(config.model_name_or_path)
    base.is_loaded_in_4bit = True  # what TRL reads to decide the model is quantized
    model = get_peft_model(
        base,
        LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, target_modules=["q_proj", "v_proj"]),
    )
    tokenizer = AutoTokenizer.from_pretrained(config.model_name_or_path)
    prepare_chat_tokenizer(tokenizer, model)
    return model, tokenizer, None


def test_adapters_and_optimizer_state_of_a_quantized_model_stay_fp32(
    tiny_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setattr(training_run, "load_policy", _quantized_policy)
    config = _config(tiny_path, tmp_path, max_steps=1)
    trainer = build_trainer(config, seed=0, scorer=_varied_scorer)
    trainable = [p for p in trainer.model.parameters() if p.requires_grad]
    assert trainable and all(p.dtype == torch.float32 for p in trainable)  # TRL had cast them to bf16
    trainer.train()
    states = [trainer.optimizer.state[p] for p in trainable if p in trainer.optimizer.state]
    assert states and all(
        value.dtype == torch.float32
        for state in states
        for value in state.values()
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dim() > 0
    )


@pytest.mark.parametrize("cpu_dtype", ["bfloat16", "float32"])
def test_a_bf16_base_on_a_cpu_samples_and_trains_under_autocast_with_fp32_adapters(
    tiny_path: Path, tmp_path: Path, cpu_dtype: str
) -> None:
    import torch

    config = _config(tiny_path, tmp_path, max_steps=1, cpu_dtype=cpu_dtype)
    trainer = build_trainer(config, seed=0, scorer=_varied_scorer)
    bf16 = cpu_dtype == "bfloat16"
    assert trainer.args.bf16 is bf16
    adapted = next(
        module
        for name, module in trainer.model.named_modules()
        if name.endswith("q_proj") and hasattr(module, "lora_A")
    )
    calls: list[tuple[bool, bool]] = []  # (gradients on, autocast on) at every forward of an adapted layer
    adapted.register_forward_hook(
        lambda module, args, output: calls.append((torch.is_grad_enabled(), torch.is_autocast_enabled("cpu")))
    )
    trainer.train()
    assert {grad for grad, _ in calls} == {False, True}  # sampling and the loss both ran
    assert {autocast for _, autocast in calls} == {bf16}
    trainable = [p for p in trainer.model.parameters() if p.requires_grad]
    frozen = [p for p in trainer.model.parameters() if not p.requires_grad and p.is_floating_point()]
    assert trainable and all(p.dtype == torch.float32 for p in trainable)
    assert {p.dtype for p in frozen} == {getattr(torch, cpu_dtype)}


def test_the_gradient_checkpointing_toggle_is_looked_up_when_called(
    tiny_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unsloth swaps trl.models.utils.disable_gradient_checkpointing for a no-op after we are imported."""
    import contextlib

    import trl.models.utils

    calls: list[object] = []

    @contextlib.contextmanager
    def unsloth_noop(model, gradient_checkpointing_kwargs=None):
        calls.append(model)
        yield

    config = _config(tiny_path, tmp_path, max_steps=1, kl_log_every=1)
    trainer = build_trainer(config, seed=0, scorer=_varied_scorer)
    monkeypatch.setattr(trl.models.utils, "disable_gradient_checkpointing", unsloth_noop)
    trainer.train()
    assert calls and all(model is trainer.model for model in calls)


def test_a_finished_run_releases_its_model(
    tiny_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several runs share one process (seeds x curricula): nothing may keep the last one's model alive."""
    import weakref

    loaded: list[weakref.ref] = []
    load_policy = training_run.load_policy

    def remembered(config: TrainingConfig, seed: int = 0, run_dir: Path | None = None):
        model, tokenizer, peft_config = load_policy(config, seed, run_dir)
        loaded.append(weakref.ref(model))
        return model, tokenizer, peft_config

    monkeypatch.setattr(training_run, "load_policy", remembered)
    train(_config(tiny_path, tmp_path, max_steps=1), seed=0, scorer=_varied_scorer)
    assert len(loaded) == 1 and loaded[0]() is None


def test_a_runs_provenance_names_the_instruction_set_its_floats_came_from() -> None:
    """Two CPUs with other vector instructions train different adapters from the same commit (a retrain
    of `notes-used` s12 diverged at its 8th rollout, 2026-11-29): the provenance says which one ran."""
    import torch

    from supersede_lib.train.run import run_provenance

    record = run_provenance({"max_steps": 1}, seed=0, checkpoints=[])
    assert record["machine"]["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert record["adapter_sha256"] is None and record["generator_seed_base"] > 0


def test_a_runs_provenance_hashes_a_local_base_model_file(tmp_path: Path) -> None:
    """Copies of a model assembled from packages may differ in bytes; a hub name has no local file."""
    import hashlib

    from supersede_lib.train.run import run_provenance

    model_file = tmp_path / "base.gguf"
    model_file.write_bytes(b"GGUF" + bytes(range(256)) * 100)
    local = run_provenance({"model_name_or_path": str(model_file)}, seed=0, checkpoints=[])
    hub = run_provenance({"model_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct"}, seed=0, checkpoints=[])
    assert local["base_model_sha256"] == hashlib.sha256(model_file.read_bytes()).hexdigest()
    assert hub["base_model_sha256"] is None
