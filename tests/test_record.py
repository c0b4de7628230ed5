"""The record: provenance of runs, replays that verify instead of overwrite, regeneration on purpose."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from supersede_lib import profiles
from supersede_lib.eval import provenance
from supersede_lib.reproduce import record, verify
from supersede_lib.results.headings import NOTEBOOK_ISOLATION
from supersede_lib.studies import isolation

COMMITTED_OFFLINE = profiles.REPO_ROOT / "outputs" / "offline"
RECORDED = COMMITTED_OFFLINE / "responses.jsonl.gz"


# --------------------------------------------------------------------------- provenance


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A throwaway git repository with one code file and one results file, committed."""
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@example.org")
    _git(tmp_path, "config", "user.name", "t")
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "table.csv").write_text("a\n1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "start")
    return tmp_path


def test_results_under_outputs_do_not_make_the_code_dirty(repo: Path) -> None:
    (repo / "outputs" / "table.csv").write_text("a\n2\n")
    state = provenance.git_state(repo)
    assert state["commit"] and state["dirty"] is False and "diff_sha256" not in state


def test_a_code_change_is_dirty_and_its_diff_is_hashed(repo: Path) -> None:
    (repo / "code.py").write_text("x = 2\n")
    first = provenance.git_state(repo)
    (repo / "code.py").write_text("x = 3\n")
    second = provenance.git_state(repo)
    assert first["dirty"] and second["dirty"]
    assert len(first["diff_sha256"]) == 64 and first["diff_sha256"] != second["diff_sha256"]
    assert provenance.commit_label(first) == first["commit"] + "-dirty"


@pytest.fixture
def checkout(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`repo` standing in for the project's checkout, nothing pinned yet."""
    monkeypatch.setattr(provenance, "REPO_ROOT", repo)
    monkeypatch.setattr(provenance, "_first_checkout_state", None)
    monkeypatch.delenv(provenance.PINNED_STATE_ENV, raising=False)
    return repo


def test_a_long_run_names_the_commit_it_started_from_not_one_made_while_it_ran(checkout: Path) -> None:
    started = provenance.pin_checkout_state()
    (checkout / "code.py").write_text("x = 2\n")
    _git(checkout, "commit", "-q", "-am", "made while the run ran")
    assert provenance.read_git_state(checkout)["commit"] != started["commit"]
    assert provenance.git_state() == started and provenance.commit_label() == started["commit"]


def test_a_child_process_inherits_the_pinned_state_of_its_own_checkout_only(
    checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pinned = {"commit": "a" * 40, "dirty": False}
    monkeypatch.setenv(provenance.PINNED_STATE_ENV, json.dumps({"root": str(checkout), "state": pinned}))
    assert provenance.git_state() == pinned
    monkeypatch.setenv(provenance.PINNED_STATE_ENV, json.dumps({"root": "/another/clone", "state": pinned}))
    assert (
        provenance.git_state()["commit"] == provenance.read_git_state(checkout)["commit"] != pinned["commit"]
    )


def test_live_results_from_dirty_code_are_refused_in_outputs_unless_allowed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(provenance.ALLOW_DIRTY_ENV, raising=False)
    dirty = {"commit": "abc", "dirty": True, "diff_sha256": "f" * 64}
    inside = provenance.REPO_ROOT / "outputs" / "offline" / "02_isolation"
    with pytest.raises(provenance.DirtyCheckoutError, match="--allow-dirty"):
        provenance.check_clean_for_results(inside, dirty)
    assert provenance.check_clean_for_results(tmp_path, dirty) == dirty  # scratch: always allowed
    assert provenance.check_clean_for_results(inside, {"commit": "abc", "dirty": False})
    monkeypatch.setenv(provenance.ALLOW_DIRTY_ENV, "1")
    assert provenance.check_clean_for_results(inside, dirty)["diff_sha256"] == "f" * 64


def test_config_hash_ignores_key_order_and_sees_values() -> None:
    assert provenance.config_sha256({"a": 1, "b": [2]}) == provenance.config_sha256({"b": [2], "a": 1})
    assert provenance.config_sha256({"a": 1}) != provenance.config_sha256({"a": 2})


def test_every_committed_recorded_reply_names_its_commit_or_the_explicit_mark() -> None:
    import gzip

    files = sorted((profiles.REPO_ROOT / "outputs").rglob("responses.jsonl.gz"))
    assert files, "no recorded replies committed"
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            commits = {json.loads(line).get("made_by_commit") for line in handle}
        assert None not in commits and "" not in commits, path


def test_no_committed_manifest_names_a_dirty_checkout_without_saying_why_it_cannot_be_regenerated() -> None:
    """Replays regenerated every manifest they can at a clean commit. The rest (exploratory live runs
    whose replies were never recorded, evaluations on real records whose replies are never
    committed) say so explicitly in `not_regenerable`, as a reply recorded before provenance says
    `recorded-before-provenance`: never silently dirty."""
    tracked = subprocess.run(
        ["git", "ls-files", "outputs"], cwd=profiles.REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    unexplained, explained = [], 0
    for name in tracked:
        if name.endswith((".manifest.json", "summary.json")):
            data = json.loads((profiles.REPO_ROOT / name).read_text(encoding="utf-8"))
            if isinstance(data, dict) and (data.get("git") or {}).get("dirty"):
                if str(data.get("not_regenerable") or "").strip():
                    explained += 1
                else:
                    unexplained.append(name)
    assert not unexplained, (
        f"{len(unexplained)} committed manifests name a dirty checkout, e.g. {unexplained[:3]}"
    )
    assert explained <= 14, "a new manifest from uncommitted code: commit the code and record it again"


# --------------------------------------------------------------------------- comparing trees


def _tree(root: Path, latency: str = "1.5", verdict: str = "correct") -> Path:
    study = root / "02_isolation"
    study.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(
        {"episode_id": ["e1", "e2"], "verdict": [verdict, "wrong"], "latency_s": [latency, "2.0"]}
    ).to_csv(study / "run.csv", index=False)
    (study / "table.md").write_text(f"| model | accuracy |\n| --- | --- |\n| m | {verdict} |\n")
    numbers = [{"name": "accuracy", "value": 0.5 if verdict == "correct" else 0.0, "model": "m"}]
    (study / "summary.json").write_text(json.dumps({"numbers": numbers, "created_at": str(time.time())}))
    return root


def test_identical_tables_reproduce_and_live_columns_are_not_compared(tmp_path: Path) -> None:
    committed = _tree(tmp_path / "committed")
    started = time.time() - 1
    replay = _tree(tmp_path / "replay", latency="0.0")
    verdict = verify.compare_trees("p", committed, replay, started)
    assert verdict.ok and len(verdict.reproduced) == 3
    assert verdict.summary_line() == "all 3 committed tables reproduced (profile p)"


def test_a_moved_number_names_the_tables_and_the_cells(tmp_path: Path) -> None:
    committed = _tree(tmp_path / "committed")
    started = time.time() - 1
    replay = _tree(tmp_path / "replay", verdict="stale")
    verdict = verify.compare_trees("p", committed, replay, started)
    assert not verdict.ok
    moved = {difference.path: difference.detail for difference in verdict.differences}
    assert set(moved) == {"02_isolation/run.csv", "02_isolation/table.md", "02_isolation/summary.json"}
    assert "row 0 verdict: committed 'correct', replay 'stale'" in moved["02_isolation/run.csv"]
    assert "3 of 3 committed tables differ" in verdict.summary_line() and "--record" in verdict.report()


def test_a_table_the_record_lacks_fails_the_check(tmp_path: Path) -> None:
    committed = _tree(tmp_path / "committed")
    started = time.time() - 1
    replay = _tree(tmp_path / "replay")
    (replay / "02_isolation" / "new_table.md").write_text("| a |\n| --- |\n| 1 |\n")
    verdict = verify.compare_trees("p", committed, replay, started)
    assert not verdict.ok and verdict.missing == ["02_isolation/new_table.md"]
    assert "not in the record: 02_isolation/new_table.md" in verdict.summary_line()


def test_files_the_replay_did_not_write_are_listed_apart_not_counted_as_reproduced(tmp_path: Path) -> None:
    committed = _tree(tmp_path / "committed")
    replay = _tree(tmp_path / "replay")
    verdict = verify.compare_trees("p", committed, replay, time.time() + 5)  # all older than the replay
    assert verdict.ok and not verdict.reproduced and len(verdict.not_regenerated) == 3


# --------------------------------------------------------------------------- regenerating on purpose


def test_record_adopts_changed_tables_and_keeps_live_measurements(tmp_path: Path) -> None:
    committed = _tree(tmp_path / "committed", latency="41.05")
    study = committed / "02_isolation"
    live = {
        "git": {"commit": "old", "dirty": True},
        "wall_s": 1395.2,
        "totals": {"cached_calls": 95, "calls": 9},
    }
    (study / "run.manifest.json").write_text(json.dumps({**live, "accuracy": {"matcher": 0.5}}))
    started = time.time() - 1
    replay = _tree(tmp_path / "replay", latency="0.0", verdict="stale")
    replayed = {
        "git": {"commit": "new", "dirty": False},
        "wall_s": 0.4,
        "totals": {"cached_calls": 9, "calls": 9},
    }
    (replay / "02_isolation" / "run.manifest.json").write_text(
        json.dumps({**replayed, "accuracy": {"matcher": 0.0}})
    )
    verdict = verify.compare_trees("p", committed, replay, started)

    adopted = record.adopt_replay(verdict, replay, committed)

    assert "02_isolation/run.csv" in adopted and "02_isolation/run.manifest.json" in adopted
    rows = pd.read_csv(study / "run.csv", dtype=str)
    assert rows["verdict"].tolist() == ["stale", "wrong"]  # the new verdicts
    assert rows["latency_s"].tolist() == ["41.05", "2.0"]  # the live run's latencies, kept
    manifest = json.loads((study / "run.manifest.json").read_text())
    assert manifest["git"] == {"commit": "new", "dirty": False} and manifest["accuracy"]["matcher"] == 0.0
    assert manifest["live_run"]["wall_s"] == 1395.2 and manifest["live_run"]["git"]["commit"] == "old"
    assert manifest["live_run"]["totals"] == {"cached_calls": 95}


def test_record_leaves_reproduced_files_alone(tmp_path: Path) -> None:
    committed = _tree(tmp_path / "committed", latency="41.05")
    before = (committed / "02_isolation" / "run.csv").read_bytes()
    started = time.time() - 1
    replay = _tree(tmp_path / "replay", latency="0.0")
    assert record.adopt_replay(verify.compare_trees("p", committed, replay, started), replay, committed) == []
    assert (committed / "02_isolation" / "run.csv").read_bytes() == before


# --------------------------------------------------------------------------- the real record


@pytest.fixture
def replayed_isolation(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, empty_home: Path) -> Path:
    """Replays study 02 of the offline profile from its recorded replies into `tmp_path` (no model)."""
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    monkeypatch.setattr(profiles, "_imported_recordings", set())
    monkeypatch.setenv("SUPERSEDE_MODEL_DIR", str(tmp_path / "no-models"))  # a live call would fail
    monkeypatch.delenv(profiles.LIVE_CALLS_ENV, raising=False)
    return tmp_path


@pytest.mark.skipif(not RECORDED.exists(), reason="no recorded offline replies in this checkout")
def test_the_committed_isolation_tables_replay_exactly(replayed_isolation: Path) -> None:
    started = time.time() - 1
    isolation.run_isolation(profiles.load_profile("offline"), progress=False)
    verdict = verify.compare_trees("offline", COMMITTED_OFFLINE, replayed_isolation / "offline", started)
    regenerated = [path for path in verdict.reproduced if path.startswith(NOTEBOOK_ISOLATION)]
    assert verdict.ok, verdict.report()
    assert len(regenerated) >= 10  # tables, per-run CSVs and the summary's numbers


@pytest.mark.skipif(not RECORDED.exists(), reason="no recorded offline replies in this checkout")
def test_a_changed_matcher_rule_fails_the_check_naming_the_tables_that_moved(
    replayed_isolation: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from supersede_lib.eval import matcher, runner

    original = matcher.score_episode_answer

    def stricter(episode, answer, *args, **kwargs):  # a rule change: answers over 40 characters are wrong
        score = original(episode, answer, *args, **kwargs)
        return score if len(answer or "") <= 40 else matcher.Score("wrong", False, False, 0.0)

    monkeypatch.setattr(runner, "score_episode_answer", stricter)
    started = time.time() - 1
    isolation.run_isolation(profiles.load_profile("offline"), progress=False)
    verdict = verify.compare_trees("offline", COMMITTED_OFFLINE, replayed_isolation / "offline", started)
    moved = {difference.path for difference in verdict.differences}
    assert not verdict.ok
    assert {
        "02_isolation/table1_isolation.md",
        "02_isolation/accuracy.csv",
        "02_isolation/summary.json",
    } <= moved


def test_a_replay_never_overwrites_the_live_measurements_of_the_same_run(tmp_path: Path) -> None:
    from supersede_lib.eval.run_files import keep_live_run, live_measurements

    path = tmp_path / "run.manifest.json"
    run = {"config": {"seed": 0}, "episodes": {"episode_ids": ["e1"]}}
    live = {
        **run,
        "wall_s": 1395.2,
        "git": {"commit": "a", "dirty": False},
        "totals": {"calls": 9, "cached_calls": 2},
    }
    path.write_text(json.dumps(live))
    replay = {
        **run,
        "wall_s": 0.4,
        "provenance": {"live_calls": 0},
        "totals": {"calls": 9, "cached_calls": 9},
    }

    kept = keep_live_run(path, replay)
    assert kept["wall_s"] == 0.4 and kept["live_run"]["wall_s"] == 1395.2
    assert live_measurements(kept) == {"wall_s": 1395.2, "totals": {"calls": 9, "cached_calls": 2}}
    other_questions = {**replay, "episodes": {"episode_ids": ["e2"]}}
    assert "live_run" not in keep_live_run(path, other_questions)  # another run: nothing to hand on
    live_again = {**replay, "provenance": {"live_calls": 3}}
    assert "live_run" not in keep_live_run(path, live_again)  # a live run measures itself


def test_record_leaves_a_manifest_the_replay_only_copied_in(tmp_path: Path) -> None:
    committed = _tree(tmp_path / "committed")
    dirty = json.dumps({"git": {"commit": "old", "dirty": True}, "wall_s": 7.2})
    (committed / "02_isolation" / "real.manifest.json").write_text(dirty)
    replay = _tree(tmp_path / "replay")
    (replay / "02_isolation" / "real.manifest.json").write_text(dirty)  # copied in, never rewritten
    started = time.time() + 5
    adopted = record.adopt_replay(verify.compare_trees("p", committed, replay, started), replay, committed)
    assert adopted == [] and (committed / "02_isolation" / "real.manifest.json").read_text() == dirty
