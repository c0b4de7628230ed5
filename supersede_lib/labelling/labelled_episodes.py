"""The episode behind each labelled answer, rebuilt, so the matcher grades it as it grades live answers.

The matcher reads the episode's sessions (`eval.matcher`): which words only turns
without evidence use. A labelled answer records its episode's question and values, not its sessions,
so they are rebuilt from what the record names (the generator is deterministic):

- an evaluation set's answer (`outputs/<profile>/07_transfer_eval/<set>/...`): the profile's set;
- a training rollout (`outputs/<profile>/06_grpo_training/<run>.rollouts.jsonl`): the run's training
  episode (`label_batch.training_episode`);
- any other synthetic answer: the generator's preset and seed in its id (`syn-<preset>-<seed>`).

A rebuilt episode counts only if its question and values are the record's. An answer whose episode
cannot be rebuilt (older offline runs with other generator settings, prompt screening, LongMemEval) is
graded without sessions, as matchers before v6 graded every answer; `unresolved` says how many.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from supersede_lib import profiles
from supersede_lib.agent.episode import Episode
from supersede_lib.data import synthetic
from supersede_lib.data.episodes import load_episodes
from supersede_lib.eval.run_files import REPO_ROOT

_EVALUATION_FILE = re.compile(r"outputs/(?P<profile>[^/]+)/07_transfer_eval/(?P<set>[^/]+)/[^/]+$")
_ROLLOUTS_FILE = re.compile(r"outputs/[^/]+/06_grpo_training/(?P<run>[^/]+)\.rollouts\.jsonl$")
_SYNTHETIC_ID = re.compile(r"syn-(?P<preset>[a-z_]+)-(?P<seed>[0-9]+)$")


class LabelBatchError(ValueError):
    """A batch that cannot be built or merged as it stands: the message names the file, id and field."""


def evaluation_set(profile: profiles.Profile, set_name: str) -> profiles.EvaluationSet:
    try:
        return profile.evaluation(set_name)
    except profiles.ProfileError as error:
        raise LabelBatchError(f"profile {profile.name} has {error}") from error


def set_episodes(profile: profiles.Profile, set_name: str) -> dict[str, Episode]:
    """The named set's episodes by id, rebuilt from the profile (the generator is deterministic)."""
    episodes = load_episodes(evaluation_set(profile, set_name).episodes)
    return {episode.episode_id: episode for episode in episodes}


def training_episode(row: Mapping[str, Any], run_config: Mapping[str, Any], path: Path) -> Episode:
    """The training episode a logged rollout answered, rebuilt from the generator seed in its id
    (`syn-<preset>-<seed>`) and the run's preset and overrides, checked against the logged values."""
    preset, _, seed = str(row["episode_id"]).removeprefix("syn-").rpartition("-")
    if not seed.isdigit() or preset != row.get("difficulty"):
        raise LabelBatchError(
            f"{path}: episode {row['episode_id']}: field episode_id is not syn-<preset>-<seed>"
        )
    config = synthetic.config_for_difficulty(preset)
    overrides = {
        key: tuple(value) if isinstance(value, list) else value
        for key, value in run_config.get("episode_overrides", {}).items()
    }
    episode = synthetic.generate_episode(int(seed), dataclasses.replace(config, **overrides))
    for field in ("gold_answers", "superseded_values"):
        if list(getattr(episode, field)) != list(row[field]):
            raise LabelBatchError(
                f"{path}: episode {row['episode_id']}: field {field} differs from the rebuilt episode"
            )
    return episode


def labelled_episodes(rows: Iterable[Mapping[str, Any]]) -> dict[str, Episode]:
    """The rebuilt episode of every labelled answer (by answer id) whose episode can be rebuilt."""
    sets: dict[tuple[str, str], dict[str, Episode]] = {}
    run_configs: dict[str, dict[str, Any]] = {}
    episodes = {}
    for row in rows:
        episode = _rebuilt(row, sets, run_configs)
        if episode is not None and _is_the_records(episode, row):
            episodes[row["id"]] = episode
    return episodes


def unresolved(rows: Iterable[Mapping[str, Any]], episodes: Mapping[str, Episode]) -> int:
    """How many of `rows` are graded without their sessions."""
    return sum(row["id"] not in episodes for row in rows)


def _rebuilt(
    row: Mapping[str, Any],
    sets: dict[tuple[str, str], dict[str, Episode]],
    run_configs: dict[str, dict[str, Any]],
) -> Episode | None:
    source = row["source"]
    file, episode_id = str(source.get("file", "")), str(source.get("episode_id", ""))
    if match := _EVALUATION_FILE.match(file):
        key = (match["profile"], match["set"])
        if key not in sets:
            sets[key] = _set_episodes(*key)
        return sets[key].get(episode_id)
    if match := _ROLLOUTS_FILE.match(file):
        path = REPO_ROOT / file
        if file not in run_configs:
            config_path = path.with_name(f"{match['run']}.training_config.json")
            run_configs[file] = (
                json.loads(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
            )
        logged = {
            "episode_id": episode_id,
            "difficulty": episode_id.removeprefix("syn-").rpartition("-")[0],
            "gold_answers": row["gold_answers"],
            "superseded_values": row["superseded_values"],
        }
        try:
            return training_episode(logged, run_configs[file], path)
        except LabelBatchError:
            return None
    if match := _SYNTHETIC_ID.match(episode_id):
        try:
            return synthetic.generate_episode(int(match["seed"]), match["preset"])
        except (TypeError, ValueError, KeyError):
            return None  # a preset this generator no longer has
    return None


def _set_episodes(profile_name: str, set_name: str) -> dict[str, Episode]:
    try:
        return set_episodes(profiles.load_profile(profile_name), set_name)
    except (LabelBatchError, profiles.ProfileError):
        return {}


def _is_the_records(episode: Episode, row: Mapping[str, Any]) -> bool:
    return (
        episode.question == row["question"]
        and list(episode.gold_answers) == list(row["gold_answers"])
        and list(episode.superseded_values) == list(row["superseded_values"])
    )
