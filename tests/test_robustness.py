"""Notebook 09's study under the `smoke` profile (fake model server): the perturbation suite's files
agree with each other, each perturbed episode pairs with its own unperturbed twin, failed pairs are
left out and said, the profile block refuses what it cannot run, a replay skips a study nobody
recorded yet, and `diagnose --suite robustness` runs the same study on any endpoint."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from supersede_lib import profiles
from supersede_lib.agent.memory import DEFAULT_MEMORY, MEMORY_POLICIES
from supersede_lib.cli import diagnose
from supersede_lib.eval.stats import paired_mcnemar
from supersede_lib.models.local_server import LocalOpenAIServer
from supersede_lib.reproduce import notebooks as reproduce
from supersede_lib.reproduce import report
from supersede_lib.results.headings import NOTEBOOK_ROBUSTNESS
from supersede_lib.studies import robustness as robustness_study

SMOKE = profiles.load_profile("smoke")


@pytest.fixture(scope="module")
def output_root(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("outputs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(profiles, "OUTPUT_ROOT", root)
        yield root


@pytest.fixture(scope="module")
def suite(output_root: Path) -> robustness_study.RobustnessResult:
    return robustness_study.run_robustness(profiles.load_profile("smoke"), progress=False)


def test_files_agree_and_every_pair_is_its_own_twin(suite: robustness_study.RobustnessResult) -> None:
    directory = suite.output_dir
    block = SMOKE.robustness
    drops = pd.read_csv(directory / "robustness_drops.csv", keep_default_na=False, na_values=[""])
    pairs = pd.read_csv(directory / "per_pair.csv", keep_default_na=False)
    labels = [label for label, _ in block.perturbed_specs()]
    models = [spec["name"] for spec in block.models]
    assert len(drops) == len(models) * len(block.conditions) * len(labels)
    sets = robustness_study.robustness_sets(block)
    twins = {(label, twin.episode_id): twin for label, episodes in sets.twins.items() for twin in episodes}
    for row in pairs.to_dict("records"):
        twin = twins[(row["perturbation"], row["twin_id"])]
        assert twin.metadata.get("twin_of", twin.episode_id) == row["episode_id"]
    for row in drops.to_dict("records"):
        chosen = pairs[
            (pairs["model"] == row["model"])
            & (pairs["condition"] == row["condition"])
            & (pairs["perturbation"] == row["perturbation"])
        ]
        expected = block.pairs_per_model.get(row["model"], block.episodes.n)
        assert row["n"] == len(chosen) == expected and row["failed"] == 0
        assert row["correct_unperturbed"] == chosen["correct_unperturbed"].sum()
        assert row["correct_perturbed"] == chosen["correct_perturbed"].sum()
        assert row["drop"] == pytest.approx(
            chosen["correct_unperturbed"].mean() - chosen["correct_perturbed"].mean()
        )
        assert row["drop_low"] <= row["drop"] <= row["drop_high"]
        test = paired_mcnemar(chosen["correct_unperturbed"], chosen["correct_perturbed"])
        assert (row["mcnemar_b"], row["mcnemar_c"]) == (test.b, test.c)
        assert row["p_holm"] >= row["p_exact"] - 1e-12
        if row["perturbation"] == "distractor_density-0":  # its own twin: nothing can drop
            assert row["drop"] == 0 and (chosen["episode_id"] == chosen["twin_id"]).all()
    assert (directory / "robustness_drops.png").stat().st_size > 0
    assert "drop, points [95% bootstrap]" in (directory / "robustness_drops.md").read_text()


def test_the_unperturbed_set_is_asked_once_per_model_and_condition(
    suite: robustness_study.RobustnessResult,
) -> None:
    block = SMOKE.robustness
    assert len(suite.runs) == len(block.models) * len(block.conditions)
    for arm in suite.runs:
        ids = arm.run.frame["episode_id"].tolist()
        assert len(ids) == len(set(ids))
        bases = [episode_id for episode_id in ids if "+" not in episode_id]
        assert len(bases) == arm.pairs
        run_csv = pd.read_csv(suite.output_dir / f"{arm.run.run_name}.csv")
        assert run_csv["episode_id"].tolist() == ids
        if arm.condition == "full_context":  # asked pair by pair: each twin right after its episode
            assert all("+" in ids[i + 1] for i, episode_id in enumerate(ids[:-1]) if "+" not in episode_id)
        else:  # set after set
            assert all("+" not in episode_id for episode_id in ids[: arm.pairs])


def test_summary_names_model_data_profile_and_n(suite: robustness_study.RobustnessResult) -> None:
    summary = json.loads((suite.output_dir / "summary.json").read_text())
    assert summary["profile"] == "smoke" and summary["tables"] == ["robustness_drops.md"]
    assert summary["config"]["robustness"]["perturbations"]
    names = {number["name"] for number in summary["numbers"]}
    assert "bounded_memory k_facts-2: drop" in names and "full_context reverted: p Holm" in names
    for number in summary["numbers"]:
        assert number["model"] and number["data"] == suite.data_label and number["n"] > 0


def test_a_failed_question_leaves_its_pairs_out_and_says_so(
    suite: robustness_study.RobustnessResult, tmp_path: Path
) -> None:
    arm = suite.runs[1]
    frame = arm.run.frame.copy()
    base_id = robustness_study.robustness_sets(SMOKE.robustness).unperturbed[0].episode_id
    frame.loc[frame["episode_id"] == base_id, "failed"] = True  # every pair of this episode
    runs = [*suite.runs[:1], replace(arm, run=replace(arm.run, frame=frame)), *suite.runs[2:]]
    result = robustness_study.analyse_robustness(SMOKE, runs)
    labels = len(SMOKE.robustness.perturbations)
    assert len(result.left_out) == labels and {item["episode_id"] for item in result.left_out} == {base_id}
    hit = result.drops[(result.drops["model"] == arm.model) & (result.drops["condition"] == arm.condition)]
    assert (hit["failed"] == 1).all() and (hit["n"] == arm.pairs - 1).all()
    compared = result.per_pair[
        (result.per_pair["model"] == arm.model) & (result.per_pair["condition"] == arm.condition)
    ]
    assert base_id not in set(compared["episode_id"])
    robustness_study.write_robustness(result, tmp_path)
    table = (tmp_path / "robustness_drops.md").read_text()
    assert table.startswith("> **incomplete: 1 of")
    assert "failed, left out" in table
    assert json.loads((tmp_path / "summary.json").read_text())["left_out"]


def _smoke_with(**robustness: object) -> dict:
    data = SMOKE.model_dump(mode="json", exclude_unset=True)
    data["robustness"] = {**data["robustness"], **robustness}
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"perturbations": [{"name": "k_facts", "k": 9}]},
            "perturbations[0]: perturbation k_facts: k must be",
        ),
        ({"perturbations": ["reverted", "reverted"]}, "perturbations must differ"),
        ({"memory_policies": ["no_such_policy"]}, "unknown memory polic"),
        ({"pairs_per_model": {"no-such-model": 1}}, "names no model of models"),
        ({"memory_policy_models": ["no-such-model"]}, "memory_policy_models: 'no-such-model' names no model"),
        ({"pairs_per_model": {"fake-heuristic-server-b": 99}}, "but episodes: has n=3"),
        ({"episodes": {"source": "synthetic", "n": 2, "perturbation": "reverted"}}, "without perturbation"),
        ({"pairs_per_policy": {"mem0": 1}}, "pairs_per_policy: 'mem0' is none of memory_policies"),
        (
            {
                "memory_policies": ["notes", "mem0"],
                "perturbations_per_policy": {"mem0": ["reverted", "k_facts-9"]},
            },
            "perturbations_per_policy: mem0: ['k_facts-9'] is not among the labels",
        ),
        (
            {"memory_policies": ["notes", "mem0"], "perturbations_per_policy": {"mem0": []}},
            "perturbations_per_policy: mem0: nothing is not among",
        ),
    ],
)
def test_the_block_refuses_what_it_cannot_run(change: dict, message: str) -> None:
    with pytest.raises(profiles.ProfileError, match="robustness") as error:
        profiles.validate_profile(_smoke_with(**change), "configs/x.yaml")
    assert message in str(error.value)


def test_the_memory_policy_hook_leaves_the_notes_agent_as_every_study_runs_it() -> None:
    assert profiles.memory_policy_changes("notes") == {} == profiles.memory_policy_changes("")
    assert profiles.memory_policy_changes("append_truncate") == {"memory": "append_truncate"}
    assert DEFAULT_MEMORY in MEMORY_POLICIES
    assert robustness_study.arm_label("bounded_memory", "notes") == "bounded_memory"
    assert robustness_study.arm_label("bounded_memory", "mem0") == "bounded_memory (mem0)"


def test_a_replay_checks_the_recorded_09_and_its_report_section_holds_the_drops() -> None:
    """offline's 09 is recorded: the replay keeps it and REPORT.md shows its numbers, not a placeholder
    (a study nobody recorded yet is skipped and said: test_memory_systems_study, with 08)."""
    lines: list[str] = []
    paths = [reproduce.NOTEBOOK_DIR / "02_isolation.ipynb", reproduce.NOTEBOOK_DIR / "09_robustness.ipynb"]
    assert reproduce.recorded_notebooks("offline", paths, lines.append) == paths and not lines
    committed = profiles.REPO_ROOT / "outputs"  # not the module's scratch root (`output_root`)
    section = report.build_report("offline", committed).split("## 09 · Robustness")[1].split("\n## ")[0]
    assert "Not recorded yet" not in section
    assert (
        "| Qwen2.5-Coder-0.5B-Instruct-Q4_K_M | full_context | indirect | 40 |" in section
    )  # the drops table
    assert "Headline numbers (ours):** 292, each a cell of the tables below" in section  # counted, not listed
    assert "09 · Robustness" not in report.build_report("cpu_proof")  # no block, no folder: no section


@pytest.fixture
def _restore_output_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", profiles.OUTPUT_ROOT)  # diagnose sets it for its process


@pytest.mark.usefixtures("_restore_output_root")
def test_diagnose_suite_robustness_counts_its_calls_and_writes_the_drop_page(tmp_path: Path, capsys) -> None:
    arguments = ["--model", "fake-model", "--n", "1", "--difficulty", "easy", "--out", str(tmp_path)]
    arguments += ["--suite", "robustness"]
    with LocalOpenAIServer() as server:
        assert diagnose.main(["--base-url", server.base_url, *arguments]) == 0
        first_requests = server.request_count
        assert diagnose.main(["--base-url", server.base_url, *arguments]) == 0
        assert server.request_count == first_requests  # the second run came from the response cache
    printed = capsys.readouterr().out
    estimated_calls = int(printed.split("about ")[1].split(" calls")[0])
    directory = tmp_path / "diagnose-fake-model" / NOTEBOOK_ROBUSTNESS
    made = sum(json.loads(path.read_text())["totals"]["calls"] for path in directory.glob("*.manifest.json"))
    assert estimated_calls == made  # every twin's calls counted, not only the unperturbed set's
    # a twin's notes calls on the sessions it shares with its unperturbed episode are the same calls:
    # the response cache answers them, so the server sees fewer than the estimate
    assert first_requests < made
    questions = int(printed.split("estimate: ")[1].split(" questions")[0])
    assert questions == 1 + len(diagnose.diagnosis.SUITE_PERTURBATIONS)
    page = (directory / "DIAGNOSIS.md").read_text()
    assert "## Drop from the unperturbed twin" in page and "![drops](robustness_drops.png)" in page
    assert "k_facts-4" in page and "last_update_position-early" in page


@pytest.mark.usefixtures("_restore_output_root")
def test_diagnose_suite_robustness_refuses_longmemeval(capsys) -> None:
    arguments = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--suite", "robustness"]
    assert diagnose.main([*arguments, "--data", "longmemeval", "--estimate-only"]) == 2
    assert "--suite robustness perturbs synthetic episodes" in capsys.readouterr().err


def test_memory_policies_run_on_the_models_named_and_the_notes_agent_on_the_others() -> None:
    offline = profiles.load_profile("offline").robustness
    chosen = {spec["name"]: robustness_study.arms(offline, spec["name"]) for spec in offline.models}
    with_policies = [name for name, arms in chosen.items() if len(arms) > 2]
    assert with_policies == offline.memory_policy_models == ["Qwen2.5-Coder-0.5B-Instruct-Q4_K_M"]
    assert chosen[with_policies[0]] == [
        ("full_context", ""),
        ("bounded_memory", "notes"),
        ("bounded_memory", "append_truncate"),
        ("bounded_memory", "mem0"),
    ]
    for name, arms in chosen.items():
        if name not in with_policies:
            assert arms == [("full_context", ""), ("bounded_memory", "notes")]
    every = offline.model_copy(update={"memory_policy_models": None})
    assert all(len(robustness_study.arms(every, name)) == 4 for name in chosen)


def test_an_empty_study_folder_left_by_a_stopped_run_is_no_record(tmp_path: Path) -> None:
    # a live run stopped before its first file leaves an empty folder
    (tmp_path / "offline" / NOTEBOOK_ROBUSTNESS).mkdir(parents=True)
    text = report.build_report("offline", tmp_path)
    assert "_Not recorded yet: `configs/offline.yaml` has a `robustness:`" in text


def test_a_costly_policy_is_asked_fewer_pairs_and_perturbations_and_its_table_says_so(
    output_root: Path, tmp_path: Path
) -> None:
    scoped = {
        "pairs_per_policy": {"append_truncate": 2},
        "perturbations_per_policy": {"append_truncate": ["reverted"]},
    }
    data = _smoke_with(memory_policies=["notes", "append_truncate"], **scoped)
    profile = profiles.validate_profile(data, "configs/smoke.yaml")
    result = robustness_study.analyse_robustness(
        profile, robustness_study.run_robustness_models(profile, progress=False)
    )
    costly = [arm for arm in result.runs if arm.memory_policy == "append_truncate"]
    assert costly and all(arm.pairs == 2 and arm.perturbations == ("reverted",) for arm in costly)
    for arm in costly:  # only its 2 unperturbed episodes and their reverted twins were asked
        ids = arm.run.frame["episode_id"].tolist()
        assert len(ids) == 4 and sum("+" not in episode_id for episode_id in ids) == 2
    rows = result.drops[result.drops["memory_policy"] == "append_truncate"]
    assert set(rows["perturbation"]) == {"reverted"} and (rows["n"] == 2).all()
    notes = result.drops[
        (result.drops["memory_policy"] == "notes") & (result.drops["model"] == "fake-heuristic-server")
    ]
    assert len(notes) == len(profile.robustness.perturbations) and (notes["n"] == 3).all()
    robustness_study.write_robustness(result, tmp_path)  # the figure's panel has one bar, the table one row
    table = (tmp_path / "robustness_drops.md").read_text()
    assert (
        table.count("bounded_memory (append_truncate)") == 2 and (tmp_path / "robustness_drops.png").exists()
    )
