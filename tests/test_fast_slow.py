"""Notebook 10, the fast-and-slow study (docs/fast-slow-log.md): the `fast_slow:` block is checked when
the profile is read, the pre-registered label follows its written rule (kept and broken cases), the
curve reads the recorded GRPO metrics, and the whole study runs on the fake server (GEPA) and the tiny
model (07's engine, a kept adapter), then replays from its recorded replies without the weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.colors import to_rgba

from supersede_lib import profiles
from supersede_lib.studies import fast_slow

PREREG = profiles.load_profile("cpu_proof_prereg")


def _prereg_with(**changes: object) -> dict:
    data = PREREG.model_dump(mode="json", exclude_unset=True)
    data["fast_slow"] = {**data["fast_slow"], **changes}
    return data


def test_the_prereg_block_states_what_the_preregistration_fixes() -> None:
    block = PREREG.fast_slow
    assert block.budgets == [160, 640] and block.combination_budget == 160
    assert (block.validation_n, block.minibatch_size, block.seed) == (20, 3, 0)
    assert "0.5b" in block.task_model["model_file"] and "1.5b" in block.reflection_model["model_file"]
    assert block.task_model["engine"] == "llamacpp" and block.reflection_model["engine"] == "llamacpp"
    assert (block.arm, block.verdict_seeds, block.max_instruction_chars) == ("verdict", [11, 12, 13], 2000)
    sets = {item.name: item for item in PREREG.transfer.evaluations}
    assert sets[block.selection].episodes.seed == 7301 and sets[block.selection].episodes.n == 100
    assert sets[block.test].episodes.seed == 7401 and sets[block.test].engine == "prefix_cache"
    assert sets[block.reference].prompt_variant == "v12_line_edits_repaired"
    settings = fast_slow.agent_settings(PREREG)
    assert (settings.prompt_variant, settings.notes_budget_chars) == ("v12_line_edits_times_kept", 300)
    assert settings.max_tokens_notes == settings.max_tokens_answer == 48
    assert [twin.label for twin in block.twins] == ["verdict s11 twin", "verdict s12 twin"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"arm": "sparse"}, "fast_slow.arm: no arm 'sparse' in training.arms"),
        ({"budgets": [640, 160]}, "fast_slow.budgets: budgets must rise and differ"),
        ({"budgets": [0, 160]}, "fast_slow.budgets[0]: must be >= 1"),
        ({"combination_budget": 320}, "combination_budget: 320 is not one of budgets"),
        ({"selection": "nowhere"}, "fast_slow.selection: no set 'nowhere' in transfer.evaluations"),
        ({"test": "hard-x"}, "fast_slow.test: no set 'hard-x'"),
        ({"validation_n": 100}, "fast_slow.validation_n: 100 leaves no training episode"),
        ({"verdict_seeds": [11, 99]}, "fast_slow.verdict_seeds: [11, 99] are not all seeds of arm 'verdict'"),
        ({"twins": [{"label": "s11"}]}, "fast_slow.twins: each twin names its kept adapter"),
        ({"task_model": {"backend": "embedded", "no_such_key": 1}}, "fast_slow.task_model"),
        ({"reflection": {"name": "x"}}, "fast_slow.reflection: unknown key (allowed: task_model"),
        ({"seed": -1}, "fast_slow.seed: must be >= 0"),
    ],
)
def test_the_block_is_checked_when_the_profile_is_read(change: dict, message: str) -> None:
    with pytest.raises(profiles.ProfileError) as error:
        profiles.validate_profile(_prereg_with(**change), "configs/x.yaml")
    assert str(error.value).startswith("configs/x.yaml: ") and message in str(error.value)


# --------------------------------------------------------------------------------------------- the label


def _seed(diff: float, p_holm: float) -> fast_slow.Paired:
    return fast_slow.Paired("verdict sN", 200, diff, diff - 0.05, diff + 0.05, 1, 1, p_holm, p_holm)


BEATS_REFERENCE = fast_slow.Paired(fast_slow.REFERENCE, 200, 0.2, 0.1, 0.3, 50, 10, 1e-6)
TIES = (0.0, 1.0)
WORSE, BETTER_BY = (-0.2, 0.001), (0.2, 0.001)


@pytest.mark.parametrize(
    ("reference", "seeds", "label"),
    [
        (BEATS_REFERENCE, [TIES, TIES, TIES], fast_slow.AS_GOOD),
        (BEATS_REFERENCE, [WORSE, TIES, TIES], fast_slow.AS_GOOD),  # not worse than 2 of 3
        (BEATS_REFERENCE, [WORSE, WORSE, TIES], fast_slow.FALLS_SHORT),
        (BEATS_REFERENCE, [(-0.2, 0.06), (-0.2, 0.06), TIES], fast_slow.AS_GOOD),  # lower, not significant
        (BEATS_REFERENCE, [BETTER_BY, BETTER_BY, WORSE], fast_slow.BETTER),
        (BEATS_REFERENCE, [BETTER_BY, TIES, WORSE], fast_slow.AS_GOOD),  # better than only 1
        (BEATS_REFERENCE, [BETTER_BY, BETTER_BY, BETTER_BY], fast_slow.BETTER),
        # the reference not beaten: p just over 0.05, or higher p-wise but lower in accuracy
        (fast_slow.Paired("r", 200, 0.1, 0.0, 0.2, 30, 18, 0.051), [BETTER_BY] * 3, fast_slow.FALLS_SHORT),
        (fast_slow.Paired("r", 200, -0.2, -0.3, -0.1, 10, 50, 1e-6), [TIES] * 3, fast_slow.FALLS_SHORT),
    ],
)
def test_the_label_follows_the_preregistered_rule(reference, seeds, label) -> None:
    assert fast_slow.rl_label(reference, [_seed(*seed) for seed in seeds]) == label


def test_holm_and_the_paired_test_read_the_right_numbers() -> None:
    ids = [f"e{i}" for i in range(40)]
    gepa = pd.Series([True] * 30 + [False] * 10, index=ids)
    other = pd.Series([True] * 10 + [False] * 30, index=ids)
    result = fast_slow.paired("x", gepa, other, resamples=200)
    assert (result.n, result.b, result.c) == (40, 20, 0) and result.diff == pytest.approx(0.5)
    assert result.low <= 0.5 <= result.high and result.p_exact < 1e-5
    seeds = fast_slow.with_holm([result, fast_slow.paired("y", gepa, gepa, resamples=200)])
    assert seeds[0].p_holm == pytest.approx(2 * result.p_exact) and seeds[1].p_holm == 1.0


# --------------------------------------------------------------------------------------------- the curve


def test_the_curve_reads_the_recorded_grpo_metrics_and_gepas_best_so_far(capsys) -> None:
    training = profiles.OUTPUT_ROOT / "cpu_proof_prereg" / "06_grpo_training"
    curve = fast_slow.grpo_curve(training, "verdict", [11, 12, 13, 99], per_step=8)
    assert "verdict s99: no training curve" in capsys.readouterr().out
    s11 = curve[curve["method"] == "GRPO verdict s11"]
    assert list(s11["rollouts"]) == list(range(8, 161, 8))
    first = json.loads((training / "verdict__seed-11.metrics.jsonl").read_text().splitlines()[0])
    assert s11["score"].iloc[0] == first["success_rate"]
    assert set(curve["method"]) == {f"GRPO verdict s{seed}" for seed in (11, 12, 13)}
    optimisation = {"found_at_metric_calls": [0, 46, 29], "validation_scores": [0.3, 0.25, 0.45]}
    gepa = fast_slow.gepa_curve(optimisation, "GEPA 160")
    assert list(gepa["rollouts"]) == [0, 29, 46] and list(gepa["score"]) == [0.3, 0.45, 0.45]
    unchanged = {"found_at_metric_calls": [0], "validation_scores": [0.25], "metric_calls": 161}
    flat = fast_slow.gepa_curve(unchanged, "GEPA 160")  # nothing better found: a line to the calls spent
    assert list(flat["rollouts"]) == [0, 161] and list(flat["score"]) == [0.25, 0.25]
    points = pd.DataFrame(
        {"model": ["verdict s11", "GEPA 160"], "rollouts": [160, 161], "accuracy": [0.6, 0.3]}
    )
    figure = fast_slow.curve_figure(pd.concat([curve, flat]), points, "t")
    axis = figure.axes[0]
    line = next(line for line in axis.get_lines() if line.get_label().startswith("GRPO verdict s11"))
    marker = next(item for item in axis.collections if item.get_label() == "verdict s11: test accuracy")
    assert tuple(marker.get_facecolor()[0]) == to_rgba(line.get_color())  # one colour a run


# --------------------------------------------------------------------------------------------- end to end


def _tiny_prereg(record: Path, tmp_path: Path) -> profiles.Profile:
    """The prereg profile shrunk: 6 selection episodes (2 validate), 3 test episodes, budgets 8 and 12,
    one kept twin (`record`) and one whose record is not there, 1 pair on 2 perturbations."""
    data = PREREG.model_dump(mode="json", exclude_unset=True)
    sizes = {"selection": 6, "test": 3, "test-format-controlled": 3}
    data["transfer"]["evaluations"] = [
        {**item, "episodes": {**item["episodes"], "n": sizes[item["name"]]}, "models": ["base"]}
        for item in data["transfer"]["evaluations"]
        if item["name"] in sizes
    ]
    data["robustness"] |= {"episodes": {**data["robustness"]["episodes"], "n": 1}}
    data["robustness"]["perturbations"] = ["reverted", {"name": "k_facts", "k": 2}]
    data["robustness"]["trained"]["engine"] = "prefix_cache"  # the tiny model has no GGUF for llama.cpp
    data["fast_slow"] |= {
        "budgets": [8, 12],
        "combination_budget": 8,
        "validation_n": 2,
        "kl_probe_episodes": 1,
    }
    data["recorded_responses"] = "outputs/x/responses.jsonl.gz"
    profile = profiles.validate_profile(data, "configs/tiny.yaml")
    twins = [
        profile.fast_slow.twins[0].model_copy(update={"adapter": str(record)}),
        profile.fast_slow.twins[1].model_copy(update={"adapter": str(record.with_name("absent.json"))}),
    ]
    block = profile.fast_slow.model_copy(update={"twins": twins})
    copy = profile.model_copy(
        update={"fast_slow": block, "recorded_responses": str(tmp_path / "responses.jsonl.gz")}
    )
    copy._source = profile.source
    return copy


def _registered_files(profile: profiles.Profile, root: Path) -> None:
    """07's test files of the registered rows (answers only; the study re-grades them) and 06's curves."""
    from supersede_lib.data.episodes import load_episodes

    test = profile.evaluation("test")
    episodes = load_episodes(test.episodes)
    right = [episode.gold_answers[0] for episode in episodes]
    stale = [episode.superseded_values[0] for episode in episodes]
    for folder, label, answers in [
        ("test", "base", stale),
        ("test-format-controlled", "base", [right[0], *stale[1:]]),
        ("test", "verdict__seed-11__step-20", right),
        ("test", "verdict__seed-12__step-20", right[:2] + stale[2:]),
        ("test", "verdict__seed-13__step-20", stale),
    ]:
        path = root / profile.name / "07_transfer_eval" / folder / f"{label}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = {"episode_id": [e.episode_id for e in episodes], "answer": answers, "verdict": "unknown"}
        pd.DataFrame(rows | {"failed": False, "notes_hold_current": 1.0, "notes_hold_stale": 0.0}).to_csv(
            path
        )
    training = root / profile.name / "06_grpo_training"
    training.mkdir(parents=True)
    for seed in (11, 12, 13):
        name = f"verdict__seed-{seed}.metrics.jsonl"
        shutil.copy(profiles.OUTPUT_ROOT / "cpu_proof_prereg" / "06_grpo_training" / name, training / name)


def _models_on(server, monkeypatch: pytest.MonkeyPatch) -> None:
    """GEPA's task and reflection models: the fake server's (None: their recorded replies only)."""
    from supersede_lib.models.cache import CachedChatModel, RecordedRepliesOnly
    from supersede_lib.models.openai_api import COMPATIBLE_CACHE_NAMESPACE, OpenAIChatModel

    def model_for(spec: dict, profile: profiles.Profile) -> CachedChatModel:
        inner = (
            RecordedRepliesOnly(spec["name"], COMPATIBLE_CACHE_NAMESPACE)
            if server is None
            else OpenAIChatModel(
                spec["name"],
                base_url=server.base_url,
                api_key_env="SUPERSEDE_FAKE_KEY",
                max_retries=0,
                cache_namespace=COMPATIBLE_CACHE_NAMESPACE,
            )
        )
        return CachedChatModel(inner, profiles.profile_cache(profile), replay=True)

    monkeypatch.setattr(profiles, "model_for", model_for)


def test_the_study_runs_end_to_end_and_replays_without_the_weights(
    tiny_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from supersede_lib.models.local_server import LocalOpenAIServer
    from supersede_lib.train.kept_adapters import keep_adapter
    from tests.test_instruction import KEEP, FakeModels
    from tests.test_kept_adapters import _trained_checkpoint

    kept = keep_adapter(_trained_checkpoint(tiny_path, tmp_path / "checkpoint-20"), tmp_path / "kept", "twin")
    profile = _tiny_prereg(kept.record_path, tmp_path)
    outputs = tmp_path / "outputs"
    _registered_files(profile, outputs)
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", outputs)
    monkeypatch.setattr(fast_slow, "resolve_base_model", lambda config: str(tiny_path))
    monkeypatch.setattr(fast_slow, "BOOTSTRAP_RESAMPLES", 50)
    with LocalOpenAIServer(responder=FakeModels()) as server:
        _models_on(server, monkeypatch)
        first = fast_slow.run_fast_slow(profile, budgets=[8], progress=False)  # one budget first
        assert "GEPA 12: skipped (its GEPA run has not been made" in capsys.readouterr().out
        assert list(first.rows["model"])[5:] == ["GEPA 8", "GEPA 8 with verdict s11 twin"]
        assert set(first.labels) == {"GEPA 8"} and list(first.kl["model"]) == ["GEPA 8", "verdict s11 twin"]
        result = fast_slow.run_fast_slow(profile, progress=False)

    assert "verdict s12 twin: skipped (its kept adapter" in capsys.readouterr().out
    original = result.instructions["original"]
    assert original.startswith("You keep a memory file") and set(result.instructions) == {
        "original",
        "GEPA 8",
        "GEPA 12",
    }
    assert result.instructions["GEPA 12"] in (original, f"{original}\n{KEEP}")  # the fake reflection's
    models = list(result.rows["model"])
    assert models[:5] == ["base", fast_slow.REFERENCE, "verdict s11", "verdict s12", "verdict s13"]
    assert models[5:] == ["GEPA 8", "GEPA 12", "GEPA 8 with verdict s11 twin"]
    registered = result.rows.set_index("model")["correct"]
    assert (registered["base"], registered[fast_slow.REFERENCE], registered["verdict s11"]) == (0, 1, 3)
    assert set(result.labels) == {"GEPA 8", "GEPA 12"}
    assert set(result.labels.values()) <= {fast_slow.AS_GOOD, fast_slow.BETTER, fast_slow.FALLS_SHORT}
    comparisons = result.comparisons[result.comparisons["model"] == "GEPA 8"]
    assert list(comparisons["other"]) == [fast_slow.REFERENCE, "verdict s11", "verdict s12", "verdict s13"]
    assert set(result.curve["method"]) >= {"GEPA 8", "GEPA 12", "GRPO verdict s11"}
    assert list(result.kl["model"]) == ["GEPA 8", "GEPA 12", "verdict s11 twin"]
    assert result.kl.iloc[:2]["kl_per_token"].eq(0).all() and result.kl.iloc[2]["kl_per_token"] > 0
    assert list(result.cost["metric_calls"]) == [8, 12] or result.cost["metric_calls"].ge([8, 12]).all()
    assert result.cost["task_cached_calls"].between(0, result.cost["task_calls"]).all()
    assert set(result.drops["model"]) == {"GEPA 8", "GEPA 8 with verdict s11 twin"} and len(result.drops) == 4
    folder = result.output_dir
    for name in (
        "test_set.md",
        "comparisons.md",
        "cost.md",
        "kl_drift.md",
        "robustness_drops.md",
        "curve.png",
    ):
        assert (folder / name).exists(), name
    names = {
        path.stem.removesuffix(".manifest"): json.loads(path.read_text())["model"]["name"]
        for path in (folder / "test").glob("*.manifest.json")
    }
    assert "+lora@" in names["GEPA-8-with-verdict-s11-twin"] and "+lora@" not in names["GEPA-8"]
    config = json.loads((folder / "test" / "GEPA-8.manifest.json").read_text())["config"]
    assert config["notes_system"] == result.instructions["GEPA 8"]
    _notebook_cells_display(result)

    # a fresh clone: no weights, no server, the recorded replies and what a replay copies (no run rows)
    profiles.save_recorded_responses(profile)
    replay = tmp_path / "replay"
    from supersede_lib.reproduce.notebooks import _not_copied_into_a_replay

    shutil.copytree(outputs / profile.name, replay / profile.name, ignore=_not_copied_into_a_replay)
    shutil.rmtree(replay / profile.name / "cache", ignore_errors=True)
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", replay)
    monkeypatch.setattr(fast_slow, "resolve_base_model", lambda config: str(tmp_path / "no.gguf"))
    _models_on(None, monkeypatch)
    again = fast_slow.run_fast_slow(profile, progress=False)
    remade = replay / profile.name / "10_fast_slow" / "test"
    for name in ("GEPA-8", "GEPA-8-with-verdict-s11-twin"):  # remade from the recorded replies alone
        manifest = json.loads((remade / f"{name}.manifest.json").read_text())
        assert (remade / f"{name}.csv").exists() and manifest["provenance"]["live_calls"] == 0
    pd.testing.assert_frame_equal(again.rows, result.rows)
    pd.testing.assert_frame_equal(again.comparisons, result.comparisons)
    pd.testing.assert_frame_equal(again.kl, result.kl)
    pd.testing.assert_frame_equal(again.drops.reset_index(drop=True), result.drops.reset_index(drop=True))
    assert again.instructions == result.instructions and again.labels == result.labels


def test_a_minibatch_that_repeats_an_episode_runs_it_once_and_scores_each_place(tmp_path: Path) -> None:
    """GEPA's epoch sampler pads the last minibatch of an epoch with an id already in it (80 training
    episodes in batches of 3, as registered): the adapter must score it, not refuse the batch."""
    from supersede_lib.data.episodes import load_episodes
    from supersede_lib.instruction import NOTES_COMPONENT, NotesInstructionAdapter
    from supersede_lib.models.local_server import LocalOpenAIServer
    from tests.test_instruction import SETTINGS, FakeModels, cached_model

    episodes = load_episodes({"source": "synthetic", "n": 2, "difficulty": "easy", "seed": 7301})
    batch = [episodes[0], episodes[1], episodes[1]]
    with LocalOpenAIServer(responder=FakeModels()) as server:
        adapter = NotesInstructionAdapter(cached_model(server, tmp_path / "c.sqlite"), SETTINGS)
        result = adapter.evaluate(batch, {NOTES_COMPONENT: "Write notes."})
    assert len(result.scores) == 3 and result.scores[1] == result.scores[2]
    assert adapter.tally.episodes == 2


def test_the_cost_is_the_live_runs_never_a_replays_optimisation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay re-runs GEPA from recorded replies and rewrites optimisation.json with every call cached;
    the cost table reads `cost.json` (the live run's) alone, so a replay cannot change it."""
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    folder = fast_slow.gepa_folder(PREREG, 160)
    folder.mkdir(parents=True)
    cost = {
        "metric_calls": 161,
        "task_calls": 578,
        "task_cached_calls": 570,
        "reflection": {"calls": 29, "cached_calls": 29},
        "wall_s": 56.8,
    }
    (folder / fast_slow.COST_FILE).write_text(json.dumps(cost))
    (folder / "optimisation.json").write_text(json.dumps({"rollouts": {"cached_calls": 578}}))  # a replay's
    row = fast_slow.cost_table(PREREG, [160, 640]).iloc[0]  # 640 has no folder: no row
    assert (row["method"], row["task_cached_calls"], row["reflection_cached_calls"]) == ("GEPA 160", 570, 29)
    del cost["task_cached_calls"]  # a cost.json written before the count: shown as unknown, not guessed
    (folder / fast_slow.COST_FILE).write_text(json.dumps(cost))
    shown = fast_slow.cost_display(fast_slow.cost_table(PREREG, [160]).assign(cpu="x")).iloc[0]
    assert shown["task calls (cached)"] == "578 (—)"


def test_a_replay_skips_notebook_10_until_it_is_recorded_and_the_report_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether or not 10's record is committed, the rule is checked both ways: an unrecorded 10 is
    named and skipped (never run live in a replay), a recorded one is replayed."""
    from supersede_lib.reproduce import notebooks as reproduce
    from supersede_lib.reproduce import report

    path = reproduce.NOTEBOOK_DIR / "10_fast_slow.ipynb"
    assert path.exists() and reproduce.NOTEBOOK_BLOCKS["10"] == ("fast_slow",)
    lines: list[str] = []
    monkeypatch.setattr(reproduce, "has_committed_record", lambda folder: "10_fast_slow" not in folder)
    assert reproduce.recorded_notebooks("cpu_proof_prereg", [path], lines.append) == []
    assert "not recorded yet" in lines[0] and "--only 10 --live" in lines[0]
    monkeypatch.setattr(reproduce, "has_committed_record", lambda folder: True)
    assert reproduce.recorded_notebooks("cpu_proof_prereg", [path], lines.append) == [path]
    kept = reproduce.runnable_notebooks(
        profiles.load_profile("offline"), [path, path.with_name("02_isolation.ipynb")], lines.append
    )
    assert [item.name for item in kept] == ["02_isolation.ipynb"] and "has no fast_slow block" in lines[-1]
    (tmp_path / "cpu_proof_prereg").mkdir()  # an output root without 10_fast_slow/
    text = report.build_report("cpu_proof_prereg", output_root=tmp_path)
    assert (
        "## 10 · Fast and slow" in text and "has a `fast_slow:` block but there is no `10_fast_slow/`" in text
    )
    assert report.OPTIONAL_SECTIONS["10_fast_slow"] == "fast_slow"  # no block, no folder: no section


def _notebook_cells_display(result: fast_slow.FastSlowResult) -> None:
    """Notebook 10's display cells, run on `result` (the study call replaced by it): no cell fails."""
    import importlib.util

    from supersede_lib.studies import notebook

    path = profiles.REPO_ROOT / "notebooks" / "make_study_notebooks.py"
    spec = importlib.util.spec_from_file_location("make_study_notebooks", path)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    cells = [cell.source for cell in generator.fast_slow_notebook().cells if cell.cell_type == "code"]
    study = next(index for index, source in enumerate(cells) if "run_fast_slow(profile)" in source)
    names = {name: getattr(notebook, name) for name in generator.DISPLAY_HELPERS} | {"result": result}
    for source in cells[study:]:
        exec(source.replace("result = fast_slow.run_fast_slow(profile)", ""), names)  # noqa: S102


def test_an_instruction_is_judged_in_float32_like_the_registered_arms_on_a_bf16_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registered arms were judged by `HFChatModel-float32-prefix`: a CPU whose fastest dtype is bf16
    (AMX) must not judge the instructions compared with them in another dtype."""
    import torch

    from supersede_lib.models import cpu_features, hf
    from supersede_lib.studies import robustness
    from supersede_lib.studies.evaluation_sets import SetModel

    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda: "flags\t: avx512f avx512_bf16 amx_bf16")
    assert hf.fast_dtype("cpu") == torch.bfloat16  # what `auto` would pick here
    built: dict = {}
    monkeypatch.setattr(hf, "HFChatModel", lambda *args, **kwargs: built.update(kwargs) or "model")
    test_set = PREREG.evaluation(PREREG.require("fast_slow").test)
    assert robustness.TRAINED_ENGINES["prefix_cache"](
        PREREG, test_set, tmp_path, "base.gguf", SetModel("GEPA 160", None)
    )
    assert built["dtype"] == torch.float32 and built["prefix_cache"]


def test_the_markdown_tables_show_points_readable_p_values_and_named_units() -> None:
    """10's Markdown shows what a reader reads (the CSV keeps every digit): no bare 0.0000 for a tiny p,
    no seventeen-digit float, the cost's cached calls beside its calls."""
    comparisons = pd.DataFrame(
        [
            {"model": "GEPA 160", "other": "verdict s12", "n": 200, "diff": -0.455, "low": -0.535}
            | {"high": -0.375, "b": 10, "c": 101, "p_exact": 4.396658681450787e-20, "p_holm": 1.3e-19}
            | {"label": fast_slow.FALLS_SHORT},
            {"model": "GEPA 160", "other": fast_slow.REFERENCE, "n": 200, "diff": 0.035, "low": -0.025}
            | {"high": 0.095, "b": 21, "c": 14, "p_exact": 0.31050465907901537, "p_holm": float("nan")}
            | {"label": fast_slow.FALLS_SHORT},
        ]
    )
    shown = fast_slow.comparisons_display(comparisons).to_dict("records")
    assert shown[0]["difference, points [95% bootstrap]"] == "-45.5 [-53.5, -37.5]"
    assert (shown[0]["McNemar b / c"], shown[0]["p exact"], shown[0]["p Holm"]) == (
        "10 / 101",
        "4.4e-20",
        "1.3e-19",
    )
    assert (shown[1]["p exact"], shown[1]["p Holm"]) == ("0.3105", "—")
    kl = pd.DataFrame(
        [{"model": "twin", "kl_per_token": 0.30229317881, "kl_first_reply_token": 4.30912, "how": "m"}]
    )
    assert fast_slow.kl_display(kl).iloc[0].tolist() == ["twin", "0.302", "4.309", "m"]
    cost = pd.DataFrame(
        [
            {"method": "GEPA 640", "metric_calls": 641, "task_calls": 2318, "task_cached_calls": 2069}
            | {
                "task_prompt_tokens": 1124632,
                "task_completion_tokens": 20169,
                "wall_s": 7373.8,
                "cpu": "Xeon",
            }
            | {"reflection_calls": 123, "reflection_cached_calls": 29, "reflection_proposals": 80}
            | {"reflection_too_long": 38, "reflection_no_instruction": 5, "reflection_failed_calls": 0}
        ]
    )
    row = fast_slow.cost_display(cost).iloc[0]
    assert (row["task calls (cached)"], row["reflections (cached)"]) == ("2,318 (2,069)", "123 (29)")
    assert (row["skipped: too long / no instruction / failed"], row["wall, live part (min)"]) == (
        "38 / 5 / 0",
        "122.9",
    )
