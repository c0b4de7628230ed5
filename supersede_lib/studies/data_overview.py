"""Notebook 01: statistics of the episodes each study asks, and one generator sample per difficulty.

`data_overview(profile)` describes the distinct episode sets of the profile's isolation and scale
blocks (LongMemEval splits, or the synthetic stand-in), shows the generator's difficulty presets
with one sample each, and hands the explorer the isolation episodes and 02's trajectories.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib import profiles
from supersede_lib.agent.episode import Episode
from supersede_lib.data import longmemeval, synthetic
from supersede_lib.data.episodes import EpisodeSpec, load_episodes
from supersede_lib.eval.run_files import read_trajectories
from supersede_lib.profiles import IsolationBlock, Profile, ScaleBlock
from supersede_lib.results.headings import NOTEBOOK_DATA, NOTEBOOK_ISOLATION, headline_number, slug
from supersede_lib.results.outputs import write_summary, write_table


@dataclass
class DataOverview:
    """What notebook 01 shows: per-question statistics, their summary, generator samples."""

    profile: str
    data_label: str
    statistics: dict[str, pd.DataFrame]  # label -> one row per question (data.dataset_statistics)
    summary_table: pd.DataFrame  # one row per label (data.summarize_statistics)
    generator_samples: pd.DataFrame  # one sample episode per difficulty preset
    generator_configs: pd.DataFrame  # the presets of the difficulty ladder
    sample_episodes: dict[str, Episode]  # difficulty -> its sample episode
    episodes: list[Episode]  # the isolation study's episodes (for the explorer)
    trajectories: list[dict[str, Any]] | None  # 02's bounded-memory trajectories, if 02 has run
    output_dir: Path
    summary: dict[str, Any]


def overview_specs(profile: Profile) -> dict[str, EpisodeSpec]:
    """The distinct episode sets the profile's studies use, by label (the isolation set first)."""
    isolation: IsolationBlock = profile.require("isolation")
    scale: ScaleBlock = profile.require("scale")
    specs: dict[str, EpisodeSpec] = {}
    for spec in (isolation.episodes, scale.short, scale.long):
        if spec.source == "longmemeval":  # None: every question of the type
            spec = spec.model_copy(update={"n": profile.overview.longmemeval_n})
        specs.setdefault(spec.label, spec)
    return specs


def latest_trajectories(profile: Profile) -> list[dict[str, Any]] | None:
    """Notebook 02's bounded-memory trajectories for this profile, or None if 02 has not run."""
    directory = profiles.OUTPUT_ROOT / profile.name / NOTEBOOK_ISOLATION
    paths = sorted(directory.glob("bounded_memory__*.trajectories.jsonl"))
    return read_trajectories(paths[0]) if paths else None


def generator_overview(samples_seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Episode]]:
    """One sample episode per difficulty preset, the presets' settings, and the samples themselves."""
    sample_rows, config_rows, samples = [], [], {}
    for difficulty in (*synthetic.DIFFICULTY_LADDER, synthetic.EXPLICIT_TEMPLATED):
        episode = synthetic.generate_episodes(1, seed=samples_seed, difficulty=difficulty)[0]
        samples[difficulty] = episode
        sample_rows.append(
            {
                "difficulty": difficulty,
                "episode_id": episode.episode_id,
                "sessions": len(episode.sessions),
                "chars": episode.total_chars,
                "question": episode.question,
                "gold": " | ".join(episode.gold_answers),
                "superseded": " | ".join(episode.superseded_values),
            }
        )
        described = synthetic.describe_config(difficulty)
        described.pop("name", None)
        described["domains"] = ", ".join(described.get("domains", []))
        config_rows.append({"difficulty": difficulty, **described})
    return pd.DataFrame(sample_rows), pd.DataFrame(config_rows), samples


def _statistics_numbers(profile: Profile, statistics: dict[str, pd.DataFrame]) -> list[dict]:
    numbers = []
    for label, frame in statistics.items():
        meta = {"model": "—", "data": label, "profile": profile.name, "n": len(frame)}
        numbers.append(headline_number("questions", len(frame), **meta))
        for column in ("n_sessions", "total_chars", "approx_tokens"):
            numbers.append(
                headline_number(f"mean {column} per question", float(frame[column].mean()), **meta)
            )
        numbers.append(headline_number("abstention items", int(frame["is_abstention"].sum()), **meta))
        numbers.append(
            headline_number("previous-value items", int(frame["asks_previous_value"].sum()), **meta)
        )
    return numbers


def data_overview(profile: Profile, *, samples_seed: int = 0) -> DataOverview:
    """Statistics of the episodes each study uses, plus one generator sample per difficulty preset."""
    directory = profiles.output_dir(profile, NOTEBOOK_DATA)
    specs = overview_specs(profile)
    statistics: dict[str, pd.DataFrame] = {}
    for label, spec in specs.items():
        frame = longmemeval.dataset_statistics(load_episodes(spec))
        statistics[label] = frame
        frame.to_csv(directory / f"statistics__{slug(label)}.csv", index=False)
    summary_table = longmemeval.summarize_statistics(statistics)
    generator_samples, generator_configs, samples = generator_overview(samples_seed)
    tables = [
        write_table(directory, "statistics_summary", summary_table.round(1)),
        write_table(directory, "generator_samples", generator_samples),
        write_table(directory, "generator_presets", generator_configs),
    ]
    (directory / "generator_samples.json").write_text(
        json.dumps({name: episode.to_dict() for name, episode in samples.items()}, indent=2) + "\n",
        encoding="utf-8",
    )
    summary = write_summary(
        directory,
        profile,
        NOTEBOOK_DATA,
        model="—",
        data=profile.data_label,
        numbers=_statistics_numbers(profile, statistics),
        tables=tables,
        figures=[],
        config=dict(specs),
    )
    return DataOverview(
        profile=profile.name,
        data_label=profile.data_label,
        statistics=statistics,
        summary_table=summary_table,
        generator_samples=generator_samples,
        generator_configs=generator_configs,
        sample_episodes=samples,
        episodes=load_episodes(profile.require("isolation").episodes),
        trajectories=latest_trajectories(profile),
        output_dir=directory,
        summary=summary,
    )
