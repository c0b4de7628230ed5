"""Fixtures shared by several test files."""

import pytest

from supersede_lib.models.gguf import MODEL_DIR_ENV


@pytest.fixture
def empty_home(tmp_path, monkeypatch):
    """A fresh $HOME and no $SUPERSEDE_MODEL_DIR, so model-file lookups see only what a test puts there."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(MODEL_DIR_ENV, raising=False)
    return home
