"""Notebook 09 with trained policies (`robustness.trained`): the block is checked when the profile is
read, each policy runs with the agent its arm trained with (07's settings), a kept adapter not here
yet is skipped and said, a recorded run replays without the weights, and the predictions P1-P7 of
docs/robustness-log.md are judged by their written rules (synthetic per-pair tables, kept and broken)."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest

from supersede_lib import profiles
from supersede_lib.results import robustness_predictions as predictions
from supersede_lib.studies import evaluation_sets
from supersede_lib.studies import robustness as robustness_study

PREREG = profiles.load_profile("cpu_proof_prereg")
REFERENCE, S11, S12 = predictions.REFERENCE, predictions.TWINS["s11"], predictions.TWINS["s12"]
LABELS = [label for label, _ in PREREG.robustness.perturbed_specs()]


# --------------------------------------------------------------------------- the profile block


def _prereg_with(**trained: object) -> dict:
    data = PREREG.model_dump(mode="json", exclude_unset=True)
    data["robustness"]["trained"] = {**data["robustness"]["trained"], **trained}
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"arm": "sparse"},
            "robustness.trained.arm: no arm 'sparse' in training.arms (arms: verdict, format",
        ),
        ({"models": [{"adapter": "x.json"}]}, "robustness.trained.models[0].label: missing"),
        ({"models": [{"label": "base"}, {"label": "base"}]}, "robustness.trained.models: labels must differ"),
        ({"models": [{"label": "a b"}, {"label": "a-b"}]}, "robustness.trained.models: labels must differ"),
        ({"engine": "vllm"}, "robustness.trained.engine: must be one of"),
        (
            {"models": [{"label": "base", "prompt_variant": "v99"}]},
            "robustness.trained.models[0].prompt_variant",
        ),
        ({"models": [{"label": "base", "seed": 1}]}, "robustness.trained.models[0].seed: unknown key"),
    ],
)
def test_the_trained_block_is_checked_when_the_profile_is_read(change: dict, message: str) -> None:
    with pytest.raises(profiles.ProfileError) as error:
        profiles.validate_profile(_prereg_with(**change), "configs/x.yaml")
    assert str(error.value).startswith("configs/x.yaml: ") and message in str(error.value)


def test_trained_policies_need_a_transfer_block_and_something_must_run() -> None:
    data = _prereg_with()
    del data["transfer"]
    with pytest.raises(profiles.ProfileError, match="robustness.trained.arm: needs a transfer: block"):
        profiles.validate_profile(data, "configs/x.yaml")
    data = _prereg_with()
    del data["robustness"]["trained"]
    with pytest.raises(profiles.ProfileError, match="models: \\[\\] leaves nothing to run"):
        profiles.validate_profile(data, "configs/x.yaml")


def test_the_prereg_suite_is_the_offline_suite_with_the_logs_models() -> None:
    offline = profiles.load_profile("offline").robustness
    block = PREREG.robustness
    assert block.episodes == offline.episodes and block.perturbations == offline.perturbations
    assert block.episodes.n == 40 and block.conditions == ["bounded_memory"] and block.models == []
    labels = [policy.label for policy in block.trained.models]
    assert {REFERENCE, S11, S12} <= set(labels) and "base" in labels
    every_clause = {clause.perturbation for clause in predictions.CLAUSES}
    assert every_clause <= set(LABELS)  # every prediction reads a perturbation the suite runs
    assert set(robustness_study.TRAINED_ENGINES) == set(profiles.TRAINED_ENGINES)


def test_each_policy_runs_with_the_settings_07_judged_the_test_set_with() -> None:
    config = robustness_study.trained_config(PREREG)
    plans = {plan.policy.label: plan for plan in robustness_study.trained_plans(PREREG, config)}
    sets = {item.name: item for item in PREREG.transfer.evaluations}
    run = evaluation_sets.ConfigOnly(config)
    test = evaluation_sets.set_settings(PREREG, sets["test"], [run])
    controlled = evaluation_sets.set_settings(PREREG, sets["test-format-controlled"], [run])
    assert asdict(plans["base"].settings) == asdict(test)
    assert asdict(plans[REFERENCE].settings) == asdict(controlled)
    assert (test.prompt_variant, test.notes_budget_chars) == ("v12_line_edits_times_kept", 300)
    assert controlled.prompt_variant == "v12_line_edits_repaired"
    assert test.max_tokens_notes == test.max_tokens_answer == config.max_completion_length


def test_a_policy_whose_kept_adapter_is_not_here_is_skipped_and_named(capsys: pytest.CaptureFixture) -> None:
    block = PREREG.robustness.trained
    policies = {policy.label: policy for policy in block.models}
    missing = policies[S11].model_copy(update={"adapter": "outputs/nowhere/verdict__seed-11__twin.json"})
    profile = _with_trained(PREREG, block.model_copy(update={"models": [policies["base"], missing]}))
    plans = robustness_study.trained_plans(profile, robustness_study.trained_config(profile))
    assert [plan.policy.label for plan in plans] == ["base"]
    assert "verdict s11 twin: skipped (its kept adapter outputs/nowhere/" in capsys.readouterr().out


def test_recorded_replies_replay_only_for_the_adapter_that_made_them(tmp_path: Path) -> None:
    weights = tmp_path / "twin.safetensors"
    weights.write_bytes(b"lora")
    sha = hashlib.sha256(b"lora").hexdigest()
    record = tmp_path / "twin.json"
    record.write_text(json.dumps({"weights_file": weights.name, "sha256": sha}))
    assert robustness_study.recorded_with_adapter(record, f"model.gguf+lora@{sha[:16]}")
    assert not robustness_study.recorded_with_adapter(record, "model.gguf+lora@0123456789abcdef")
    assert robustness_study.recorded_with_adapter(None, "model.gguf")  # the base: no adapter to match


def _with_trained(profile: profiles.Profile, trained: object, **robustness: object) -> profiles.Profile:
    block = profile.robustness.model_copy(update={"trained": trained, **robustness})
    copy = profile.model_copy(update={"robustness": block})
    copy._source = profile.source
    return copy


# --------------------------------------------------------------------------- predictions, synthetic pairs


@pytest.fixture(autouse=True)
def _few_resamples(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules read the observed drop and the McNemar p, never the bootstrap interval: 20 resamples."""
    monkeypatch.setattr(robustness_study, "BOOTSTRAP_RESAMPLES", 20)


def _pairs(model: str, label: str, a: int, b: int, c: int, d: int) -> list[dict]:
    """a pairs right on both, b right only unperturbed, c right only perturbed, d wrong on both."""
    cells = [(True, True)] * a + [(True, False)] * b + [(False, True)] * c + [(False, False)] * d
    return [
        {
            "model": model,
            "condition": "bounded_memory",
            "memory_policy": "notes",
            "perturbation": label,
            "correct_unperturbed": first,
            "correct_perturbed": second,
            "verdict_unperturbed": "correct" if first else "stale",
            "verdict_perturbed": "correct" if second else "stale",
        }
        for first, second in cells
    ]


# every model right on both sides everywhere: the base 10/40, each twin 20/40 (a 25-point gain kept)
WORLD = {REFERENCE: (10, 0, 0, 30), S11: (20, 0, 0, 20), S12: (20, 0, 0, 20)}
FALL = (10, 10, 0, 20)  # 50% -> 25%: the twin's gain gone (and no significant drop: b = 10, p ~ 0.002 x Holm)
COLLAPSE = (0, 20, 0, 20)  # 50% -> 0%: a significant drop even after Holm


def _judge(changes: dict[tuple[str, str], tuple[int, int, int, int]], models=(REFERENCE, S11, S12)) -> dict:
    rows = []
    for model in models:
        for label in LABELS:
            rows += _pairs(model, label, *changes.get((model, label), WORLD[model]))
    per_pair = pd.DataFrame(rows)
    arms = [(model, "bounded_memory", "notes") for model in models]
    drops = robustness_study.pair_drops(per_pair, arms, LABELS)
    return predictions.judge_predictions(drops).set_index("prediction")["result"].to_dict()


@pytest.mark.parametrize(
    ("name", "kept", "broken"),
    [
        (
            "P1",
            {(S11, "k_facts-4"): (10, 10, 2, 18), (S11, "k_facts-2"): FALL, (S12, "k_facts-4"): FALL},
            {(S11, "k_facts-4"): (10, 10, 3, 17), (S11, "k_facts-2"): FALL, (S12, "k_facts-4"): FALL},
        ),
        (
            "P2",
            {(S11, "someone_else"): FALL, (S12, "someone_else"): FALL},
            # s12 keeps "less than half" of a negative gain (-5 -> -5) but drops no more than the base
            {(S11, "someone_else"): FALL, (S12, "someone_else"): (8, 0, 0, 32)},
        ),
        (
            "P3",
            {(S11, "considered_not_made"): FALL, (S12, "considered_not_made"): (14, 6, 0, 20)},
            {(S11, "considered_not_made"): FALL, (S12, "considered_not_made"): (15, 5, 0, 20)},
        ),
        (  # the base falls too (25% -> 0%): a twin's perturbed gain is read against the base's perturbed
            "P3",
            {(S11, "considered_not_made"): FALL, (S12, "considered_not_made"): FALL},
            {(twin, "considered_not_made"): FALL for twin in (S11, S12)}
            | {(REFERENCE, "considered_not_made"): (0, 10, 0, 30)},
        ),
        ("P4", {(S12, "reverted"): (15, 5, 0, 20)}, {(S11, "reverted"): COLLAPSE}),
        ("P4", {(S11, "reverted"): (0, 0, 20, 20)}, {(S12, "reverted"): (14, 6, 0, 20)}),
        # 6 of 40 pairs lost: p exact 0.03 but Holm 0.31 across s11's perturbations; 35 of a 50-point gain kept
        ("P5", {(S11, "past_tense_later"): (24, 6, 0, 10)}, {(S12, "past_tense_later"): COLLAPSE}),
        ("P6", {(S11, "held_out_vocab"): (15, 5, 0, 20)}, {(S11, "held_out_vocab"): (14, 6, 0, 20)}),
        (
            "P7",
            {(S11, "distractor_density-8"): COLLAPSE, (S11, "last_update_position-early"): COLLAPSE},
            {(S11, "distractor_density-8"): COLLAPSE, (S11, "last_update_position-early"): (0, 0, 20, 20)},
        ),
    ],
)
def test_each_prediction_is_kept_and_broken_by_its_written_rule(name: str, kept: dict, broken: dict) -> None:
    assert _judge(kept)[name] == predictions.KEPT
    assert _judge(broken)[name] == predictions.BROKEN


def test_the_untouched_world_keeps_the_shortcut_controls_and_breaks_the_shortcut_predictions() -> None:
    results = _judge({})
    assert {name: results[name] for name in ("P4", "P5", "P6")} == dict.fromkeys(("P4", "P5", "P6"), "kept")
    assert {name: results[name] for name in ("P1", "P2", "P3", "P7")} == dict.fromkeys(
        ("P1", "P2", "P3", "P7"), "broken"
    )


def test_a_prediction_naming_a_model_not_run_is_not_evaluable_unless_a_clause_already_broke() -> None:
    s11_only = (REFERENCE, S11)
    kept_for_s11 = {(S11, label): FALL for label in ("k_facts-4", "k_facts-2", "considered_not_made")}
    kept_for_s11[(S11, "someone_else")] = (0, 20, 0, 20)
    results = _judge(kept_for_s11, models=s11_only)
    assert results["P1"] == results["P3"] == predictions.MISSING  # s12's clauses cannot be read
    assert results["P2"] == predictions.MISSING  # s11 kept both, s12 unknown
    assert results["P6"] == predictions.KEPT and results["P7"] == predictions.BROKEN  # s11 alone
    assert _judge({(S11, "reverted"): COLLAPSE}, models=s11_only)["P4"] == predictions.BROKEN
    assert set(_judge({}, models=(S11, S12)).values()) == {predictions.MISSING}  # no reference, no gain
    clauses = predictions.judge_clauses(pd.DataFrame(columns=["model", "condition", "perturbation"]))
    assert len(clauses) == len(predictions.CLAUSES) and set(clauses["result"]) == {predictions.MISSING}


# --------------------------------------------------------------------------- the study on a tiny model


def _tiny_profile(record: Path) -> profiles.Profile:
    """The prereg block on 1 pair, 2 perturbations: base, format-controlled base, an s11 twin whose
    kept adapter is `record` and an s12 twin whose record is not there."""
    block = PREREG.robustness.trained
    policies = {policy.label: policy for policy in block.models}
    twin = policies[S11].model_copy(update={"adapter": str(record)})
    absent = policies[S12].model_copy(update={"adapter": str(record.with_name("absent.json"))})
    # the tiny model is a transformers folder, not a GGUF: the transformers engine
    models = [policies["base"], policies[REFERENCE], twin, absent]
    trained = block.model_copy(update={"models": models, "engine": "prefix_cache"})
    episodes = PREREG.robustness.episodes.model_copy(update={"n": 1})
    perturbations = ["reverted", {"name": "k_facts", "k": 2}]
    profile = _with_trained(PREREG, trained, episodes=episodes, perturbations=perturbations)
    return profile.model_copy(update={"recorded_responses": str(record.parent / "responses.jsonl.gz")})


def test_the_suite_runs_trained_policies_and_replays_them_without_the_weights(
    tiny_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from supersede_lib.train.kept_adapters import keep_adapter
    from tests.test_kept_adapters import _trained_checkpoint

    kept = keep_adapter(_trained_checkpoint(tiny_path, tmp_path / "checkpoint-20"), tmp_path / "kept", "twin")
    profile = _tiny_profile(kept.record_path)
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path / "outputs")
    monkeypatch.setattr(robustness_study, "resolve_base_model", lambda config: str(tiny_path))

    result = robustness_study.run_robustness(profile, progress=False)

    assert "verdict s12 twin: skipped (its kept adapter" in capsys.readouterr().out
    assert result.model == ["base", REFERENCE, S11]
    assert set(result.drops["model"]) == {"base", REFERENCE, S11} and len(result.drops) == 3 * 2
    folder = result.output_dir
    manifests = {path.name: json.loads(path.read_text()) for path in folder.glob("*.manifest.json")}
    names = {key: value["model"]["name"] for key, value in manifests.items()}
    assert (
        names["bounded_memory__base__B300.manifest.json"]
        == names["bounded_memory__format-controlled-base__B300.manifest.json"]
    )  # one base, two agents
    assert "+lora@" in names["bounded_memory__verdict-s11-twin__B300.manifest.json"]
    assert (folder / "predictions.md").exists() and "predictions.md" in result.summary["tables"]
    clauses = pd.read_csv(folder / "predictions.csv")
    assert set(clauses["result"]) <= {"kept", "broken", predictions.MISSING, predictions.NO_PAIRS}
    assert (clauses[clauses["model"] == S12]["result"] == predictions.MISSING).all()
    assert set(result.predictions["prediction"]) == {f"P{number}" for number in range(1, 8)}

    # a fresh clone: no weights, the recorded replies and the manifests only (as a replay copies them)
    profiles.save_recorded_responses(profile)
    replay_root = tmp_path / "replay"
    (replay_root / profile.name / folder.name).mkdir(parents=True)
    for name in manifests:
        shutil.copy(folder / name, replay_root / profile.name / folder.name / name)
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", replay_root)
    monkeypatch.setattr(robustness_study, "resolve_base_model", lambda config: str(tmp_path / "no.gguf"))
    again = robustness_study.run_robustness(profile, progress=False)
    assert {arm.run.manifest["provenance"]["live_calls"] for arm in again.runs} == {0}
    pd.testing.assert_frame_equal(again.per_pair, result.per_pair)
    pd.testing.assert_frame_equal(again.prediction_clauses, result.prediction_clauses)


def test_the_llamacpp_engine_runs_the_kept_adapter_under_a_name_its_record_recognises(tmp_path: Path) -> None:
    weights = tmp_path / "twin.safetensors"
    weights.write_bytes(b"lora")
    record = tmp_path / "twin.json"
    record.write_text(
        json.dumps(
            {"weights_file": weights.name, "sha256": hashlib.sha256(b"lora").hexdigest(), "peft_config": {}}
        )
    )
    gguf = tmp_path / "base.gguf"
    gguf.write_bytes(b"GGUF")  # the embedded model loads its file at the first call, not when built
    engine = robustness_study.TRAINED_ENGINES["llamacpp"]
    evaluation = PREREG.transfer.evaluations[0]

    adapted = engine(PREREG, evaluation, tmp_path, str(gguf), robustness_study.SetModel("twin", record))
    base = engine(PREREG, evaluation, tmp_path, str(gguf), robustness_study.SetModel("base", None))

    assert robustness_study.recorded_with_adapter(record, adapted.name)
    assert adapted.lora_adapter is not None and base.lora_adapter is None
    assert base.name != adapted.name  # base and adapter replies never share cache entries
    assert not adapted.serves_embeddings  # as the block's recorded replies were made
