"""A question that failed for the infrastructure is neither right nor wrong in every study's tables.

Notebook 07 (Table 3, the seed bootstrap, the arm comparisons), its evaluation sets (accuracy and
McNemar against the base, the engine check) and notebook 05 (the environment's reward beside the
runner's accuracy, the saturation check) leave a failed question out of every accuracy and every
paired comparison, and their tables open with "incomplete: k of n failed — re-run the same command
to finish". The failed rows here come from the runner itself, against a fake server that answers
503 on one question.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import make_episode

from supersede_lib import profiles
from supersede_lib.eval.runner import RunSettings, run_condition
from supersede_lib.models.local_server import LocalOpenAIServer, ScriptedFailure, default_responder
from supersede_lib.models.openai_api import OpenAIChatModel
from supersede_lib.results import evidence
from supersede_lib.studies import environment_validation as environment_study
from supersede_lib.studies import evaluation_sets
from supersede_lib.studies import transfer as transfer_study
from supersede_lib.train.config import TrainingConfig

INCOMPLETE = "> **incomplete: 1 of 3 failed — re-run the same command to finish.**"
EPISODES = [make_episode(f"e{index}") for index in range(3)]


def _fails_on(episode_id: str | None):
    """The fake server's replies, but a 503 for every request about `episode_id`."""

    def responder(messages: list[dict]) -> str:
        if episode_id is not None and f"[{episode_id}]" in str(messages[-1]["content"]):
            raise ScriptedFailure(("status", 503))
        return default_responder(messages)

    return responder


def _run(
    directory: Path, run_name: str, failing: str | None, condition: str = "full_context"
) -> pd.DataFrame:
    """One run of the three questions through the runner, the server failing on `failing`."""
    with LocalOpenAIServer(responder=_fails_on(failing)) as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, max_retries=0)
        return run_condition(
            EPISODES,
            condition,
            model,
            RunSettings(notes_budget_chars=300),
            output_dir=directory,
            run_name=run_name,
            progress=False,
        ).frame


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(OpenAIChatModel, "backoff_delay", lambda self, *args, **kwargs: 0.0)


def test_the_runner_marks_the_failed_question_and_its_warning_says_what_happens(tmp_path: Path) -> None:
    frame = _run(tmp_path, "step", failing="e2")
    assert frame.set_index("episode_id")["failed"].to_dict() == {"e0": False, "e1": False, "e2": True}
    warning = json.loads((tmp_path / "step.manifest.json").read_text())["warnings"][0]
    assert "scored wrong" not in warning
    assert "left out of every accuracy and paired comparison" in warning
    assert "re-run the same command to finish" in warning


def test_an_evaluation_set_leaves_a_failed_question_out_of_every_row(tmp_path: Path) -> None:
    _run(tmp_path, "base", failing=None)
    _run(tmp_path, "fixed__seed-0__step-4", failing="e2")
    table = evidence.evaluation_table(evidence.evaluation_frames(tmp_path)).set_index("model")
    # the server's failure on e2 is no loss of the checkpoint's: both stand on e0 and e1
    assert table["n"].tolist() == [2, 2] and table["correct"].tolist() == [2, 2]
    assert table["failed"].tolist() == [1, 1]
    assert table.loc["fixed__seed-0__step-4", "b_base_only"] == 0
    evidence.write_evidence_table(tmp_path, "heldout", table.reset_index())
    assert (tmp_path / "heldout.md").read_text().startswith(INCOMPLETE)


def test_the_engine_check_compares_only_what_both_engines_answered(tmp_path: Path) -> None:
    whole, prefix = tmp_path / "heldout", tmp_path / "heldout-prefix-cache"
    for folder, failing in ((whole, None), (prefix, "e1")):
        folder.mkdir()
        _run(folder, "base", failing=None)
        _run(folder, "fixed__seed-0__step-4", failing=failing)
    check = evidence.engine_check_table(whole, prefix).set_index("model")
    step = check.loc["fixed__seed-0__step-4"]
    assert (step["n"], step["failed"]) == (2, 1)
    assert step["correct_whole"] == step["correct_prefix"] == step["verdicts_agree"] == 2


def _transfer_runs(profile: profiles.Profile) -> transfer_study.TransferRuns:
    """Base and two checkpoints on four questions; q3 failed in the base's run (an unanswered row)."""
    config = TrainingConfig.preset("smoke")
    runs = [SimpleNamespace(config=config)]
    raw = transfer_study.TransferRuns(profile, runs, "base-path", "fingerprint", 120, 4)  # type: ignore[arg-type]

    def frame(correct: list[bool], failed: tuple[str, ...] = ()) -> pd.DataFrame:
        ids = [f"q{index}" for index in range(4)]
        return pd.DataFrame(
            {
                "episode_id": ids,
                "verdict": ["correct" if value else "wrong" for value in correct],
                "failed": [key in failed for key in ids],
            }
        )

    raw.add("base", frame([True, True, False, False], failed=("q3",)))
    raw.add("fixed__seed-0__step-4", frame([True, True, True, True]), "fixed", 0, 4, "sparse")
    raw.add("adaptive__seed-0__step-4", frame([True, False, True, True]), "adaptive", 0, 4, "sparse")
    return raw


def test_table3_and_its_comparisons_leave_a_failed_question_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    profile = profiles.load_profile("smoke")
    result = transfer_study.analyse_transfer(_transfer_runs(profile))
    rows = result.checkpoints.set_index("run")
    assert rows["n"].tolist() == [3, 3, 3] and rows["failed"].tolist() == [1, 1, 1]
    assert rows.loc["base", "correct"] == 2
    fixed = rows.loc["fixed__seed-0__step-4"]
    assert (fixed["correct"], fixed["base_only_right"], fixed["trained_only_right"]) == (3, 0, 1)
    assert fixed["vs_base_points"] == pytest.approx(100 / 3)
    assert result.by_step.set_index("curriculum").loc["fixed", "mean_accuracy"] == 1.0
    pooled = result.curricula[result.curricula["seed"] == "all (pooled)"].iloc[0]
    assert (pooled["fixed accuracy"], pooled["adaptive accuracy"]) == (1.0, pytest.approx(2 / 3))
    assert result.table.loc[1, "accuracy"] == "3/3 = 100.0% (1 of 4 failed, left out)"

    transfer_study.write_transfer(result, tmp_path)
    assert (tmp_path / "table3_transfer.md").read_text().startswith(INCOMPLETE.replace("of 3", "of 4"))
    assert json.loads((tmp_path / "summary.json").read_text())["left_out"] == ["q3"]


def test_the_environment_check_leaves_a_failed_question_out_of_both_drivers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    profile = profiles.load_profile("smoke")
    runner = _run(tmp_path, "runner", failing="e2")
    saturation = _run(tmp_path, "saturation", failing="e0")
    answers = runner.set_index("episode_id")["answer"]
    rollouts = pd.DataFrame(
        {
            "episode_id": ["e0", "e1", "e2"],
            "answer": [answers["e0"], answers["e1"], ""],
            "answered_current": [1.0, 1.0, 0.0],
            "reward": [1.0, 1.0, 0.0],
            "terminated": [True, True, True],
            "error": [None, None, None],
        }
    )
    raw = environment_study.EnvironmentRuns(
        profile=profile,
        model="fake-model",
        runner=runner,
        rollouts=rollouts,
        served=environment_study.ServedModelStats(),
        saturation=saturation,
        judged=False,
        grader="matcher",
    )
    result = environment_study.analyse_environment(raw)
    assert (result.environment_accuracy, result.reference_accuracy) == (1.0, 1.0)
    assert result.saturation_accuracy == 1.0 and result.answers_identical == 2
    assert result.left_out == ["e2"]
    shown = result.table.set_index("measure").iloc[:, 1]
    assert shown["answers identical to run_condition's"] == "2/2 (1 of 3 failed, left out)"

    environment_study.write_environment(result, tmp_path)
    assert (tmp_path / "environment_validation.md").read_text().startswith(INCOMPLETE)
    assert (tmp_path / "saturation.md").read_text().startswith(INCOMPLETE)


def test_an_evaluation_set_runs_under_the_trained_rollout_and_the_profile_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    profile = profiles.load_profile("smoke")
    config = TrainingConfig.preset("smoke")
    run = evaluation_sets.ConfigOnly(config)
    settings = evaluation_sets.run_settings(profile, [run])
    trained = config.rollout_settings()
    assert (settings.prompt_variant, settings.concurrency) == (trained.prompt_variant, profile.concurrency)
    # one source: a field the training's rollout sets reaches the evaluation without being named here
    per_session = trained.with_changes(chars_per_session=40)
    monkeypatch.setattr(TrainingConfig, "rollout_settings", lambda self: per_session)
    assert evaluation_sets.run_settings(profile, [run]).chars_per_session == 40
