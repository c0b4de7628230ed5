"""Studies 06/07: profile blocks, Table 3 arithmetic, seed aggregation, curriculum and reward
comparisons, and a tiny end-to-end train + transfer run (sparse and memory reward side by side) that
must refuse a checkpoint whose base weights changed."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("trl")

from supersede_lib import profiles
from supersede_lib.agent.prompts import DEFAULT_PROMPT_VARIANT  # noqa: E402
from supersede_lib.profiles import Profile, validate_profile
from supersede_lib.studies import training as training_study  # noqa: E402
from supersede_lib.studies import transfer as transfer_study  # noqa: E402
from supersede_lib.train import rewards as training_rewards  # noqa: E402
from supersede_lib.train.config import TrainingConfig  # noqa: E402
from supersede_lib.train.kept_adapters import read_kept_record, restore_adapter
from supersede_lib.train.run import run_dir_for  # noqa: E402


def _profile(**training: object) -> Profile:
    return validate_profile(
        {"name": "unit", "model": {}, "training": {"preset": "smoke", **training}}, "unit.yaml"
    )


# ----------------------------------------------------------------------------- configuration


def test_training_block_defaults_and_errors_name_the_field() -> None:
    block = _profile().training
    assert block.seeds == [0] and block.curricula == ["fixed"] and block.overrides == {}
    assert block.rewards == ["sparse"]
    with pytest.raises(profiles.ProfileError, match="training.preset"):
        validate_profile({"name": "unit", "model": {}, "training": {}}, "unit.yaml")
    with pytest.raises(profiles.ProfileError, match="training.curricula.*sometimes"):
        _profile(curricula=["fixed", "sometimes"])
    with pytest.raises(profiles.ProfileError, match="training.seeds"):
        _profile(seeds=[0, -1])
    with pytest.raises(profiles.ProfileError, match="training.seeds"):
        _profile(seeds=[])
    with pytest.raises(profiles.ProfileError, match=r"training.rewards\[1\]: must be one of .*dense"):
        _profile(rewards=["sparse", "dense"])
    with pytest.raises(profiles.ProfileError, match="training.rewards: must have at least 1"):
        _profile(rewards=[])


def test_only_the_rewards_key_chooses_the_reward() -> None:
    # one place decides: `overrides: {reward: ...}` is refused, beside `rewards:` or alone
    for training in (
        {"rewards": ["memory"], "overrides": {"reward": "sparse"}},
        {"overrides": {"reward": "memory"}},
    ):
        with pytest.raises(
            profiles.ProfileError, match=r"unit.yaml: training.overrides: reward: .*training.rewards"
        ):
            _profile(**training)


def test_each_reward_arm_gets_its_own_folder_and_the_sparse_one_keeps_its_names(
    monkeypatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    profile = _profile(rewards=["sparse", "memory"], curricula=["fixed", "adaptive"])
    arms = training_study.arm_configs(profile)
    assert [(curriculum, config.reward) for curriculum, config in arms] == [
        ("fixed", "sparse"),
        ("adaptive", "sparse"),
        ("fixed", "memory"),
        ("adaptive", "memory"),
    ]
    runs = tmp_path / "unit" / "06_grpo_training" / "runs"
    folders = [Path(config.output_dir) for _, config in arms]
    assert folders == [
        runs / "fixed",  # as before rewards were an axis: committed runs still read back
        runs / "adaptive",
        runs / "fixed__memory-reward",
        runs / "adaptive__memory-reward",
    ]
    assert (
        training_study.run_label("fixed", 1)
        == training_study.run_label("fixed", 1, "sparse")
        == "fixed__seed-1"
    )
    assert training_study.run_label("fixed", 1, "memory") == "fixed__memory-reward__seed-1"
    sparse, memory = arms[0][1], arms[2][1]
    assert memory == sparse.replace(reward="memory", output_dir=memory.output_dir)
    assert training_study.training_config_for(profile, "fixed") == sparse  # the default reward: sparse
    only_memory = training_study.arm_configs(profile, curricula=["fixed"], rewards=["memory"])
    assert [(curriculum, config) for curriculum, config in only_memory] == [("fixed", memory)]


def test_each_curriculum_arm_gets_its_own_ignored_run_folder(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    profile = _profile(curricula=["fixed", "adaptive"], overrides={"learning_rate": 3e-4, "max_steps": 7})
    fixed = training_study.training_config_for(profile, "fixed")
    adaptive = training_study.training_config_for(profile, "adaptive")
    assert (fixed.curriculum, adaptive.curriculum) == ("fixed", "adaptive")
    assert fixed.learning_rate == adaptive.learning_rate == 3e-4 and fixed.max_steps == 7
    assert Path(fixed.output_dir) == tmp_path / "unit" / "06_grpo_training" / "runs" / "fixed"
    assert fixed.replace(curriculum="adaptive", output_dir=adaptive.output_dir) == adaptive
    gitignore = (profiles.REPO_ROOT / ".gitignore").read_text()
    assert "outputs/*/06_grpo_training/runs/" in gitignore  # adapters are never committed


def test_training_asks_the_policy_with_the_profile_prompt_unless_overridden() -> None:
    profile = validate_profile(
        {"name": "unit", "model": {}, "prompt_variant": "v9_line_edits", "training": {"preset": "smoke"}},
        "unit.yaml",
    )
    assert training_study.training_config_for(profile, "fixed").prompt_variant == "v9_line_edits"
    assert _profile().prompt_variant == DEFAULT_PROMPT_VARIANT
    assert training_study.training_config_for(_profile(), "fixed").prompt_variant == DEFAULT_PROMPT_VARIANT
    pinned = _profile(overrides={"prompt_variant": "v1_no_example"})
    assert training_study.training_config_for(pinned, "fixed").prompt_variant == "v1_no_example"
    with pytest.raises(profiles.ProfileError, match="prompt_variant"):
        validate_profile({"name": "unit", "model": {}, "prompt_variant": "v99"}, "unit.yaml")


def test_every_profile_names_a_valid_training_block() -> None:
    for name in profiles.PROFILES:
        profile = profiles.load_profile(name)
        for reward in ("sparse", "memory"):
            for curriculum in profile.require("training").curricula:
                config = training_study.training_config_for(profile, curriculum, reward)
                assert isinstance(config, TrainingConfig) and config.reward == reward
        assert all(isinstance(arm.config, TrainingConfig) for arm in training_study.planned_arms(profile))
        block = profile.require("transfer")  # Table 3's episodes and/or named evaluation sets
        specs = ([block.episodes] if block.episodes else []) + [item.episodes for item in block.evaluations]
        assert specs and all(spec.n >= 1 for spec in specs if spec.source == "synthetic")


# ----------------------------------------------------------------------------- Table 3 arithmetic


def test_checkpoint_row_counts_against_the_base_by_hand() -> None:
    base = pd.Series([True, True, False, False, False, False, False, False, False, False])
    trained = pd.Series([True, False, True, True, True, False, False, False, False, False])
    row = transfer_study.checkpoint_row("fixed__seed-0__step-4", "fixed", 0, 4, trained, base)
    assert (row["correct"], row["n"]) == (4, 10)
    assert row["vs_base_points"] == pytest.approx(20.0)
    assert (row["base_only_right"], row["trained_only_right"]) == (1, 3)
    assert row["p_exact"] == pytest.approx(0.625)  # two-sided binomial, 1 of 4 discordant pairs: 2 * 5/16
    assert row["ci_low"] < 0.4 < row["ci_high"]


def _checkpoints(rows: list[tuple[str, str | None, int | None, int]]) -> pd.DataFrame:
    """Evaluated models as `analyse_transfer` tabulates them; a run's reward is named in its label."""
    frame = pd.DataFrame(rows, columns=["run", "curriculum", "seed", "step"])
    frame["run_group"] = [run.split("__step-")[0] for run in frame["run"]]
    frame["reward_type"] = [
        None if curriculum is None else "memory" if "__memory-reward__" in run else "sparse"
        for run, curriculum in zip(frame["run"], frame["curriculum"], strict=True)
    ]
    return frame


def test_seed_aggregate_averages_seeds_on_the_same_questions() -> None:
    correct = {
        "base": pd.Series([False] * 4),
        "fixed__seed-0__step-2": pd.Series([True, True, False, False]),
        "fixed__seed-1__step-2": pd.Series([True, True, True, True]),
        "fixed__seed-0__step-4": pd.Series([True] * 4),
        "fixed__seed-1__step-4": pd.Series([True] * 4),
    }
    checkpoints = _checkpoints(
        [("base", None, None, 0)]
        + [(run, "fixed", int(run[12]), int(run[-1])) for run in correct if run != "base"]
    )
    by_step = transfer_study.seed_aggregate(correct, checkpoints).set_index("step")
    assert by_step.loc[2, "seeds"] == 2
    assert by_step.loc[2, "mean_accuracy"] == pytest.approx(0.75)
    assert (by_step.loc[2, "min_over_seeds"], by_step.loc[2, "max_over_seeds"]) == (0.5, 1.0)
    assert by_step.loc[2, "ci_low"] <= 0.75 <= by_step.loc[2, "ci_high"]
    assert by_step.loc[2, "ci_low"] >= 0.5  # seed 1 is always right: the mean cannot drop below 0.5
    assert (by_step.loc[4, "ci_low"], by_step.loc[4, "ci_high"]) == (1.0, 1.0)


def test_seed_aggregate_never_averages_two_rewards_together() -> None:
    correct = {
        "base": pd.Series([False] * 2),
        "fixed__seed-0__step-2": pd.Series([False, False]),
        "fixed__memory-reward__seed-0__step-2": pd.Series([True, True]),
    }
    checkpoints = _checkpoints(
        [("base", None, None, 0), ("fixed__seed-0__step-2", "fixed", 0, 2)]
        + [("fixed__memory-reward__seed-0__step-2", "fixed", 0, 2)]
    )
    by_arm = transfer_study.seed_aggregate(correct, checkpoints).set_index("reward_type")
    assert by_arm.loc["sparse", "mean_accuracy"] == 0.0 and by_arm.loc["memory", "mean_accuracy"] == 1.0
    assert set(by_arm["seeds"]) == {1}


def test_curriculum_comparison_pairs_final_checkpoints_per_seed() -> None:
    correct = {
        "base": pd.Series([False] * 5),
        "fixed__seed-0__step-2": pd.Series([True] * 5),  # not final: ignored
        "fixed__seed-0__step-4": pd.Series([True, False, False, False, False]),
        "adaptive__seed-0__step-4": pd.Series([True, True, True, False, False]),
    }
    checkpoints = _checkpoints(
        [
            ("base", None, None, 0),
            ("fixed__seed-0__step-2", "fixed", 0, 2),
            ("fixed__seed-0__step-4", "fixed", 0, 4),
            ("adaptive__seed-0__step-4", "adaptive", 0, 4),
        ]
    )
    table = transfer_study.curriculum_comparison(correct, checkpoints)
    seed_row = table[table["seed"] == 0].iloc[0]
    assert (seed_row["fixed step"], seed_row["fixed accuracy"], seed_row["adaptive accuracy"]) == (
        4,
        0.2,
        0.6,
    )
    assert (seed_row["fixed only right"], seed_row["adaptive only right"]) == (0, 2)
    pooled = table[table["seed"] == "all (pooled)"].iloc[0]
    assert pooled["adaptive - fixed (95% CI)"].startswith("+40.0 pts")
    only_fixed = checkpoints[checkpoints["curriculum"] != "adaptive"]
    assert transfer_study.curriculum_comparison(correct, only_fixed).empty  # nothing to compare
    assert set(table["reward_type"]) == {"sparse"}


def test_reward_comparison_pairs_final_checkpoints_per_curriculum_and_seed() -> None:
    correct = {
        "base": pd.Series([False] * 4),
        "fixed__seed-0__step-4": pd.Series([True, False, False, False]),
        "fixed__memory-reward__seed-0__step-4": pd.Series([True, True, True, False]),
        "adaptive__seed-0__step-4": pd.Series([False] * 4),
        "adaptive__memory-reward__seed-0__step-4": pd.Series([False] * 4),
    }
    checkpoints = _checkpoints(
        [("base", None, None, 0)] + [(run, run.split("__")[0], 0, 4) for run in correct if run != "base"]
    )
    rewards = transfer_study.reward_comparison(correct, checkpoints)
    fixed = rewards[(rewards["curriculum"] == "fixed") & (rewards["seed"] == 0)].iloc[0]
    assert (fixed["sparse accuracy"], fixed["memory accuracy"]) == (0.25, 0.75)
    assert (fixed["sparse only right"], fixed["memory only right"]) == (0, 2)
    pooled = rewards[(rewards["curriculum"] == "fixed") & (rewards["seed"] == "all (pooled)")].iloc[0]
    assert pooled["memory - sparse (95% CI)"].startswith("+50.0 pts")
    assert set(rewards["curriculum"]) == {"fixed", "adaptive"}
    # the curricula are compared within each reward, never across them
    curricula = transfer_study.curriculum_comparison(correct, checkpoints).set_index(["reward_type", "seed"])
    assert curricula.loc[("sparse", 0), "fixed accuracy"] == 0.25
    assert curricula.loc[("memory", 0), "fixed accuracy"] == 0.75
    sparse_only = checkpoints[checkpoints["reward_type"] != "memory"]
    assert transfer_study.reward_comparison(correct, sparse_only).empty


def test_table3_keeps_the_base_row_plain_and_the_paper_apart() -> None:
    base = pd.Series([True, False, False, False])
    rows = [
        transfer_study.checkpoint_row("base", None, None, 0, base, base),
        transfer_study.checkpoint_row("fixed__seed-0__step-4", "fixed", 0, 4, pd.Series([True] * 4), base),
    ]
    frame = pd.DataFrame(rows)
    frame["run_group"] = [run.split("__step-")[0] for run in frame["run"]]
    table = transfer_study.table3(frame)
    assert table.loc[0, "checkpoint"] == "base (untrained)" and table.loc[0, "vs. base"] == "—"
    assert table.loc[1, "accuracy"] == "4/4 = 100.0%" and table.loc[1, "vs. base"] == "+75.0"
    paper = transfer_study.paper_table3()
    assert paper["oracle accuracy"].tolist()[-1] == "13/78 = 16.7%"
    assert paper["vs. baseline"].tolist()[-1] == "+7.7"


# ----------------------------------------------------------------------------- end to end, tiny model


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory: pytest.TempPathFactory):
    """Smoke training of one curriculum and seed under both rewards, one step each.

    A random tiny model never writes the current value into its notes, so while training the notes
    are taken to hold it: the memory scorer then adds its credit to every rollout, the sparse one never.
    """
    import torch

    threads = torch.get_num_threads()
    root = tmp_path_factory.mktemp("outputs")
    patch = pytest.MonkeyPatch()
    patch.setattr(profiles, "OUTPUT_ROOT", root)
    profile = profiles.load_profile(
        "smoke",
        {
            "training": {
                "seeds": [0],
                "curricula": ["fixed"],
                "rewards": ["sparse", "memory"],
                "overrides": {"max_steps": 1, "save_steps": 1},
            },
            "transfer": {"episodes": {"source": "synthetic", "n": 2, "difficulty": "easy", "seed": 1001}},
        },
    )
    with pytest.MonkeyPatch.context() as notes:
        notes.setattr(training_rewards, "_notes_hold_current", lambda episode, notes: True)
        training = training_study.run_training(profile)
    yield profile, training, root
    patch.undo()
    torch.set_num_threads(threads)


def test_training_study_writes_committable_files_and_keeps_each_final_adapter(tiny_study) -> None:
    profile, training, root = tiny_study
    directory = root / "smoke" / "06_grpo_training"
    assert training.output_dir == directory
    for label in ("fixed__seed-0", "fixed__memory-reward__seed-0"):
        for suffix in ("metrics.jsonl", "rollouts.jsonl", "run_summary.json", "training_config.json"):
            assert (directory / f"{label}.{suffix}").exists(), (label, suffix)
    assert not list(directory.glob("*.safetensors")) and not list(directory.glob("checkpoint-*"))
    for run in training.runs:  # the final adapter, kept in float16 where a fresh clone finds it
        record = read_kept_record(directory / "adapters" / f"{run.label}.json")
        assert record["provenance"]["step"] == 1 and record["stored_dtype"] == "float16"
        restored = restore_adapter(
            directory / "adapters" / f"{run.label}.json", root / "restored" / run.label
        )
        assert (restored / "adapter_config.json").exists()
    assert [[step for step, _ in run.checkpoints] for run in training.runs] == [[1], [1]]
    summary = json.loads((directory / "summary.json").read_text())
    assert summary["profile"] == "smoke" and summary["device"].startswith(("cpu", "cuda"))
    steps = [number for number in summary["numbers"] if number["name"] == "fixed__seed-0 steps"]
    assert steps and steps[0]["value"] == 1 and steps[0]["n"] == training.runs[0].config.trajectories_per_step
    assert (directory / "figure4a_training_reward.png").stat().st_size > 0
    assert len(training_study.sample_rollouts(training, per_run=2)) == 2 * 2


def test_both_rewards_train_side_by_side_in_their_own_folders(tiny_study) -> None:
    from supersede_lib.present import plots

    _, training, root = tiny_study
    runs_folder = root / "smoke" / "06_grpo_training" / "runs"
    sparse, memory = training.runs
    assert (sparse.label, memory.label) == ("fixed__seed-0", "fixed__memory-reward__seed-0")
    assert run_dir_for(sparse.config, 0) == runs_folder / "fixed" / "seed-0"  # today's folder
    assert run_dir_for(memory.config, 0) == runs_folder / "fixed__memory-reward" / "seed-0"
    for run, reward in ((sparse, "sparse"), (memory, "memory")):
        saved = json.loads((run_dir_for(run.config, 0) / "training_config.json").read_text())
        assert (saved["reward"], saved["curriculum"], saved["seed"]) == (reward, "fixed", 0)
    assert training.runs_table[["run", "reward_type"]].values.tolist() == [
        ["fixed__seed-0", "sparse"],
        ["fixed__memory-reward__seed-0", "memory"],
    ]
    assert training.metrics.groupby("run")["reward_type"].unique().map(list).to_dict() == {
        "fixed__seed-0": ["sparse"],
        "fixed__memory-reward__seed-0": ["memory"],
    }
    on_disk = pd.read_csv(training.output_dir / "training_metrics.csv")
    assert {"curriculum", "reward_type", "seed"} <= set(on_disk.columns)

    # the same seed draws the same first step; only the memory scorer credits the notes
    rollouts = {
        run.reward: pd.read_json(training.output_dir / f"{run.label}.rollouts.jsonl", lines=True)
        for run in training.runs
    }
    first = {reward: rows[rows["step"] == 1].reset_index(drop=True) for reward, rows in rollouts.items()}
    assert first["sparse"]["answer"].tolist() == first["memory"]["answer"].tolist()
    assert first["memory"]["notes_hold_current"].all() and first["sparse"]["notes_hold_current"].all()
    assert (first["memory"]["reward"] - first["sparse"]["reward"]).tolist() == pytest.approx(
        [memory.config.memory_credit] * len(first["sparse"])
    )
    assert first["memory"]["reason"].str.contains("memory credit").all()
    assert not first["sparse"]["reason"].fillna("").str.contains("memory credit").any()

    figure = plots.training_curves_figure(training.metrics, title="two rewards")
    legend = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert any(label.startswith("fixed, sparse reward, seed 0") for label in legend)
    assert any(label.startswith("fixed, memory reward, seed 0") for label in legend)


def test_transfer_evaluates_base_and_every_checkpoint(tiny_study, study_bars) -> None:
    profile, _, root = tiny_study
    result = transfer_study.run_transfer(profile, progress=False)
    assert result.checkpoints["run"].tolist() == [
        "base",
        "fixed__seed-0__step-1",
        "fixed__memory-reward__seed-0__step-1",
    ]
    assert result.checkpoints["reward_type"].tolist()[1:] == ["sparse", "memory"]
    assert result.n == 2 and set(result.checkpoints["n"]) == {2}
    bar = [bar for bar in study_bars if "07_transfer_eval" in bar.description][-1]
    assert bar.done == bar.total == 3 * 2  # base and two checkpoints, two questions each, on one bar
    summary = json.loads((root / "smoke" / "07_transfer_eval" / "summary.json").read_text())
    assert set(summary["adapters"]) == {"fixed__seed-0__step-1", "fixed__memory-reward__seed-0__step-1"}
    assert all(adapter["differs_only_by_adapter"] for adapter in summary["adapters"].values())
    assert set(result.by_step["reward_type"]) == {"sparse", "memory"}
    assert result.rewards["curriculum"].tolist() == ["fixed", "fixed"]  # seed 0, then pooled
    assert (result.output_dir / "reward_comparison.md").exists()
    assert "fixed__memory-reward__seed-0 step 1" in (result.output_dir / "table3_transfer.md").read_text()
    assert (result.output_dir / "table3_transfer.md").read_text().startswith("| checkpoint |")
    rows = pd.concat(pd.read_csv(path) for path in result.output_dir.glob("*.csv") if "__" in path.name)
    # every checkpoint is asked with the prompt its adapter was trained with
    assert set(rows["prompt_variant"]) == {
        training_study.training_config_for(profile, "fixed").prompt_variant
    }
    assert "not distinguishable" in transfer_study.transfer_summary_line(result) or "p < 0.05" in (
        transfer_study.transfer_summary_line(result)
    )


def test_checkpoints_are_cached_under_their_adapter_content_not_their_run() -> None:
    # two arms that never diverged write bit-identical adapters: one evaluation serves both
    same = training_study.checkpoint_model_name("base", "ab" * 32)
    assert same == training_study.checkpoint_model_name("base", "ab" * 32)
    assert same != training_study.checkpoint_model_name("base", "cd" + "ab" * 31)
    assert same != training_study.checkpoint_model_name("other-base", "ab" * 32)


def test_transfer_refuses_a_checkpoint_whose_base_weights_differ(tiny_study, monkeypatch) -> None:
    from supersede_lib.models import hf as hf_model

    profile, _, _ = tiny_study
    real = hf_model.HFChatModel.base_fingerprint

    def tampered(self: hf_model.HFChatModel) -> str:
        return "tampered" if self.adapter_path else real(self)

    monkeypatch.setattr(hf_model.HFChatModel, "base_fingerprint", tampered)
    with pytest.raises(AssertionError, match="base weights differ"):
        transfer_study.run_transfer(profile, progress=False)


def test_transfer_without_training_says_to_run_06_first(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    with pytest.raises(FileNotFoundError, match="run notebook 06"):
        transfer_study.run_transfer(profiles.load_profile("smoke"), progress=False)


def test_a_clone_without_run_folders_replays_06_and_07_from_the_committed_files(
    tiny_study, monkeypatch, tmp_path: Path
) -> None:
    """What a fresh clone of a committed profile does: no adapters, no sqlite cache, no training."""
    import shutil

    from supersede_lib.models.cache import ResponseCache
    from supersede_lib.train import run as train_run

    profile, training, root = tiny_study
    first = transfer_study.run_transfer(profile, progress=False)
    recorded = tmp_path / "responses.jsonl.gz"
    ResponseCache(profiles.cache_path(profile)).export_responses(recorded)
    clone = tmp_path / "clone"
    shutil.copytree(root, clone, ignore=shutil.ignore_patterns("runs", "cache"))
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", clone)
    monkeypatch.setattr(profiles, "_imported_recordings", set())
    monkeypatch.delenv(profiles.LIVE_CALLS_ENV, raising=False)
    replaying = profile.model_copy(update={"recorded_responses": str(recorded)})

    def no_training(*_: object, **__: object) -> None:
        raise AssertionError("a recorded run was trained again")

    monkeypatch.setattr(training_study, "train", no_training)
    replayed = training_study.run_training(replaying)
    assert [run.recorded for run in replayed.runs] == [True, True]
    assert [run.reward for run in replayed.runs] == ["sparse", "memory"]
    assert replayed.runs_table.drop(columns="s/step").equals(training.runs_table.drop(columns="s/step"))
    assert [step for step, _ in replayed.runs[0].checkpoints] == [1]

    def no_weights(*_: object, **__: object) -> None:
        raise AssertionError("replay loaded model weights")

    monkeypatch.setattr(transfer_study, "HFChatModel", no_weights)
    again = transfer_study.run_transfer(replaying, progress=False)
    assert again.checkpoints.drop(columns="run_group").equals(first.checkpoints.drop(columns="run_group"))

    # a reply that was never recorded is a clear error, not a silent live call
    shutil.rmtree(clone / "smoke" / "cache", ignore_errors=True)
    monkeypatch.setattr(profiles, "_imported_recordings", set())
    empty = profile.model_copy(update={"recorded_responses": None})
    with pytest.raises(Exception, match="no recorded reply"):
        transfer_study.run_transfer(empty, progress=False)

    # another config (here: the learning rate) is not the committed run: it trains anew
    changed = training_study.training_config_for(profile, "fixed").replace(learning_rate=0.5)
    assert training_study.recorded_run(profile, "fixed", 0, changed) is None
    assert "learning_rate" in train_run.config_changes(
        json.loads((clone / "smoke" / "06_grpo_training" / "fixed__seed-0.training_config.json").read_text()),
        changed,
        0,
        same_model_file=True,
    )


def test_live_calls_never_read_a_committed_run_back(tiny_study, monkeypatch) -> None:
    profile, _, _ = tiny_study
    monkeypatch.setenv(profiles.LIVE_CALLS_ENV, "1")
    # the fixture's runs trained in this CPU's dtype; the precision check has its own tests (test_precision)
    monkeypatch.setattr(training_study, "check_committed_precision", lambda *args, **kwargs: None)
    calls = []
    monkeypatch.setattr(training_study, "train", lambda config, seed: calls.append(seed) or "trained")
    monkeypatch.setattr(training_study, "run_dir_for", lambda config, seed: Path("/nonexistent"))
    runs = training_study.train_runs(profile)
    assert calls == [0, 0] and not any(run.recorded for run in runs)
