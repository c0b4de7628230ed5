"""`python -m supersede_lib reachable [PROFILE]`: can a profile's downloads be fetched?

Offline it prints one line naming what to run instead and exits non-zero. Standard library only, so
`make reproduce` can ask before anything is installed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from supersede_lib.data.reachability import UNREACHABLE_EXIT, unreachable_message


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", nargs="?", default="local", help="a profile name (default local)")
    parser.add_argument("--live", action="store_true", help="the run makes every call again (no replay)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args, _ = build_parser().parse_known_args(argv)  # the Makefile passes REPRODUCE_ARGS through (--only ...)
    message = unreachable_message(args.profile, live=args.live)
    if message:
        print(message, file=sys.stderr)
        return UNREACHABLE_EXIT
    return 0
