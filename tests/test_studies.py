"""The study functions behind notebooks 01-05, run under the `smoke` profile (fake model server).

Each study runs once per module into a temporary output root; the tests read back the files it
wrote (tables, CSVs, summary.json, figures) and check them against each other and the paper data.
The smoke model is a deterministic heuristic server: these tests check plumbing and bookkeeping,
not any model's accuracy.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from supersede_lib import profiles
from supersede_lib.agent.episode import Episode, Session, Turn
from supersede_lib.agent.rollout import CONDITIONS
from supersede_lib.eval.run_files import read_trajectories
from supersede_lib.eval.runner import RunSettings
from supersede_lib.models.chat import ChatResult
from supersede_lib.present.explorer import episode_explorer, episode_step_html, index_trajectories
from supersede_lib.results import paper_results
from supersede_lib.results.comparison import compare_conditions, correct_column
from supersede_lib.results.headings import (
    MATCHER,
    NOTEBOOK_ENVIRONMENT,
    NOTEBOOK_FRONTIER,
    NOTEBOOK_ISOLATION,
    NOTEBOOK_SCALE,
    format_pvalue,
    ours_label,
    percent,
)
from supersede_lib.results.outputs import study_warnings
from supersede_lib.studies import data_overview as data_overview_study
from supersede_lib.studies import environment_validation as environment_study
from supersede_lib.studies import frontier as frontier_study
from supersede_lib.studies import isolation as isolation_study
from supersede_lib.studies import scale as scale_study

SMOKE = profiles.load_profile("smoke")


def test_a_tiny_p_value_is_never_printed_as_zero() -> None:
    """Every study's tables print p with one function: four places, scientific below 0.0001."""
    assert format_pvalue(0.31050465907901537) == "0.3105"
    assert format_pvalue(0.0001) == "0.0001"
    assert format_pvalue(4.9e-5) == "4.9e-05"
    assert format_pvalue(4.396658681450787e-20) == "4.4e-20"
    assert format_pvalue(None) == format_pvalue(float("nan")) == "—"


@pytest.fixture(scope="module")
def output_root(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("outputs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(profiles, "OUTPUT_ROOT", root)
        yield root


@pytest.fixture(scope="module")
def isolation(output_root: Path, study_bars) -> isolation_study.IsolationResult:
    return isolation_study.run_isolation(profiles.load_profile("smoke"), progress=False)


@pytest.fixture(scope="module")
def frontier(output_root: Path, study_bars) -> frontier_study.FrontierResult:
    return frontier_study.run_frontier(profiles.load_profile("smoke"), progress=False)


@pytest.fixture(scope="module")
def scale(output_root: Path, study_bars) -> scale_study.ScaleResult:
    return scale_study.run_scale(profiles.load_profile("smoke"), progress=False)


@pytest.fixture(scope="module")
def environment(output_root: Path, study_bars) -> environment_study.EnvironmentValidationResult:
    return environment_study.run_environment_validation(profiles.load_profile("smoke"), progress=False)


def _summary(directory: Path) -> dict:
    summary = json.loads((directory / "summary.json").read_text())
    assert summary["profile"] == "smoke"
    assert summary["git"].keys() >= {"commit", "dirty"}
    for number in summary["numbers"]:
        assert number.keys() >= {"name", "value", "model", "data", "profile", "n"}, number
        assert number["profile"] == "smoke" and number["n"] > 0 and number["model"], number
    for name in summary["tables"] + summary["figures"]:
        assert (directory / name).exists(), name
    return summary


def _numbers(summary: dict) -> dict[tuple[str, str], dict]:
    return {(number["name"], number["model"]): number for number in summary["numbers"]}


def _table_text(directory: Path, name: str) -> str:
    text = (directory / name).read_text()
    assert text.startswith("| ")
    return text


# ------------------------------------------------------------------ 02 isolation


def test_isolation_files_accuracy_and_mcnemar_agree(isolation: isolation_study.IsolationResult) -> None:
    directory = isolation.output_dir
    assert directory == profiles.OUTPUT_ROOT / "smoke" / NOTEBOOK_ISOLATION
    n = SMOKE.isolation.episodes.n
    assert isolation.n == n
    for run in isolation.comparison.run_names.values():
        for suffix in (".csv", ".trajectories.jsonl", ".manifest.json"):
            assert (directory / f"{run}{suffix}").exists()
    per_question = pd.read_csv(directory / "per_question.csv")
    assert len(per_question) == n and per_question["episode_id"].is_unique
    accuracy = pd.read_csv(directory / "accuracy.csv").set_index("condition")
    for condition in CONDITIONS:
        value = accuracy.loc[condition, "accuracy"]
        assert 0.0 <= accuracy.loc[condition, "ci_low"] <= value <= accuracy.loc[condition, "ci_high"] <= 1.0
        assert value == pytest.approx(per_question[f"correct_{condition}"].mean())
    mcnemar = json.loads((directory / "mcnemar.json").read_text())
    assert mcnemar.keys() >= {"b", "c", "n", "p_exact", "p_chi2_corrected"}
    full, bounded = per_question["correct_full_context"], per_question["correct_bounded_memory"]
    assert mcnemar["b"] == int((full & ~bounded).sum()) and mcnemar["c"] == int((bounded & ~full).sum())
    assert 0.0 <= mcnemar["p_exact"] <= 1.0 and 0.0 <= mcnemar["p_chi2_corrected"] <= 1.0
    assert (directory / "accuracy.png").stat().st_size > 1000


def test_isolation_table_keeps_paper_and_ours_in_separate_columns(
    isolation: isolation_study.IsolationResult,
) -> None:
    directory = isolation.output_dir
    header = _table_text(directory, "table1_isolation.md").splitlines()[0]
    paper = f"paper (gpt-4.1-mini, LongMemEval, n={paper_results.TABLE1_N})"
    ours = f"ours (fake-heuristic-server, synthetic, hard preset, smoke, n={isolation.n})"
    assert header == f"| measure | {paper} | {ours} |"
    table = pd.read_csv(directory / "table1_isolation.csv").set_index("measure")
    row = paper_results.TABLE1_ISOLATION[0]
    assert table.loc["full context accuracy [95% Wilson]", paper] == percent(row["full_context"])
    assert table.loc["McNemar b (full right, bounded wrong)", paper] == str(row["mcnemar_b"])
    assert table.loc["McNemar b (full right, bounded wrong)", ours] == str(isolation.mcnemar["b"])
    ours_full = table.loc["full context accuracy [95% Wilson]", ours]
    assert ours_full.startswith(percent(isolation.comparison.accuracy_of("full_context")))
    assert table.loc["grader", ours] == MATCHER


def test_isolation_summary_and_failure_breakdown(isolation: isolation_study.IsolationResult) -> None:
    directory = isolation.output_dir
    summary = _summary(directory)
    numbers = _numbers(summary)
    full = numbers[("accuracy full_context", "fake-heuristic-server")]
    assert full["value"] == pytest.approx(isolation.comparison.accuracy_of("full_context"))
    assert full["data"] == "synthetic, hard preset" and full["grader"] == MATCHER
    trajectories = read_trajectories(
        directory / f"{isolation.comparison.run_names['bounded_memory']}.trajectories.jsonl"
    )
    breakdown = pd.read_csv(directory / "failure_breakdown.csv")
    assert len(breakdown) + isolation.comparison.failures.attrs.get("skipped", 0) == len(trajectories)
    counts = isolation.failure_counts.set_index("model")
    assert counts.loc["fake-heuristic-server", "total"] == len(breakdown)
    bounded_correct = pd.read_csv(directory / "per_question.csv")["correct_bounded_memory"].sum()
    assert counts.loc["fake-heuristic-server", "correct"] <= bounded_correct


# ------------------------------------------------------------------ 03 frontier


def test_frontier_covers_every_model_with_paper_columns_apart(
    frontier: frontier_study.FrontierResult,
) -> None:
    directory = frontier.output_dir
    models = [spec["name"] for spec in SMOKE.frontier.models]
    accuracy = pd.read_csv(directory / "accuracy.csv")
    assert sorted(accuracy["model"].unique()) == sorted(models)
    assert len(accuracy) == 2 * len(models)
    assert accuracy["accuracy"].between(0, 1).all() and (accuracy["n"] == frontier.n).all()
    mcnemar = pd.read_csv(directory / "mcnemar.csv")
    assert list(mcnemar["model"]) == models and (mcnemar["b"] + mcnemar["c"] <= frontier.n).all()
    table = pd.read_csv(directory / "table1_frontier.csv")
    paper_models = [row["model"] for row in paper_results.TABLE1_ISOLATION]
    paper_column = next(
        column for column in table.columns if column.startswith("paper (") and column.endswith("model")
    )
    ours_column = next(
        column for column in table.columns if column.startswith("ours (") and column.endswith("model")
    )
    assert list(table[paper_column]) == paper_models + ["—"] * (len(table) - len(paper_models))
    assert [value for value in table[ours_column] if value != "—"] == models
    assert f"n={frontier.n}" in ours_column and "smoke" in ours_column
    summary = _summary(directory)
    assert summary["model"] == models
    assert {number["model"] for number in summary["numbers"]} == set(models)
    assert (directory / "figure2_frontier.png").stat().st_size > 1000


# ------------------------------------------------------------------ 04 scale


def test_scale_conditions_budgets_and_answer_differences(scale: scale_study.ScaleResult) -> None:
    directory = scale.output_dir
    accuracy = pd.read_csv(directory / "accuracy.csv").set_index("condition")
    assert list(accuracy.index) == list(scale_study.SCALE_CONDITIONS)
    assert accuracy["accuracy"].between(0, 1).all()
    assert accuracy.loc["short_fixed", "mean_notes_budget_chars"] == SMOKE.scale.notes_budget_chars
    per_session = SMOKE.scale.chars_per_session
    long_row = accuracy.loc["long_per_session"]
    assert long_row["mean_notes_budget_chars"] == pytest.approx(per_session * long_row["mean_sessions"])
    extra = SMOKE.scale.long.extra_distractor_sessions
    assert long_row["mean_sessions"] == pytest.approx(accuracy.loc["short_fixed", "mean_sessions"] + extra)
    n = SMOKE.scale.long.n
    assert scale.n == n and 0 <= scale.answers_differ <= scale.answers_compared == n
    runs = {
        name: pd.read_csv(directory / f"{name}__fake-heuristic-server.csv", keep_default_na=False)
        for name in ("long_fixed", "long_per_session")
    }
    fixed, ratio = (runs[name].set_index("episode_id")["answer"].str.strip() for name in runs)
    differ = int((fixed != ratio.loc[fixed.index]).sum())
    assert scale.answers_differ == differ
    assert scale.mcnemar_long["b"] + scale.mcnemar_long["c"] <= n
    assert scale.mcnemar_short_long is not None and scale.mcnemar_short_long["n"] == n  # paired via base ids
    text = _table_text(directory, "table2_scale.md")
    assert f"paper (gpt-4.1-mini, LongMemEval, n={paper_results.TABLE2_N})" in text
    assert f"| {paper_results.SCALE_ANSWERS_DIFFER}/{paper_results.TABLE2_N} |" in text
    assert f"{scale.answers_differ}/{n}" in text
    numbers = _numbers(_summary(directory))
    assert (
        numbers[("answers differ long_fixed vs long_per_session", "fake-heuristic-server")]["value"] == differ
    )
    assert (directory / "figure3_scale.png").exists()


# ------------------------------------------------------------------ 05 environment validation


def test_environment_rollouts_terminate_and_match_the_runner(
    environment: environment_study.EnvironmentValidationResult,
) -> None:
    directory = environment.output_dir
    n = SMOKE.environment.episodes.n
    rollouts = pd.read_csv(directory / "environment_rollouts.csv")
    assert len(rollouts) == environment.n == n
    assert environment.all_terminated and rollouts["terminated"].all()
    assert (rollouts["turns"] == rollouts["n_sessions"] + 1).all()
    assert environment.environment_accuracy == pytest.approx(rollouts["answered_current"].mean())
    assert 0.0 <= environment.environment_accuracy <= 1.0 and 0.0 <= environment.reference_accuracy <= 1.0
    # the environment sent exactly the runner's prompts: every request replayed from the runner's cache
    assert environment.served.requests == int(rollouts["turns"].sum())
    assert environment.served.cached == environment.served.requests
    assert environment.answers_identical == n
    text = _table_text(directory, "environment_validation.md")
    assert f"paper (gpt-4.1-mini, LongMemEval, n={paper_results.TABLE1_N})" in text
    assert percent(paper_results.ENVIRONMENT_MATCHER_ACCURACY) in text
    assert f"{n}/{n}" in text


def test_saturation_check_runs_full_context_on_templated_episodes(
    environment: environment_study.EnvironmentValidationResult,
) -> None:
    spec = SMOKE.saturation.episodes
    assert len(environment.saturation) == spec.n
    assert set(environment.saturation["condition"]) == {"full_context"}
    assert environment.saturation_accuracy == pytest.approx(
        (environment.saturation["verdict"] == "correct").mean()
    )
    numbers = _numbers(_summary(environment.output_dir))
    saturation = numbers[("saturation full_context accuracy", "fake-heuristic-server")]
    assert saturation["n"] == spec.n and saturation["data"] == spec.label
    assert "paper (frontier models, templated synthetic)" in _table_text(
        environment.output_dir, "saturation.md"
    )


# ------------------------------------------------------------------ 01 data


def test_data_overview_statistics_and_generator_samples(output_root: Path) -> None:
    from supersede_lib.data import synthetic

    overview = data_overview_study.data_overview(profiles.load_profile("smoke"))
    directory = overview.output_dir
    assert (directory / "statistics_summary.md").exists() and (directory / "generator_samples.json").exists()
    isolation_label = SMOKE.isolation.episodes.label
    assert len(overview.statistics[isolation_label]) == SMOKE.isolation.episodes.n
    presets = [*synthetic.DIFFICULTY_LADDER, synthetic.EXPLICIT_TEMPLATED]
    assert list(overview.generator_samples["difficulty"]) == presets
    samples = json.loads((directory / "generator_samples.json").read_text())
    assert list(samples) == presets
    assert all(Episode.from_dict(record).superseded_values for record in samples.values())
    assert [episode.episode_id for episode in overview.episodes] == list(
        overview.statistics[isolation_label]["episode_id"]
    )
    numbers = {(number["name"], number["data"]): number for number in _summary(directory)["numbers"]}
    isolation_stats = overview.statistics[isolation_label]
    assert numbers[("questions", isolation_label)]["value"] == len(isolation_stats)
    mean_sessions = numbers[("mean n_sessions per question", isolation_label)]
    assert mean_sessions["value"] == pytest.approx(isolation_stats["n_sessions"].mean())
    long_label = SMOKE.scale.long.label
    assert numbers[("mean n_sessions per question", long_label)]["value"] == pytest.approx(
        overview.statistics[SMOKE.scale.short.label]["n_sessions"].mean()
        + SMOKE.scale.long.extra_distractor_sessions
    )


def test_latest_trajectories_reads_the_isolation_run(isolation: isolation_study.IsolationResult) -> None:
    trajectories = data_overview_study.latest_trajectories(profiles.load_profile("smoke"))
    assert trajectories is not None
    assert {trajectory["episode_id"] for trajectory in trajectories} == set(
        isolation.comparison.per_question["episode_id"]
    )


# ------------------------------------------------------------------ explorer


def _episode() -> Episode:
    sessions = tuple(
        Session(
            f"s{index}",
            f"2023/05/0{index + 1} (Mon) 10:00",
            (Turn("user", f"I live in <city{index}>", has_answer=index == 1),),
        )
        for index in range(2)
    )
    return Episode("ep-x", sessions, "Where do I live?", "2023/06/01 (Thu) 10:00", ("city1",), ("city0",))


def test_explorer_step_html_shows_session_notes_and_answer() -> None:
    trajectory = {
        "episode_id": "ep-x",
        "notes_history": ["lives in city0", "lives in city1 & more"],
        "holds_current": [False, True],
        "holds_stale": [True, False],
        "notes_budget_chars": 300,
        "answer": "city1",
        "verdict": "correct",
    }
    first = episode_step_html(_episode(), 1, trajectory)
    assert "Session 1/2" in first and "I live in &lt;city0&gt;" in first
    assert (
        "lives in city0" in first
        and "holds a stale value" in first
        and "holds the current value" not in first
    )
    second = episode_step_html(_episode(), 2, trajectory)
    assert (
        "evidence session" in second
        and "lives in city1 &amp; more" in second
        and "holds the current value" in second
    )
    assert "2*" in second  # the evidence session is marked in the strip
    final = episode_step_html(_episode(), 3, trajectory)
    assert "Agent's answer" in final and "correct" in final
    assert "Final notes" in final and "lives in city1 &amp; more" in final
    assert "No run yet" in episode_step_html(_episode(), 1, None)
    with pytest.raises(ValueError, match="ep-x.*step must be 1..3"):
        episode_step_html(_episode(), 0)


def test_explorer_indexes_trajectories_and_builds_a_widget(tmp_path: Path) -> None:
    path = tmp_path / "run.trajectories.jsonl"
    path.write_text(json.dumps({"episode_id": "ep-x", "notes_history": ["n0", "n1"]}) + "\n")
    assert set(index_trajectories(path)) == {"ep-x"}
    with pytest.raises(ValueError, match=r"trajectories\[0\]: missing field 'episode_id'"):
        index_trajectories([{"answer": "x"}])
    shown = episode_explorer([_episode()], path)
    dropdown, slider, view = shown.box.children
    assert slider.min == 1 and slider.max == 3 and "Session 1/2" in view.value and "n0" in view.value
    slider.value = 2
    assert "n1" in view.value
    assert "Session 1/2" in shown.static_html and "Answer step" in shown.static_html  # for copies


# ------------------------------------------------------------------ exact values with a scripted model

EPISODE_TAG = re.compile(r"\[(ep-\d)\]")


def _city_episode(index: int, n_sessions: int = 3) -> Episode:
    """Session k says 'my city is city<k>'; the last city is current, the others superseded."""
    sessions = tuple(
        Session(
            f"ep-{index}-s{k}",
            f"2023/05/0{k + 1} (Mon) 10:00",
            (Turn("user", f"[ep-{index}] my city is city{k}"), Turn("assistant", "Noted.")),
        )
        for k in range(n_sessions)
    )
    return Episode(
        f"ep-{index}",
        sessions,
        f"[ep-{index}] Which city do I live in now?",
        "2023/06/01 (Thu) 10:00",
        (f"city{n_sessions - 1}",),
        tuple(f"city{k}" for k in range(n_sessions - 1)),
    )


class ScriptedModel:
    """Full context right on `full_right`, bounded answers right on `bounded_right`; ep-2's notes stay empty."""

    name = "scripted"

    def __init__(self, full_right: set[str], bounded_right: set[str]) -> None:
        self.full_right, self.bounded_right = full_right, bounded_right

    async def achat(self, messages, *, max_tokens=None, temperature=0.0, seed=0) -> ChatResult:
        text = messages[-1]["content"]
        episode_id = EPISODE_TAG.findall(text)[-1]
        if "New conversation (" in text:
            city = re.findall(r"my city is (city\d)", text)[-1]
            return ChatResult("nothing yet" if episode_id == "ep-2" else f"lives in {city}")
        if "Conversation history:" in text:
            return ChatResult("city2" if episode_id in self.full_right else "city0")
        return ChatResult("city2" if episode_id in self.bounded_right else "I don't know")


@pytest.mark.parametrize(
    ("study", "notebook"),
    [
        ("isolation", NOTEBOOK_ISOLATION),
        ("frontier", NOTEBOOK_FRONTIER),
        ("scale", NOTEBOOK_SCALE),
        ("environment", NOTEBOOK_ENVIRONMENT),
    ],
)
def test_a_study_counts_every_run_on_one_bar(study: str, notebook: str, study_bars, request) -> None:
    result = request.getfixturevalue(study)
    [bar] = [bar for bar in study_bars if notebook in bar.description]
    trajectories = [
        trajectory
        for path in sorted(result.output_dir.glob("*.trajectories.jsonl"))
        for trajectory in read_trajectories(path)
    ]
    turns = [turn for trajectory in trajectories for turn in trajectory["turns"]]
    # environment: the runner's two runs; verifiers' rollouts keep their own bar and write no trajectories
    assert bar.done == bar.total == len(trajectories) > 0
    assert bar.cached_calls == sum(turn["cached"] for turn in turns)
    assert bar.live_calls == len(turns) - bar.cached_calls
    assert bar.live_tokens == sum(
        turn["prompt_tokens"] + turn["completion_tokens"] for turn in turns if not turn["cached"]
    )


def test_compare_conditions_counts_exactly_what_the_model_did(tmp_path: Path) -> None:
    episodes = [_city_episode(index) for index in range(4)]
    model = ScriptedModel(full_right={"ep-0", "ep-1", "ep-2"}, bounded_right={"ep-0", "ep-3"})
    comparison = compare_conditions(
        episodes, model, RunSettings(concurrency=2), directory=tmp_path, progress=False
    )

    assert comparison.n == 4 and comparison.grader == MATCHER
    assert comparison.accuracy_of("full_context") == 0.75 and comparison.accuracy_of("bounded_memory") == 0.5
    assert (comparison.mcnemar["b"], comparison.mcnemar["c"], comparison.mcnemar["n"]) == (2, 1, 4)
    assert comparison.mcnemar["p_exact"] == pytest.approx(1.0)  # 2 vs 1 discordant: no evidence
    per_question = comparison.per_question.set_index("episode_id")
    assert per_question.loc["ep-3", "verdict_full_context"] == "stale"
    assert per_question.loc["ep-1", "final_notes"] == "lives in city2"
    failures = comparison.failures.set_index("episode_id")["failure"].to_dict()
    assert failures == {
        "ep-0": "correct",
        "ep-1": "held_but_missed",
        "ep-2": "notes_never_written",  # "nothing yet" after every session: memory never written
        "ep-3": "correct",
    }
    memory = comparison.memory.iloc[0]
    states = sum(len(episode.sessions) for episode in episodes)
    assert memory["n_trajectories"] == 4 and memory["n_rewrites"] == states
    assert memory["empty_share"] == pytest.approx(len(episodes[2].sessions) / states)
    assert memory["holds_current_share"] == pytest.approx(3 / 4)  # every final note but ep-2's holds city2
    assert memory["echo_share"] == 0
    assert (tmp_path / f"{comparison.run_names['bounded_memory']}.trajectories.jsonl").exists()

    ours = ours_label("scripted", "toy", "unit", 4)
    table = isolation_study.isolation_table(
        comparison, ours, paper_results.TABLE1_ISOLATION[0], "paper"
    ).set_index("measure")
    assert table.loc["full context accuracy [95% Wilson]", ours].startswith("75.0% [")
    assert table.loc["gap (points)", ours] == "25.0" and table.loc["gap (points)", "paper"] == "19.0"


def test_correct_column_uses_the_judge_only_when_asked() -> None:
    frame = pd.DataFrame(
        {
            "episode_id": ["a", "b"],
            "verdict": ["correct", "wrong"],
            "judge_correct": pd.Series([False, True], dtype=object),
        }
    )
    assert list(correct_column(frame, use_judge=False)) == [True, False]
    assert list(correct_column(frame, use_judge=True)) == [False, True]
    frame.loc[1, "judge_correct"] = None
    with pytest.raises(ValueError, match=r"field 'judge_correct'.*\['b'\]"):
        correct_column(frame, use_judge=True)


LONGMEMEVAL_SAMPLES = profiles.REPO_ROOT.parent / "shared" / "longmemeval-samples"


@pytest.mark.skipif(
    not (LONGMEMEVAL_SAMPLES / "lme_s_ku_real1.json").exists(), reason="no LongMemEval samples"
)
def test_data_overview_on_real_longmemeval_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One real knowledge-update question: its 2 oracle evidence sessions and its 39 `_s` sessions."""
    data_dir = tmp_path / "longmemeval"
    data_dir.mkdir()
    (data_dir / "longmemeval_oracle.json").symlink_to(LONGMEMEVAL_SAMPLES / "lme_oracle_ku_real1.json")
    (data_dir / "longmemeval_s_cleaned.json").symlink_to(LONGMEMEVAL_SAMPLES / "lme_s_ku_real1.json")
    monkeypatch.setenv("SUPERSEDE_LONGMEMEVAL_DIR", str(data_dir))
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path / "outputs")
    oracle = {"source": "longmemeval", "split": "oracle", "n": 1}
    profile = profiles.load_profile(
        "smoke",
        {"isolation": {"episodes": oracle}, "scale": {"short": oracle, "long": {**oracle, "split": "s"}}},
    )
    overview = data_overview_study.data_overview(profile)
    assert list(overview.statistics) == [
        "LongMemEval knowledge-update, oracle",
        "LongMemEval knowledge-update, s",
    ]
    oracle_stats, s_stats = overview.statistics.values()
    assert list(oracle_stats["episode_id"]) == list(s_stats["episode_id"]) == ["852ce960"]
    assert oracle_stats["n_sessions"].item() == 2 and s_stats["n_sessions"].item() == 39
    assert s_stats["total_chars"].item() > 10 * oracle_stats["total_chars"].item()
    summary = pd.read_csv(overview.output_dir / "statistics_summary.csv").set_index("episode_set")
    assert summary.loc["LongMemEval knowledge-update, s", "mean_n_sessions"] == 39
    assert [episode.episode_id for episode in overview.episodes] == ["852ce960"]


def test_a_study_collects_and_prints_the_warnings_of_its_runs(tmp_path: Path, capsys) -> None:
    from supersede_lib.eval.runner import RunSettings, run_condition
    from supersede_lib.models.chat import ChatResult

    class CutsEveryReply:
        name = "cutting-model"

        async def achat(self, messages, *, max_tokens=None, temperature=0.0, seed=0):
            return ChatResult("city", finish_reason="length")

    run_condition([_city_episode(0)], "bounded_memory", CutsEveryReply(), RunSettings(), output_dir=tmp_path)
    warnings = study_warnings(tmp_path)
    assert len(warnings) == 1 and "cutting-model" in warnings[0] and "4 of 4 calls were cut" in warnings[0]


def test_memory_tables_show_shares_as_percent_and_keep_numbers_in_csv(tmp_path) -> None:
    import pandas as pd

    from supersede_lib.results.comparison import shares_as_percent
    from supersede_lib.results.outputs import write_table

    frame = pd.DataFrame({"model": ["m"], "changed_share": [0.8313], "empty_share": [float("nan")]})
    write_table(tmp_path, "memory_metrics", frame, "note", shown=shares_as_percent(frame))
    assert "| m | 83% |  |" in (tmp_path / "memory_metrics.md").read_text()
    assert pd.read_csv(tmp_path / "memory_metrics.csv")["changed_share"].tolist() == [0.8313]
