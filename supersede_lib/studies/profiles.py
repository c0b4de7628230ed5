"""Run profiles: which data, models and sizes each study uses (configs/<profile>.yaml).

A notebook asks this module for its episodes and models instead of building them itself,
so `paper`, `local`, `offline` and `smoke` differ only in their YAML file.
"""

from __future__ import annotations

import atexit
import copy
import os
from pathlib import Path
from typing import Any

import yaml

from supersede_lib.episode import Episode
from supersede_lib.models.chat import ChatModel

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO_ROOT / "configs"
OUTPUT_ROOT = Path(os.environ.get("SUPERSEDE_OUTPUT_DIR", REPO_ROOT / "outputs"))
PROFILES = ("smoke", "offline", "local", "paper")

_fake_servers: list[Any] = []  # kept alive for the process; closed at exit


class ProfileError(ValueError):
    """A profile file is missing or malformed."""


def load_profile(name_or_path: str | os.PathLike = "local", overrides: dict[str, Any] | None = None) -> dict:
    """Read configs/<name>.yaml (or a YAML path) and deep-merge `overrides` into it."""
    path = Path(name_or_path)
    if not path.suffix:
        path = CONFIG_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        raise ProfileError(f"no profile {name_or_path!r}: expected {path} (choices: {', '.join(PROFILES)})")
    profile = yaml.safe_load(path.read_text()) or {}
    if not isinstance(profile, dict) or "name" not in profile:
        raise ProfileError(f"{path}: a profile is a mapping with at least a 'name' field")
    return _deep_merge(profile, overrides or {})


def _deep_merge(base: dict, overrides: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def output_dir(profile: dict, notebook: str) -> Path:
    """outputs/<profile>/<notebook>/, created on demand."""
    path = OUTPUT_ROOT / profile["name"] / notebook
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_path(profile: dict) -> Path:
    """The profile's persistent response cache (a re-run of a finished study is free)."""
    path = Path(profile.get("cache_path") or OUTPUT_ROOT / profile["name"] / "cache" / "responses.sqlite")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def episodes_for(spec: dict[str, Any]) -> list[Episode]:
    """Episodes for one study from an `episodes:` block of a profile.

    `source: longmemeval` reads the split (`oracle`/`s`) and keeps the first `n` items;
    `source: synthetic` generates `n` episodes of a difficulty preset; `extra_distractor_sessions`
    lengthens each episode with distractor sessions (the synthetic scale study's long history).
    """
    spec = dict(spec)
    source = spec.pop("source", "synthetic")
    count = spec.pop("n", None)
    if source == "longmemeval":
        from supersede_lib.data.longmemeval import load_longmemeval

        return load_longmemeval(
            split=spec.get("split", "oracle"),
            question_type=spec.get("question_type", "knowledge-update"),
            local_path=spec.get("local_path"),
            limit=count,
        )
    if source == "synthetic":
        from supersede_lib.data import synthetic

        extra = spec.pop("extra_distractor_sessions", 0)
        episodes = synthetic.generate_episodes(
            count or 8, seed=spec.pop("seed", 0), difficulty=spec.pop("difficulty", "medium"), **spec
        )
        if extra:
            episodes = [synthetic.add_distractor_sessions(episode, extra) for episode in episodes]
        return episodes
    raise ProfileError(f"unknown episode source {source!r}; expected 'longmemeval' or 'synthetic'")


def model_for(spec: dict[str, Any], profile: dict | None = None, use_cache: bool = True) -> ChatModel:
    """Build a ChatModel from a model spec, wrapped in the profile's response cache.

    `backend: fake` starts the deterministic local fake server (smoke profile only).
    `backend: embedded` with `model_file` looks the GGUF up in SUPERSEDE_MODEL_DIR /
    ~/.cache/supersede/models, else downloads the default from the hub.
    """
    from supersede_lib.models.gguf import resolve_default_gguf
    from supersede_lib.models.openai_api import OpenAIChatModel
    from supersede_lib.models.spec import make_chat_model

    spec = dict(spec)
    name = spec.pop("name", None)
    backend = spec.get("backend", "embedded")
    if backend == "fake":
        from supersede_lib.models.local_server import LocalOpenAIServer

        server = LocalOpenAIServer()
        server.__enter__()
        _fake_servers.append(server)
        model: ChatModel = OpenAIChatModel(
            model=name or "fake-heuristic-server", base_url=server.base_url, api_key_env="SUPERSEDE_FAKE_KEY"
        )
    else:
        if backend == "embedded" and "model_path" not in spec:
            spec["model_path"] = str(resolve_default_gguf(filename=spec.pop("model_file")))
        spec.pop("model_file", None)
        if name:
            spec["name"] = name
        model = make_chat_model(spec)
    if use_cache and profile is not None:
        from supersede_lib.models.cache import CachedChatModel, ResponseCache

        model = CachedChatModel(model, ResponseCache(cache_path(profile)))
    return model


@atexit.register
def _close_fake_servers() -> None:
    while _fake_servers:
        _fake_servers.pop().__exit__(None, None, None)
