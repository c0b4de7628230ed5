"""Does a replay reproduce the record? Compare every committed table with the one a replay wrote.

A replay (`make verify`, or `make reproduce` without `--live`) runs the notebooks from recorded
model replies into a scratch folder, never into `outputs/`. This module then reads both trees and
gives one verdict: every committed table the replay regenerated is identical, or a list of the
tables that moved and how (first differing cells). So a change to the matcher, prompts, statistics
or generator that moves a committed number is caught, and the results are regenerated on purpose.

What is compared: result tables (`*.md`, `*.csv`) and the headline `numbers` of each `summary.json`.
Live measurements (per-row latency, how many calls a live run found cached) differ by nature
between a live run and its replay: those columns are left out of the comparison (`LIVE_COLUMNS`).
Run manifests, trajectories and figures are not compared: manifests hold wall times and commits,
trajectories are the evidence behind the CSV rows (which are compared), and PNG bytes vary with
the plotting library's version.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from supersede_lib.results.outputs import STUDY_SUMMARY_FILE

# columns that record how a live run went, not what it found: never compared
LIVE_COLUMNS = frozenset({"latency_s", "cached_calls"})
# columns added to run rows after records were made, with the cells every older record implies (the
# notes policy, no memory failure; empty under full context): a replay's column the committed table
# lacks is checked against these instead of failing the table, so a record need not be rewritten
IMPLIED_COLUMNS: dict[str, frozenset[str]] = {
    "memory_policy": frozenset({"notes", ""}),
    "memory_failures": frozenset({"0"}),
}
TABLE_SUFFIXES = (".md", ".csv")
SKIPPED_DIRS = frozenset({"executed", "cache", "training"})
MAX_CELLS_SHOWN = 3


@dataclass
class TableDifference:
    """One committed table that the replay did not reproduce, and how it differs."""

    path: str  # relative to the profile's folder
    detail: str


@dataclass
class Verdict:
    """The outcome of comparing a replay with the committed record of one profile."""

    profile: str
    reproduced: list[str] = field(default_factory=list)
    differences: list[TableDifference] = field(default_factory=list)
    not_regenerated: list[str] = field(default_factory=list)  # recorded inputs the replay only reads
    missing: list[str] = field(default_factory=list)  # tables the code now writes that the record lacks
    replay_started: float = 0.0  # a file in the replay tree older than this was copied in, not made

    @property
    def ok(self) -> bool:
        """Every committed table reproduced, and the record holds every table the code writes."""
        return not self.differences and not self.missing

    def summary_line(self) -> str:
        """The one-line verdict a user reads first."""
        if self.ok:
            return f"all {len(self.reproduced)} committed tables reproduced (profile {self.profile})"
        parts = []
        if self.differences:
            names = ", ".join(difference.path for difference in self.differences)
            total = len(self.reproduced) + len(self.differences)
            parts.append(
                f"{len(self.differences)} of {total} committed tables differ from their replay: {names}"
            )
        if self.missing:
            parts.append(
                f"{len(self.missing)} tables the code writes are not in the record: {', '.join(self.missing)}"
            )
        return f"profile {self.profile}: " + "; ".join(parts)

    def report(self) -> str:
        """The verdict with every difference, and what the replay did not regenerate."""
        lines = [("REPRODUCED: " if self.ok else "DIFFERS: ") + self.summary_line()]
        for difference in self.differences:
            lines.append(f"  {difference.path}: {difference.detail}")
        if self.not_regenerated:
            lines.append(
                f"  ({len(self.not_regenerated)} recorded files are read, not regenerated, by the replay: "
                "training runs and recorded inputs)"
            )
        if not self.ok:
            lines.append(
                "  If the change is intended, regenerate the record on purpose at a clean commit: "
                "make reproduce PROFILE=<profile> REPRODUCE_ARGS=--record (see CONTRIBUTING.md)."
            )
        return "\n".join(lines)


def compared_files(root: Path) -> list[str]:
    """The tables and summaries under a profile's folder, relative to it, in a stable order."""
    found = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if not path.is_file() or SKIPPED_DIRS.intersection(relative.parts[:-1]):
            continue
        if path.suffix in TABLE_SUFFIXES or path.name == STUDY_SUMMARY_FILE:
            found.append(relative.as_posix())
    return found


def read_table_csv(path: Path) -> pd.DataFrame:
    """Every cell as the text written, so nothing is lost to float parsing."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def compare_csv(committed: Path, replayed: Path) -> str | None:
    """None when the two CSVs hold the same cells (live columns aside); else what differs."""
    old, new = read_table_csv(committed), read_table_csv(replayed)
    old = old.drop(columns=[column for column in old.columns if column in LIVE_COLUMNS])
    new = new.drop(columns=[column for column in new.columns if column in LIVE_COLUMNS])
    for column in [
        column for column in new.columns if column in IMPLIED_COLUMNS and column not in old.columns
    ]:
        cells = set(new[column])
        if not cells <= IMPLIED_COLUMNS[column]:
            return f"column {column} added with {sorted(cells - IMPLIED_COLUMNS[column])}, which the record does not imply"
        new = new.drop(columns=[column])
    if list(old.columns) != list(new.columns):
        added = [column for column in new.columns if column not in old.columns]
        dropped = [column for column in old.columns if column not in new.columns]
        return f"columns changed (added {added}, dropped {dropped})"
    if len(old) != len(new):
        return f"{len(old)} rows committed, {len(new)} replayed"
    unequal = old.ne(new)
    if not unequal.to_numpy().any():
        return None
    spots = [(row, column) for column in old.columns for row in old.index[unequal[column]]]
    shown = [
        f"row {row} {column}: committed {old.at[row, column]!r}, replay {new.at[row, column]!r}"
        for row, column in spots[:MAX_CELLS_SHOWN]
    ]
    more = f" (+{len(spots) - MAX_CELLS_SHOWN} more)" if len(spots) > MAX_CELLS_SHOWN else ""
    return f"{len(spots)} cell(s) differ: " + "; ".join(shown) + more


def _markdown_rows(text: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("|")
    ]


def _without_live_columns(text: str) -> str:
    """A Markdown file with the cells of live-measurement columns blanked (tables only)."""
    rows = _markdown_rows(text)
    if not rows:
        return text
    live = [index for index, name in enumerate(rows[0]) if name in LIVE_COLUMNS]
    if not live:
        return text
    buffer = io.StringIO()
    for line in text.splitlines():
        if line.startswith("|"):
            cells = line.strip().strip("|").split("|")
            line = "|" + "|".join("" if index in live else cell for index, cell in enumerate(cells)) + "|"
        buffer.write(line + "\n")
    return buffer.getvalue()


def compare_markdown(committed: Path, replayed: Path) -> str | None:
    """None when two Markdown tables read the same (live columns aside); else the first differing line."""
    old = _without_live_columns(committed.read_text(encoding="utf-8")).splitlines()
    new = _without_live_columns(replayed.read_text(encoding="utf-8")).splitlines()
    if old == new:
        return None
    for number, (before, after) in enumerate(zip(old, new, strict=False), start=1):
        if before != after:
            return f"line {number}: committed {before[:160]!r}, replay {after[:160]!r}"
    return f"{len(old)} lines committed, {len(new)} replayed"


def compare_summary(committed: Path, replayed: Path) -> str | None:
    """None when two summary.json files carry the same headline numbers; else the first that moved."""
    old = json.loads(committed.read_text(encoding="utf-8")).get("numbers", [])
    new = json.loads(replayed.read_text(encoding="utf-8")).get("numbers", [])
    if old == new:
        return None
    if len(old) != len(new):
        return f"{len(old)} headline numbers committed, {len(new)} replayed"
    for before, after in zip(old, new, strict=True):
        if before != after:
            return f"headline number {before.get('name')!r} ({before.get('model')}): committed {before.get('value')!r}, replay {after.get('value')!r}"
    return "headline numbers differ"


def compare_file(committed: Path, replayed: Path) -> str | None:
    """Dispatch on the file's kind; None when equal."""
    if committed.name == STUDY_SUMMARY_FILE:
        return compare_summary(committed, replayed)
    if committed.suffix == ".csv":
        return compare_csv(committed, replayed)
    return compare_markdown(committed, replayed)


def compare_trees(profile: str, committed_root: Path, replay_root: Path, replay_started: float) -> Verdict:
    """Compare a replay's tree with the committed one; files the replay did not rewrite were only read.

    `replay_started` (a `time.time()`): a file in the replay tree older than it was copied in as a
    recorded input and not regenerated, so it proves nothing and is listed apart.
    """
    verdict = Verdict(profile, replay_started=replay_started)
    committed = set(compared_files(committed_root))
    for relative in compared_files(replay_root):
        replayed = replay_root / relative
        if replayed.stat().st_mtime < replay_started:
            verdict.not_regenerated.append(relative)
        elif relative not in committed:
            verdict.missing.append(relative)
        else:
            detail = compare_file(committed_root / relative, replayed)
            if detail is None:
                verdict.reproduced.append(relative)
            else:
                verdict.differences.append(TableDifference(relative, detail))
    return verdict
