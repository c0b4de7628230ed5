"""Generator knobs: `GeneratorConfig`, the difficulty presets and the ladder that climbs them.

Difficulty is a ladder of presets (`DIFFICULTY_LADDER`), from clean explicit "X is now Y"
updates to long histories with implicit, relative and retracted updates. The
`explicit_templated` preset is the paper's saturated control (Section 4).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from supersede_lib.data.synthetic.domains import FACT_DOMAINS

UPDATE_STYLES = ("explicit", "implicit", "mixed")
DIFFICULTY_LADDER = ("easy", "medium", "hard", "expert")
EXPLICIT_TEMPLATED = "explicit_templated"
MAX_UPDATES = 6  # the smallest value pool (days of the week) holds 7 values

IntRange = tuple[int, int]


@dataclass(frozen=True)
class GeneratorConfig:
    """Knobs of the generator. Ranges are inclusive (min, max); a single int means (n, n)."""

    name: str = "custom"  # used in episode_id and source: f"syn-{name}-{seed}", f"synthetic:{name}"
    n_sessions: IntRange = (6, 8)  # all sessions: introduction + updates + distractors
    n_updates: IntRange = (1, 2)  # how many times the introduced value is superseded
    update_style: str = "mixed"  # explicit ("X is now Y") | implicit (in passing, paraphrase) | mixed
    evidence_exchanges: IntRange = (2, 3)  # user/assistant exchanges in a session that mentions the fact
    distractor_exchanges: IntRange = (2, 3)  # user/assistant exchanges per distractor session
    filler_chars: int = 0  # pad each distractor session with on-topic chat up to this many characters
    trailing_distractors: IntRange = (1, 2)  # distractor sessions after the last update
    retraction_prob: float = 0.0  # per update: a wrong value is stated, then corrected in the same session
    relative_wording_prob: float = 0.0  # per implicit numeric update: "another one", "up by $20,000"
    previous_value_prob: float = 0.0  # the question asks for an earlier value instead of the current one
    counts_weight: float = 1.0  # sampling weight of the growing-count domain (every other domain: 1.0)
    domains: tuple[str, ...] = ()  # fact domains to draw from; empty = all of FACT_DOMAINS
    days_between_sessions: IntRange = (1, 14)

    def __post_init__(self) -> None:
        for name in (
            "n_sessions",
            "n_updates",
            "evidence_exchanges",
            "distractor_exchanges",
            "trailing_distractors",
            "days_between_sessions",
        ):
            object.__setattr__(self, name, _as_range(name, getattr(self, name)))
        object.__setattr__(self, "domains", tuple(self.domains))
        self._validate()

    def _validate(self) -> None:
        if self.update_style not in UPDATE_STYLES:
            raise ValueError(
                f"GeneratorConfig.update_style: expected one of {UPDATE_STYLES}, got {self.update_style!r}"
            )
        for name in ("retraction_prob", "relative_wording_prob", "previous_value_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"GeneratorConfig.{name}: expected a probability in [0, 1], got {value!r}")
        if self.counts_weight < 0:
            raise ValueError(f"GeneratorConfig.counts_weight: must be >= 0, got {self.counts_weight!r}")
        if self.filler_chars < 0:
            raise ValueError(f"GeneratorConfig.filler_chars: must be >= 0, got {self.filler_chars!r}")
        if self.n_updates[1] > MAX_UPDATES:
            raise ValueError(
                f"GeneratorConfig.n_updates: at most {MAX_UPDATES} updates, got {self.n_updates}"
            )
        if self.n_sessions[0] < 1 + self.n_updates[1]:
            raise ValueError(
                f"GeneratorConfig.n_sessions: the minimum {self.n_sessions[0]} cannot hold the introduction "
                f"plus {self.n_updates[1]} updates (n_updates max)"
            )
        if self.evidence_exchanges[0] < 1 or self.distractor_exchanges[0] < 1:
            raise ValueError(
                "GeneratorConfig.evidence_exchanges/distractor_exchanges: need at least 1 exchange"
            )
        if self.days_between_sessions[0] < 1:
            raise ValueError("GeneratorConfig.days_between_sessions: sessions must be at least 1 day apart")
        unknown = [name for name in self.domains if name not in FACT_DOMAINS]
        if unknown:
            raise ValueError(f"GeneratorConfig.domains: unknown {unknown}; known: {sorted(FACT_DOMAINS)}")
        if self.domains and all(name == "counts" for name in self.domains) and self.counts_weight == 0:
            raise ValueError("GeneratorConfig.counts_weight: 0 leaves no domain to draw from")


def _as_range(name: str, value: Any) -> IntRange:
    """Accept 7, (6, 8) or [6, 8] (YAML) for a range field."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, value)
    try:
        low, high = (int(bound) for bound in value)
    except (TypeError, ValueError):
        raise ValueError(
            f"GeneratorConfig.{name}: expected an int or a (min, max) pair, got {value!r}"
        ) from None
    if low < 0 or low > high:
        raise ValueError(f"GeneratorConfig.{name}: expected 0 <= min <= max, got {(low, high)}")
    return (low, high)


_PRESETS: dict[str, dict[str, Any]] = {
    # Clean explicit updates, one change, short chats.
    "easy": dict(
        n_sessions=(4, 6),
        n_updates=(1, 1),
        update_style="explicit",
        evidence_exchanges=(1, 2),
        distractor_exchanges=(1, 2),
        trailing_distractors=(0, 1),
    ),
    # The paper's training setting: 6-8 sessions, the update buried among distractors.
    "medium": dict(
        n_sessions=(6, 8),
        n_updates=(1, 2),
        update_style="mixed",
        evidence_exchanges=(2, 3),
        distractor_exchanges=(2, 3),
        trailing_distractors=(1, 2),
        relative_wording_prob=0.25,
        previous_value_prob=0.1,
    ),
    "hard": dict(
        n_sessions=(8, 12),
        n_updates=(2, 3),
        update_style="implicit",
        evidence_exchanges=(2, 4),
        distractor_exchanges=(3, 5),
        trailing_distractors=(1, 3),
        retraction_prob=0.3,
        relative_wording_prob=0.5,
        previous_value_prob=0.15,
        counts_weight=2.0,
    ),
    "expert": dict(
        n_sessions=(14, 20),
        n_updates=(3, 5),
        update_style="implicit",
        evidence_exchanges=(3, 4),
        distractor_exchanges=(4, 6),
        filler_chars=2500,
        trailing_distractors=(2, 4),
        retraction_prob=0.35,
        relative_wording_prob=0.6,
        previous_value_prob=0.2,
        counts_weight=2.0,
    ),
    # The saturation control: clean explicit "X is now Y" timelines, nothing else.
    EXPLICIT_TEMPLATED: dict(
        n_sessions=(4, 8),
        n_updates=(1, 3),
        update_style="explicit",
        evidence_exchanges=(1, 2),
        distractor_exchanges=(2, 3),
        trailing_distractors=(0, 2),
    ),
}


def config_for_difficulty(name: str) -> GeneratorConfig:
    """The preset for a rung of `DIFFICULTY_LADDER` (or `explicit_templated`)."""
    if name not in _PRESETS:
        raise ValueError(f"unknown difficulty {name!r}; expected one of {sorted(_PRESETS)}")
    return GeneratorConfig(name=name, **_PRESETS[name])


def next_difficulty(name: str) -> str:
    """One rung up the ladder; the top rung stays where it is."""
    if name not in DIFFICULTY_LADDER:
        raise ValueError(f"unknown difficulty {name!r}; the ladder is {DIFFICULTY_LADDER}")
    return DIFFICULTY_LADDER[min(DIFFICULTY_LADDER.index(name) + 1, len(DIFFICULTY_LADDER) - 1)]


def describe_config(config: GeneratorConfig | str) -> dict[str, Any]:
    """The config as a flat dict, plus what it implies (for notebook tables)."""
    config = resolve_config(config)
    row: dict[str, Any] = asdict(config)
    row["domains"] = list(config.domains or FACT_DOMAINS)
    row["distractor_sessions"] = (
        max(0, config.n_sessions[0] - 1 - config.n_updates[1]),
        config.n_sessions[1] - 1 - config.n_updates[0],
    )
    return row


def resolve_config(config: GeneratorConfig | str) -> GeneratorConfig:
    """A config as given, or the preset a difficulty name stands for."""
    if isinstance(config, GeneratorConfig):
        return config
    if isinstance(config, str):
        return config_for_difficulty(config)
    raise TypeError(f"config must be a GeneratorConfig or a difficulty name, got {type(config).__name__}")
