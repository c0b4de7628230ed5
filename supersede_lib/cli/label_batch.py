"""`python -m supersede_lib label-batch`: blind label packets of new answers; merge the labels; grade once.

A batch is made blind (packets without the matcher's verdict), labelled by readers outside the
repository, merged into the labelled set, then graded once by this commit's matcher
(`labelling.label_batch`, `labelling/data/README.md`).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from supersede_lib import profiles
from supersede_lib.labelling.agreement import LABELLED_ANSWERS, answer_id_number, read_labelled_answers
from supersede_lib.labelling.label_batch import (
    grade,
    merge,
    new_answers,
    trajectories_path,
    write_packets,
    write_training_packets,
)
from supersede_lib.labelling.labelled_episodes import set_episodes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    packets = commands.add_parser("packets", help="blind packets of a judged model's new answers")
    packets.add_argument("--profile", required=True, help="the profile whose evaluation set was judged")
    packets.add_argument("--set", dest="set_name", required=True, help="the evaluation set, e.g. test")
    packets.add_argument("--model", required=True, help="e.g. verdict__seed-12__step-20")
    packets.add_argument("--first-id", type=int, help="the first id's number (default: one past the last)")
    packets.add_argument("--packets", type=int, default=3, help="how many packets (readers) (default: 3)")
    packets.add_argument("--out", type=Path, required=True, help="a folder outside the repository")
    training = commands.add_parser(
        "training-packets", help="blind packets of training runs' logged rollout answers"
    )
    training.add_argument("rollouts", type=Path, nargs="+", help="<run>.rollouts.jsonl files, in id order")
    training.add_argument("--first-step", type=int, default=1, help="only rollouts of this step on")
    training.add_argument("--last-step", type=int, help="only rollouts up to this step")
    training.add_argument("--sample", type=int, help="a uniform random sample of this many answers")
    training.add_argument("--sample-seed", type=int, default=0, help="the sample's random seed")
    training.add_argument("--first-id", type=int, help="the first id's number (default: one past the last)")
    training.add_argument("--packets", type=int, default=3, help="how many packets (readers) (default: 3)")
    training.add_argument("--out", type=Path, required=True, help="a folder outside the repository")
    merged = commands.add_parser("merge", help="append a folder's labels to the labelled set")
    merged.add_argument("--out", type=Path, required=True, help="the folder the packets were written to")
    graded = commands.add_parser("grade", help="grade ans-FIRST...ans-LAST once with this commit's matcher")
    graded.add_argument("first", type=int, help="the first answer id's number")
    graded.add_argument("last", type=int, help="the last answer id's number")
    return parser


def _write_model_packets(arguments: argparse.Namespace) -> None:
    profile = profiles.load_profile(arguments.profile)
    labelled = read_labelled_answers(LABELLED_ANSWERS)
    first_id = arguments.first_id or 1 + max(answer_id_number(row["id"]) for row in labelled)
    episodes = set_episodes(profile, arguments.set_name)
    path = trajectories_path(profile, arguments.set_name, arguments.model)
    items = new_answers(path, arguments.model, episodes, labelled, first_id)
    for packet in write_packets(items, episodes, arguments.out, arguments.packets):
        print(f"{packet}: {len(json.loads(packet.read_text(encoding='utf-8')))} answers")
    print(f"{len(items)} new answers: {items[0]['id']}...{items[-1]['id']}")


def main(argv: Sequence[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
    if arguments.command == "packets":
        _write_model_packets(arguments)
    elif arguments.command == "training-packets":
        write_training_packets(arguments)
    elif arguments.command == "merge":
        records = merge(arguments.out)
        counts = Counter(record["label"] for record in records)
        print(f"appended {len(records)} labels ({dict(counts)}) to {LABELLED_ANSWERS}")
    else:
        print(grade(arguments.first, arguments.last))
    return 0
