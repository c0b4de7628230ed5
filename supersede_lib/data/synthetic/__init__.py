"""Procedural supersession timelines: a fact is introduced, changed (explicitly or implicitly),
sometimes retracted, and buried among distractor sessions; the question asks its current value."""

from supersede_lib.data.synthetic.generator import (
    DIFFICULTY_LADDER,
    DISTRACTOR_TOPICS,
    EXPLICIT_MARKERS,
    EXPLICIT_TEMPLATED,
    FACT_DOMAINS,
    GeneratorConfig,
    add_distractor_sessions,
    config_for_difficulty,
    describe_config,
    episode_seed,
    generate_episode,
    generate_episodes,
    next_difficulty,
    parse_date,
)

__all__ = [
    "DIFFICULTY_LADDER",
    "DISTRACTOR_TOPICS",
    "EXPLICIT_MARKERS",
    "EXPLICIT_TEMPLATED",
    "FACT_DOMAINS",
    "GeneratorConfig",
    "add_distractor_sessions",
    "config_for_difficulty",
    "describe_config",
    "episode_seed",
    "generate_episode",
    "generate_episodes",
    "next_difficulty",
    "parse_date",
]
