"""Run profiles: which data, models and sizes each study uses (configs/<profile>.yaml).

`load_profile(name)` reads one YAML file into a frozen, validated `Profile`: an unknown key or a
bad value fails with one line naming the file, the key path and what is allowed. A notebook asks
the profile for its block (`profile.require("isolation")`), and this module for its episodes and
models, so `paper`, `local`, `offline` and `smoke` differ only in their YAML file. Defaults live
here and nowhere else: the notes budget is the paper's, concurrency the runner's.
"""

from __future__ import annotations

import atexit
import copy
import os
import re
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from supersede_lib.agent.memory import DEFAULT_MEMORY, get_memory_policy
from supersede_lib.agent.prompts import get_prompt_variant
from supersede_lib.agent.settings import DEFAULT_ROLLOUT, PAPER_CHARS_PER_SESSION
from supersede_lib.data.episodes import EpisodeSpec
from supersede_lib.eval.judge import LongMemEvalJudge
from supersede_lib.eval.provenance import REPO_ROOT, check_clean_for_results, commit_label
from supersede_lib.eval.runner import DEFAULT_CONCURRENCY, RunSettings
from supersede_lib.models.cache import CachedChatModel, ResponseCache
from supersede_lib.models.chat import ChatModel, url_secret_problem
from supersede_lib.models.local_server import LocalOpenAIServer
from supersede_lib.models.numbers import check_integers
from supersede_lib.models.openai_api import COMPATIBLE_CACHE_NAMESPACE, OpenAIChatModel
from supersede_lib.models.spec import check_model_spec, make_chat_model
from supersede_lib.train.config import (
    CURRICULUM_MODES,
    DEFAULT_REWARD,
    PRESETS,
    REWARDS,
    TrainingConfig,
    check_training_numbers,
)

CONFIG_DIR = REPO_ROOT / "configs"
OUTPUT_ROOT = Path(os.environ.get("SUPERSEDE_OUTPUT_DIR", REPO_ROOT / "outputs"))
PROFILES = ("smoke", "offline", "local", "paper", "colab", "cpu_proof", "cpu_proof_prereg")

Count = Annotated[int, Strict(), Field(ge=1, le=1_000_000)]
Budget = Annotated[int, Strict(), Field(ge=1, le=100_000)]  # characters of notes: the paper's is 300
Concurrency = Annotated[int, Strict(), Field(ge=1, le=256)]  # questions in flight at once
# a profile name is a folder under outputs/: matched in full (fullmatch), so no trailing newline gets in
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
Seed = Annotated[int, Strict(), Field(ge=0)]
TokenCap = Annotated[int, Strict(), Field(ge=1, le=4096)]  # a reply's max_tokens


def _inside_repository(path: str) -> str:
    """A path the runs write (a cache, recorded replies), refused unless it stays inside the repository.

    Read like every profile path, against the repository (absolute paths as they are), and checked
    without following links: `../outside/cache.sqlite` would otherwise create folders anywhere."""
    resolved = Path(os.path.normpath(REPO_ROOT / Path(path).expanduser()))
    if not resolved.is_relative_to(REPO_ROOT):
        raise ValueError(
            f"{path!r} lies outside the repository ({REPO_ROOT}); the runs write there: "
            "name a path inside it (relative paths are the repository's, e.g. outputs/<name>/cache.sqlite)"
        )
    return path


RepositoryPath = Annotated[str, AfterValidator(_inside_repository)]


def _checked_model_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A model spec checked when the profile is read: no part of base_url that may hold a secret
    (`models.chat.url_secret_problem`), only keys its backend takes, numbers in bounds
    (`models.spec.check_model_spec`)."""
    problem = url_secret_problem(str(spec.get("base_url") or ""))
    if problem:
        raise PydanticCustomError("model_spec", problem)
    try:
        check_model_spec(spec)
    except ValueError as error:
        raise PydanticCustomError("model_spec", str(error)) from None
    if spec.get("cache_path") is not None:
        try:
            _inside_repository(str(spec["cache_path"]))
        except ValueError as error:
            raise PydanticCustomError("model_spec", f"cache_path: {error}") from None
    return spec


ModelSpec = Annotated[dict[str, Any], AfterValidator(_checked_model_spec)]


def _known_memory_policy(name: str) -> str:
    """A `memory:` value: a name of `agent.memory.MEMORY_POLICIES` (a policy merged later joins by
    name); the error lists the known names, and the profile's error line names file and key."""
    get_memory_policy(name)  # ValueError listing the known policies
    return name


def _known_prompt_variant(name: str) -> str:
    get_prompt_variant(name)  # ValueError listing the known variants
    return name


MemoryPolicyName = Annotated[str, AfterValidator(_known_memory_policy)]
PromptVariantName = Annotated[str, AfterValidator(_known_prompt_variant)]

LIVE_CALLS_ENV = "SUPERSEDE_LIVE_CALLS"

_imported_recordings: set[tuple[Path, Path]] = set()  # (recording, cache): each cache imports it once
_fake_servers: list[Any] = []  # kept alive for the process; closed at exit


BLOCK_BUDGET = DEFAULT_ROLLOUT.notes_budget_chars  # a study block's notes budget unless it names one


class ProfileError(ValueError):
    """A profile file is missing or malformed."""


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class IsolationBlock(_Block):
    """02: full context vs bounded memory on these episodes; the token caps, when set, replace the
    runner's (`diagnose --max-tokens-notes / --max-tokens-answer`)."""

    episodes: EpisodeSpec
    notes_budget_chars: Budget = BLOCK_BUDGET
    max_tokens_notes: TokenCap | None = None
    max_tokens_answer: TokenCap | None = None
    memory: MemoryPolicyName = DEFAULT_MEMORY  # the bounded-memory condition's policy

    def token_caps(self) -> dict[str, int]:
        """The caps this block sets, as `RunSettings` changes (none: the runner's defaults)."""
        caps = {"max_tokens_notes": self.max_tokens_notes, "max_tokens_answer": self.max_tokens_answer}
        return {key: value for key, value in caps.items() if value is not None}

    def settings_changes(self) -> dict[str, Any]:
        """What this block changes in the profile's `RunSettings`: its budget, its token caps, and a
        memory policy other than the notes (none: the runs every record holds keep their settings)."""
        changes = {"notes_budget_chars": self.notes_budget_chars, **self.token_caps()}
        if self.memory != DEFAULT_MEMORY:
            changes["memory"] = self.memory
        return changes


class FrontierBlock(_Block):
    """03: the isolation comparison for every model in `models`."""

    episodes: EpisodeSpec
    notes_budget_chars: Budget = BLOCK_BUDGET
    models: list[ModelSpec] = Field(min_length=1)


class MemoryPolicyEntry(_Block):
    """One row of 08: a label (`name`, the row and its run's name), the policy (`memory`, a name of
    `agent.memory.MEMORY_POLICIES`) and the prompt variant it runs under (None: the profile's). The
    paper's notes rewrite and the line-edit notes are both `memory: notes`, told apart by the variant."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")]
    memory: MemoryPolicyName
    prompt_variant: PromptVariantName | None = None


class MemorySystemsBlock(_Block):
    """08: every model of `models` x every memory policy of `policies` on the same episodes, at one
    budget, with full context as the ceiling (`full_context`). `episodes_per_model` asks a model
    only the first n episodes (by its `name`; the generator is prefix-stable, so they are the same
    questions); `reference` names the entry every policy is tested against (default: the first).
    `longmemeval` lists real-record files asked as a sanity row, each read only where it is present
    (never committed)."""

    episodes: EpisodeSpec
    models: list[ModelSpec] = Field(min_length=1)
    policies: list[MemoryPolicyEntry] = Field(min_length=1)
    notes_budget_chars: Budget = BLOCK_BUDGET
    full_context: bool = True
    reference: str | None = None
    episodes_per_model: dict[str, Count] = Field(default_factory=dict)
    longmemeval: list[EpisodeSpec] = Field(default_factory=list)
    max_tokens_notes: TokenCap | None = None  # None: the runner's caps (`diagnose` sets its own)
    max_tokens_answer: TokenCap | None = None

    @model_validator(mode="after")
    def _consistent(self) -> MemorySystemsBlock:
        names = [entry.name for entry in self.policies]
        if len(set(names)) != len(names):
            raise ValueError(f"policy names must differ (got {names})")
        if self.reference is not None and self.reference not in names:
            raise ValueError(f"reference: {self.reference!r} names no entry of policies: ({names})")
        models = [spec.get("name") for spec in self.models]
        for name in self.episodes_per_model:
            if name not in models:
                raise ValueError(f"episodes_per_model: {name!r} names no model of models: ({models})")
        if any(spec.source != "longmemeval" for spec in self.longmemeval):
            raise ValueError("longmemeval: real-record files only (source: longmemeval)")
        return self

    @property
    def reference_entry(self) -> MemoryPolicyEntry:
        """The entry every policy is paired with (the paper's notes rewrite in the committed profiles)."""
        return next(
            entry for entry in self.policies if entry.name == (self.reference or self.policies[0].name)
        )


def memory_policy_changes(policy: str) -> dict[str, Any]:
    """The one place a memory policy's name becomes a `RunSettings` change: none for the notes agent
    or none ("": full context keeps no memory), so those runs, names and cached replies stay those of
    every other study; `memory=` otherwise."""
    return {} if policy in ("", DEFAULT_MEMORY) else {"memory": policy}


# engines a trained policy of 09 can run on; `studies.robustness.TRAINED_ENGINES` maps each to its model
TRAINED_ENGINES = ("prefix_cache", "llamacpp")
TrainedLabel = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9 _-]*$", max_length=80)]


class TrainedPolicy(_Block):
    """One trained policy (or base control) 09 judges with the agent a training arm used.

    `label` names it in every table (`verdict s11 twin`); `adapter` is a kept adapter's JSON record
    (`train.kept_adapters`, a repository path; unset: the base alone); `prompt_variant` replaces the
    arm's agent (the format-controlled base: `v12_line_edits_repaired`)."""

    label: TrainedLabel
    adapter: RepositoryPath | None = None
    prompt_variant: PromptVariantName | None = None


class TrainedBlock(_Block):
    """09's trained policies: each of `models` runs bounded memory with the agent, budget and token caps
    `arm` trained with (07's `set_settings`), on `engine` (a name of `TRAINED_ENGINES`)."""

    arm: ArmName
    models: list[TrainedPolicy] = Field(min_length=1)
    engine: Literal[TRAINED_ENGINES] = "prefix_cache"

    @field_validator("models")
    @classmethod
    def _different_labels(cls, models: list[TrainedPolicy]) -> list[TrainedPolicy]:
        labels = [trained_run_label(model.label) for model in models]
        if len(set(labels)) != len(labels):
            raise ValueError(f"labels must differ (got {[model.label for model in models]})")
        return models


def trained_run_label(label: str) -> str:
    """A trained policy's label as a file name: spaces become '-' (`verdict-s11-twin`)."""
    return label.replace(" ", "-")


class RobustnessBlock(_Block):
    """09: every model and condition on unperturbed synthetic episodes and on each perturbation's twins
    of them (docs/perturbations.md); the unperturbed set is asked once and pairs with every twin.

    `perturbations` lists names or mappings of a name and its parameters (`{name: k_facts, k: 2}`);
    `models` defaults to the profile's model (`[]`: none, only `trained`); `pairs_per_model` asks a
    model only the first n base episodes (and their twins), by its `name`; `memory_policies` are the
    bounded-memory agents to compare (`agent.memory.MEMORY_POLICIES`; the notes agent by default), on
    the models `memory_policy_models` names (default: every model; the others run the notes agent alone);
    `pairs_per_policy` and `perturbations_per_policy` ask one policy fewer pairs or only some
    perturbations (by label, `k_facts-2`), for a policy whose calls cost many times the others';
    `trained` adds trained policies run with their training's agent (`TrainedBlock`).
    """

    episodes: EpisodeSpec
    perturbations: list[str | dict[str, Any]] = Field(min_length=1)
    models: list[ModelSpec] | None = None
    conditions: list[Literal["full_context", "bounded_memory"]] = Field(
        default=["full_context", "bounded_memory"], min_length=1
    )
    notes_budget_chars: Budget = BLOCK_BUDGET
    pairs_per_model: dict[str, Count] = Field(default_factory=dict)
    memory_policies: list[MemoryPolicyName] = Field(default=[DEFAULT_MEMORY], min_length=1)
    memory_policy_models: list[str] | None = None  # the models (by name) the other policies run on; None: all
    pairs_per_policy: dict[str, Count] = Field(default_factory=dict)
    perturbations_per_policy: dict[str, list[str]] = Field(default_factory=dict)  # labels; absent: all
    trained: TrainedBlock | None = None

    @field_validator("memory_policies")
    @classmethod
    def _different_policies(cls, policies: list[str]) -> list[str]:
        if len(set(policies)) != len(policies):
            raise ValueError(f"memory policies must differ (got {policies})")
        return policies

    @model_validator(mode="after")
    def _twins_of_synthetic_episodes(self) -> RobustnessBlock:
        if self.episodes.source != "synthetic" or self.episodes.perturbation is not None:
            raise ValueError("episodes: the unperturbed twins: synthetic, without perturbation:")
        if self.models == [] and self.trained is None:
            raise ValueError("models: [] leaves nothing to run without trained:")
        labels = [label for label, _ in self.perturbed_specs()]
        if len(set(labels)) != len(labels):
            raise ValueError(f"perturbations must differ (got {labels})")
        for name in self.memory_policy_models or ():
            if name not in [spec.get("name") for spec in self.models or ()]:
                raise ValueError(f"memory_policy_models: {name!r} names no model of models:")
        for name, pairs in self.pairs_per_model.items():
            if name not in [spec.get("name") for spec in self.models or ()]:
                raise ValueError(f"pairs_per_model: {name!r} names no model of models:")
            if pairs > (self.episodes.n or pairs):
                raise ValueError(
                    f"pairs_per_model: {name}: {pairs} pairs, but episodes: has n={self.episodes.n}"
                )
        for field_name in ("pairs_per_policy", "perturbations_per_policy"):
            for policy in getattr(self, field_name):
                if policy not in self.memory_policies:
                    raise ValueError(
                        f"{field_name}: {policy!r} is none of memory_policies: {self.memory_policies}"
                    )
        for policy, chosen in self.perturbations_per_policy.items():
            unknown = sorted(set(chosen) - set(labels))
            if unknown or not chosen:
                raise ValueError(
                    f"perturbations_per_policy: {policy}: {unknown or 'nothing'} is not among the labels {labels}"
                )
        return self

    def policy_pairs(self, policy: str, pairs: int) -> int:
        """The pairs one memory policy is asked of a model asked `pairs` (`pairs_per_policy` caps them)."""
        return min(self.pairs_per_policy.get(policy, pairs), pairs)

    def policy_perturbations(self, policy: str) -> list[str]:
        """The perturbation labels one memory policy is asked, in the block's order (default: all)."""
        every = [label for label, _ in self.perturbed_specs()]
        chosen = self.perturbations_per_policy.get(policy, every)
        return [label for label in every if label in chosen]

    def runs_memory_policies(self, model_name: str | None) -> bool:
        """Whether the model named runs every memory policy (else the notes agent alone)."""
        return self.memory_policy_models is None or model_name in self.memory_policy_models

    def perturbed_specs(self) -> list[tuple[str, EpisodeSpec]]:
        """(label, episodes) per perturbation: `k_facts-2`, `someone_else`, ...; the base block with
        `perturbation:` set, so each is checked as any `episodes:` block is."""
        specs = []
        base = self.episodes.model_dump(mode="json")
        for index, item in enumerate(self.perturbations):
            try:
                spec = EpisodeSpec.model_validate({**base, "perturbation": item})
            except ValidationError as error:
                problem = "; ".join(
                    str(detail["msg"]).removeprefix("Value error, ") for detail in error.errors()
                )
                raise ValueError(f"perturbations[{index}]: {problem}") from None
            params = [str(value) for key, value in spec.perturbation.items() if key != "name"]
            specs.append(("-".join([spec.perturbation["name"], *params]), spec))
        return specs


class FastSlowBlock(_Block):
    """10: the fast-and-slow study of docs/fast-slow-log.md, every choice its pre-registration fixes.

    GEPA optimises the notes instruction for `task_model` with `reflection_model` proposing, one run
    per `budgets` entry (metric calls), on the `selection` evaluation set of `transfer.evaluations`
    (its first `validation_n` episodes validate, the rest train, minibatches of `minibatch_size`, GEPA
    `seed`). The agent is the one arm `arm` trained (07's `set_settings`: its prompt variant, budget
    and token caps). Each chosen instruction is judged on the `test` set on that set's engine (never
    shown to GEPA), beside the registered rows: the base, the format-controlled base (`reference`, a
    set judging the base with its own agent) and the arm's `verdict_seeds`. `twins` are kept adapters
    (`train.kept_adapters` records) measured for drift (KL on the first `kl_probe_episodes` selection
    episodes) and combined with the instruction of `combination_budget`."""

    task_model: ModelSpec
    reflection_model: ModelSpec
    arm: ArmName
    budgets: list[Count] = Field(min_length=1)
    selection: str
    validation_n: Count = 20
    minibatch_size: Count = 3
    seed: Seed = 0
    test: str
    reference: str
    verdict_seeds: list[Seed] = Field(min_length=1)
    twins: list[TrainedPolicy] = Field(default_factory=list)
    combination_budget: Count
    kl_probe_episodes: Count = 20
    max_instruction_chars: Count = 2000

    @field_validator("budgets")
    @classmethod
    def _rising_budgets(cls, budgets: list[int]) -> list[int]:
        if budgets != sorted(set(budgets)):
            raise ValueError(f"budgets must rise and differ (got {budgets})")
        return budgets

    @field_validator("twins")
    @classmethod
    def _kept_adapters(cls, twins: list[TrainedPolicy]) -> list[TrainedPolicy]:
        labels = [trained_run_label(twin.label) for twin in twins]
        if len(set(labels)) != len(labels):
            raise ValueError(f"labels must differ (got {[twin.label for twin in twins]})")
        if any(twin.adapter is None for twin in twins):
            raise ValueError("each twin names its kept adapter record (adapter:)")
        return twins

    @model_validator(mode="after")
    def _combination_is_run(self) -> FastSlowBlock:
        if self.combination_budget not in self.budgets:
            raise ValueError(
                f"combination_budget: {self.combination_budget} is not one of budgets {self.budgets}"
            )
        return self


class ScaleBlock(_Block):
    """04: short vs long history at a fixed budget, and long history at `chars_per_session` per session."""

    short: EpisodeSpec
    long: EpisodeSpec
    notes_budget_chars: Budget = BLOCK_BUDGET
    chars_per_session: Budget = PAPER_CHARS_PER_SESSION


class EnvironmentBlock(_Block):
    """05: the verifiers environment end to end on these episodes."""

    episodes: EpisodeSpec
    notes_budget_chars: Budget = BLOCK_BUDGET


class SaturationBlock(_Block):
    """05: full context on explicit templated timelines."""

    episodes: EpisodeSpec


def _check_training_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """Only `TrainingConfig` fields, and never the reward (the block's or the arm's `reward` chooses it)."""
    known = set(TrainingConfig.__dataclass_fields__)
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown TrainingConfig field(s) {', '.join(unknown)}")
    check_integers(overrides, _TRAINING_INTEGERS)
    if "reward" in overrides:
        raise ValueError(
            "reward: chosen by training.rewards (e.g. rewards: [sparse, memory]) or an arm's reward, "
            "not by overrides"
        )
    check_training_numbers(overrides)
    return overrides


_TRAINING_INTEGERS = frozenset(
    item.name for item in fields(TrainingConfig) if item.type in ("int", "int | None")
)
ArmName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9.+-]*$")]


class TrainingArm(_Block):
    """One named arm of a sweep: a reward, a curriculum and its own departures from the preset.

    `name` is the arm's run folder and the prefix of its run labels (`<name>__seed-N`); the CPU
    proof's `sparse-stale0` is the sparse reward with `overrides: {stale_penalty_weight: 0.0}`.
    `seeds` replaces the block's seeds for this arm (a sweep arm may run fewer).
    """

    name: ArmName
    reward: Literal[REWARDS] = DEFAULT_REWARD
    curriculum: Literal[CURRICULUM_MODES] = "fixed"
    seeds: list[Seed] | None = Field(default=None, min_length=1)
    overrides: dict[str, Any] = Field(default_factory=dict)  # TrainingConfig fields, after the block's

    @field_validator("overrides")
    @classmethod
    def _known_training_fields(cls, overrides: dict[str, Any]) -> dict[str, Any]:
        return _check_training_overrides(overrides)


class TrainingBlock(_Block):
    """06: one GRPO run per (reward, curriculum, seed) from a `TrainingConfig` preset plus `overrides`.

    `rewards` names `TrainingConfig.reward`s: `sparse` (the paper's: the answer alone) and/or
    `memory` (plus credit when the notes hold the current value). A sparse run keeps the folder and
    label it had before rewards were listed here (`runs/fixed/seed-0`, `fixed__seed-0`); another
    reward adds itself to the arm (`runs/fixed__memory-reward/seed-0`, `fixed__memory-reward__seed-0`).
    Only `rewards` chooses the reward: `overrides` may not set it. `arms` replaces the rewards x
    curricula grid with named arms, so a sweep (stale penalty, learning rate) is data too.
    """

    preset: Literal[PRESETS]
    seeds: list[Seed] = Field(default=[0], min_length=1)
    curricula: list[Literal[CURRICULUM_MODES]] = Field(default=["fixed"], min_length=1)
    rewards: list[Literal[REWARDS]] = Field(default=[DEFAULT_REWARD], min_length=1)
    overrides: dict[str, Any] = Field(default_factory=dict)  # any TrainingConfig field but the reward
    arms: list[TrainingArm] | None = Field(default=None, min_length=1)

    @field_validator("overrides")
    @classmethod
    def _known_training_fields(cls, overrides: dict[str, Any]) -> dict[str, Any]:
        return _check_training_overrides(overrides)

    @model_validator(mode="after")
    def _arms_or_grid(self) -> TrainingBlock:
        if self.arms is not None and {"curricula", "rewards"} & self.model_fields_set:
            raise ValueError("name each arm's reward and curriculum under arms:, not in rewards/curricula")
        names = [arm.name for arm in self.arms or ()]
        if len(set(names)) != len(names):
            raise ValueError(f"arm names must differ (got {names})")
        return self


ENGINES = ("whole_prompt", "prefix_cache")


class EvaluationSet(_Block):
    """One named evaluation set of 07: its episodes, the engine, and which models it judges.

    `engine: prefix_cache` reuses the keys and values of the shared prompt prefix (a second, faster
    engine whose replies are cached apart). `condition`, `prompt_variant` and the token caps change
    how this set runs from the block's (the full-context reference, a format-controlled agent, caps that
    do not cut). `models` names `base` and checkpoint labels
    (`sparse__seed-0__step-20`); unset, the base and every checkpoint. LongMemEval episodes are
    real records: their per-question files and replies stay out of git (only counts and verdicts
    are committed), and the set is skipped where its `local_path` file is absent.
    """

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$")]
    episodes: EpisodeSpec
    engine: Literal[ENGINES] = "whole_prompt"
    models: list[str] | None = Field(default=None, min_length=1)
    # the full-context reference reads every session instead of the notes (`full_context`)
    condition: Literal["bounded_memory", "full_context"] = "bounded_memory"
    # another agent than the training's (e.g. the format-controlled base: `v12_line_edits_repaired`)
    prompt_variant: str | None = None
    # this set's token caps instead of the block's (a hard set whose answers must not be cut)
    max_tokens_notes: TokenCap | None = None
    max_tokens_answer: TokenCap | None = None

    @property
    def real_records(self) -> bool:
        """Real LongMemEval text: never committed."""
        return self.episodes.source == "longmemeval"


class PreregistrationBlock(_Block):
    """What a proof decided before any run it governs (docs/preregistration.md): the primary arm and
    metric, the test, what counts as success, the stopping rule, the sets' roles and the order of runs.
    Text a reader holds the results to; `order` ("verdict s11, format s11, ...") also drives
    `studies.preregistered`."""

    committed_before: str
    primary_arm: ArmName
    primary_metric: str
    primary_test: str
    success: str
    secondary: str = ""
    comparisons: str = ""
    trend: str = ""
    stopping_rule: str
    selection_set: str
    test_set: str
    order: str
    exploratory: str
    amendments: list[str] = []  # each says when it was committed, before what, and what it changes


class TransferBlock(_Block):
    """07: base and every checkpoint on these held-out episodes (budget: the training run's if unset).

    `episodes` feeds Table 3 and Figure 4b; `evaluations` lists named sets (held out, harder, real
    records; either engine), each judged against the base in its own table. `max_tokens_from_training`
    caps every reply at the training's `max_completion_length`, the cap the policy learned under (a
    rambling policy would otherwise run to the evaluation's larger default, text the budget cuts
    anyway); `merge_adapter` folds each adapter into the weights once (faster generation).
    """

    episodes: EpisodeSpec | None = None
    notes_budget_chars: Budget | None = None
    evaluations: list[EvaluationSet] = Field(default_factory=list)
    max_tokens_from_training: bool = False
    merge_adapter: bool = False

    @model_validator(mode="after")
    def _something_to_evaluate(self) -> TransferBlock:
        if self.episodes is None and not self.evaluations:
            raise ValueError("set episodes: (Table 3) or list evaluation sets under evaluations:")
        names = [item.name for item in self.evaluations]
        if len(set(names)) != len(names):
            raise ValueError(f"evaluation set names must differ (got {names})")
        return self


class OverviewBlock(_Block):
    """01: how many LongMemEval questions the statistics cover (None: every one of the type)."""

    longmemeval_n: Count | None = None


class Profile(_Block):
    """One configs/<name>.yaml: shared settings, then one block per study (absent: that study cannot run)."""

    name: str
    description: str = ""
    data_label: str = ""
    model: ModelSpec
    judge: ModelSpec | None = None
    concurrency: Concurrency = DEFAULT_CONCURRENCY
    prompt_variant: str = (
        DEFAULT_ROLLOUT.prompt_variant
    )  # how every study's agent is asked (prompts.PROMPT_VARIANTS)
    cache_path: RepositoryPath | None = None
    # a response cache found damaged mid-run: "stop" (name the file and the way out) or
    # "run_uncached" (finish without it; the manifest warns and counts the calls as misses)
    cache_on_damage: Literal["stop", "run_uncached"] = "stop"
    # the profile's model replies, committed (.jsonl.gz); like cache_path, inside the repository
    recorded_responses: RepositoryPath | None = None
    preregistration: PreregistrationBlock | None = None  # decided before the runs it governs
    overview: OverviewBlock = OverviewBlock()
    isolation: IsolationBlock | None = None
    frontier: FrontierBlock | None = None
    scale: ScaleBlock | None = None
    environment: EnvironmentBlock | None = None
    saturation: SaturationBlock | None = None
    training: TrainingBlock | None = None
    transfer: TransferBlock | None = None
    memory_systems: MemorySystemsBlock | None = None
    robustness: RobustnessBlock | None = None
    fast_slow: FastSlowBlock | None = None
    _source: str = PrivateAttr(default="<profile>")

    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str) -> str:
        if not PLAIN_NAME.fullmatch(name):
            raise ValueError(
                "must be a plain name (letters, digits, '-' and '_'; it names the folder outputs/<name>/)"
            )
        return name

    @field_validator("prompt_variant")
    @classmethod
    def _known_prompt_variant(cls, name: str) -> str:
        get_prompt_variant(name)  # ValueError listing the allowed names
        return name

    @property
    def source(self) -> str:
        """The file the profile was read from, as error messages name it."""
        return self._source

    def run_settings(self, **changes: Any) -> RunSettings:
        """The settings every run of a study starts from: the profile's prompt variant and
        concurrency, with a block's `changes` (its notes budget, a set's token caps) on top."""
        return RunSettings(prompt_variant=self.prompt_variant, concurrency=self.concurrency).with_changes(
            **changes
        )

    def require(self, section: str) -> Any:
        """The block a study needs; a one-line `ProfileError` naming the file and key when it is absent."""
        block = getattr(self, section)
        if block is None:
            raise ProfileError(f"{self.source}: {section}: missing (this study needs a '{section}:' block)")
        return block

    def evaluation(self, name: str) -> EvaluationSet:
        """The transfer block's evaluation set called `name`; a name it lacks is refused with the ones it has."""
        named = {item.name: item for item in self.require("transfer").evaluations}
        if name not in named:
            raise ProfileError(f"no evaluation set {name!r} (sets: {', '.join(named)})")
        return named[name]

    def as_config(self, *sections: str) -> dict[str, Any]:
        """The named blocks as written in the file (no filled-in defaults), for a summary.json."""
        config = {}
        for section in sections:
            value = getattr(self, section)
            config[section] = (
                value.model_dump(mode="json", exclude_unset=True) if isinstance(value, BaseModel) else value
            )
        return config


def _display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def _model_class(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (`X`, `X | None`, `list[X]`), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in getattr(annotation, "__args__", ()):
        found = _model_class(argument)
        if found is not None:
            return found
    return None


def _allowed_keys(model: type[BaseModel]) -> tuple[str, ...]:
    allowed = getattr(model, "allowed_keys", None)
    return tuple(allowed()) if allowed is not None else tuple(model.model_fields)


def _key_path(loc: tuple[Any, ...]) -> tuple[str, type[BaseModel]]:
    """`isolation.episodes.n` from a pydantic error location, and the model owning its last key.

    Union members and validator tags in the location (e.g. 'int', 'list[...]') are not keys: skipped.
    """
    path: list[str] = []
    current: type[BaseModel] | None = Profile
    owner: type[BaseModel] = Profile
    for part in loc:
        if isinstance(part, int):
            if path:
                path[-1] += f"[{part}]"
            continue
        if current is None:
            continue
        fields = current.model_fields
        if part == "generator_overrides":
            continue
        owner = current
        path.append(str(part))
        current = _model_class(fields[part].annotation) if part in fields else None
    return ".".join(path), owner


def _describe(error: dict[str, Any], owner: type[BaseModel]) -> str:
    kind, context, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "model_spec":
        return str(error["msg"])  # never echo the value: it holds the credentials
    if kind == "extra_forbidden":
        return f"unknown key (allowed: {', '.join(_allowed_keys(owner))})"
    if kind == "missing":
        return "missing (required)"
    got = f" (got {value!r})"
    messages = {
        "int_type": "must be an integer",
        "string_type": "must be a string",
        "list_type": "must be a list",
        "dict_type": "must be a mapping",
        "model_type": "must be a mapping",
        "bool_type": "must be true or false",
        "greater_than_equal": f"must be >= {context.get('ge')}",
        "less_than_equal": f"must be <= {context.get('le')}",
        "too_short": f"must have at least {context.get('min_length')} item(s)",
        "literal_error": f"must be one of {context.get('expected')}",
    }
    if kind in messages:
        return messages[kind] + got
    return str(error["msg"]).removeprefix("Value error, ") + got


def validation_message(error: ValidationError, source: str) -> str:
    """One line: `<file>: <key path>: <what is wrong and what is allowed>` for each problem."""
    problems: dict[str, str] = {}
    for item in error.errors():
        path, owner = _key_path(item["loc"])
        problems.setdefault(path or "(top level)", _describe(item, owner))
    return f"{source}: " + "; ".join(f"{path}: {problem}" for path, problem in problems.items())


def validate_profile(data: Any, source: str = "<profile>") -> Profile:
    """A `Profile` from a plain mapping (as read from YAML); `ProfileError` names `source` and the key."""
    if not isinstance(data, dict):
        raise ProfileError(f"{source}: a profile is a mapping of keys (name, model, isolation, ...)")
    try:
        profile = Profile.model_validate(data)
    except ValidationError as error:
        raise ProfileError(validation_message(error, source)) from None
    problem = _trained_policy_problem(profile)
    if problem:
        raise ProfileError(f"{source}: robustness.trained.{problem}")
    problem = _fast_slow_problem(profile)
    if problem:
        raise ProfileError(f"{source}: fast_slow.{problem}")
    profile._source = source
    return profile


def _trained_policy_problem(profile: Profile) -> str | None:
    """What 09's trained policies need from other blocks: their arm among `training.arms` (its agent)
    and a `transfer:` block (07's settings and adapter loading, which they reuse)."""
    trained = profile.robustness.trained if profile.robustness else None
    if trained is None:
        return None
    arms = [arm.name for arm in profile.training.arms or ()] if profile.training else []
    if trained.arm not in arms:
        return f"arm: no arm {trained.arm!r} in training.arms (arms: {', '.join(arms) or 'none'})"
    if profile.transfer is None:
        return "arm: needs a transfer: block (the settings and adapter loading its evaluation sets use)"
    return None


def _fast_slow_problem(profile: Profile) -> str | None:
    """What the fast-and-slow block needs from other blocks: its arm among `training.arms` with the
    registered seeds, and its sets among `transfer.evaluations` (the selection set large enough to
    leave a training set beside the validation set)."""
    block = profile.fast_slow
    if block is None:
        return None
    arms = {arm.name: arm for arm in profile.training.arms or ()} if profile.training else {}
    if block.arm not in arms:
        return f"arm: no arm {block.arm!r} in training.arms (arms: {', '.join(arms) or 'none'})"
    seeds = arms[block.arm].seeds or profile.training.seeds
    if not set(block.verdict_seeds) <= set(seeds):
        return f"verdict_seeds: {block.verdict_seeds} are not all seeds of arm {block.arm!r} ({seeds})"
    sets = {item.name: item for item in profile.transfer.evaluations} if profile.transfer else {}
    for key in ("selection", "test", "reference"):
        if getattr(block, key) not in sets:
            named = ", ".join(sets) or "none; it needs a transfer: block"
            return f"{key}: no set {getattr(block, key)!r} in transfer.evaluations (sets: {named})"
    size = sets[block.selection].episodes.n
    if size is not None and size <= block.validation_n:
        return f"validation_n: {block.validation_n} leaves no training episode of the {size} in {block.selection!r}"
    if sets[block.test].engine not in TRAINED_ENGINES:
        return f"test: set {block.test!r} runs on {sets[block.test].engine!r}; judge it on one of {TRAINED_ENGINES}"
    return None


def load_profile(
    name_or_path: str | os.PathLike = "local", overrides: dict[str, Any] | None = None
) -> Profile:
    """Read configs/<name>.yaml (or a YAML path), deep-merge `overrides` into it, and validate."""
    path = Path(name_or_path)
    if not path.suffix:
        path = CONFIG_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        raise ProfileError(f"no profile {name_or_path!r}: expected {path} (choices: {', '.join(PROFILES)})")
    source = _display_path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ProfileError(f"{source}:{where}: YAML syntax error: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ProfileError(f"{source}: a profile is a mapping of keys (name, model, isolation, ...)")
    return validate_profile(_deep_merge(data, overrides or {}), source)


def _deep_merge(base: dict, overrides: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def output_dir(profile: Profile, notebook: str) -> Path:
    """outputs/<profile>/<notebook>/, created on demand.

    Refused (`provenance.DirtyCheckoutError`) when it lies in the committed outputs/ and the code has
    uncommitted changes, unless allowed: results must name the code that made them.
    """
    path = OUTPUT_ROOT / profile.name / notebook
    check_clean_for_results(path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_path(profile: Profile, root: Path | None = None, *, create: bool = True) -> Path:
    """The profile's persistent response cache (a re-run of a finished study is free), under `root`
    (default `OUTPUT_ROOT`) unless the profile names its own; its folder made unless `create` is False
    (a look that must write nothing, such as an estimate).

    A relative `cache_path:` is the repository's, like every path in a profile: notebooks run in
    notebooks/, and a path read against the working directory would be another cache there.
    """
    path = REPO_ROOT / Path(profile.cache_path).expanduser() if profile.cache_path else None
    path = path or (root or OUTPUT_ROOT) / profile.name / "cache" / "responses.sqlite"
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    return path


def recorded_responses_path(profile: Profile) -> Path | None:
    """The committed recorded-responses file of a profile (`recorded_responses:`), or None."""
    return REPO_ROOT / profile.recorded_responses if profile.recorded_responses else None


def live_calls_forced() -> bool:
    """`SUPERSEDE_LIVE_CALLS=1` (`reproduce --live`): every model call is made again, none replayed."""
    return os.environ.get(LIVE_CALLS_ENV, "").strip().lower() in {"1", "true", "yes"}


def profile_cache(profile: Profile, root: Path | None = None) -> ResponseCache:
    """The profile's response cache, holding the profile's recorded responses (imported once per cache)."""
    cache = ResponseCache(cache_path(profile, root))
    recorded = recorded_responses_path(profile)
    if recorded is not None and recorded.exists() and (recorded, cache.path) not in _imported_recordings:
        cache.import_responses(recorded)
        _imported_recordings.add((recorded, cache.path))
    return cache


def save_recorded_responses(profile: Profile) -> int | None:
    """Write the profile's cache to its recorded-responses file (None when the profile keeps none)."""
    recorded = recorded_responses_path(profile)
    if recorded is None or not cache_path(profile).exists():
        return None
    return ResponseCache(cache_path(profile)).export_responses(recorded)


def model_for(spec: ModelSpec, profile: Profile | None = None, use_cache: bool = True) -> ChatModel:
    """Build a ChatModel from a model spec, wrapped in the profile's response cache.

    `backend: fake` starts the deterministic local fake server (smoke profile only).
    `backend: embedded` with `model_file` looks the GGUF up in SUPERSEDE_MODEL_DIR /
    ~/.cache/supersede/models, else downloads the default from the hub.
    """
    spec = dict(spec)
    name = spec.pop("name", None)
    backend = spec.get("backend", "embedded")
    if backend == "fake":
        server = LocalOpenAIServer()
        server.__enter__()
        _fake_servers.append(server)
        # one deterministic responder on a new port every run: its replies are shared on purpose
        model: ChatModel = OpenAIChatModel(
            model=name or "fake-heuristic-server",
            base_url=server.base_url,
            api_key_env="SUPERSEDE_FAKE_KEY",
            cache_namespace=COMPATIBLE_CACHE_NAMESPACE,
        )
    else:
        if backend != "embedded" or "model_path" in spec:
            spec.pop("model_file", None)
        # an embedded `model_file` not on this machine is looked up (or downloaded) at its first
        # live call (`DeferredEmbeddedModel`): a replay of recorded replies needs no model file
        if name:
            spec["name"] = name
        model = make_chat_model(spec)
    if use_cache and profile is not None:
        model = CachedChatModel(
            model,
            profile_cache(profile),
            replay=not live_calls_forced(),
            commit=commit_label(),
            on_damage=profile.cache_on_damage,
        )
    return model


@atexit.register
def _close_fake_servers() -> None:
    while _fake_servers:
        _fake_servers.pop().__exit__(None, None, None)


def judge_for(profile: Profile) -> LongMemEvalJudge | None:
    """The profile's LongMemEval judge (None when `judge:` is null)."""
    if not profile.judge:
        return None
    return LongMemEvalJudge(model_for(profile.judge, profile))
