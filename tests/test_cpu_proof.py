"""The CPU proof's read-out: training trend per run, held-out accuracy against the base, the figure."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from supersede_lib.studies import cpu_proof
from supersede_lib.train.config import TrainingConfig


def _write_run(directory: Path, label: str, successes_by_step: list[int], group: int = 8) -> None:
    runs = directory / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    lines = []
    for step, successes in enumerate(successes_by_step, start=1):
        for index in range(group):
            correct = index < successes
            lines.append(
                json.dumps(
                    {
                        "step": step,
                        "reward": 1.0 if correct else 0.0,
                        "verdict": "correct" if correct else "wrong",
                        "notes_hold_current": correct,
                        "final_notes": "pet: Olive" if correct else "",
                    }
                )
            )
    (runs / f"{label}.rollouts.jsonl").write_text("\n".join(lines) + "\n")


def _write_eval(directory: Path, which: str, label: str, correct: list[bool]) -> None:
    folder = directory / which
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(
        {
            "episode_id": [f"ep-{i}" for i in range(len(correct))],
            "verdict": ["correct" if value else "wrong" for value in correct],
        }
    ).to_csv(folder / f"{label}.csv", index=False)


def test_the_preset_trains_the_agent_its_base_rate_was_measured_with() -> None:
    config = cpu_proof.proof_config("memory")
    assert config.prompt_variant == "v10_line_edits_loose_answer"
    assert config.num_generations >= 8 and config.reward == "memory"
    assert config.output_dir != cpu_proof.proof_config("sparse").output_dir
    assert TrainingConfig.preset("cpu_proof").episode_overrides == {"n_sessions": (2, 3)}
    # held out: another generator seed than the training episodes (500 + run seed) on the same distribution
    assert cpu_proof.HELDOUT.seed not in {500, 501, 502} and cpu_proof.HELDOUT.n >= 100
    assert cpu_proof.HELDOUT.difficulty == config.difficulty


def test_the_report_reads_trend_and_heldout_accuracy_from_the_committed_files(tmp_path: Path) -> None:
    _write_run(tmp_path, "sparse__seed-0", [1, 2, 1, 1, 2, 2, 6, 7])  # rises: 3/16 -> 13/16
    _write_run(tmp_path, "memory__seed-0", [2, 2, 2, 2, 2, 2, 2, 2])  # flat
    base = [i < 20 for i in range(100)]
    better = [i < 20 or 20 <= i < 35 for i in range(100)]  # 15 more right, none lost
    _write_eval(tmp_path, "heldout", "base", base)
    _write_eval(tmp_path, "heldout", "sparse__seed-0__step-8", better)
    _write_eval(tmp_path, "heldout", "memory__seed-0__step-8", base)

    tables = cpu_proof.write_report(tmp_path)
    trend = tables["trend"].set_index("run")
    assert trend.loc["sparse__seed-0", "first_quarter"] == "3/16" and trend.loc["sparse__seed-0", "rises"]
    assert not trend.loc["memory__seed-0", "rises"] and trend.loc["memory__seed-0", "p_one_sided"] > 0.5
    # the written rollouts leave the notes empty exactly when wrong: 13/16 -> 3/16 empty
    assert trend.loc["sparse__seed-0", "notes_empty_first"] == pytest.approx(13 / 16)
    assert trend.loc["sparse__seed-0", "notes_empty_last"] == pytest.approx(3 / 16)
    assert trend.loc["sparse__seed-0", "stale_last"] == 0.0
    heldout = tables["heldout"].set_index("model")
    assert list(heldout.index) == ["base", "memory__seed-0__step-8", "sparse__seed-0__step-8"]
    assert heldout.loc["base", "accuracy"] == pytest.approx(0.20)
    assert heldout.loc["sparse__seed-0__step-8", "c_model_only"] == 15
    assert heldout.loc["sparse__seed-0__step-8", "b_base_only"] == 0
    assert heldout.loc["sparse__seed-0__step-8", "p_exact"] < 0.001
    assert heldout.loc["memory__seed-0__step-8", "p_exact"] == 1.0
    assert "hard" not in tables  # no hard-set evaluation committed
    for name in ("trend.csv", "trend.md", "heldout.csv", "heldout.md", "cpu_proof.png"):
        assert (tmp_path / name).stat().st_size > 0


def test_the_longmemeval_set_reads_a_local_file_and_says_when_it_is_missing() -> None:
    spec = cpu_proof.eval_spec("longmemeval", "data/longmemeval_oracle.json")
    assert spec.source == "longmemeval" and spec.question_type == "knowledge-update"
    assert spec.local_path == "data/longmemeval_oracle.json"
    assert cpu_proof.eval_spec("heldout") == cpu_proof.HELDOUT
    with pytest.raises(ValueError, match="--longmemeval PATH"):
        cpu_proof.eval_spec("longmemeval")


def test_the_report_of_a_profile_shows_the_proof_under_its_training_section(tmp_path: Path) -> None:
    from supersede_lib.studies import report

    proof = tmp_path / "smoke" / "06_grpo_training" / cpu_proof.PROOF_DIR.name
    _write_run(proof, "sparse__seed-1", [0, 1, 1, 1, 4, 5, 6, 6])
    (proof / "runs" / "sparse__seed-1.training_config.json").write_text(
        json.dumps({"model_name_or_path": "/somewhere/tiny.gguf", "lora_r": 4, "num_generations": 8})
    )
    _write_eval(proof, "heldout", "base", [i < 30 for i in range(100)])
    _write_eval(proof, "heldout", "sparse__seed-1__step-8", [i < 45 for i in range(100)])
    cpu_proof.write_report(proof)

    text = report.build_report("smoke", output_root=tmp_path)

    section = text[text.index("06 · GRPO") : text.index("07 · Transfer")]
    assert "### The CPU proof" in section and "`06_grpo_training/cpu_proof/`" in section
    assert "`tiny.gguf` with LoRA r = 4" in section and "/somewhere" not in section
    assert "| sparse__seed-1 | sparse | 1 | 8 | 64 | 1/16 |" in section
    assert "| sparse__seed-1__step-8 | bounded_memory | 100 | 45 |" in section
    assert "generator seed 7201, n = 100" in section
    assert "![cpu_proof](06_grpo_training/cpu_proof/cpu_proof.png)" in section
    assert cpu_proof.report_section(tmp_path / "nothing-here") == ""


def test_side_by_side_puts_the_questions_whose_verdicts_differ_first(tmp_path: Path) -> None:
    columns = {"question": "q?", "gold": "$1", "final_notes": "notes", "answer": "a"}
    for label, verdicts in (
        ("base", ["wrong", "correct", "wrong"]),
        ("sparse__seed-0__step-20", ["wrong"] * 3),
    ):
        folder = tmp_path / "heldout"
        folder.mkdir(exist_ok=True)
        pd.DataFrame({"episode_id": ["e0", "e1", "e2"], **columns, "verdict": verdicts}).to_csv(
            folder / f"{label}.csv", index=False
        )
    both = cpu_proof.side_by_side("sparse__seed-0__step-20", n=2, directory=tmp_path)
    assert list(both["episode_id"]) == ["e1", "e0"]
    assert list(both.columns[-1:]) == ["verdict (sparse__seed-0__step-20)"]
    models = ["base", "memory__seed-0__step-20", "sparse-lr2e-05__seed-0__step-20", "sparse__seed-0__step-10"]
    table = pd.DataFrame({"model": [*models, "sparse__seed-0__step-20"]})
    assert cpu_proof.final_checkpoints(table) == [  # the preset's arms first: a sweep arm is a side branch
        "sparse__seed-0__step-20",
        "memory__seed-0__step-20",
        "sparse-lr2e-05__seed-0__step-20",
    ]


def test_a_sweep_arm_has_its_own_folder_and_label_and_changes_only_its_field() -> None:
    preset = TrainingConfig.preset("cpu_proof")
    same = cpu_proof.Variant(learning_rate=preset.learning_rate, stale_penalty=preset.stale_penalty_weight)
    assert cpu_proof.proof_config("sparse", same) == cpu_proof.proof_config("sparse")
    sweep = cpu_proof.proof_config("sparse", cpu_proof.Variant(learning_rate=1e-4))
    assert sweep.learning_rate == 1e-4 and sweep.max_steps == preset.max_steps
    assert sweep.output_dir.endswith("sparse-lr1e-04") and sweep.reward == "sparse"
    no_penalty = cpu_proof.Variant(stale_penalty=0.0)
    assert cpu_proof.proof_config("memory", no_penalty).stale_penalty_weight == 0.0
    assert cpu_proof.proof_config("memory", no_penalty).learning_rate == preset.learning_rate
    assert cpu_proof.run_label("sparse", 1, no_penalty) == "sparse-stale0__seed-1"
    both = cpu_proof.Variant(learning_rate=2e-5, stale_penalty=0.5)
    assert cpu_proof.arm_name("sparse", both) == "sparse-lr2e-05-stale0.5"
    assert (
        cpu_proof.reward_of("memory-lr2e-05-stale0") == "memory" and cpu_proof.reward_of("memory") == "memory"
    )


def test_sweep_runs_are_read_under_their_arm_and_reward(tmp_path: Path) -> None:
    _write_run(tmp_path, "sparse__seed-0", [1, 1, 2, 2])
    _write_run(tmp_path, "sparse-lr1e-04__seed-0", [1, 0, 0, 0])
    rollouts = cpu_proof.read_rollouts(tmp_path)
    assert set(rollouts["arm"]) == {"sparse", "sparse-lr1e-04"} and set(rollouts["reward_type"]) == {"sparse"}
    trend = cpu_proof.trend_table(rollouts).set_index("run")
    assert trend.loc["sparse-lr1e-04__seed-0", "last_quarter"] == "0/8"


def test_replies_on_real_longmemeval_records_stay_out_of_the_committed_responses(
    tmp_path: Path, tiny_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import supersede_lib.train.run as run

    monkeypatch.setattr(cpu_proof, "RUNS_ROOT", tmp_path / "runs")
    monkeypatch.setattr(run, "resolve_base_model", lambda config: str(tiny_path))
    proof = tmp_path / "proof"
    proof.mkdir()
    committed = proof / cpu_proof.RESPONSES_FILE
    committed.write_bytes(b"")  # stands for the committed export: must stay as it is
    records = Path(__file__).parent / "fixtures" / "longmemeval" / "longmemeval_oracle.json"

    frame = cpu_proof.evaluate("base", None, cpu_proof.LONGMEMEVAL, proof, longmemeval_path=str(records))

    assert len(frame) == 5  # the fixture's knowledge-update questions, answered and graded
    assert committed.read_bytes() == b""
    assert (tmp_path / "runs" / "responses-longmemeval.sqlite").exists()
    assert not (tmp_path / "runs" / "responses.sqlite").exists()


def test_the_prefix_cache_engine_writes_its_own_folder_and_is_checked_against_the_whole_prompt_one(
    tmp_path: Path, tiny_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gzip

    import supersede_lib.train.run as run
    from supersede_lib.data.episodes import EpisodeSpec

    monkeypatch.setattr(cpu_proof, "RUNS_ROOT", tmp_path / "runs")
    monkeypatch.setattr(run, "resolve_base_model", lambda config: str(tiny_path))
    small = EpisodeSpec(source="synthetic", n=3, difficulty="easy", seed=7201, n_sessions=(2, 3))
    monkeypatch.setitem(cpu_proof.EVAL_SETS, "heldout", small)
    proof = tmp_path / "proof"
    _write_run(proof, "sparse__seed-0", [1, 2, 3, 4])

    whole = cpu_proof.evaluate("base", None, "heldout", proof)
    exported = cpu_proof.RESPONSES_FILE
    whole_keys = {json.loads(line)["key"] for line in gzip.open(proof / exported, "rt")}
    reused = cpu_proof.evaluate("base", None, "heldout", proof, prefix_cache=True)
    all_keys = {json.loads(line)["key"] for line in gzip.open(proof / exported, "rt")}

    assert (proof / "heldout" / "base.csv").exists()
    assert (proof / f"heldout{cpu_proof.PREFIX_CACHE_SUFFIX}" / "base.csv").exists()
    assert len(whole) == len(reused) == 3
    # the same prompts, cached apart: the second engine's replies are new entries, exported beside
    assert len(all_keys) == 2 * len(whole_keys) > 0
    check = cpu_proof.engine_check_table("heldout", proof).set_index("model")
    assert check.loc["base", "n"] == 3
    assert check.loc["base", "correct_whole"] == whole["verdict"].eq("correct").sum()
    assert 0 <= check.loc["base", "answers_identical"] <= 3 and 0 <= check.loc["base", "verdicts_agree"] <= 3
    tables = cpu_proof.write_report(proof)
    assert cpu_proof.ENGINE_CHECK in tables and (proof / f"{cpu_proof.ENGINE_CHECK}.md").exists()
    assert "prompt-prefix cache" in cpu_proof.report_section(proof)
    # the faster engine's own accuracy table, and what each evaluation cost
    assert list(tables[f"heldout{cpu_proof.PREFIX_CACHE_SUFFIX}"]["model"]) == ["base"]
    cost = tables[cpu_proof.COST].set_index("engine")
    assert cost.loc["whole prompt", "calls"] == cost.loc["prefix cache", "calls"] > 0
    assert cost.loc["prefix cache", "live_calls"] == cost.loc["prefix cache", "calls"]  # nothing replayed
    assert "prompt-prefix engine" in cpu_proof.report_section(proof)


def test_training_minutes_add_every_session_of_a_resumed_run(tmp_path: Path) -> None:
    _write_run(tmp_path, "sparse__seed-2", [1, 2, 3])
    runs = tmp_path / "runs"
    steps = [
        (1, 60.0),
        (2, 90.0),
        (2, 120.0),
        (3, 30.0),
    ]  # step 2 ran again after a resume: its last record counts
    (runs / "sparse__seed-2.metrics.jsonl").write_text(
        "\n".join(
            json.dumps({"step": step, "kind": "train", "step_time": seconds}) for step, seconds in steps
        )
        + "\n"
    )
    summary = {"final_step": 3, "wall_time_s": 30.0}  # the last session's wall time only
    (runs / "sparse__seed-2.run_summary.json").write_text(json.dumps(summary))
    (runs / "sparse__seed-2.training_config.json").write_text(json.dumps({"share_prompt_prefix": True}))
    (row,) = cpu_proof.cost_table(tmp_path).to_dict("records")
    assert row["part"] == "train" and row["engine"] == "shared prefix" and row["steps"] == 3
    assert row["minutes"] == 3.5  # (60 + 120 + 30) s


def test_the_markdown_tables_keep_small_p_values_readable() -> None:
    table = pd.DataFrame({"accuracy": [0.25, 0.4912], "p_exact": [float("nan"), 0.000222]})
    shown = cpu_proof._for_display(table)
    assert list(shown["accuracy"]) == [0.25, 0.491]
    assert shown["p_exact"].iloc[1] == 0.00022 and pd.isna(shown["p_exact"].iloc[0])


def test_notes_payoff_compares_written_and_empty_notes_early_and_counts_empty_notes_late(
    tmp_path: Path,
) -> None:
    _write_run(tmp_path, "sparse__seed-0", [1, 2, 1, 1, 2, 2, 6, 7])
    rollouts = cpu_proof.read_rollouts(tmp_path)
    rollouts.loc[
        (rollouts["step"] == 1) & rollouts["notes_empty"], "reward"
    ] = -1.0  # one step of punished guesses
    payoff = cpu_proof.notes_payoff_table(rollouts).set_index("run").loc["sparse__seed-0"]
    # first half = steps 1-4: 5 rollouts wrote notes (all correct), 27 left them empty (7 of them at -1)
    assert (payoff["notes_written"], payoff["notes_empty"]) == (5, 27)
    assert payoff["reward_notes_written"] == 1.0 and payoff["punished_share_written"] == 0.0
    assert payoff["reward_notes_empty"] == pytest.approx(-7 / 27)
    assert payoff["notes_empty_last_quarter"] == pytest.approx(3 / 16)  # steps 7-8: 13 of 16 wrote notes
