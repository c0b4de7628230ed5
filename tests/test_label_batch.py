"""The label-batch tool: it rebuilds the committed batches exactly, keeps packets blind, and merges safely."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supersede_lib import profiles
from supersede_lib.labelling import label_batch
from supersede_lib.labelling.agreement import LABELLED_ANSWERS, read_labelled_answers
from supersede_lib.labelling.labelled_episodes import set_episodes

R3_MODEL, R3_FIRST, R3_LAST = "notes-used__seed-11__step-20", 1625, 1776  # batch R3 of the labels README


def _number(row: dict) -> int:
    return int(row["id"].split("-")[1])


@pytest.fixture(scope="module")
def r3_items() -> tuple[list[dict], dict]:
    """Batch R3 rebuilt from its committed trajectories, as if nothing from R3 on were labelled."""
    profile = profiles.load_profile("cpu_proof_prereg")
    episodes = set_episodes(profile, "test")
    before = [row for row in read_labelled_answers(LABELLED_ANSWERS) if _number(row) < R3_FIRST]
    path = label_batch.trajectories_path(profile, "test", R3_MODEL)
    return label_batch.new_answers(path, R3_MODEL, episodes, before, R3_FIRST), episodes


def _unlabelled(row: dict) -> dict:
    return {key: value for key, value in row.items() if key not in ("label", "reason", "strict_label")}


def test_the_committed_batch_r3_is_rebuilt_exactly(r3_items: tuple[list[dict], dict]) -> None:
    items, _ = r3_items
    committed = [
        row for row in read_labelled_answers(LABELLED_ANSWERS) if R3_FIRST <= _number(row) <= R3_LAST
    ]
    assert [_unlabelled(row) for row in committed] == items


def test_packets_are_blind_and_hold_the_sessions(r3_items: tuple[list[dict], dict], tmp_path: Path) -> None:
    items, episodes = r3_items
    paths = label_batch.write_packets(items, episodes, tmp_path, n_packets=3)
    entries = [entry for path in paths for entry in json.loads(path.read_text())]
    assert [path.name for path in paths] == ["packet_A.json", "packet_B.json", "packet_C.json"]
    assert [entry["id"] for entry in entries] == [item["id"] for item in items]
    text = json.dumps(entries)
    for grader_field in ('"verdict"', '"reward"', '"holds_current"', '"label"', '"score_reason"'):
        assert grader_field not in text
    first = entries[0]
    assert first["sessions"] and first["value_timeline"][0]["kind"] == "introduce"


def test_a_changed_episode_is_refused(r3_items: tuple[list[dict], dict], tmp_path: Path) -> None:
    _, episodes = r3_items
    row = {
        "episode_id": next(iter(episodes)),
        "question": "something else?",
        "gold_answers": [],
        "superseded_values": [],
    }
    path = tmp_path / "m.trajectories.jsonl"
    path.write_text(json.dumps(row | {"answer": "x", "condition": "bounded_memory"}) + "\n")
    with pytest.raises(label_batch.LabelBatchError, match="field question differs"):
        label_batch.new_answers(path, "m", episodes, [], 1)


def _batch(tmp_path: Path, answers: list[str]) -> list[dict]:
    items = [
        {
            "id": f"ans-{9000 + index}",
            "source": {"file": "f", "episode_id": "e", "model": "m", "condition": "bounded_memory"},
            "question": "Which car do I drive?",
            "gold_answers": ["Volvo XC40"],
            "superseded_values": ["Subaru Outback"],
            "is_abstention": False,
            "asks_previous_value": False,
            "answer": answer,
            "n_copies": 1,
        }
        for index, answer in enumerate(answers)
    ]
    (tmp_path / "items.json").write_text(json.dumps(items))
    return items


def _write_labels(tmp_path: Path, rows: list[dict]) -> None:
    (tmp_path / "labels_A.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_merge_appends_once_and_keeps_the_strict_reading_only_where_it_applies(tmp_path: Path) -> None:
    _batch(tmp_path, ["violin teacher: Volvo XC40", "Volvo XC40", "violin teacher: Kia"])
    _write_labels(
        tmp_path,
        [
            {"id": "ans-9000", "label": "correct", "reason": "noise key", "strict_label": "wrong"},
            {"id": "ans-9001", "label": "correct", "reason": "current", "strict_label": "wrong"},
            {"id": "ans-9002", "label": "wrong", "reason": "not in history", "strict_label": "wrong"},
        ],
    )
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("")
    records = label_batch.merge(tmp_path, labelled)
    assert [record.get("strict_label") for record in records] == ["wrong", None, None]
    assert [row["id"] for row in read_labelled_answers(labelled)] == ["ans-9000", "ans-9001", "ans-9002"]
    with pytest.raises(label_batch.LabelBatchError, match="already labelled"):
        label_batch.merge(tmp_path, labelled)
    assert len(read_labelled_answers(labelled)) == 3


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ([{"id": "ans-9000", "label": "right", "reason": "r"}], "field label is 'right'"),
        ([{"id": "ans-9000", "label": "correct", "reason": " "}], "field reason is empty"),
        ([{"id": "ans-9000", "label": "correct", "reason": "r"}] * 2, "labelled twice"),
        ([{"id": "ans-9001", "label": "correct", "reason": "r"}], "missing"),
    ],
)
def test_bad_labels_are_refused_naming_the_file_and_id(
    tmp_path: Path, labels: list[dict], message: str
) -> None:
    _batch(tmp_path, ["Volvo XC40"])
    _write_labels(tmp_path, labels)
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("")
    with pytest.raises(label_batch.LabelBatchError, match=message):
        label_batch.merge(tmp_path, labelled)
    assert labelled.read_text() == ""


def test_grade_reports_the_batch_agreement() -> None:
    text = label_batch.grade(R3_FIRST, R3_LAST)
    assert text.startswith(f"ans-{R3_FIRST}...ans-{R3_LAST}: verdict ")
    assert "verdict 152/152" in text  # R3's one disagreement (ans-1675, "laptop: Planet Fitness") went at v6
    assert "no disagreements" in text
    assert "answers whose readers did not call them borderline)" in text


TRAINING_RUN = (
    profiles.OUTPUT_ROOT / "cpu_proof_prereg" / "06_grpo_training" / "verdict__seed-11.rollouts.jsonl"
)


def test_training_rollouts_rebuild_their_episodes_and_give_blind_packets(tmp_path: Path) -> None:
    """A registered training run's logged answers (steps 11-20) become items whose rebuilt episodes
    carry the logged values; the packets hold no reward, verdict or advantage."""
    items, episodes = label_batch.training_answers(TRAINING_RUN, [], 5000, first_step=11)
    rows = [json.loads(line) for line in TRAINING_RUN.read_text().splitlines()]
    late = {(row["episode_id"], row["answer"]) for row in rows if row["step"] >= 11}
    assert len(items) == len({(item["question"], item["answer"]) for item in items}) <= len(late)
    assert [item["id"] for item in items] == [f"ans-{5000 + index}" for index in range(len(items))]
    for item in items:
        episode = episodes[item["source"]["episode_id"]]
        assert item["question"] == episode.question and item["gold_answers"] == list(episode.gold_answers)
        assert item["source"]["condition"].startswith("training rollout, step ")
    paths = label_batch.write_packets(items, episodes, tmp_path, n_packets=2)
    text = "".join(path.read_text() for path in paths)
    for grader_field in ('"verdict"', '"reward"', '"advantage"', '"notes_hold_current"', '"label"'):
        assert grader_field not in text


def test_a_training_rollout_whose_episode_differs_is_refused(tmp_path: Path) -> None:
    row = json.loads(TRAINING_RUN.read_text().splitlines()[0])
    (tmp_path / "run.rollouts.jsonl").write_text(json.dumps(row | {"gold_answers": ["Elsewhere"]}) + "\n")
    config = TRAINING_RUN.with_name("verdict__seed-11.training_config.json")
    (tmp_path / "run.training_config.json").write_text(config.read_text())
    with pytest.raises(
        label_batch.LabelBatchError, match=r"run.rollouts.jsonl: episode syn-.*field gold_answers"
    ):
        label_batch.training_answers(tmp_path / "run.rollouts.jsonl", [], 1, first_step=1)


def test_a_last_step_before_the_first_logged_step_takes_nothing() -> None:
    """`--last-step 0` bounds the steps like any other number (it once read as no bound)."""
    assert label_batch.training_answers(TRAINING_RUN, [], 100, first_step=0, last_step=0)[0] == []
    assert label_batch.training_answers(TRAINING_RUN, [], 100, first_step=0, last_step=None)[0]


def test_a_sample_is_seeded_kept_in_order_and_numbered_again() -> None:
    items, _ = label_batch.training_answers(TRAINING_RUN, [], 100, first_step=1, last_step=10)
    rows = [json.loads(line) for line in TRAINING_RUN.read_text().splitlines()]
    early = {row["answer"] for row in rows if row["step"] <= 10}
    assert {item["answer"] for item in items} <= early
    sample = label_batch.sample_items(items, 5, seed=3, first_id=900)
    assert sample == label_batch.sample_items(items, 5, seed=3, first_id=900)
    assert [item["id"] for item in sample] == [f"ans-{900 + rank}" for rank in range(5)]
    keys = [label_batch.answer_key(item) for item in items]
    order = [keys.index(label_batch.answer_key(item)) for item in sample]
    assert order == sorted(order)
    with pytest.raises(label_batch.LabelBatchError, match="--sample 999"):
        label_batch.sample_items(items, 999, seed=3, first_id=900)
