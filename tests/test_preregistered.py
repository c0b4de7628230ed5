"""The pre-registered CPU proof (issue 26): the design is data, checked before any run it governs.

These tests hold the committed profile to what docs/preregistration.md promises (fresh seeds, a test
set of its own with n >= 200, every registered run judged on it, the controls beside it) and check the
pieces the runs use: the format repair, the registered order and the per-set settings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import make_episode  # noqa: E402

from supersede_lib import profiles
from supersede_lib.agent.notes_edits import parse_edit_lines, repair_prose_reply
from supersede_lib.agent.rollout import BoundedMemoryRollout
from supersede_lib.eval.matcher import MATCHER_VERSION
from supersede_lib.labelling.agreement import read_blind_batches
from supersede_lib.prereg import analysis as prereg_analysis
from supersede_lib.prereg import registered as preregistered
from supersede_lib.studies import evaluation_sets
from supersede_lib.studies.evaluation_sets import set_settings
from supersede_lib.studies.training import planned_arms
from supersede_lib.train.config import TRAINING_SEED_BASE

PROFILE = profiles.load_profile("cpu_proof_prereg")
EXPLORATORY = profiles.load_profile("cpu_proof")


def _sets() -> dict:
    return {item.name: item for item in PROFILE.require("transfer").evaluations}


def test_the_registered_seeds_are_fresh_and_every_registered_run_is_an_arm() -> None:
    used = {seed for arm in planned_arms(EXPLORATORY) for seed in arm.seeds}
    arms = {arm.name: arm for arm in planned_arms(PROFILE)}
    order = preregistered.registered_order(PROFILE)
    assert PROFILE.require("preregistration").primary_arm in arms
    assert {(name, seed) for name, arm in arms.items() for seed in arm.seeds} == set(order)
    assert not used & {seed for _, seed in order}  # never used for a reported number


def test_the_test_set_is_its_own_and_judges_every_final_checkpoint() -> None:
    sets = _sets()
    test, selection = sets["test"].episodes, sets["selection"].episodes
    assert test.n >= 200 and test.seed not in {selection.seed} | {
        TRAINING_SEED_BASE + s for _, s in preregistered.registered_order(PROFILE)
    }
    finals = {preregistered.final_label(arm, seed) for arm, seed in preregistered.registered_order(PROFILE)}
    assert finals | {"base"} == set(sets["test"].models)
    assert sets["selection"].models == ["base"]  # development only: no trained run is chosen on it


def test_the_controls_run_the_same_base_on_the_same_test_episodes() -> None:
    sets = _sets()
    for name in ("test-format-controlled", "test-full-context"):
        assert sets[name].episodes == sets["test"].episodes and sets[name].models == ["base"]
    assert sets["test-format-controlled"].prompt_variant == "v12_line_edits_repaired"
    assert sets["test-full-context"].condition == "full_context"
    assert sets["hard"].episodes.n >= 100


def test_a_set_may_run_its_own_agent_and_token_caps() -> None:
    config = planned_arms(PROFILE)[0].config
    run = evaluation_sets.ConfigOnly(config)
    hard = set_settings(PROFILE, _sets()["hard"], [run])
    assert (hard.max_tokens_notes, hard.max_tokens_answer) == (160, 128)
    plain = set_settings(PROFILE, _sets()["test"], [run])
    assert plain.max_tokens_answer == config.max_completion_length  # the cap the policy trained under
    assert (
        set_settings(PROFILE, _sets()["test-format-controlled"], [run]).prompt_variant
        == "v12_line_edits_repaired"
    )


def test_the_format_repair_keeps_prose_as_lines_and_leaves_lines_alone() -> None:
    assert repair_prose_reply("city: Denver", 1) == "city: Denver"
    assert repair_prose_reply("NONE", 2) == "NONE"
    repaired = repair_prose_reply("- I moved to Denver.\n\nMy gym is Blink Fitness.", 2)
    assert repaired == "note 2.1: I moved to Denver.\nnote 2.2: My gym is Blink Fitness."
    assert parse_edit_lines(repaired, keep_times=True)


def test_the_repaired_agent_keeps_what_the_plain_agent_drops() -> None:
    episode = make_episode("hand-0", 2)
    kept, dropped = (
        BoundedMemoryRollout(episode, 300, prompt_variant=v)
        for v in ("v12_line_edits_repaired", "v12_line_edits_times_kept")
    )
    for rollout in (kept, dropped):
        rollout.step("You moved to city1 last week.")
    assert "city1" in kept.notes and dropped.notes == ""
    assert kept.turns[0].reply == "You moved to city1 last week."  # the model's own reply is what is logged


def test_the_next_run_is_the_first_registered_one_not_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    order = preregistered.registered_order(PROFILE)
    assert preregistered.next_run(PROFILE) == order[0]
    for item in _sets().values():
        if item.models and preregistered.final_label(*order[0]) in item.models and not item.real_records:
            folder = preregistered.set_folder(PROFILE, item)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{preregistered.final_label(*order[0])}.csv").write_text("x\n")
    assert preregistered.next_run(PROFILE) == order[1]


def test_a_malformed_order_is_named() -> None:
    bad = PROFILE.model_copy(
        update={"preregistration": PROFILE.preregistration.model_copy(update={"order": "verdict 11"})}
    )
    with pytest.raises(profiles.ProfileError, match="verdict 11"):
        preregistered.registered_order(bad)


def _write_set(tmp_path: Path, set_name: str, label: str, correct: list[bool]) -> None:
    folder = preregistered.set_folder(PROFILE, _sets()[set_name])
    folder.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(
        {
            "episode_id": [f"e{i}" for i in range(len(correct))],
            "verdict": ["correct" if c else "wrong" for c in correct],
        }
    )
    frame.to_csv(folder / f"{label}.csv", index=False)


def test_the_registered_analysis_pairs_by_episode_against_the_controls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    n = 200
    _write_set(tmp_path, "test", "base", [i < 40 for i in range(n)])  # 20%
    _write_set(tmp_path, "test-format-controlled", "base", [i < 60 for i in range(n)])  # 30%
    _write_set(tmp_path, "test-full-context", "base", [i < 140 for i in range(n)])  # 70%
    _write_set(tmp_path, "test", "verdict__seed-11__step-20", [i < 100 for i in range(n)])  # 50%
    table = prereg_analysis.results_table(PROFILE).set_index("model")
    row = table.loc["verdict__seed-11__step-20"]
    assert row["accuracy"] == 0.5 and row["vs format-controlled: diff"] == pytest.approx(0.2)
    assert row["diff 95% CI low"] > 0 and row["vs format-controlled: p (exact McNemar)"] < 1e-6
    assert row[prereg_analysis.GAP_CLOSED] == pytest.approx((0.5 - 0.2) / (0.7 - 0.2))
    verdict = prereg_analysis.primary_verdict(PROFILE, table.reset_index())
    assert verdict.startswith("primary arm `verdict`: 1 of 3 seeds judged; 1 above")


def test_a_question_the_arm_failed_on_leaves_its_accuracy_and_its_paired_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    n = 20
    for set_name in ("test", "test-format-controlled", "test-full-context"):
        _write_set(tmp_path, set_name, "base", [i < 10 for i in range(n)])
    label = "verdict__seed-11__step-20"
    _write_set(tmp_path, "test", label, [i < 10 for i in range(n)])
    path = preregistered.set_folder(PROFILE, _sets()["test"]) / f"{label}.csv"
    rows = pd.read_csv(path).assign(failed=[i < 5 for i in range(n)])  # the server died on 5 of them
    rows.to_csv(path, index=False)
    row = prereg_analysis.results_table(PROFILE).set_index("model").loc[label]
    assert row["n"] == 15 and row["accuracy"] == pytest.approx(5 / 15)  # not 5/20: failed is not wrong
    assert row["vs format-controlled: diff"] == pytest.approx(5 / 15 - 5 / 15)


def test_the_analysis_of_the_controls_alone_names_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    _write_set(tmp_path, "test", "base", [True, False])
    table = prereg_analysis.results_table(PROFILE)
    assert list(table["model"]) == ["base"]
    assert "0 of 3 seeds judged" in prereg_analysis.primary_verdict(PROFILE, table)


def test_the_command_runs() -> None:
    """`python -m supersede_lib preregistered` reaches its parser through the dispatcher."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "supersede_lib", "preregistered", "--help"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0 and "--report" in result.stdout


def _write_rows(set_name: str, label: str, correct: list[bool], cut_calls: int = 0) -> None:
    """A judged model's file with the columns the hard-set table reads (three calls per episode)."""
    folder = preregistered.set_folder(PROFILE, _sets()[set_name])
    folder.mkdir(parents=True, exist_ok=True)
    cuts = [1 if i < cut_calls else 0 for i in range(len(correct))]
    frame = pd.DataFrame(
        {
            "episode_id": [f"e{i}" for i in range(len(correct))],
            "verdict": ["correct" if c else "wrong" for c in correct],
            "n_calls": [3] * len(correct),
            "cut_calls": cuts,
        }
    )
    frame.to_csv(folder / f"{label}.csv", index=False)


def test_the_hard_set_pairs_each_checkpoint_with_the_base_and_reports_the_cut_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    assert prereg_analysis.hard_table(PROFILE).empty  # nothing judged: no table, no error
    _write_rows("hard", "base", [i < 10 for i in range(100)], cut_calls=3)
    _write_rows("hard", "verdict__seed-11__step-20", [i < 30 for i in range(100)])
    _write_rows("hard", "verdict__seed-12__step-20", [i < 11 for i in range(100)])
    table = prereg_analysis.hard_table(PROFILE).set_index("model")
    assert table.loc["base", "cut rate"] == pytest.approx(3 / 300)
    assert table.loc["base", "95% CI low"] < 0.10 < table.loc["base", "95% CI high"]
    strong, weak = table.loc["verdict__seed-11__step-20"], table.loc["verdict__seed-12__step-20"]
    assert strong["vs base: diff"] == pytest.approx(0.20) and strong["diff 95% CI low"] > 0
    assert strong["vs base: p"] < 1e-4 and weak["vs base: p"] == pytest.approx(1.0)
    # Holm: the smallest of two p values is doubled, and no adjusted p falls below its raw one
    assert strong["vs base: p (Holm)"] == pytest.approx(min(1.0, 2 * strong["vs base: p"]))
    assert (table["vs base: p (Holm)"].dropna() >= table["vs base: p"].dropna()).all()


def test_the_hard_set_beside_its_blind_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batch RH: hard-set rows graded by their labels where labelled, each reading paired with the base's."""
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    _write_rows("hard", "base", [i < 10 for i in range(100)])
    _write_rows("hard", "verdict__seed-11__step-20", [i < 30 for i in range(100)])
    for label in ("base", "verdict__seed-11__step-20"):  # the columns the labels are keyed by
        path = preregistered.set_folder(PROFILE, _sets()["hard"]) / f"{label}.csv"
        frame = pd.read_csv(path).assign(question=[f"q{i}" for i in range(100)], gold="Denver")
        frame.assign(answer=[f"{label} {i}" for i in range(100)]).to_csv(path, index=False)
    # the checkpoint's first 20 rows labelled (10 correct, 10 a person reads as wrong); under the strict
    # reading none of them is correct; the base's rows are unlabelled
    labels = {
        (f"q{i}", "Denver", f"verdict__seed-11__step-20 {i}"): "correct" if i < 10 else "wrong"
        for i in range(20)
    }
    strict = {key: "wrong" for key in labels}
    monkeypatch.setattr(
        prereg_analysis, "human_labels", lambda strict_reading=False: strict if strict_reading else labels
    )
    table = prereg_analysis.hard_table(PROFILE).set_index("model")
    row = table.loc["verdict__seed-11__step-20"]
    assert (row["labelled"], row["credit agrees"]) == (20, 0.5)
    assert (row["correct (labels where labelled)"], row["correct (strict labels)"]) == (20, 10)
    assert row["by labels vs base: diff"] == pytest.approx(0.10)
    assert row["by strict labels vs base: diff"] == pytest.approx(0.0)
    assert row["vs base: diff"] == pytest.approx(0.20)  # the registered reading is unchanged
    assert table.loc["base", "labelled"] == 0 and pd.isna(table.loc["base", "by labels vs base: diff"])


def test_the_trend_counts_each_step_once_and_shows_a_notes_collapse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per-step rates rising over 20 steps give a small one-sided Kendall p; the empty-notes share of
    the last quarter is read from the logged final notes."""
    import json

    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    folder = tmp_path / PROFILE.name / "06_grpo_training"
    folder.mkdir(parents=True)
    rows = [
        {"step": step, "reward": 0.0, "verdict": "correct" if slot < step // 3 else "wrong",
         "final_notes": "" if step > 15 or slot == 7 else "city: Denver", "advantage": -0.5 if slot == 7 else 0.1}
        for step in range(1, 21)
        for slot in range(8)
    ]  # fmt: skip
    (folder / "verdict__seed-11.rollouts.jsonl").write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    table = prereg_analysis.trend_table(PROFILE).set_index("run")
    row = table.loc["verdict__seed-11"]
    assert row["steps"] == 20 and row["rollouts"] == 160
    assert row["kendall tau"] > 0.9 and row["p (one-sided)"] < 1e-4
    assert row["empty notes first quarter"] == 1 / 8 and row["empty notes last quarter"] == 1
    assert row["advantage on empty notes, first half"] == pytest.approx(-0.5 * 10)  # one per step, steps 1-10


def test_the_report_writes_every_table_and_says_what_has_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    _write_rows("test", "base", [i < 60 for i in range(200)])
    report = prereg_analysis.write_results(PROFILE)
    text = report.read_text()
    # the hard set, the real records, the notes and the trend tables are not run yet
    assert "0 of 3 seeds judged" in text and text.count("(not run yet)") == 4
    assert {path.name for path in report.parent.glob("*.csv")} == {
        "results.csv", "hard.csv", "real_records.csv", "instrument.csv", "notes.csv", "trend.csv"
    }  # fmt: skip


def test_regrading_adopts_what_the_matcher_says_now_and_keeps_the_live_measurements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A committed piece graded by an older matcher (here: one verdict changed by hand) is replayed
    from its recorded replies; `--regrade` writes the replay's verdict and keeps the live latency."""
    import json
    import shutil

    committed = profiles.OUTPUT_ROOT / PROFILE.name / "07_transfer_eval" / "test-full-context"
    folder = tmp_path / PROFILE.name / "07_transfer_eval" / "test-full-context"
    shutil.copytree(committed, folder)
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    frame = pd.read_csv(folder / "base.csv")
    row = frame.index[frame["verdict"] == "correct"][0]
    frame.loc[row, "verdict"], frame.loc[row, "latency_s"] = "wrong", 1234.5
    frame.to_csv(folder / "base.csv", index=False)
    scratch = tmp_path / "scratch"
    problems = preregistered.verify_record(PROFILE, scratch, regrade=True)
    assert len(problems) == 1 and "verdict: committed 'wrong', replay 'correct'" in problems[0]
    regraded = pd.read_csv(folder / "base.csv")
    assert regraded.loc[row, "verdict"] == "correct" and regraded.loc[row, "latency_s"] == 1234.5
    timed = [json.loads(line)["wall_s"] for line in (committed / "base.trajectories.jsonl").open()]
    assert [json.loads(line)["wall_s"] for line in (folder / "base.trajectories.jsonl").open()] == timed
    assert preregistered.verify_record(PROFILE, tmp_path / "scratch2") == []


def test_trained_rows_are_not_reported_before_the_blind_labels_are_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Amendment 1: the registered analysis says trained rows are the record, not a result, until 150
    answers of the registered arms are labelled blind; the controls alone need no such line."""
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    for set_name in ("test", "test-format-controlled", "test-full-context"):
        _write_set(tmp_path, set_name, "base", [i < 50 for i in range(200)])
    assert "not reported" not in prereg_analysis.write_results(PROFILE).read_text()
    _write_set(tmp_path, "test", "format__seed-11__step-20", [i < 90 for i in range(200)])
    monkeypatch.setattr(prereg_analysis, "labelled_trained_answers", lambda profile: 12)
    assert (
        "**Trained rows not reported yet:** 12 of the 150"
        in prereg_analysis.write_results(PROFILE).read_text()
    )
    monkeypatch.setattr(prereg_analysis, "labelled_trained_answers", lambda profile: 160)
    text = prereg_analysis.write_results(PROFILE).read_text()
    assert "not reported" not in text and "160 answers of these arms labelled blind" in text


def test_the_instrument_table_grades_labelled_answers_by_their_labels_and_gates_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26: trained numbers are results only when the matcher's credit agrees with the blind labels
    on >= 98% of the arms' labelled answers; the sensitivity row grades labelled answers by their label."""
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    for set_name in ("test", "test-format-controlled", "test-full-context"):
        _write_set(tmp_path, set_name, "base", [i < 50 for i in range(200)])
    folder = preregistered.set_folder(PROFILE, _sets()["test"])
    trained = pd.DataFrame(
        {
            "episode_id": [f"e{i}" for i in range(200)],
            "verdict": ["correct" if i < 120 else "wrong" for i in range(200)],
            "question": [f"q{i}" for i in range(200)],
            "gold": ["Denver"] * 200,
            "answer": [f"violin teacher: Denver {i}" for i in range(200)],
        }
    )
    trained.to_csv(folder / "verdict__seed-11__step-20.csv", index=False)
    # 160 labelled: the first 100 of the matcher's 120 correct are labelled wrong by a person
    labels = {
        (f"q{i}", "Denver", f"violin teacher: Denver {i}"): "wrong" if i < 100 else "correct"
        for i in range(160)
    }
    labels.update({(f"q{i}", "Denver", f"violin teacher: Denver {i}"): "wrong" for i in range(120, 160)})
    strict = {key: "wrong" for key in labels}  # a literal reading that credits nothing labelled
    monkeypatch.setattr(
        prereg_analysis, "human_labels", lambda strict_reading=False: strict if strict_reading else labels
    )
    monkeypatch.setattr(prereg_analysis, "labelled_trained_answers", lambda profile: 160)
    row = prereg_analysis.instrument_table(PROFILE).set_index("model").loc["verdict__seed-11__step-20"]
    assert row["labelled"] == 160 and row["correct (matcher)"] == 120
    assert row["correct (labels where labelled)"] == 20  # 20 labelled correct, 40 unlabelled wrong
    assert row["credit agrees"] == pytest.approx(60 / 160)
    assert row["by labels vs format-controlled: diff"] == pytest.approx((20 - 50) / 200)
    assert row["correct (strict labels)"] == 0  # every row labelled wrong or unlabelled and wrong
    text = prereg_analysis.write_results(PROFILE).read_text()
    assert "**Trained rows not reported as results:**" in text and "credit agrees 37.5%" in text
    assert "rests on a disputed labelling convention:** 20 correct by the labels, 0 under" in text
    agreeing = {key: ("correct" if int(key[0][1:]) < 120 else "wrong") for key in labels}
    monkeypatch.setattr(
        prereg_analysis, "human_labels", lambda strict_reading=False: strict if strict_reading else agreeing
    )
    text = prereg_analysis.write_results(PROFILE).read_text()
    assert "not reported" not in text and "credit agrees 100.0%" in text
    assert "was revised after the registered verdict" in text  # and what it measured out of sample

    def quoted(batch) -> str:
        return f"{batch.batch} ({batch.answers}) {batch.credit_agrees}/{batch.n}"

    # every batch this matcher was measured on, none left out; a batch graded by two rounds alike (F4 by
    # v6 and by the frozen v7) reads the same for both
    current = {quoted(batch) for batch in read_blind_batches() if batch.matcher == MATCHER_VERSION}
    for batch in read_blind_batches():
        assert (quoted(batch) in text) == (quoted(batch) in current), batch.batch
    assert "rests on a disputed labelling convention:** 120 correct by the labels, 0 under" in text


def test_a_checkpoint_judged_before_the_base_and_a_real_record_manifest_are_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hard set lists a checkpoint's count when the base has not been judged there yet (no
    comparison); a real-record piece, whose rows are never committed, is counted from its manifest."""
    import json

    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    _write_rows("hard", "verdict__seed-11__step-20", [i < 23 for i in range(100)])
    hard = prereg_analysis.hard_table(PROFILE)
    assert list(hard["model"]) == ["verdict__seed-11__step-20"] and hard.loc[0, "correct"] == 23
    assert "vs base: p" not in hard
    evaluation = next(item for item in PROFILE.require("transfer").evaluations if item.real_records)
    folder = preregistered.set_folder(PROFILE, evaluation)
    folder.mkdir(parents=True)
    manifest = {"totals": {"questions": 2, "calls": 6, "cut_calls": 3}, "accuracy": {"matcher": 0.5}}
    (folder / "verdict__seed-11__step-20.manifest.json").write_text(json.dumps(manifest))
    row = prereg_analysis.real_records_table(PROFILE).set_index("model").loc["verdict__seed-11__step-20"]
    assert (row["n"], row["correct"], row["cut rate"]) == (2, 1, 0.5)


def test_the_notes_table_separates_what_the_notes_held_from_what_was_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model whose notes keep the current value but whose answers miss it shows it: held 2 of 3, current
    only 1, correct where current only 0."""
    import json

    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    folder = preregistered.set_folder(PROFILE, _sets()["test"])
    folder.mkdir(parents=True)
    rows = [
        {"holds_current": [False, True], "holds_stale": [True, False], "verdict": "wrong", "memory": {}},
        {
            "holds_current": [True, True],
            "holds_stale": [True, True],
            "verdict": "correct",
            "memory": {"holds_current_keyed": True},
        },
        {"holds_current": [True, False], "holds_stale": None, "verdict": "wrong", "memory": None},
    ]
    text = "\n".join(json.dumps(row) for row in rows) + "\n"
    (folder / "format__seed-11__step-20.trajectories.jsonl").write_text(text)
    row = prereg_analysis.notes_table(PROFILE).set_index("model").loc["format__seed-11__step-20"]
    assert row["final notes hold the current value"] == 2 and row["hold a stale value"] == 1
    assert row["the same, literal reading of the key"] == 1  # the keyed-line rule's literal reading
    assert (
        row["hold the current value only"] == 1
        and row["correct where the notes hold the current value only"] == 0
    )


def test_the_final_checkpoint_is_judged_with_every_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Training holds torch to one thread on CPU; the judging after it in the same process must not inherit
    that (it left a core idle through `verdict` s12's test set)."""
    import os

    import torch

    from supersede_lib.studies.training import TrainedRun

    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    config = preregistered.planned_arms(PROFILE)[0].config

    def trained(profile: object, arm: str, seed: int) -> TrainedRun:
        torch.set_num_threads(1)  # what train.run does with cpu_threads=1
        result = type("Result", (), {"final_step": 20})()
        return TrainedRun("fixed", seed, config, result, arm=arm)

    threads_when_judged: list[int] = []
    monkeypatch.setattr(preregistered, "train_arm_seed", trained)
    monkeypatch.setattr(TrainedRun, "checkpoints", property(lambda self: [(20, str(tmp_path / "adapter"))]))
    monkeypatch.setattr(preregistered, "copy_run_files", lambda run, folder: None)
    monkeypatch.setattr(
        preregistered, "judge_models", lambda *a, **k: threads_when_judged.append(torch.get_num_threads())
    )
    before = torch.get_num_threads()
    try:
        preregistered.train_and_judge(PROFILE, "verdict", 11)
    finally:
        torch.set_num_threads(before)
    assert threads_when_judged and set(threads_when_judged) == {os.cpu_count()}


def test_the_fresh_instrument_set_uses_episodes_no_other_set_or_run_has_used() -> None:
    sets = _sets()
    fresh = sets["instrument-fresh"].episodes
    others = {item.episodes.seed for name, item in sets.items() if name != "instrument-fresh"}
    training = {TRAINING_SEED_BASE + seed for _, seed in preregistered.registered_order(PROFILE)}
    assert fresh.seed not in others | training
    assert fresh.n >= 150 and sets["instrument-fresh"].models == [
        "format__seed-11__step-20",
        "verdict__seed-11__step-20",
        "notes-used__seed-11__step-20",
        "notes-used__seed-12__step-20",
        "format__seed-12__step-20",
    ]
    assert "instrument-fresh" not in PROFILE.require("preregistration").order  # exploratory, not registered


def test_results_print_tiny_p_values_as_below_a_bound_not_zero() -> None:
    table = pd.DataFrame({"vs base: p": [3.5e-24, 0.21, None], "vs base: diff": [0.123456, 0.0, 0.5]})
    printed = prereg_analysis.printed_p_values(table)
    assert list(printed["vs base: p"]) == ["< 0.0001", "0.2100", "—"]
    assert list(printed["vs base: diff"]) == [0.1235, 0.0, 0.5]  # other columns: four places, unchanged


def test_a_trained_row_says_whether_its_adapter_can_be_loaded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    label = "verdict__seed-11__step-20"
    assert prereg_analysis.kept_adapter_status(PROFILE, label) == "not kept: cannot be loaded again"
    adapters = tmp_path / PROFILE.name / "06_grpo_training" / "adapters"
    adapters.mkdir(parents=True)
    (adapters / f"{label}.json").write_text(json.dumps({"sha256": "ab" * 32}))
    assert prereg_analysis.kept_adapter_status(PROFILE, label) == f"kept (sha256 {'ab' * 6})"


def test_the_matcher_caveat_says_when_no_fresh_batch_measured_the_current_matcher(monkeypatch) -> None:
    from supersede_lib.labelling import agreement

    monkeypatch.setattr(agreement, "current_matcher_batches", lambda batches, version: [])
    caveat = prereg_analysis._revised_matcher_caveat()
    assert "agreed: ." not in caveat
    assert "graded by it yet: its agreement out of sample is unmeasured" in caveat
