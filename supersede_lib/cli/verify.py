"""`python -m supersede_lib verify`: check every committed record against its replay (what CI runs).

Each profile with committed files under outputs/ is replayed from its recorded replies and compared
table by table: a profile of notebooks through `reproduce.notebooks` (REPORT.md included), a
pre-registered proof piece by piece through `prereg.registered`. Nothing tracked is rewritten.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from supersede_lib import profiles
from supersede_lib.prereg.registered import verify_record
from supersede_lib.reproduce.notebooks import (
    REPLAY_ROOT,
    has_committed_record,
    notebook_paths,
    report_is_current,
    reproduce,
)
from supersede_lib.results.headings import NOTEBOOK_TRAINING, NOTEBOOK_TRANSFER

# a pre-registered proof's own notebooks, checked piece by piece (`prereg.registered.verify_record`)
PROOF_NOTEBOOKS = {NOTEBOOK_TRAINING, NOTEBOOK_TRANSFER}


def recorded_profiles() -> list[str]:
    """The profiles with a committed record, in the order `profiles.PROFILES` names them."""
    return [name for name in profiles.PROFILES if has_committed_record(name)]


def verify_profile(name: str) -> bool:
    """Replay one profile's record and say whether every committed table (and REPORT.md) reproduced."""
    profile = profiles.load_profile(name)
    if profile.preregistration is not None:
        problems = verify_record(profile, REPLAY_ROOT / "preregistered")
        current = report_is_current(name, profiles.OUTPUT_ROOT)
        print("\n".join(problems) or f"{name}: every committed piece reproduced")
        if current is False:
            print(f"{name}: REPORT.md DIFFERS from what the committed files give: make report PROFILE={name}")
        return not problems and current is not False and studies_beyond_the_proof_reproduce(name)
    run = reproduce(name, mode="replay")
    return run.verdict.ok and run.report_current is not False


def studies_beyond_the_proof_reproduce(name: str) -> bool:
    """A pre-registered profile's recorded studies beyond its proof (09, 10: they read the proof's
    adapters and rows as inputs) replayed as notebooks and compared table by table."""
    recorded = [
        path.name[:2]
        for path in notebook_paths()
        if path.stem not in PROOF_NOTEBOOKS and has_committed_record(f"{name}/{path.stem}")
    ]
    if not recorded:
        return True
    return reproduce(name, recorded, mode="replay", write_report=False).verdict.ok


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--profile",
        action="append",
        default=None,
        help="verify only this profile (repeatable; default: every profile with a committed record)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    names = build_parser().parse_args(argv).profile or recorded_profiles()
    failed = [name for name in names if not verify_profile(name)]
    if failed:
        print(f"NOT reproduced: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"every committed record reproduced: {', '.join(names)}")
    return 0
