"""A blind label batch: the new answers of one judged model, packets for readers, then merge and grade once.

The matcher is held to human labels of the answers it grades (`labelling/data/README.md`). A batch of a
new run is made in three steps, each a subcommand of `python -m supersede_lib label-batch`:

1. `packets`: every distinct (question, gold, answer) of one model on one evaluation set that is not
   labelled yet, its episode rebuilt from the profile and checked against the logged question and
   values, split into packets for readers. A packet holds what a reader needs to judge (question,
   values, the value timeline, the sessions, the answer) and nothing of the grader (no verdict, score,
   reward or `holds_*` field), so the labels are blind. `items.json` keeps each id's source.
   `training-packets` does the same for training runs' logged rollouts, each episode rebuilt from
   the generator seed in its id.
2. The readers write `labels_<packet>.jsonl`: `{"id", "label", "reason"}` and, for answers under the
   prompt example's key, the literal reading `strict_label`.
3. `merge` appends the labels to the labelled set (checked: every id once, known labels); commit them
   before `grade`, which grades the batch once with the matcher of the commit it runs at.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from supersede_lib import profiles
from supersede_lib.agent.episode import Episode
from supersede_lib.eval.run_files import REPO_ROOT, read_trajectories
from supersede_lib.labelling.agreement import (
    LABELLED_ANSWERS,
    VERDICTS,
    agreement,
    answer_id_number,
    credit_agreement,
    disagreements,
    grade_labelled_answers,
    read_labelled_answers,
    rollout_condition,
)
from supersede_lib.labelling.labelled_episodes import (
    LabelBatchError,
    evaluation_set,
    labelled_episodes,
    training_episode,
)
from supersede_lib.studies import evaluation_sets

PROMPT_EXAMPLE_KEY = "violin teacher"  # the format example's key that trained policies copy
ITEM_FIELDS = (
    "question",
    "gold_answers",
    "superseded_values",
    "is_abstention",
    "asks_previous_value",
    "answer",
)


def answer_key(row: Mapping[str, Any]) -> tuple[str, tuple[str, ...], str]:
    """What makes an answer distinct in the labelled set: (question, gold answers, answer)."""
    return (row["question"], tuple(row["gold_answers"]), row["answer"])


def trajectories_path(profile: profiles.Profile, set_name: str, model: str) -> Path:
    """`07_transfer_eval/<set>/<model>.trajectories.jsonl` of a profile's named evaluation set."""
    return (
        evaluation_sets.set_folder(profile, evaluation_set(profile, set_name)) / f"{model}.trajectories.jsonl"
    )


def new_answers(
    path: Path,
    model: str,
    episodes: Mapping[str, Episode],
    labelled: Sequence[Mapping[str, Any]],
    first_id: int,
) -> list[dict[str, Any]]:
    """The distinct answers in the trajectories at `path` that `labelled` lacks, as labelled-set items
    with ids from `first_id` (episode order), each checked against its rebuilt episode."""
    if not path.exists():
        raise LabelBatchError(f"{path}: no trajectories of {model} here (judge it first)")
    rows = read_trajectories(path)
    return _distinct_new_items(
        rows, labelled, first_id, model, path, check=lambda row: _check_against_episode(row, episodes, path)
    )


def _distinct_new_items(
    rows: Sequence[Mapping[str, Any]],
    labelled: Sequence[Mapping[str, Any]],
    first_id: int,
    model: str,
    path: Path,
    check: Callable[[Mapping[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Each answer of `rows` that `labelled` lacks, once, as an item numbered from `first_id` with its
    number of copies; `check` sees every new row before it becomes an item."""
    copies = Counter(answer_key(row) for row in rows)
    seen = {answer_key(row) for row in labelled}
    items: list[dict[str, Any]] = []
    for row in rows:
        if answer_key(row) in seen:
            continue
        seen.add(answer_key(row))
        if check is not None:
            check(row)
        items.append(_item(row, f"ans-{first_id + len(items)}", model, path, copies[answer_key(row)]))
    return items


def _check_against_episode(row: Mapping[str, Any], episodes: Mapping[str, Episode], path: Path) -> None:
    """The rebuilt episode must be the one the model saw: same question, gold and superseded values."""
    episode = episodes.get(row["episode_id"])
    if episode is None:
        raise LabelBatchError(f"{path}: episode {row['episode_id']} is not in the set's episodes")
    for field in ("question", "gold_answers", "superseded_values"):
        rebuilt = getattr(episode, field)
        if (list(rebuilt) if isinstance(rebuilt, tuple) else rebuilt) != row[field]:
            raise LabelBatchError(
                f"{path}: episode {row['episode_id']}: field {field} differs from the rebuilt episode"
            )


def training_answers(
    rollouts_path: Path,
    labelled: Sequence[Mapping[str, Any]],
    first_id: int,
    first_step: int,
    last_step: int | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Episode]]:
    """The distinct answers of a training run's logged rollouts of steps `first_step`..`last_step`
    that `labelled` lacks, as labelled-set items (ids from `first_id`, log order), with their episodes."""
    run = rollouts_path.name.removesuffix(".rollouts.jsonl")
    config_path = rollouts_path.with_name(f"{run}.training_config.json")
    if not rollouts_path.exists() or not config_path.exists():
        raise LabelBatchError(f"{rollouts_path}: need the run's rollouts and its {config_path.name}")
    run_config = json.loads(config_path.read_text(encoding="utf-8"))
    rows = [
        json.loads(line) for line in rollouts_path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    episodes: dict[str, Episode] = {}
    keyed = []
    in_steps = (
        row for row in rows if first_step <= row["step"] and (last_step is None or row["step"] <= last_step)
    )
    for row in in_steps:
        if row["episode_id"] not in episodes:
            episodes[row["episode_id"]] = training_episode(row, run_config, rollouts_path)
        episode = episodes[row["episode_id"]]
        keyed.append(
            row
            | {
                "question": episode.question,
                "is_abstention": episode.is_abstention,
                "condition": rollout_condition(row["step"]),
            }
        )
    return _distinct_new_items(keyed, labelled, first_id, run, rollouts_path), episodes


def _item(row: Mapping[str, Any], ident: str, model: str, path: Path, n_copies: int) -> dict[str, Any]:
    """A labelled-set record without its label: id, source, the episode's values and the answer."""
    model_hash = str(row.get("model", "")).rpartition("@")[2][:12]
    source = {
        "file": path.resolve().relative_to(REPO_ROOT).as_posix()
        if path.resolve().is_relative_to(REPO_ROOT)
        else str(path),
        "episode_id": row["episode_id"],
        "model": f"{model}@{model_hash}" if model_hash else model,
        "condition": row["condition"],
    }
    return {
        "id": ident,
        "source": source,
        **{field: row[field] for field in ITEM_FIELDS},
        "n_copies": n_copies,
    }


def packet_entry(item: Mapping[str, Any], episode: Episode) -> dict[str, Any]:
    """What a reader sees of one answer: the episode and the answer, nothing of the grader."""
    return {
        "id": item["id"],
        "question": item["question"],
        "question_date": episode.question_date,
        **{field: item[field] for field in ITEM_FIELDS[1:5]},
        "value_timeline": episode.metadata.get("value_timeline"),
        "sessions": [
            {"date": session.date, "turns": [f"{turn.role}: {turn.content}" for turn in session.turns]}
            for session in episode.sessions
        ],
        "answer": item["answer"],
    }


def write_packets(
    items: Sequence[Mapping[str, Any]], episodes: Mapping[str, Episode], out_dir: Path, n_packets: int
) -> list[Path]:
    """`items.json` and `packet_A.json`, `packet_B.json`, ... of near-equal size, in id order."""
    if not items:
        raise LabelBatchError("no new answers to label: every answer of this model is in the labelled set")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "items.json").write_text(
        json.dumps(list(items), indent=1, ensure_ascii=False), encoding="utf-8"
    )
    size = -(-len(items) // n_packets)
    paths = []
    for index in range(0, len(items), size):
        path = out_dir / f"packet_{chr(ord('A') + index // size)}.json"
        entries = [
            packet_entry(item, episodes[item["source"]["episode_id"]]) for item in items[index : index + size]
        ]
        path.write_text(json.dumps(entries, indent=1, ensure_ascii=False), encoding="utf-8")
        paths.append(path)
    return paths


def read_labels(out_dir: Path) -> dict[str, dict[str, Any]]:
    """Every `labels_*.jsonl` row in `out_dir` by id; a repeated id or an unknown label is an error."""
    labels: dict[str, dict[str, Any]] = {}
    for path in sorted(out_dir.glob("labels_*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            where = f"{path}:{number} ({row.get('id')})"
            if row.get("id") in labels:
                raise LabelBatchError(f"{where}: id labelled twice")
            for field in ("label", "strict_label"):
                if field in row and row[field] not in VERDICTS:
                    raise LabelBatchError(f"{where}: field {field} is {row[field]!r}, not one of {VERDICTS}")
            if not str(row.get("reason", "")).strip():
                raise LabelBatchError(f"{where}: field reason is empty")
            labels[row["id"]] = row
    return labels


def labelled_records(
    items: Sequence[Mapping[str, Any]], labels: Mapping[str, Mapping[str, Any]]
) -> list[dict]:
    """The labelled-set records of a batch: each item with its label and reason; `strict_label` kept only
    where the answer carries the prompt example's key and the label credits a value (correct or stale)."""
    missing = [item["id"] for item in items if item["id"] not in labels]
    extra = sorted(set(labels) - {item["id"] for item in items})
    if missing or extra:
        raise LabelBatchError(
            f"labels do not match items.json: missing {missing[:5]}, not in the batch {extra[:5]}"
        )
    records = []
    for item in items:
        label = labels[item["id"]]
        record = {key: value for key, value in item.items() if key != "n_copies"}
        record |= {"label": label["label"], "reason": label["reason"].strip(), "n_copies": item["n_copies"]}
        keeps_strict = PROMPT_EXAMPLE_KEY in item["answer"].lower() and label["label"] in ("correct", "stale")
        if keeps_strict and "strict_label" in label:
            record["strict_label"] = label["strict_label"]
        records.append(record)
    return records


def merge(out_dir: Path, labelled_path: Path = LABELLED_ANSWERS) -> list[dict[str, Any]]:
    """Append the batch in `out_dir` to the labelled set; an id already there is an error (merged once)."""
    items = json.loads((out_dir / "items.json").read_text(encoding="utf-8"))
    records = labelled_records(items, read_labels(out_dir))
    existing = {row["id"] for row in read_labelled_answers(labelled_path)}
    if clash := [record["id"] for record in records if record["id"] in existing]:
        raise LabelBatchError(f"{labelled_path}: ids already labelled: {clash[:5]}")
    with labelled_path.open("a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    return records


def grade(first_id: int, last_id: int, labelled_path: Path = LABELLED_ANSWERS) -> str:
    """The batch `ans-<first>`...`ans-<last>` graded by the matcher of this commit: agreement and misses."""
    rows = [
        row
        for row in read_labelled_answers(labelled_path)
        if first_id <= answer_id_number(row["id"]) <= last_id
    ]
    if not rows:
        raise LabelBatchError(f"{labelled_path}: no labelled ids between ans-{first_id} and ans-{last_id}")
    graded = grade_labelled_answers(rows, labelled_episodes(rows))
    verdicts = agreement(graded)
    missed = disagreements(graded)[["id", "label", "verdict", "answer"]]
    clear = graded[~graded["borderline"]]
    return (
        f"ans-{first_id}...ans-{last_id}: verdict {verdicts.agreed:.0f}/{verdicts.total:.0f} = {verdicts.share:.1%}, "
        f"credit {credit_agreement(graded):.1%} ({credit_agreement(clear):.1%} of the {len(clear)} answers "
        f"whose readers did not call them borderline)\n\n{verdicts.matrix.to_string()}\n\n"
        + (missed.to_string(index=False) if len(missed) else "no disagreements")
    )


def sample_items(
    items: Sequence[dict[str, Any]], size: int, seed: int, first_id: int
) -> list[dict[str, Any]]:
    """A uniform random sample of `size` items (seeded, drawn before anyone reads them), kept in their
    order and numbered again from `first_id`."""
    if not 0 < size <= len(items):
        raise LabelBatchError(f"--sample {size}: need 1 to {len(items)} (the new answers found)")
    chosen = sorted(random.Random(seed).sample(range(len(items)), size))
    return [dict(items[index], id=f"ans-{first_id + rank}") for rank, index in enumerate(chosen)]


def write_training_packets(arguments: argparse.Namespace) -> None:
    """Packets of every new answer of the named training runs, ids running on from run to run."""
    labelled = list(read_labelled_answers(LABELLED_ANSWERS))
    first_id = arguments.first_id or 1 + max(answer_id_number(row["id"]) for row in labelled)
    items: list[dict[str, Any]] = []
    episodes: dict[str, Episode] = {}
    for path in arguments.rollouts:
        run_items, run_episodes = training_answers(
            path, labelled, first_id + len(items), arguments.first_step, arguments.last_step
        )
        items += run_items
        labelled += run_items
        episodes |= run_episodes
        print(f"{path}: {len(run_items)} new answers")
    if arguments.sample:
        items = sample_items(items, arguments.sample, arguments.sample_seed, first_id)
    for path in write_packets(items, episodes, arguments.out, arguments.packets):
        print(f"{path}: {len(json.loads(path.read_text(encoding='utf-8')))} answers")
    print(f"{len(items)} new answers: {items[0]['id']}...{items[-1]['id']}")
