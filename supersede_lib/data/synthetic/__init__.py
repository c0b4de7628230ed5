"""Procedural supersession timelines: a fact is introduced, changed (explicitly or implicitly),
sometimes retracted, and buried among distractor sessions; the question asks its current value."""

from supersede_lib.data.synthetic.config import (
    DIFFICULTY_LADDER,
    EXPLICIT_TEMPLATED,
    GeneratorConfig,
    config_for_difficulty,
    describe_config,
    next_difficulty,
)
from supersede_lib.data.synthetic.distractors import DISTRACTOR_TOPICS
from supersede_lib.data.synthetic.domains import EXPLICIT_MARKERS, FACT_DOMAINS
from supersede_lib.data.synthetic.generator import (
    add_distractor_sessions,
    episode_seed,
    generate_episode,
    generate_episodes,
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
