"""`python -m supersede_lib reproduce --profile X [--only 01,02]`: replay or run the notebooks headless.

A profile with a committed record is replayed from its recorded replies into a scratch folder and
checked table by table; any other profile runs into outputs/<profile>/ (`reproduce.notebooks`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from supersede_lib import profiles
from supersede_lib.data import reachability
from supersede_lib.eval.provenance import ALLOW_DIRTY_ENV, DirtyCheckoutError
from supersede_lib.reproduce import notebooks
from supersede_lib.reproduce.notebooks import MODES_HELP, REPLAY_ROOT, NotebookFailed


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=MODES_HELP,
    )
    parser.add_argument(
        "--profile", default="local", help=f"one of {', '.join(profiles.PROFILES)} (default: local)"
    )
    parser.add_argument("--only", default="", help="comma-separated notebook prefixes, e.g. 01,02")
    parser.add_argument("--no-report", action="store_true", help="skip writing REPORT.md (live and record)")
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument(
        "--live", action="store_true", help="make every model call again; write into outputs/"
    )
    chosen.add_argument(
        "--run",
        action="store_true",
        help="write into outputs/, reusing cached replies: finish a --live run that was stopped",
    )
    chosen.add_argument(
        "--replay", action="store_true", help="replay and check (the default for a profile with a record)"
    )
    chosen.add_argument(
        "--record", action="store_true", help="replay, then adopt what changed into outputs/ (on purpose)"
    )
    chosen.add_argument(
        "--save-responses",
        action="store_true",
        help="write the local response cache to the profile's recorded-responses file and stop: commit it to "
        "finish a stopped run on another machine with --run, paying for no call twice",
    )
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help=f"let --live/--record write from uncommitted code (the diff's hash is recorded; {ALLOW_DIRTY_ENV}=1)",
    )
    parser.add_argument(
        "--replay-root", type=Path, default=None, help=f"scratch folder (default {REPLAY_ROOT})"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.allow_dirty:
        os.environ[ALLOW_DIRTY_ENV] = "1"  # the notebook kernels inherit it
    mode = (
        "live"
        if args.live
        else "run"
        if args.run
        else "record"
        if args.record
        else "replay"
        if args.replay
        else "auto"
    )
    if args.save_responses:
        return save_responses(args.profile)
    unreachable = reachability.unreachable_message(args.profile, live=args.live)
    if unreachable:  # before any notebook starts: offline, one line saying what to run instead
        print(f"STOPPED: {unreachable}", file=sys.stderr)
        return 2
    only = [prefix for prefix in args.only.split(",") if prefix.strip()] or None
    try:
        run = notebooks.reproduce(
            args.profile, only, mode=mode, write_report=not args.no_report, replay_root=args.replay_root
        )
    except NotebookFailed as failure:
        print(f"STOPPED: {failure}", file=sys.stderr)
        return 1
    except (DirtyCheckoutError, profiles.ProfileError, ValueError) as error:
        print(f"STOPPED: {error}", file=sys.stderr)
        return 2
    if run.mode == "replay" and not (run.verdict.ok and run.report_current is not False):
        return 1
    return 0


def save_responses(profile_name: str) -> int:
    """Export the profile's local cache (every reply paid for so far, an unfinished run's included) to
    its recorded-responses file: a local cache does not move with a clone, a committed file does."""
    try:
        profile = profiles.load_profile(profile_name)
    except profiles.ProfileError as error:
        print(f"STOPPED: {error}", file=sys.stderr)
        return 2
    if profile.recorded_responses is None:
        print(
            f"STOPPED: profile {profile.name} keeps no recorded responses (no `recorded_responses:`)",
            file=sys.stderr,
        )
        return 2
    saved = profiles.save_recorded_responses(profile)
    if saved is None:
        print(f"nothing to save: profile {profile.name} has no local response cache here")
        return 0
    print(f"recorded responses: {saved} replies -> {profile.recorded_responses}")
    return 0
