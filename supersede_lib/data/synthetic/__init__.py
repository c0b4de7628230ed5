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
    episodes_config,
    generate_episode,
    generate_episodes,
    parse_date,
)
from supersede_lib.data.synthetic.perturbations import (
    CHANGE_CUES,
    HELD_OUT_DOMAINS,
    PERTURBATIONS,
    Perturbation,
    check_perturbation,
    perturb,
)

__all__ = [
    "CHANGE_CUES",
    "DIFFICULTY_LADDER",
    "DISTRACTOR_TOPICS",
    "EXPLICIT_MARKERS",
    "EXPLICIT_TEMPLATED",
    "FACT_DOMAINS",
    "HELD_OUT_DOMAINS",
    "PERTURBATIONS",
    "GeneratorConfig",
    "Perturbation",
    "add_distractor_sessions",
    "check_perturbation",
    "config_for_difficulty",
    "describe_config",
    "episode_seed",
    "episodes_config",
    "generate_episode",
    "generate_episodes",
    "next_difficulty",
    "parse_date",
    "perturb",
]
