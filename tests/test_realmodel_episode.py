"""The embedded default model answers one easy synthetic episode end to end: no key, no network.

Uses the 1.5B GGUF when provisioned, else the 0.5B; skips (with the reason) when neither file is
in $SUPERSEDE_MODEL_DIR or ~/.cache/supersede/models. It checks the plumbing with a real model
(a non-empty answer and a complete trajectory), not the model's accuracy.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from supersede_lib.data.synthetic import generate_episodes
from supersede_lib.eval.run_files import read_trajectories
from supersede_lib.eval.runner import RunSettings, run_condition
from supersede_lib.models.gguf import EmbeddedGGUFModel, default_model_dir

pytestmark = [pytest.mark.realmodel, pytest.mark.slow]

PREFERRED_FILES = ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
SESSIONS = 2  # a fact and its update: the fewest that make the notes supersede (each session a 1.5B call)


def _provisioned_default() -> Path | None:
    folders = [Path(os.environ["SUPERSEDE_MODEL_DIR"])] if os.environ.get("SUPERSEDE_MODEL_DIR") else []
    folders.append(default_model_dir())
    for filename in PREFERRED_FILES:
        for folder in folders:
            if (folder / filename).is_file():
                return folder / filename
    return None


def _short_easy_episode():
    for seed in range(50):
        (episode,) = generate_episodes(1, seed=seed, difficulty="easy", n_sessions=(SESSIONS, SESSIONS))
        if not episode.asks_previous_value:
            return episode
    pytest.fail(f"no easy synthetic episode of {SESSIONS} sessions asking the current value in seeds 0-49")


def test_embedded_default_answers_one_episode_offline(tmp_path, monkeypatch) -> None:
    model_path = _provisioned_default()
    if model_path is None:
        pytest.skip(f"no {' or '.join(PREFERRED_FILES)} in $SUPERSEDE_MODEL_DIR or {default_model_dir()}")
    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    episode = _short_easy_episode()
    model = EmbeddedGGUFModel(model_path, n_ctx=4096)
    try:
        frame = run_condition(
            [episode],
            "bounded_memory",
            model,
            RunSettings(concurrency=1),
            output_dir=tmp_path,
            run_name="real",
            progress=False,
        ).frame
    finally:
        model.close()

    row = frame.iloc[0]
    assert row["answer"].strip(), "the model gave an empty answer"
    assert row["n_calls"] == len(episode.sessions) + 1
    assert row["verdict"] in {"correct", "stale", "ambiguous", "wrong"}
    (trajectory,) = read_trajectories(tmp_path / "real.trajectories.jsonl")
    assert len(trajectory["notes_history"]) == len(episode.sessions)
    assert len(trajectory["holds_current"]) == len(episode.sessions)
    assert [turn["kind"] for turn in trajectory["turns"]] == ["notes"] * len(episode.sessions) + ["answer"]
    assert all(len(notes) <= 300 for notes in trajectory["notes_history"])
    assert trajectory["completion_tokens"] > 0
    manifest = json.loads((tmp_path / "real.manifest.json").read_text())
    assert manifest["model"]["class"] == "EmbeddedGGUFModel"
