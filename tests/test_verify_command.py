"""`python -m supersede_lib verify` on a pre-registered profile: the proof piece by piece, then the
recorded studies beyond it (09, 10) replayed as notebooks; any of them failing fails the profile."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from supersede_lib.cli import verify


def _replays(monkeypatch: pytest.MonkeyPatch, ok: bool) -> list[tuple[str, list[str], str]]:
    asked: list[tuple[str, list[str], str]] = []

    def fake_reproduce(name: str, only: list[str], *, mode: str, write_report: bool) -> SimpleNamespace:
        assert not write_report  # a check never rewrites REPORT.md
        asked.append((name, list(only), mode))
        return SimpleNamespace(verdict=SimpleNamespace(ok=ok))

    monkeypatch.setattr(verify, "reproduce", fake_reproduce)
    return asked


def test_the_studies_beyond_a_proof_are_replayed_as_notebooks(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _replays(monkeypatch, ok=True)
    recorded = {"p/09_robustness", "p/10_fast_slow", "p/07_transfer_eval", "p/06_grpo_training"}
    monkeypatch.setattr(verify, "has_committed_record", lambda folder: folder in recorded)
    assert verify.studies_beyond_the_proof_reproduce("p")
    assert asked == [("p", ["09", "10"], "replay")]  # 06 and 07 are the proof's, checked piece by piece


def test_a_failing_study_fails_the_profile_and_none_recorded_replays_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = _replays(monkeypatch, ok=False)
    monkeypatch.setattr(verify, "has_committed_record", lambda folder: folder == "p/10_fast_slow")
    assert not verify.studies_beyond_the_proof_reproduce("p")
    monkeypatch.setattr(verify, "has_committed_record", lambda folder: False)
    assert verify.studies_beyond_the_proof_reproduce("p") and len(asked) == 1
