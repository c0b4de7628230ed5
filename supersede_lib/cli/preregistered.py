"""`python -m supersede_lib preregistered --profile X`: a pre-registered proof one piece per session.

`--baselines` judges the base on every set that names it; `--next` (or `--run ARM:SEED`) trains the
next registered run and judges it; `--report` writes the registered analysis; `--verify` replays
every committed piece and compares its table (`prereg.registered`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from supersede_lib import profiles
from supersede_lib.prereg import registered
from supersede_lib.prereg.analysis import write_results
from supersede_lib.reproduce.notebooks import REPLAY_ROOT


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", required=True, help="a profile with a preregistration block")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--baselines", action="store_true", help="judge the base on every set that names it")
    parser.add_argument("--sets", help="with --baselines: these sets only, in this order (comma-separated)")
    group.add_argument("--next", action="store_true", help="train and judge the next registered run")
    group.add_argument("--run", metavar="ARM:SEED", help="train and judge this registered run")
    group.add_argument("--report", action="store_true", help="write the registered analysis of what has run")
    replays = {
        "--verify": "replay every committed piece and compare its table",
        "--regrade": "replay every committed piece and adopt what the matcher now says",
    }
    for flag, text in replays.items():
        group.add_argument(flag, action="store_true", help=text)
    return parser


def _verify(profile: profiles.Profile, *, regrade: bool) -> int:
    problems = registered.verify_record(profile, REPLAY_ROOT / "preregistered", regrade=regrade)
    print("\n".join(problems) or f"every committed piece of {profile.name} reproduced")
    if regrade and problems:
        print(f"regraded {len(problems)} piece(s) with this commit's matcher, live measurements kept")
        return 0
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    profile = profiles.load_profile(args.profile)
    if args.baselines:
        registered.judge_baselines(profile, args.sets.split(",") if args.sets else None)
        return 0
    if args.report:
        print(write_results(profile))
        return 0
    if args.verify or args.regrade:
        return _verify(profile, regrade=args.regrade)
    run = registered.next_run(profile) if args.next else registered.parse_run(args.run, profile)
    if run is None:
        print("every registered run is trained and judged")
        return 0
    registered.train_and_judge(profile, *run)
    return 0
