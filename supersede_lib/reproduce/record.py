"""Regenerate the record on purpose: adopt a replay's changed files into outputs/, live measurements kept.

After an intended change (a matcher rule, a prompt, a statistic), `reproduce --record` replays the
profile into scratch, and this module copies into the committed `outputs/<profile>/` only what the
replay changed, plus the run manifests that still describe an uncommitted checkout. What a live run
measured (per-row latency, calls found cached, wall time, the checkout the calls were made from)
cannot be replayed, so it is carried over from the committed file, never overwritten: the adopted
manifest keeps it under `live_run`, and its own `git` names the clean commit that regenerated it.
Files a replay reproduces byte for byte, or reproduces up to live columns, are left alone.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib.eval.run_files import live_run_record, portable_path
from supersede_lib.reproduce.verify import LIVE_COLUMNS, Verdict, read_table_csv
from supersede_lib.results.outputs import STUDY_SUMMARY_FILE

LIVE_TURN_FIELDS = ("latency_s", "cached", "made_by_commit")
LIVE_TRAJECTORY_FIELDS = ("latency_s", "wall_s", "cached_calls")  # the episode's, measured when it ran live
MANIFEST_SUFFIX = ".manifest.json"
TRAJECTORIES_SUFFIX = ".trajectories.jsonl"


def merged_manifest(committed: dict[str, Any], replayed: dict[str, Any]) -> dict[str, Any]:
    """The replay's manifest (its commit, its verdicts) with the committed live run's measurements kept."""
    return {
        **replayed,
        "live_run": replayed.get("live_run") or live_run_record(committed),
        "regenerated_by_replay": True,
    }


def carry_live_columns(committed: pd.DataFrame, replayed: pd.DataFrame) -> pd.DataFrame:
    """The replay's rows with the committed live columns, when both hold the same questions in order."""
    same_rows = len(committed) == len(replayed) and (
        "episode_id" not in committed or committed["episode_id"].tolist() == replayed["episode_id"].tolist()
    )
    if not same_rows:
        return replayed
    carried = replayed.copy()
    for column in LIVE_COLUMNS & set(committed.columns) & set(replayed.columns):
        carried[column] = committed[column].to_numpy()
    return carried


def carry_live_turns(committed: list[dict[str, Any]], replayed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Replayed trajectories with the live fields (latency, wall time, cached calls; each turn's latency,
    cached flag and commit) of the committed one: a replay re-grades, it never re-times."""
    by_episode = {record.get("episode_id"): record for record in committed}
    for record in replayed:
        old = by_episode.get(record.get("episode_id"))
        if old is None or len(old.get("turns", [])) != len(record.get("turns", [])):
            continue
        record.update({key: old[key] for key in LIVE_TRAJECTORY_FIELDS if key in old})
        for old_turn, new_turn in zip(old["turns"], record["turns"], strict=True):
            new_turn.update({key: old_turn[key] for key in LIVE_TURN_FIELDS if key in old_turn})
    return replayed


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text(
        "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records), encoding="utf-8"
    )


def adopt_table(relative: str, replay_dir: Path, committed_dir: Path) -> None:
    source, target = replay_dir / relative, committed_dir / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.suffix == ".csv" and target.exists():
        carry_live_columns(read_table_csv(target), read_table_csv(source)).to_csv(target, index=False)
    else:
        shutil.copyfile(source, target)


def _needs_manifest(committed: Path, run_changed: bool) -> bool:
    """A manifest is rewritten when its run's results changed or it still names an uncommitted checkout."""
    if not committed.exists() or run_changed:
        return True
    manifest = json.loads(committed.read_text(encoding="utf-8"))
    return bool((manifest.get("git") or {}).get("dirty"))


def adopt_run(stem: Path, replay_dir: Path, committed_dir: Path, run_changed: bool) -> list[str]:
    """A run's manifest (and, when its results changed, its trajectories), live measurements kept."""
    adopted = []
    manifest_path = stem.with_name(stem.name + MANIFEST_SUFFIX)
    committed_manifest = committed_dir / manifest_path
    if _needs_manifest(committed_manifest, run_changed):
        replayed = json.loads((replay_dir / manifest_path).read_text(encoding="utf-8"))
        committed = (
            json.loads(committed_manifest.read_text(encoding="utf-8")) if committed_manifest.exists() else {}
        )
        merged = merged_manifest(committed, replayed) if committed else replayed
        committed_manifest.parent.mkdir(parents=True, exist_ok=True)
        committed_manifest.write_text(json.dumps(merged, indent=2, default=str) + "\n", encoding="utf-8")
        adopted.append(manifest_path.as_posix())
    trajectories = stem.with_name(stem.name + TRAJECTORIES_SUFFIX)
    if run_changed and (replay_dir / trajectories).exists():
        old = _read_jsonl(committed_dir / trajectories) if (committed_dir / trajectories).exists() else []
        _write_jsonl(
            committed_dir / trajectories, carry_live_turns(old, _read_jsonl(replay_dir / trajectories))
        )
        adopted.append(trajectories.as_posix())
    return adopted


def _run_csv(manifest: Path) -> str:
    """`<dir>/<run>.csv` of `<dir>/<run>.manifest.json` (run names hold dots: no Path.with_suffix)."""
    return manifest.with_name(manifest.name.removesuffix(MANIFEST_SUFFIX) + ".csv").as_posix()


def _regenerated_manifests(replay_dir: Path, verdict: Verdict) -> list[Path]:
    """Manifests the replay wrote itself (those copied in as inputs and left alone are older)."""
    return [
        path.relative_to(replay_dir)
        for path in sorted(replay_dir.rglob(f"*{MANIFEST_SUFFIX}"))
        if path.stat().st_mtime >= verdict.replay_started
    ]


def _adopt_executed(source: Path, target: Path) -> None:
    """An executed notebook of the replay, its results folder named as where they now lie (outputs/)."""
    replay_root = portable_path(source.parents[2])
    text = source.read_text(encoding="utf-8").replace(f"{replay_root}/", "outputs/")
    target.write_text(text, encoding="utf-8")


def _studies_with_dirty_summaries(replay_dir: Path, committed_dir: Path, verdict: Verdict) -> set[str]:
    """Studies whose committed summary.json the replay rewrote and which still names an uncommitted checkout."""
    found = set()
    for path in replay_dir.glob(f"*/{STUDY_SUMMARY_FILE}"):
        relative = path.relative_to(replay_dir).as_posix()
        committed = committed_dir / relative
        if relative in verdict.not_regenerated or not committed.exists():
            continue
        if (json.loads(committed.read_text(encoding="utf-8")).get("git") or {}).get("dirty"):
            found.add(path.parent.name)
    return found


def adopt_replay(verdict: Verdict, replay_dir: Path, committed_dir: Path) -> list[str]:
    """Copy what the replay changed into the committed folder; returns the files written (relative)."""
    changed = [difference.path for difference in verdict.differences] + list(verdict.missing)
    adopted = []
    for relative in changed:
        adopt_table(relative, replay_dir, committed_dir)
        adopted.append(relative)
    for manifest in _regenerated_manifests(replay_dir, verdict):
        stem = manifest.with_name(manifest.name.removesuffix(MANIFEST_SUFFIX))
        adopted += adopt_run(stem, replay_dir, committed_dir, _run_csv(manifest) in changed)
    studies = {Path(relative).parts[0] for relative in adopted if len(Path(relative).parts) > 1}
    studies |= _studies_with_dirty_summaries(replay_dir, committed_dir, verdict)
    for study in sorted(studies):
        for extra in (STUDY_SUMMARY_FILE, *[path.name for path in (replay_dir / study).glob("*.png")]):
            if (replay_dir / study / extra).exists():
                shutil.copyfile(replay_dir / study / extra, committed_dir / study / extra)
                adopted.append(f"{study}/{extra}")
        executed = replay_dir / "executed" / f"{study}.ipynb"
        if executed.exists() and (committed_dir / "executed").exists():
            _adopt_executed(executed, committed_dir / "executed" / executed.name)
            adopted.append(f"executed/{executed.name}")
    return adopted
