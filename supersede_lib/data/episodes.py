"""One `episodes:` block of a profile: `EpisodeSpec` says which episodes, `load_episodes` builds them.

`source: longmemeval` reads a split (`oracle`, `s`, `m`) and keeps the first `n` questions of a type;
`source: synthetic` generates `n` episodes of a difficulty preset, with any `GeneratorConfig` field
as an override (e.g. `n_sessions: [4, 5]`), optionally `extra_distractor_sessions` more sessions
per episode (the scale study's long history) and optionally a `perturbation` (a name, or a mapping of
its name and parameters: `perturbation: {name: k_facts, k: 2}`) that turns every episode into its
perturbed twin (docs/perturbations.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    field_validator,
    model_serializer,
    model_validator,
)

from supersede_lib.agent.episode import Episode
from supersede_lib.data import synthetic
from supersede_lib.data.longmemeval import SPLITS, load_longmemeval

DEFAULT_SYNTHETIC_N = 8
GENERATOR_FIELDS = tuple(item.name for item in fields(synthetic.GeneratorConfig) if item.name != "name")
DIFFICULTIES = (*synthetic.DIFFICULTY_LADDER, synthetic.EXPLICIT_TEMPLATED)

Count = Annotated[int, Strict(), Field(ge=1)]
NonNegative = Annotated[int, Strict(), Field(ge=0)]


class EpisodeSpec(BaseModel):
    """Which episodes a study asks: their source, how many, and how they are generated or read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: Literal["synthetic", "longmemeval"] = "synthetic"
    n: Count | None = None  # None: every LongMemEval question of the type, or DEFAULT_SYNTHETIC_N
    # LongMemEval
    split: Literal[SPLITS] = "oracle"
    question_type: str | None = "knowledge-update"
    local_path: str | None = None
    # synthetic
    difficulty: Literal[DIFFICULTIES] = "medium"
    seed: NonNegative = 0
    extra_distractor_sessions: NonNegative = 0
    generator_overrides: dict[str, Any] = Field(default_factory=dict)  # GeneratorConfig fields
    perturbation: dict[str, Any] | None = None  # {name: ..., parameter: value}; see synthetic.PERTURBATIONS

    @field_validator("perturbation", mode="before")
    @classmethod
    def _check_perturbation(cls, value: Any) -> Any:
        """A name alone or a mapping with `name` and the perturbation's parameters, checked here so a
        profile with a typo fails when it is read."""
        if value is None:
            return None
        if isinstance(value, str):
            value = {"name": value}
        if not isinstance(value, Mapping) or not isinstance(value.get("name"), str):
            raise ValueError(
                f"expected a perturbation name or a mapping with name: and its parameters "
                f"(known: {', '.join(synthetic.PERTURBATIONS)})"
            )
        params = {key: item for key, item in value.items() if key != "name"}
        return {"name": value["name"], **synthetic.check_perturbation(value["name"], params)}

    @model_validator(mode="after")
    def _perturbation_needs_synthetic(self) -> EpisodeSpec:
        if self.perturbation is not None and self.source != "synthetic":
            raise ValueError("perturbation: applies to synthetic episodes only (source: synthetic)")
        return self

    @model_validator(mode="before")
    @classmethod
    def _collect_generator_fields(cls, data: Any) -> Any:
        """`GeneratorConfig` fields sit beside the other keys in YAML; gather them into one dict."""
        if not isinstance(data, Mapping):
            return data
        overrides = {key: value for key, value in data.items() if key in GENERATOR_FIELDS}
        if not overrides:
            return data
        rest = {key: value for key, value in data.items() if key not in GENERATOR_FIELDS}
        return {**rest, "generator_overrides": {**rest.get("generator_overrides", {}), **overrides}}

    @model_serializer(mode="wrap")
    def _flatten_generator_fields(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        data.update(data.pop("generator_overrides", None) or {})
        if data.get("perturbation") is None:  # an unperturbed block reads (and records) as before
            data.pop("perturbation", None)
        return data

    @classmethod
    def allowed_keys(cls) -> tuple[str, ...]:
        """The keys an `episodes:` block may hold (generator overrides sit at the top level)."""
        return (*(name for name in cls.model_fields if name != "generator_overrides"), *GENERATOR_FIELDS)

    @property
    def label(self) -> str:
        """What the episodes are, in words (e.g. 'LongMemEval knowledge-update, oracle')."""
        if self.source == "longmemeval":
            return f"LongMemEval {self.question_type}, {self.split}"
        label = f"synthetic, {self.difficulty} preset"
        if self.extra_distractor_sessions:
            label += f", +{self.extra_distractor_sessions} distractor sessions"
        if self.perturbation is not None:
            params = ", ".join(f"{key}={value}" for key, value in self.perturbation.items() if key != "name")
            label += f", perturbed: {self.perturbation['name']}" + (f" ({params})" if params else "")
        return label


def _as_spec(spec: EpisodeSpec | Mapping[str, Any]) -> EpisodeSpec:
    return spec if isinstance(spec, EpisodeSpec) else EpisodeSpec.model_validate(dict(spec))


def episode_sample(spec: EpisodeSpec | Mapping[str, Any], size: int) -> tuple[int, list[Episode]]:
    """(how many episodes the block holds, its first `size` of them), in time and memory bounded by
    `size` for synthetic episodes (episode i depends on the seed and i alone, so the first `size` are
    the same in a set of any n) and by the file for LongMemEval: an estimate for n = 1,000,000 builds
    no million episodes."""
    spec = _as_spec(spec)
    if spec.source == "longmemeval":
        episodes = load_episodes(spec)
        return len(episodes), episodes[:size]
    count = spec.n or DEFAULT_SYNTHETIC_N
    return count, load_episodes(spec.model_copy(update={"n": min(count, size)}))


def load_episodes(spec: EpisodeSpec | Mapping[str, Any]) -> list[Episode]:
    """The episodes of one `episodes:` block (an `EpisodeSpec` or the same keys as a dict)."""
    spec = _as_spec(spec)
    if spec.source == "longmemeval":
        return load_longmemeval(
            split=spec.split, question_type=spec.question_type, local_path=spec.local_path, limit=spec.n
        )
    episodes = synthetic.generate_episodes(
        spec.n or DEFAULT_SYNTHETIC_N, seed=spec.seed, difficulty=spec.difficulty, **spec.generator_overrides
    )
    if spec.extra_distractor_sessions:
        episodes = [
            synthetic.add_distractor_sessions(episode, spec.extra_distractor_sessions) for episode in episodes
        ]
    if spec.perturbation is not None:
        config = synthetic.episodes_config(spec.difficulty, **spec.generator_overrides)
        params = {key: value for key, value in spec.perturbation.items() if key != "name"}
        episodes = [
            synthetic.perturb(episode, spec.perturbation["name"], config=config, **params)
            for episode in episodes
        ]
    return episodes
