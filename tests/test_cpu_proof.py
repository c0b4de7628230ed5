"""The CPU proof as a profile (configs/cpu_proof.yaml) through the generic studies 06 and 07.

The slowest test here replays every committed evaluation of the proof from its recorded replies
(no adapters, no weights) and re-derives every committed table: they must come out byte for byte.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from supersede_lib import profiles
from supersede_lib.models.cache import BEFORE_PROVENANCE
from supersede_lib.profiles import ProfileError, validate_profile
from supersede_lib.reproduce.verify import compare_csv
from supersede_lib.results import evidence
from supersede_lib.results.headings import NOTEBOOK_TRAINING, NOTEBOOK_TRANSFER
from supersede_lib.studies import evaluation_sets, training, transfer
from supersede_lib.train.config import TrainingConfig

COMMITTED = profiles.REPO_ROOT / "outputs" / "cpu_proof"
# what a replay cannot reproduce: the seconds a reply took and whether it came from the cache


def _write_run(directory: Path, label: str, successes_by_step: list[int], group: int = 8) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = []
    for step, successes in enumerate(successes_by_step, start=1):
        for index in range(group):
            correct = index < successes
            record = {
                "step": step,
                "reward": 1.0 if correct else 0.0,
                "advantage": (1.0 if correct else 0.0) - successes / group,  # GRPO: against its group
                "verdict": "correct" if correct else "wrong",
                "notes_hold_current": correct,
                "final_notes": "pet: Olive" if correct else "",
            }
            lines.append(json.dumps(record))
    (directory / f"{label}.rollouts.jsonl").write_text("\n".join(lines) + "\n")


def _write_eval(folder: Path, label: str, correct: list[bool]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    verdicts = ["correct" if value else "wrong" for value in correct]
    frame = pd.DataFrame({"episode_id": [f"ep-{i}" for i in range(len(correct))], "verdict": verdicts})
    frame.to_csv(folder / f"{label}.csv", index=False)


def test_the_profile_names_the_arms_seeds_and_sets_as_data() -> None:
    profile = profiles.load_profile("cpu_proof")
    arms = {arm.name: arm for arm in training.planned_arms(profile)}
    assert list(arms) == ["sparse", "memory", "sparse-stale0", "sparse-lr2e-05"]
    preset = TrainingConfig.preset("cpu_proof")
    assert arms["memory"].config.reward == "memory" and arms["memory"].seeds == (0, 1, 2, 3, 4, 5)
    assert arms["sparse-stale0"].config.stale_penalty_weight == 0.0
    assert arms["sparse-stale0"].config.learning_rate == preset.learning_rate
    assert arms["sparse-lr2e-05"].config.learning_rate == 2e-5
    assert arms["sparse-lr2e-05"].config.stale_penalty_weight == preset.stale_penalty_weight
    assert len({arm.config.output_dir for arm in arms.values()}) == 4
    assert arms["sparse"].config.prompt_variant == "v10_line_edits_loose_answer"
    # held out: another generator seed than the training episodes (500 + run seed), same distribution
    heldout = profile.transfer.evaluations[0].episodes
    assert heldout.seed not in range(500, 510) and heldout.n >= 100
    assert heldout.difficulty == arms["sparse"].config.difficulty


def test_named_arms_exclude_the_grid_and_name_the_file_and_key() -> None:
    base = {"name": "unit", "model": {"backend": "fake"}}
    arms = [{"name": "sparse"}, {"name": "sparse"}]
    with pytest.raises(ProfileError, match=r"^unit\.yaml: training: .*arm names must differ"):
        validate_profile({**base, "training": {"preset": "smoke", "arms": arms}}, "unit.yaml")
    grid = {"preset": "smoke", "rewards": ["memory"], "arms": [{"name": "a"}]}
    with pytest.raises(ProfileError, match="not in rewards/curricula"):
        validate_profile({**base, "training": grid}, "unit.yaml")
    bad = {"preset": "smoke", "arms": [{"name": "a", "overrides": {"reward": "memory"}}]}
    with pytest.raises(ProfileError, match=r"training\.arms\[0\]\.overrides"):
        validate_profile({**base, "training": bad}, "unit.yaml")
    with pytest.raises(ProfileError, match=r"transfer: .*episodes"):
        validate_profile({**base, "transfer": {"notes_budget_chars": 300}}, "unit.yaml")


def test_a_named_arm_labels_its_runs_with_its_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    profile = profiles.load_profile("cpu_proof")
    (arm,) = [arm for arm in training.planned_arms(profile) if arm.name == "sparse-stale0"]
    assert (
        Path(arm.config.output_dir) == tmp_path / "cpu_proof" / NOTEBOOK_TRAINING / "runs" / "sparse-stale0"
    )
    run = training.recorded_run(
        profile, arm.curriculum, 1, arm.config, COMMITTED / NOTEBOOK_TRAINING, arm.name
    )
    assert run is not None and run.label == "sparse-stale0__seed-1"
    assert [step for step, _ in run.checkpoints] == [10, 20]


def test_training_evidence_reads_trend_and_notes_from_the_rollouts(tmp_path: Path) -> None:
    _write_run(tmp_path, "sparse__seed-0", [1, 2, 1, 1, 2, 2, 6, 7])  # rises: 3/16 -> 13/16
    _write_run(tmp_path, "memory__seed-0", [2, 2, 2, 2, 2, 2, 2, 2])  # flat
    assert evidence.write_training_evidence(tmp_path) == ["trend.md", "notes_payoff.md"]
    trend = pd.read_csv(tmp_path / "trend.csv").set_index("run")
    assert trend.loc["sparse__seed-0", "first_quarter"] == "3/16" and trend.loc["sparse__seed-0", "rises"]
    assert not trend.loc["memory__seed-0", "rises"] and trend.loc["memory__seed-0", "p_one_sided"] > 0.5
    # the written rollouts leave the notes empty exactly when wrong: 13/16 -> 3/16 empty
    assert trend.loc["sparse__seed-0", "notes_empty_first"] == pytest.approx(13 / 16)
    assert trend.loc["sparse__seed-0", "notes_empty_last"] == pytest.approx(3 / 16)
    payoff = pd.read_csv(tmp_path / "notes_payoff.csv").set_index("run")
    # within each group of the first 4 steps the empty (wrong) rollouts sit below their group's mean
    assert payoff.loc["sparse__seed-0", "advantage_empty_first_half"] == pytest.approx(-(7 + 12 + 7 + 7) / 8)
    assert payoff.loc["memory__seed-0", "advantage_empty_first_half"] == pytest.approx(-4 * 12 / 8)
    assert evidence.write_training_evidence(tmp_path / "empty") == []


def test_an_evaluation_table_counts_against_the_base_on_the_same_questions(tmp_path: Path) -> None:
    _write_eval(tmp_path, "base", [i < 20 for i in range(100)])
    _write_eval(tmp_path, "sparse__seed-0__step-8", [i < 35 for i in range(100)])  # 15 more, none lost
    table = evidence.evaluation_table(evidence.evaluation_frames(tmp_path)).set_index("model")
    assert list(table.index) == ["base", "sparse__seed-0__step-8"]
    assert table.loc["base", "accuracy"] == pytest.approx(0.20)
    assert (
        table.loc["sparse__seed-0__step-8", "b_base_only"],
        table.loc["sparse__seed-0__step-8", "c_model_only"],
    ) == (0, 15)
    assert table.loc["sparse__seed-0__step-8", "p_exact"] < 0.001


def test_training_minutes_add_every_session_of_a_resumed_run(tmp_path: Path) -> None:
    steps = [(1, 60.0), (2, 90.0), (2, 120.0), (3, 30.0)]  # step 2 ran again after a resume: its last counts
    lines = [json.dumps({"step": step, "kind": "train", "step_time": seconds}) for step, seconds in steps]
    (tmp_path / "sparse__seed-2.metrics.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "sparse__seed-2.run_summary.json").write_text(
        json.dumps({"final_step": 3, "wall_time_s": 30.0})
    )
    (tmp_path / "sparse__seed-2.training_config.json").write_text(json.dumps({"share_prompt_prefix": True}))
    (row,) = evidence.cost_table(tmp_path, []).to_dict("records")
    assert row["part"] == "train" and row["engine"] == "shared prefix" and row["steps"] == 3
    assert row["minutes"] == 3.5  # (60 + 120 + 30) s


def test_the_markdown_tables_keep_small_p_values_readable() -> None:
    shown = evidence.for_display(
        pd.DataFrame({"accuracy": [0.25, 0.4912], "p_exact": [float("nan"), 0.000222]})
    )
    assert list(shown["accuracy"]) == [0.25, 0.491]
    assert shown["p_exact"].iloc[1] == 0.00022 and pd.isna(shown["p_exact"].iloc[0])


def test_side_by_side_and_final_checkpoints_follow_the_profile_arms(tmp_path: Path) -> None:
    columns = {"question": "q?", "gold": "$1", "final_notes": "notes", "answer": "a"}
    for label, verdicts in (
        ("base", ["wrong", "correct", "wrong"]),
        ("sparse__seed-0__step-20", ["wrong"] * 3),
    ):
        frame = pd.DataFrame({"episode_id": ["e0", "e1", "e2"], **columns, "verdict": verdicts})
        frame.to_csv(tmp_path / f"{label}.csv", index=False)
    both = evidence.side_by_side(tmp_path, "sparse__seed-0__step-20", n=2)
    assert list(both["episode_id"]) == ["e1", "e0"]
    models = ["base", "memory__seed-0__step-20", "sparse-lr2e-05__seed-0__step-20", "sparse__seed-0__step-10"]
    table = pd.DataFrame({"model": [*models, "sparse__seed-0__step-20"]})
    arms = ["sparse", "memory", "sparse-lr2e-05"]
    assert evidence.final_checkpoints(table, arms) == [
        "sparse__seed-0__step-20",
        "memory__seed-0__step-20",
        "sparse-lr2e-05__seed-0__step-20",
    ]


def test_an_unknown_model_in_an_evaluation_set_names_the_file_and_key(tmp_path: Path) -> None:
    profile = profiles.load_profile("cpu_proof")
    evaluation = profile.transfer.evaluations[0].model_copy(
        update={"models": ["base", "sparse__seed-9__step-20"]}
    )
    with pytest.raises(
        ProfileError, match=r"cpu_proof\.yaml: transfer\.evaluations\.heldout\.models: .*seed-9"
    ):
        evaluation_sets.set_models(profile, evaluation, [])


def _copy_committed(root: Path) -> Path:
    shutil.copytree(COMMITTED, root / "cpu_proof")
    return root / "cpu_proof"


def _compare_tables(produced: Path, committed: Path) -> list[str]:
    names = sorted(path.name for path in committed.glob("*") if path.suffix in {".csv", ".md", ".png"})
    return [name for name in names if (produced / name).read_bytes() != (committed / name).read_bytes()]


def test_the_committed_proof_regenerates_unchanged_from_its_recorded_replies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Studies 06 and 07 on a copy of the committed files, every per-model CSV removed: 07 replays each
    model from `responses.jsonl.gz` (no adapters) and every committed table comes out byte for byte.

    The exception, named: the per-model CSVs differ from the committed ones in `latency_s` and
    `cached_calls` only (a replay takes no time and is all cache hits). The timing tables (`cost`,
    `engine_check`) come out unchanged because each replayed manifest keeps its live run's
    measurements (`live_run`). The 9 `cost` rows of the whole-prompt LongMemEval set, whose manifests
    were written into a git-ignored folder and never committed, left the record when it was
    regenerated at fdf147c (they stay in git history)."""
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    copy = _copy_committed(tmp_path)
    removed = sorted((copy / NOTEBOOK_TRANSFER).glob("*/*.csv"))
    for path in removed:
        path.unlink()
    responses_before = (
        COMMITTED.parent.parent / profiles.load_profile("cpu_proof").recorded_responses
    ).read_bytes()
    profile = profiles.load_profile("cpu_proof")

    training.run_training(profile)
    transfer.run_transfer(profile, progress=False)

    assert len(removed) == 38
    for path in removed:  # verify's own comparison: live columns aside, later columns as implied
        assert compare_csv(COMMITTED / path.relative_to(copy), path) is None, path.name
    assert _compare_tables(copy / NOTEBOOK_TRAINING, COMMITTED / NOTEBOOK_TRAINING) == []
    assert _compare_tables(copy / NOTEBOOK_TRANSFER, COMMITTED / NOTEBOOK_TRANSFER) == []
    # a replay adds nothing to the recorded replies: the committed file is not rewritten
    assert (profiles.REPO_ROOT / profile.recorded_responses).read_bytes() == responses_before


def test_every_recorded_reply_names_the_commit_that_made_it_or_says_it_predates_provenance() -> None:
    with gzip.open(COMMITTED / "responses.jsonl.gz", "rt", encoding="utf-8") as handle:
        made_by = [json.loads(line)["made_by_commit"] for line in handle]
    commit = re.compile(r"^[0-9a-f]{40}(-dirty)?$")
    assert made_by and all(value == BEFORE_PROVENANCE or commit.match(value) for value in made_by)


def test_real_longmemeval_records_leave_only_manifests_and_counts_in_git() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "outputs"], cwd=profiles.REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    real = [path for path in tracked if f"/{evaluation_sets.REAL_RECORDS_FOLDER}/" in path]
    assert real and all(path.endswith(".manifest.json") for path in real)
    assert not [
        path for path in tracked if "longmemeval" in path and path.endswith((".jsonl", ".trajectories.jsonl"))
    ]
    folder = (
        Path("outputs/cpu_proof") / NOTEBOOK_TRANSFER / evaluation_sets.REAL_RECORDS_FOLDER / "longmemeval"
    )
    for name in ("base.csv", "base.trajectories.jsonl"):  # what quotes the records: ignored
        ignored = subprocess.run(["git", "check-ignore", "-q", str(folder / name)], cwd=profiles.REPO_ROOT)
        assert ignored.returncode == 0, name


def test_a_real_record_set_writes_to_the_ignored_folder_and_its_own_cache(
    tmp_path: Path, tiny_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    monkeypatch.setattr(evaluation_sets, "resolve_base_model", lambda config: str(tiny_path))
    records = Path(__file__).parent / "fixtures" / "longmemeval" / "longmemeval_oracle.json"
    profile = profiles.load_profile("cpu_proof")
    (real,) = [item for item in profile.transfer.evaluations if item.name == "longmemeval"]
    real = real.model_copy(
        update={"episodes": real.episodes.model_copy(update={"local_path": str(records)}), "models": ["base"]}
    )
    recorded = training.recorded_run(
        profile, "fixed", 0, training.planned_arms(profile)[0].config, COMMITTED / NOTEBOOK_TRAINING, "sparse"
    )
    runs = [dataclasses.replace(recorded, recorded=False)]  # trained here, no checkpoint yet: the base live

    evaluation_sets.evaluate_set(profile, real, runs, progress=False)

    folder = tmp_path / "cpu_proof" / NOTEBOOK_TRANSFER / evaluation_sets.REAL_RECORDS_FOLDER / "longmemeval"
    assert len(pd.read_csv(folder / "base.csv")) == 5  # the fixture's knowledge-update questions
    assert (tmp_path / "cpu_proof" / "cache" / evaluation_sets.REAL_RECORDS_CACHE).exists()
    assert not (tmp_path / "cpu_proof" / "cache" / "responses.sqlite").exists()


def test_the_prefix_cache_engine_has_its_own_folder_and_replies_and_is_checked_against_the_whole_prompt(
    tmp_path: Path, tiny_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    monkeypatch.setattr(evaluation_sets, "resolve_base_model", lambda config: str(tiny_path))
    profile = profiles.load_profile("cpu_proof")
    exported = tmp_path / "responses.jsonl.gz"
    profile = profile.model_copy(update={"recorded_responses": str(exported)})  # not the committed file
    small = profile.transfer.evaluations[0].episodes.model_copy(update={"n": 3})
    whole, prefix = (
        item.model_copy(update={"episodes": small, "models": ["base"]})
        for item in profile.transfer.evaluations
        if item.name in ("heldout", "heldout-prefix-cache")
    )
    recorded = training.recorded_run(
        profile, "fixed", 0, training.planned_arms(profile)[0].config, COMMITTED / NOTEBOOK_TRAINING, "sparse"
    )
    runs = [dataclasses.replace(recorded, recorded=False)]

    evaluation_sets.evaluate_set(profile, whole, runs, progress=False)
    whole_keys = {json.loads(line)["key"] for line in gzip.open(exported, "rt")}
    evaluation_sets.evaluate_set(profile, prefix, runs, progress=False)
    all_keys = {json.loads(line)["key"] for line in gzip.open(exported, "rt")}

    # the same prompts, cached apart: the second engine's replies are new entries, exported beside
    assert len(all_keys) == 2 * len(whole_keys) > 0
    folders = [evaluation_sets.set_folder(profile, item) for item in (whole, prefix)]
    check = evidence.engine_check_table(*folders).set_index("model")
    assert check.loc["base", "n"] == 3 and 0 <= check.loc["base", "verdicts_agree"] <= 3
    cost = evidence.cost_table(tmp_path / "none", [(folders[0], False), (folders[1], True)]).set_index(
        "engine"
    )
    assert cost.loc["whole prompt", "calls"] == cost.loc["prefix cache", "calls"] > 0
    assert cost.loc["prefix cache", "live_calls"] == cost.loc["prefix cache", "calls"]  # nothing replayed
