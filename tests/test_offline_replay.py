"""A fresh clone re-derives the committed offline numbers from the committed replies, with no model."""

import json
from pathlib import Path

import pytest

from supersede_lib import profiles
from supersede_lib.studies import isolation

RECORDED = profiles.REPO_ROOT / "outputs" / "offline" / "responses.jsonl.gz"
COMMITTED_SUMMARY = profiles.REPO_ROOT / "outputs" / "offline" / "02_isolation" / "summary.json"


@pytest.mark.skipif(not RECORDED.exists(), reason="no recorded offline replies in this checkout")
def test_offline_isolation_replays_from_the_committed_replies_without_a_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, empty_home: Path
) -> None:
    monkeypatch.setattr(profiles, "OUTPUT_ROOT", tmp_path)
    monkeypatch.setattr(profiles, "_imported_recordings", set())
    monkeypatch.setenv("SUPERSEDE_MODEL_DIR", str(tmp_path / "no-models"))  # a live call would fail
    monkeypatch.delenv(profiles.LIVE_CALLS_ENV, raising=False)
    result = isolation.run_isolation(profiles.load_profile("offline"), progress=False)

    replayed = {(n["name"], n.get("model")): n["value"] for n in result.summary["numbers"]}
    committed = json.loads(COMMITTED_SUMMARY.read_text())
    for number in committed["numbers"]:
        assert replayed[(number["name"], number.get("model"))] == pytest.approx(number["value"]), number[
            "name"
        ]
    manifest = json.loads(
        next((tmp_path / "offline" / "02_isolation").glob("bounded_memory__*.manifest.json")).read_text()
    )
    questions = profiles.load_profile("offline").require("isolation").episodes.n
    assert (
        manifest["provenance"]["live_calls"] == 0 and manifest["provenance"]["replayed_answers"] == questions
    )
