"""Studies 06/07: profile blocks, Table 3 arithmetic, seed aggregation, curriculum comparison, and a
tiny end-to-end train + transfer run that must refuse a checkpoint whose base weights changed."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("trl")

from supersede_lib.prompts import DEFAULT_PROMPT_VARIANT  # noqa: E402
from supersede_lib.studies import profiles  # noqa: E402
from supersede_lib.studies import training as training_study  # noqa: E402
from supersede_lib.studies import transfer as transfer_study  # noqa: E402
from supersede_lib.studies.profiles import Profile, validate_profile  # noqa: E402
from supersede_lib.train.config import TrainingConfig  # noqa: E402


def _profile(**training: object) -> Profile:
    return validate_profile(
        {"name": "unit", "model": {}, "training": {"preset": "smoke", **training}}, "unit.yaml"
    )


# ----------------------------------------------------------------------------- configuration


def test_training_block_defaults_and_errors_name_the_field() -> None:
    block = _profile().training
    assert block.seeds == [0] and block.curricula == ["fixed"] and block.overrides == {}
    with pytest.raises(profiles.ProfileError, match="training.preset"):
        validate_profile({"name": "unit", "model": {}, "training": {}}, "unit.yaml")
    with pytest.raises(profiles.ProfileError, match="training.curricula.*sometimes"):
        _profile(curricula=["fixed", "sometimes"])
    with pytest.raises(profiles.ProfileError, match="training.seeds"):
        _profile(seeds=[0, -1])
    with pytest.raises(profiles.ProfileError, match="training.seeds"):
        _profile(seeds=[])


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
        for curriculum in profile.require("training").curricula:
            assert isinstance(training_study.training_config_for(profile, curriculum), TrainingConfig)
        assert profile.require("transfer").episodes.n >= 1


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
    frame = pd.DataFrame(rows, columns=["run", "curriculum", "seed", "step"])
    frame["run_group"] = [run.split("__step-")[0] for run in frame["run"]]
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
                "overrides": {"max_steps": 1, "save_steps": 1},
            },
            "transfer": {"episodes": {"source": "synthetic", "n": 2, "difficulty": "easy", "seed": 1001}},
        },
    )
    training = training_study.run_training(profile)
    yield profile, training, root
    patch.undo()
    torch.set_num_threads(threads)


def test_training_study_writes_committable_files_without_adapters(tiny_study) -> None:
    profile, training, root = tiny_study
    directory = root / "smoke" / "06_grpo_training"
    assert training.output_dir == directory
    for suffix in ("metrics.jsonl", "rollouts.jsonl", "run_summary.json", "training_config.json"):
        assert (directory / f"fixed__seed-0.{suffix}").exists(), suffix
    assert not list(directory.glob("*.safetensors")) and not list(directory.glob("checkpoint-*"))
    assert [step for step, _ in training.runs[0].checkpoints] == [1]
    summary = json.loads((directory / "summary.json").read_text())
    assert summary["profile"] == "smoke" and summary["device"].startswith(("cpu", "cuda"))
    steps = [number for number in summary["numbers"] if number["name"] == "fixed__seed-0 steps"]
    assert steps and steps[0]["value"] == 1 and steps[0]["n"] == training.runs[0].config.trajectories_per_step
    assert (directory / "figure4a_training_reward.png").stat().st_size > 0
    assert len(training_study.sample_rollouts(training, per_run=2)) == 2


def test_transfer_evaluates_base_and_every_checkpoint(tiny_study, study_bars) -> None:
    profile, _, root = tiny_study
    result = transfer_study.run_transfer(profile, progress=False)
    assert result.checkpoints["run"].tolist() == ["base", "fixed__seed-0__step-1"]
    assert result.n == 2 and set(result.checkpoints["n"]) == {2}
    bar = [bar for bar in study_bars if "07_transfer_eval" in bar.description][-1]
    assert bar.done == bar.total == 2 * 2  # base and one checkpoint, two questions each, on one bar
    summary = json.loads((root / "smoke" / "07_transfer_eval" / "summary.json").read_text())
    assert all(adapter["differs_only_by_adapter"] for adapter in summary["adapters"].values())
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
    same = transfer_study._checkpoint_model_name("base", "ab" * 32)
    assert same == transfer_study._checkpoint_model_name("base", "ab" * 32)
    assert same != transfer_study._checkpoint_model_name("base", "cd" + "ab" * 31)
    assert same != transfer_study._checkpoint_model_name("other-base", "ab" * 32)


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
        transfer_study.run_transfer("smoke", progress=False)


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
    assert [run.recorded for run in replayed.runs] == [True]
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
    calls = []
    monkeypatch.setattr(training_study, "train", lambda config, seed: calls.append(seed) or "trained")
    monkeypatch.setattr(training_study, "run_dir_for", lambda config, seed: Path("/nonexistent"))
    runs = training_study.train_runs(profile)
    assert calls == [0] and not runs[0].recorded
