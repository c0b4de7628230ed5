"""Training presets are YAML files (configs/training/), read into TrainingConfig with clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from supersede_lib.train.config import PRESETS, PRESETS_DIR, TrainingConfig, read_preset


def test_every_named_preset_has_its_file_and_builds_a_config() -> None:
    assert sorted(PRESETS) == sorted(path.stem for path in PRESETS_DIR.glob("*.yaml"))
    for name in PRESETS:
        assert isinstance(TrainingConfig.preset(name), TrainingConfig)


def test_a_model_file_is_looked_up_in_the_model_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SUPERSEDE_MODEL_DIR", str(tmp_path))
    config = TrainingConfig.preset("cpu_proof")
    assert Path(config.model_name_or_path).parent == tmp_path
    assert config.episode_overrides == {"n_sessions": (2, 3)}  # YAML lists held as tuples


def test_an_unknown_key_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text("learning_rate: 1.0e-5\nlearning_rat: 3\n")
    with pytest.raises(ValueError, match=r"mine\.yaml: unknown key\(s\) \['learning_rat'\]"):
        read_preset("mine", tmp_path)


def test_an_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown training preset 'nope'.*cpu_proof"):
        TrainingConfig.preset("nope")
