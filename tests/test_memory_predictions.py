"""The predictions M1-M6 of docs/memory-systems-log.md, judged by their written rules on hand-built
accuracy rows: each clause kept and broken, ties, a missing or refused policy, the sanity rows that
never count, and the per-episode share M3 reads computed from the runs."""

from __future__ import annotations

import pandas as pd
import pytest

from supersede_lib import profiles
from supersede_lib.results import memory_predictions as predictions
from supersede_lib.studies import memory_systems as study
from tests.test_memory_systems_study import _run

SMALL, LARGE = "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M", "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"
SIZE = {"0.5B": SMALL, "1.5B": LARGE}
FULL, NOTES, LINES = predictions.FULL_CONTEXT, predictions.REFERENCE, "notes-line-edits"
APPEND, CORE, MEM0 = predictions.APPEND_TRUNCATE, predictions.CORE_MEMORY, predictions.MEM0
LOG, LATEST = predictions.OBSERVATION_LOG, predictions.LATEST_VALUE
MEASURES = (
    "accuracy",
    "stale_answer_rate",
    "held_empty_share",
    "held_stale_share_nonempty",
    "memory_failures_per_episode",
)
# one world, the same on both models, in which every prediction is kept:
# accuracy, stale answers, empty memories, stale share of the non-empty memories, failures per episode
WORLD = {
    FULL: (0.80, 0.05, None, None, 0.0),
    NOTES: (0.50, 0.10, 0.10, 0.20, 0.0),
    LINES: (0.50, 0.10, 0.10, 0.20, 0.1),
    APPEND: (0.40, 0.40, 0.00, 0.60, 0.0),
    CORE: (0.20, 0.10, 0.50, 0.20, 2.0),
    LOG: (0.60, 0.10, 0.10, 0.10, 0.1),
    LATEST: (0.75, 0.05, 0.10, 0.10, 0.2),
    MEM0: (0.30, 0.10, 0.30, 0.30, 0.5),
}


def _accuracy(changes: dict | None = None, *, models: tuple[str, ...] = ("0.5B", "1.5B")) -> pd.DataFrame:
    """The world's rows for `models`; `changes` maps (size, policy) to the measures it sets, or to
    `None` (the row is absent) or a string (the policy refused with that reason)."""
    changes = changes or {}
    rows = []
    for size in models:
        for policy, numbers in WORLD.items():
            change = changes.get((size, policy), {})
            if change is None:
                continue
            row = {"data": "synthetic", "model": SIZE[size], "policy": policy, "refused": None}
            row |= dict(zip(MEASURES, numbers, strict=True))
            if isinstance(change, str):
                row |= dict.fromkeys(MEASURES) | {"refused": change}
            else:
                row |= change
            rows.append(row)
    return pd.DataFrame(rows)


def _verdicts(accuracy: pd.DataFrame) -> dict[str, str]:
    return predictions.judge_memory_predictions(accuracy).set_index("prediction")["verdict"].to_dict()


def test_the_world_keeps_every_prediction_and_shows_the_numbers_read() -> None:
    assert _verdicts(_accuracy()) == dict.fromkeys(predictions.STATEMENTS, predictions.KEPT)
    clauses = predictions.judge_memory_clauses(_accuracy())
    assert len(clauses) == len(predictions.CLAUSES) == 13
    failures = clauses[clauses["rule"].str.startswith("core_memory's memory failures")].iloc[0]
    assert failures["model"] == SMALL
    assert "core_memory 2.00" in failures["numbers"] and "mem0 0.50" in failures["numbers"]
    ceiling = clauses[(clauses["prediction"] == "M6") & (clauses["model"] == LARGE)].iloc[0]
    assert "full_context 80.0" in ceiling["numbers"] and "latest_value 75.0" in ceiling["numbers"]
    shown = predictions.judge_memory_predictions(_accuracy()).set_index("prediction")
    assert "notes-rewrite 50.0" in shown.loc["M4", "clauses"] and shown.loc["M4", "clauses"].endswith("kept")


@pytest.mark.parametrize(
    ("name", "kept", "broken"),
    [
        # M1: the most failures of the LLM policies (a tie keeps it), the most empty memories (append-
        # truncate makes no memory call: not in the set), strictly below notes; the 0.5B only
        (
            "M1",
            {("0.5B", LINES): {"memory_failures_per_episode": 2.0}},
            {("0.5B", MEM0): {"memory_failures_per_episode": 2.5}},
        ),
        (
            "M1",
            {("1.5B", LOG): {"memory_failures_per_episode": 9.0}},
            {("0.5B", LOG): {"held_empty_share": 0.6}},
        ),
        ("M1", {("0.5B", APPEND): {"held_empty_share": 0.9}}, {("0.5B", CORE): {"accuracy": 0.5}}),
        # M2: the highest stale rate of the bounded policies on each model; full context is not one
        ("M2", {("0.5B", LINES): {"stale_answer_rate": 0.4}}, {("1.5B", LINES): {"stale_answer_rate": 0.5}}),
        ("M2", {("1.5B", FULL): {"stale_answer_rate": 0.9}}, {("0.5B", LATEST): {"stale_answer_rate": 0.41}}),
        # M3: strictly below notes, strictly more empty memories, a stale share at least notes'
        ("M3", {("0.5B", MEM0): {"accuracy": 0.49}}, {("0.5B", MEM0): {"accuracy": 0.5}}),
        ("M3", {("0.5B", MEM0): {"held_empty_share": 0.11}}, {("0.5B", MEM0): {"held_empty_share": 0.1}}),
        (
            "M3",
            {("0.5B", MEM0): {"held_stale_share_nonempty": 0.2}},
            {("0.5B", MEM0): {"held_stale_share_nonempty": 0.19}},
        ),
        ("M3", {("1.5B", MEM0): {"accuracy": 0.9}}, {("0.5B", NOTES): {"held_empty_share": 0.3}}),
        # M4: at or above notes on the 1.5B (a tie keeps it); the 0.5B is not read
        ("M4", {("1.5B", LOG): {"accuracy": 0.5}}, {("1.5B", LOG): {"accuracy": 0.49}}),
        ("M4", {("0.5B", LOG): {"accuracy": 0.1}}, {("1.5B", NOTES): {"accuracy": 0.61}}),
        # M5: the best bounded policy on the 1.5B (a tie keeps it), within 10 points of full context
        ("M5", {("1.5B", LOG): {"accuracy": 0.75}}, {("1.5B", LINES): {"accuracy": 0.76}}),
        (  # 0.8 - 0.7 is 0.10000000000000009 in floats: 10 points all the same
            "M5",
            {("1.5B", LATEST): {"accuracy": 0.7}},
            {("1.5B", LATEST): {"accuracy": 0.7}, ("1.5B", FULL): {"accuracy": 0.81}},
        ),
        ("M5", {("1.5B", FULL): {"accuracy": 0.65}}, {("1.5B", FULL): {"accuracy": 0.64}}),
        # M6: full context at or above every bounded policy, on each model
        ("M6", {("1.5B", LATEST): {"accuracy": 0.8}}, {("0.5B", APPEND): {"accuracy": 0.81}}),
        ("M6", {("0.5B", FULL): {"accuracy": 0.75}}, {("1.5B", FULL): {"accuracy": 0.74}}),
    ],
)
def test_each_clause_is_kept_and_broken_by_its_written_rule(name: str, kept: dict, broken: dict) -> None:
    assert _verdicts(_accuracy(kept))[name] == predictions.KEPT
    assert _verdicts(_accuracy(broken))[name] == predictions.BROKEN


def test_a_missing_or_refused_policy_or_model_is_not_evaluable_unless_a_clause_broke() -> None:
    refused = _verdicts(_accuracy({("0.5B", MEM0): "memory policy 'mem0' needs embeddings"}))
    not_evaluable = {"M1", "M2", "M3", "M6"}  # each reads mem0 on the 0.5B
    assert refused == {
        name: predictions.NOT_EVALUABLE if name in not_evaluable else predictions.KEPT
        for name in predictions.STATEMENTS
    }
    clauses = predictions.judge_memory_clauses(_accuracy({("0.5B", MEM0): "no embeddings"}))
    assert set(clauses.loc[clauses["prediction"] == "M3", "result"]) == {"not evaluable (mem0 refused)"}
    broke = {("0.5B", MEM0): "no embeddings", ("0.5B", CORE): {"accuracy": 0.9}}
    assert _verdicts(_accuracy(broke))["M1"] == predictions.BROKEN  # a broken clause decides
    missing = _verdicts(_accuracy({("1.5B", MEM0): None}))
    assert missing["M5"] == missing["M2"] == missing["M6"] == predictions.NOT_EVALUABLE
    assert missing["M4"] == missing["M3"] == predictions.KEPT
    no_number = _accuracy({("1.5B", LATEST): {"accuracy": float("nan")}})
    assert _verdicts(no_number)["M5"] == predictions.NOT_EVALUABLE
    small_only = _verdicts(_accuracy(models=("0.5B",)))
    assert small_only["M1"] == small_only["M3"] == predictions.KEPT
    assert {small_only[name] for name in ("M2", "M4", "M5", "M6")} == {predictions.NOT_EVALUABLE}
    clauses = predictions.judge_memory_clauses(_accuracy(models=("0.5B",)))
    assert "not evaluable (no model tagged 1.5B)" in set(clauses["result"])


def test_models_are_found_by_their_size_tag_and_two_with_one_tag_are_not_evaluable() -> None:
    other = _accuracy(models=("0.5B",)).assign(model="Qwen2.5-Coder-0.5B-Instruct-Q8_0")
    doubled = pd.concat([_accuracy(), other])
    verdicts = _verdicts(doubled)
    assert verdicts["M1"] == verdicts["M3"] == predictions.NOT_EVALUABLE
    assert verdicts["M4"] == verdicts["M5"] == predictions.KEPT
    clauses = predictions.judge_memory_clauses(doubled)
    assert "not evaluable (2 models tagged 0.5B)" in set(clauses["result"])
    bigger = pd.concat([_accuracy(), other.assign(model="some-10.5B-model")])  # 10.5B is no 0.5B
    assert _verdicts(bigger) == dict.fromkeys(predictions.STATEMENTS, predictions.KEPT)


def test_the_longmemeval_sanity_rows_never_count() -> None:
    everything_broken = {(size, FULL): {"accuracy": 0.0} for size in SIZE} | {
        (size, policy): {"accuracy": 1.0, "stale_answer_rate": 1.0}
        for size in SIZE
        for policy in (NOTES, CORE)
    }
    sanity = _accuracy(everything_broken).assign(data="longmemeval")
    assert set(_verdicts(sanity).values()) == {predictions.NOT_EVALUABLE}
    assert _verdicts(pd.concat([_accuracy(), sanity])) == dict.fromkeys(
        predictions.STATEMENTS, predictions.KEPT
    )
    assert set(_verdicts(pd.DataFrame()).values()) == {predictions.NOT_EVALUABLE}


def test_the_predicted_policies_are_the_offline_profiles_and_its_models_carry_the_tags() -> None:
    block = profiles.load_profile("offline").memory_systems
    assert {entry.name for entry in block.policies} == set(predictions.BOUNDED)
    assert set(predictions.LLM_BOUNDED) == set(predictions.BOUNDED) - {predictions.APPEND_TRUNCATE}
    assert block.reference == predictions.REFERENCE and block.full_context
    assert (study.FULL_CONTEXT, study.SYNTHETIC) == (predictions.FULL_CONTEXT, predictions.SYNTHETIC)
    names = [str(spec["name"]) for spec in block.models]
    assert [predictions.model_of_size(pd.DataFrame({"model": names}), size) for size in SIZE] == names


def test_the_stale_share_m3_reads_counts_only_the_memories_that_hold_something() -> None:
    ids = ["e1", "e2", "e3", "e4"]
    notes = _run(ids, set(), set(ids), ["", "- a: 1", "- a: 2", "(empty)"], [True, True, False, True])
    mem0 = _run(ids, set(), set(ids), ["", "(empty)", "", ""], [True] * 4)
    runs = [
        study.PolicyRun(SMALL, NOTES, "notes", "v1", run=notes),
        study.PolicyRun(SMALL, MEM0, "mem0", "v1", run=mem0),
    ]
    accuracy = study.analyse_policy_runs(runs, NOTES).accuracy
    rows = accuracy.set_index("policy")
    assert rows.loc[NOTES, "held_stale_share"] == pytest.approx(0.75)
    assert rows.loc[NOTES, "held_empty_share"] == pytest.approx(0.5)
    assert rows.loc[NOTES, "held_stale_share_nonempty"] == pytest.approx(0.5)  # e2 of e2, e3
    assert pd.isna(rows.loc[MEM0, "held_stale_share_nonempty"])  # every memory empty: no share
    clauses = predictions.judge_memory_clauses(accuracy)
    stale_clause = clauses[clauses["rule"].str.startswith("of the non-empty")].iloc[0]
    assert stale_clause["result"] == "not evaluable (mem0 has no held_stale_share_nonempty)"
