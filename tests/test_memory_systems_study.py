"""Notebook 08's study (memory systems) under `smoke` (fake server), its refusals and left-out
questions, and the `memory:` keys of a profile. The smoke model is a deterministic heuristic server:
these tests check plumbing and bookkeeping, not any policy's accuracy."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from supersede_lib import profiles
from supersede_lib.agent.memory import MEMORY_POLICIES
from supersede_lib.eval.run_files import read_trajectories
from supersede_lib.models.local_server import LocalOpenAIServer
from supersede_lib.profiles import ProfileError
from supersede_lib.results.comparison import accuracy_incomplete_line
from supersede_lib.results.headings import NOTEBOOK_MEMORY_SYSTEMS
from supersede_lib.studies import memory_systems as study


@pytest.fixture(scope="module")
def output_root(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("outputs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(profiles, "OUTPUT_ROOT", root)
        yield root


@pytest.fixture(scope="module")
def memory_systems(output_root: Path) -> study.MemorySystemsResult:
    return study.run_memory_systems(profiles.load_profile("smoke"), progress=False)


def test_every_model_and_policy_has_a_row_and_the_files_agree(memory_systems, output_root: Path) -> None:
    block = profiles.load_profile("smoke").memory_systems
    folder = output_root / "smoke" / NOTEBOOK_MEMORY_SYSTEMS
    accuracy = pd.read_csv(folder / "accuracy.csv")
    names = [spec["name"] for spec in block.models]
    policies = [study.FULL_CONTEXT, *(entry.name for entry in block.policies)]
    assert list(zip(accuracy["model"], accuracy["policy"], strict=True)) == [
        (model, policy) for model in names for policy in policies
    ]
    for model in names:  # episodes_per_model asks a model only the first n questions
        expected = block.episodes_per_model.get(model, block.episodes.n)
        assert set(accuracy.loc[accuracy["model"] == model, "n"]) == {expected}
    table = (folder / "table_memory_systems.md").read_text()
    assert table.count("\n| fake-heuristic-server") == len(accuracy)
    for row in accuracy.to_dict("records"):  # each row from its own run's files
        run = study.policy_run_name(
            row["model"], profiles.load_profile("smoke").run_settings(), row["policy"]
        )
        frame = pd.read_csv(folder / f"{run}.csv")
        assert row["correct"] == int((frame["verdict"] == "correct").sum())
        assert row["calls_per_episode"] == pytest.approx(frame["n_calls"].mean())
        assert row["stale_answer_rate"] == pytest.approx((frame["verdict"] == "stale").mean())
        if row["policy"] != study.FULL_CONTEXT:
            assert set(frame["memory_policy"]) == {row["memory"]}
            assert len(read_trajectories(folder / f"{run}.trajectories.jsonl")) == row["n"]
    # the two notes rows are one policy under two prompt variants, with files of their own
    notes = accuracy[accuracy["memory"] == "notes"]
    assert set(notes["prompt_variant"]) == {"v1_worked_example", "v10_line_edits_loose_answer"}
    assert (folder / "accuracy_vs_cost.png").stat().st_size > 0
    # the fake server serves every registered policy (tools, embeddings, Mem0's JSON prompts): smoke
    # runs each of them, none refused
    assert {entry.memory for entry in block.policies} == set(MEMORY_POLICIES)
    assert accuracy["refused"].isna().all()


def test_mcnemar_pairs_each_policy_with_the_reference_and_holm_within_model(
    memory_systems, output_root: Path
) -> None:
    folder = output_root / "smoke" / NOTEBOOK_MEMORY_SYSTEMS
    tests = pd.read_csv(folder / "mcnemar.csv")
    assert set(tests["reference"]) == {"notes-rewrite"} and "notes-rewrite" not in set(tests["policy"])
    settings = profiles.load_profile("smoke").run_settings()
    for row in tests.to_dict("records"):

        def correct(policy: str, model: str = row["model"]) -> pd.Series:
            frame = pd.read_csv(folder / f"{study.policy_run_name(model, settings, policy)}.csv")
            return (frame["verdict"] == "correct").set_axis(frame["episode_id"])

        base, other = correct("notes-rewrite"), correct(row["policy"])
        assert row["b"] == int((base & ~other).sum()) and row["c"] == int((~base & other).sum())
        same_model = tests[tests["model"] == row["model"]]
        assert row["p_exact_holm"] >= row["p_exact"] and row["p_exact_holm"] <= 1
        assert len(same_model) == len(
            profiles.load_profile("smoke").memory_systems.policies
        )  # incl. full context
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["profile"] == "smoke" and summary["reference"] == "notes-rewrite"
    for number in summary["numbers"]:
        assert number.keys() >= {"name", "value", "model", "data", "profile", "n"} and number["n"] > 0
    accuracies = {
        (n["model"], n["name"]): n["value"] for n in summary["numbers"] if n["name"].startswith("accuracy ")
    }
    accuracy = pd.read_csv(folder / "accuracy.csv")
    for row in accuracy.to_dict("records"):
        assert accuracies[(row["model"], f"accuracy {row['policy']}")] == pytest.approx(row["accuracy"])


def test_the_predictions_are_judged_and_written_beside_the_tables(memory_systems, output_root: Path) -> None:
    folder = output_root / "smoke" / NOTEBOOK_MEMORY_SYSTEMS
    assert list(memory_systems.predictions["prediction"]) == ["M1", "M2", "M3", "M4", "M5", "M6"]
    # the fake servers' names carry no size tag (0.5B, 1.5B): no clause can be read
    assert set(memory_systems.predictions["verdict"]) == {"not evaluable"}
    clauses = pd.read_csv(folder / "predictions.csv")
    assert (
        len(clauses) == len(memory_systems.prediction_clauses)
        and clauses["result"].str.startswith("not evaluable (no model tagged").all()
    )
    assert "| M6 |" in (folder / "predictions.md").read_text()
    assert memory_systems.accuracy["held_stale_share_nonempty"].notna().any()  # M3's share, per row


def _one_model(tmp_path: Path, policies: list[dict]) -> profiles.Profile:
    overrides = {
        "memory_systems": {
            "models": [{"backend": "fake", "name": "fake-heuristic-server-b"}],  # asked 1 (smoke.yaml)
            "episodes": {"source": "synthetic", "n": 1, "difficulty": "easy", "seed": 3},
            "policies": policies,
            "reference": policies[0]["name"],
        }
    }
    return profiles.load_profile("smoke", overrides)


def test_a_policy_the_server_cannot_serve_is_a_refused_row_never_a_failure(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    monkeypatch.setattr(profiles, "LocalOpenAIServer", functools.partial(LocalOpenAIServer, tools=False))
    policies = [{"name": "notes", "memory": "notes"}, {"name": "core_memory", "memory": "core_memory"}]
    result = study.run_memory_systems(_one_model(tmp_path, policies), progress=False)
    row = result.accuracy.set_index("policy").loc["core_memory"]
    assert "needs tools" in row["refused"] and row["n"] == 0 and pd.isna(row["accuracy"])
    shown = result.table.set_index("policy").loc["core_memory"]
    assert shown["accuracy [95% Wilson]"].startswith("refused: memory policy 'core_memory' needs tools")
    assert "core_memory" not in set(result.mcnemar["policy"])  # nothing to pair
    assert "fake-heuristic-server-b core_memory" in result.summary["refused"]
    assert not result.summary.get("failed_runs")
    folder = tmp_path / "smoke" / NOTEBOOK_MEMORY_SYSTEMS
    assert not list(folder.glob("*core_memory*.csv"))  # refused before any call: no run files


def _run(
    episodes: list[str],
    failed: set[str],
    correct: set[str],
    final_notes: list[str] | None = None,
    hold_stale: list[bool] | None = None,
) -> SimpleNamespace:
    """A run's stand-in: its frame only (every memory holds the current value unless told)."""
    frame = pd.DataFrame(
        {
            "episode_id": episodes,
            "verdict": ["correct" if key in correct else "wrong" for key in episodes],
            "failed": [key in failed for key in episodes],
            "notes_hold_current": [True] * len(episodes),
            "notes_hold_stale": hold_stale or [False] * len(episodes),
            "final_notes": final_notes or ["- a: 1"] * len(episodes),
            "memory_failures": [0] * len(episodes),
            "n_calls": [3] * len(episodes),
            "prompt_tokens": [100] * len(episodes),
            "completion_tokens": [10] * len(episodes),
        }
    )
    return SimpleNamespace(frame=frame, trajectories=[], run_name="r", manifest={})


def test_a_question_failed_in_any_policy_is_left_out_of_every_row_of_that_model() -> None:
    ids = ["e1", "e2", "e3", "e4"]
    runs = [
        study.PolicyRun("m", "notes", "notes", "v1", run=_run(ids, set(), {"e1", "e2"})),
        study.PolicyRun("m", "other", "latest_value", "v1", run=_run(ids, {"e3"}, {"e1", "e3", "e4"})),
    ]
    tables = study.analyse_policy_runs(runs, "notes")
    assert tables.left_out == {"m": ["e3"]}
    assert list(tables.accuracy["n"]) == [3, 3] and list(tables.accuracy["failed"]) == [
        1,
        1,
    ]  # left out of both
    assert list(tables.accuracy["correct"]) == [2, 2]
    test = tables.mcnemar.iloc[0]
    assert (test["b"], test["c"], test["n"]) == (1, 1, 3)  # e2 / e4; e3 in neither
    assert accuracy_incomplete_line(tables.accuracy).startswith("> **incomplete: 1 of 4 failed")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"isolation": {"memory": "nope"}},
            r"configs/smoke.yaml: isolation.memory: unknown memory policy 'nope'",
        ),
        (
            {"memory_systems": {"policies": [{"name": "x", "memory": "mem1"}], "reference": "x"}},
            r"configs/smoke.yaml: memory_systems.policies\[0\].memory: unknown memory policy 'mem1'; expected one of",
        ),
        (
            {
                "memory_systems": {
                    "policies": [{"name": "x", "memory": "notes", "prompt_variant": "v0"}],
                    "reference": "x",
                }
            },
            r"memory_systems.policies\[0\].prompt_variant: .*'v0'",
        ),
        (
            {
                "memory_systems": {
                    "policies": [{"name": "x", "memory": "notes"}, {"name": "x", "memory": "notes"}]
                }
            },
            r"memory_systems: policy names must differ",
        ),
        ({"memory_systems": {"reference": "nope"}}, r"memory_systems: reference: 'nope' names no entry"),
        ({"memory_systems": {"episodes_per_model": {"zz": 1}}}, r"episodes_per_model: 'zz' names no model"),
    ],
)
def test_memory_keys_are_checked_naming_file_and_key(change: dict, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        profiles.load_profile("smoke", change)


def test_isolation_memory_runs_that_policy_and_the_notes_keep_their_settings() -> None:
    smoke = profiles.load_profile("smoke")
    assert "memory" not in smoke.isolation.settings_changes()  # the recorded notes runs stay the same runs
    changed = profiles.load_profile("smoke", {"isolation": {"memory": "latest_value"}})
    assert changed.run_settings(**changed.isolation.settings_changes()).memory == "latest_value"


def test_a_replay_skips_a_notebook_without_a_committed_record() -> None:
    from supersede_lib.reproduce import notebooks

    lines: list[str] = []
    paths = notebooks.notebook_paths(["02", "08"])
    kept = notebooks.recorded_notebooks("offline", paths, lines.append)
    assert [path.name for path in kept] == ["02_isolation.ipynb"]  # 02 is recorded, 08 not yet
    assert lines and "skipped 08_memory_systems.ipynb: not recorded yet for offline" in lines[0]
