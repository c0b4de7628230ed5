"""Notebook 09: does a model's accuracy survive perturbations that keep the gold determined?

`run_robustness(profile)` = `run_robustness_models` (per model and condition one run over the
unperturbed episodes and every perturbation's twins of them, through the ordinary runner: cache,
resume, failed rows) → `analyse_robustness` (per perturbation: both accuracies, the paired drop with
its bootstrap interval, exact McNemar, Holm across the perturbations of one model and condition) →
`write_robustness` (tables, per-pair CSV, the drop figure, summary.json). The measure and the test
were decided before any run (docs/robustness-log.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib import profiles
from supersede_lib.agent.episode import Episode
from supersede_lib.agent.memory import DEFAULT_MEMORY
from supersede_lib.data.episodes import load_episodes
from supersede_lib.eval.run_files import default_run_name
from supersede_lib.eval.runner import RunResult, RunSettings, run_condition
from supersede_lib.eval.stats import holm_adjusted, paired_bootstrap_diff, paired_mcnemar, wilson_interval
from supersede_lib.models.cache import CachedChatModel, RecordedRepliesOnly
from supersede_lib.models.chat import ChatModel, release_model
from supersede_lib.models.gguf import EmbeddedGGUFModel
from supersede_lib.profiles import (
    EvaluationSet,
    Profile,
    RobustnessBlock,
    TrainedBlock,
    TrainedPolicy,
    judge_for,
    memory_policy_changes,
    trained_run_label,
)
from supersede_lib.results.comparison import (
    accuracy_incomplete_line,
    correct_column,
    failed_mask,
    grader_name,
)
from supersede_lib.results.headings import (
    MATCHER,
    NOTEBOOK_ROBUSTNESS,
    format_pvalue,
    headline_number,
    percent,
    points_interval,
)
from supersede_lib.results.outputs import (
    StudyResult,
    record_summary,
    study_progress,
    write_csv_atomic,
    write_table,
)
from supersede_lib.results.robustness_predictions import judge_clauses, judge_predictions
from supersede_lib.studies.evaluation_sets import (
    ConfigOnly,
    SetModel,
    live_model,
    recorded_model,
    set_settings,
)
from supersede_lib.studies.training import planned_arms
from supersede_lib.train.config import TrainingConfig
from supersede_lib.train.kept_adapters import read_kept_record, restore_adapter
from supersede_lib.train.run import resolve_base_model

UNPERTURBED = "unperturbed"
BOOTSTRAP_RESAMPLES = 10_000  # decided before any run (docs/robustness-log.md), with seed 0
BOOTSTRAP_SEED = 0
DROP_NOTE = (
    "Per model, condition and perturbation: accuracy on the unperturbed episodes and on their perturbed "
    "twins over the same pairs (95% Wilson); drop = unperturbed minus perturbed, in points, with a paired "
    f"bootstrap 95% interval over pairs ({BOOTSTRAP_RESAMPLES:,} resamples, seed {BOOTSTRAP_SEED}); exact "
    "two-sided McNemar (b: unperturbed right and twin wrong, c: the reverse), Holm-adjusted across the "
    "perturbations of one model and condition; stale: answers the matcher calls stale. A pair whose run "
    "failed on either episode is left out of every number (`failed`)."
)

PREDICTIONS_NOTE = (
    "P1-P7 of docs/robustness-log.md (committed before any perturbed result of a trained twin), judged "
    "by its rules on the bounded-memory drops above (`results.robustness_predictions`): gain = a twin's "
    "accuracy minus the format-controlled base's on the same set; a prediction is kept when every clause "
    "holds, broken when one does not, not evaluable when a model it names was not run. The CSV lists "
    "every clause with the numbers it read."
)


@dataclass
class RobustnessSets:
    """The unperturbed episodes and, per perturbation label, their twins in the same order."""

    unperturbed: list[Episode]
    twins: dict[str, list[Episode]]

    def episodes(
        self, pairs: int, labels: Sequence[str] | None = None, *, by_pair: bool = False
    ) -> list[Episode]:
        """The first `pairs` unperturbed episodes and their twins (of the perturbations `labels`, default
        all), each once (an identity perturbation's twin is the episode itself): set after set, or
        `by_pair`, each unperturbed episode followed by its twins, so that a server's prompt cache
        reuses the opening sessions a twin shares with it (a third of a twin's history on average)
        when the whole history is in the prompt."""
        chosen_sets = [self.unperturbed[:pairs]]
        chosen_sets += [
            twins[:pairs] for label, twins in self.twins.items() if labels is None or label in labels
        ]
        ordered = zip(*chosen_sets, strict=True) if by_pair else chosen_sets
        return list({episode.episode_id: episode for group in ordered for episode in group}.values())


@dataclass
class ArmRun:
    """One model in one condition (and memory policy) over every set: one runner run."""

    model: str
    condition: str
    memory_policy: str  # "" under full context, which keeps no memory
    pairs: int
    run: RunResult
    grader: str  # the matcher, or the LLM judge whose verdicts the run holds
    perturbations: tuple[str, ...] | None = None  # the labels this arm was asked; None: every one

    def asked(self, labels: Sequence[str]) -> list[str]:
        """The perturbation labels of `labels` this arm was asked, in that order."""
        return [label for label in labels if self.perturbations is None or label in self.perturbations]

    @property
    def use_judge(self) -> bool:
        return self.grader != MATCHER


@dataclass
class RobustnessResult(StudyResult):
    """Notebook 09: per model, condition and perturbation, the paired drop from the unperturbed twin."""

    profile: Profile
    data_label: str
    grader: str
    runs: list[ArmRun]
    per_pair: pd.DataFrame  # one row per compared pair: ids, both answers, verdicts and correctness
    drops: pd.DataFrame  # one row per model x condition x perturbation (drop_row)
    table: pd.DataFrame  # drops as the Markdown shows them
    left_out: list[dict[str, str]] = field(default_factory=list)  # pairs a run failed on
    # with trained policies: P1-P7 of docs/robustness-log.md, kept or broken, and clause by clause
    predictions: pd.DataFrame = field(default_factory=pd.DataFrame)
    prediction_clauses: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def model(self) -> list[str]:
        """The models compared, in the profile's order."""
        return list(dict.fromkeys(arm.model for arm in self.runs))

    @property
    def n(self) -> int:
        """The most pairs any model was asked per perturbation."""
        return max(arm.pairs for arm in self.runs)


def robustness_sets(block: RobustnessBlock) -> RobustnessSets:
    """The block's unperturbed episodes and each perturbation's twins, checked to pair by position."""
    unperturbed = load_episodes(block.episodes)
    twins = {}
    for label, spec in block.perturbed_specs():
        episodes = load_episodes(spec)
        for base, twin in zip(unperturbed, episodes, strict=True):
            if twin.metadata.get("twin_of", base.episode_id) != base.episode_id:
                raise ValueError(f"{label}: {twin.episode_id} is no twin of {base.episode_id}")
        twins[label] = episodes
    return RobustnessSets(unperturbed, twins)


def arms(block: RobustnessBlock, model_name: str | None = None) -> list[tuple[str, str]]:
    """(condition, memory policy) pairs to run for one model: full context once, bounded memory once
    per policy (the notes agent alone for a model `memory_policy_models` leaves out)."""
    chosen = []
    for condition in block.conditions:
        policies = block.memory_policies if condition == "bounded_memory" else [""]
        if condition == "bounded_memory" and not block.runs_memory_policies(model_name):
            notes_agents = [policy for policy in policies if not memory_policy_changes(policy)]
            policies = notes_agents or [DEFAULT_MEMORY]
        chosen += [(condition, policy) for policy in policies]
    return chosen


def arm_label(condition: str, memory_policy: str) -> str:
    """`full_context`, `bounded_memory`, or `bounded_memory (append_truncate)` for another policy."""
    if not memory_policy or not memory_policy_changes(memory_policy):
        return condition
    return f"{condition} ({memory_policy})"


def model_pairs(block: RobustnessBlock, spec: dict[str, Any], available: int) -> int:
    """How many unperturbed episodes (and their twins) this model is asked."""
    return min(block.pairs_per_model.get(str(spec.get("name")), available), available)


def arm_scope(block: RobustnessBlock, policy: str, pairs: int) -> tuple[int, list[str]]:
    """(pairs, perturbation labels) one arm of a model asked `pairs` runs: a policy named in
    `pairs_per_policy` or `perturbations_per_policy` fewer."""
    return block.policy_pairs(policy, pairs), block.policy_perturbations(policy)


def _transformers_model(
    profile: Profile, evaluation: EvaluationSet, folder: Path, base_path: str, model: SetModel
) -> ChatModel:
    """The registered engine: transformers with the prompt-prefix cache in float32, as the registered
    arms were judged (their manifests: `HFChatModel-float32-prefix`), also on a CPU whose fastest dtype is
    bf16: a reply compared with theirs is made with the same numerics. Adapters load as 07 loads them
    (the kept adapter restored into a PEFT folder in the git-ignored cache first)."""
    import torch

    if model.adapter is not None:
        restored = profiles.cache_path(profile).parent / "adapters" / model.label
        model = SetModel(model.label, restore_adapter(model.adapter, restored))
    prefix = evaluation.model_copy(update={"engine": "prefix_cache"})
    return live_model(profile.require("transfer"), prefix, folder, base_path, model, dtype=torch.float32)


def _llamacpp_model(
    profile: Profile, evaluation: EvaluationSet, folder: Path, base_path: str, model: SetModel
) -> ChatModel:
    """llama.cpp's Q4 engine on the GGUF the adapters' base was dequantised from, the kept adapter
    converted to a GGUF LoRA (`models.lora_gguf`): the fastest engine on a CPU without bf16 units; its
    agreement with the transformers engine is measured by `bench --lora-adapter` (docs/benchmarks.md).
    Embeddings stay off: the notes agent needs none, and the block's recorded replies were made so."""
    return EmbeddedGGUFModel(base_path, n_ctx=LLAMACPP_CONTEXT, lora_adapter=model.adapter, embeddings=False)


LLAMACPP_CONTEXT = 4096  # a bounded-memory call holds one session and the notes: far below this
# `robustness.trained.engine` -> the factory of a trained policy's live model, called with (profile,
# the policy's evaluation set, 09's folder, the base model's path, its SetModel: run name and the kept
# adapter's record, None for the base)
TRAINED_ENGINES: dict[str, Callable[..., ChatModel]] = {
    "prefix_cache": _transformers_model,
    "llamacpp": _llamacpp_model,
}
TRAINED_CONDITION = "bounded_memory"  # trained policies learned the notes agent: bounded memory only


@dataclass(frozen=True)
class TrainedPlan:
    """One trained policy ready to run: its entry, run name, settings (07's `set_settings` of the
    arm's training) and kept adapter record (None: the base alone)."""

    policy: TrainedPolicy
    run_name: str
    evaluation: EvaluationSet  # what 07's settings and model builders read: the policy's agent
    settings: RunSettings
    record: Path | None


def trained_config(profile: Profile) -> TrainingConfig:
    """The training config of the trained block's arm (the agent its policies learned)."""
    trained: TrainedBlock = profile.require("robustness").trained
    return next(arm.config for arm in planned_arms(profile) if arm.name == trained.arm)


def trained_plans(profile: Profile, config: TrainingConfig) -> list[TrainedPlan]:
    """The trained block's policies, each with the settings its arm trained with; a policy whose kept
    adapter record is not here (yet) is named and skipped, never a crash."""
    block: RobustnessBlock = profile.require("robustness")
    plans = []
    for policy in block.trained.models if block.trained else ():
        record = profiles.REPO_ROOT / policy.adapter if policy.adapter else None
        if record is not None and not record.is_file():
            print(f"{policy.label}: skipped (its kept adapter {policy.adapter} is not here yet)")
            continue
        label = trained_run_label(policy.label)
        evaluation = EvaluationSet(name=label, episodes=block.episodes, prompt_variant=policy.prompt_variant)
        settings = set_settings(profile, evaluation, [ConfigOnly(config)])
        run_name = default_run_name(TRAINED_CONDITION, label, settings.notes_budget_chars, None)
        plans.append(TrainedPlan(policy, run_name, evaluation, settings, record))
    return plans


def _replays(folder: Path, run_name: str, weights_here: bool) -> bool:
    """Whether a trained policy answers from its recorded replies: its run is recorded (and finished,
    unless the weights are not here to finish it) and no call is forced live."""
    manifest = folder / f"{run_name}.manifest.json"
    if profiles.live_calls_forced() or not manifest.exists():
        return False
    return not weights_here or "stopped" not in json.loads(manifest.read_text(encoding="utf-8"))


def recorded_with_adapter(record: Path | None, model_name: str) -> bool:
    """Whether replies recorded under `model_name` came from the kept adapter `record` (its hash is in the
    name a checkpoint is recorded under; restoring a kept adapter gives back its bytes): a policy whose
    adapter was replaced never replays the old one's replies. The base (no record) always matches."""
    return record is None or f"@{read_kept_record(record)['sha256'][:12]}" in model_name


def trained_model(
    profile: Profile, plan: TrainedPlan, base_path: str, folder: Path, engine: str | None = None
) -> ChatModel | None:
    """A trained policy in the profile's response cache: its recorded replies where its run is recorded
    (a fresh clone replays the record without the weights), else its weights on the block's engine
    (the adapter restored from its kept record into the git-ignored cache folder). None, said, when
    neither is here. `engine` (a name of `TRAINED_ENGINES`) replaces the trained block's."""
    weights_here = not Path(base_path).is_absolute() or Path(base_path).exists()
    recorded = recorded_model(folder, plan.run_name)
    if recorded is not None and not recorded_with_adapter(plan.record, recorded[0]):
        print(f"{plan.policy.label}: {plan.run_name} was recorded with another adapter; it runs again")
        recorded = None
    if recorded is not None and _replays(folder, plan.run_name, weights_here):
        inner: Any = RecordedRepliesOnly(*recorded)
    elif not weights_here:
        print(f"{plan.policy.label}: skipped (not recorded, and the base model {base_path} is not here)")
        return None
    else:
        build = TRAINED_ENGINES[engine or profile.require("robustness").trained.engine]
        inner = build(profile, plan.evaluation, folder, base_path, SetModel(plan.run_name, plan.record))
    live = profiles.live_calls_forced()
    cache = profiles.profile_cache(profile)
    return CachedChatModel(
        inner, cache, replay=not live, commit=profiles.commit_label(), on_damage=profile.cache_on_damage
    )


def run_trained_models(
    profile: Profile, sets: RobustnessSets, plans: Sequence[TrainedPlan], bar: Any, base_path: str
) -> list[ArmRun]:
    """Each trained policy over every set with its training's agent (bounded memory), one at a time."""
    directory = profiles.output_dir(profile, NOTEBOOK_ROBUSTNESS)
    judge, pairs = judge_for(profile), len(sets.unperturbed)
    runs = []
    for plan in plans:
        model = trained_model(profile, plan, base_path, directory)
        if model is None:
            continue
        run = run_condition(
            sets.episodes(pairs),
            TRAINED_CONDITION,
            model,
            plan.settings,
            judge=judge,
            output_dir=directory,
            run_name=plan.run_name,
            progress=bar,
        )
        runs.append(
            ArmRun(plan.policy.label, TRAINED_CONDITION, DEFAULT_MEMORY, pairs, run, grader_name(judge))
        )
        release_model(model)
    return runs


def run_robustness_models(profile: Profile, *, progress: bool = True) -> list[ArmRun]:
    """Every model x condition (x memory policy) over the unperturbed set and every twin set, then every
    trained policy, one model at a time, each released before the next loads; run files in 09's folder."""
    block: RobustnessBlock = profile.require("robustness")
    sets = robustness_sets(block)
    directory = profiles.output_dir(profile, NOTEBOOK_ROBUSTNESS)
    judge = judge_for(profile)
    settings = profile.run_settings(notes_budget_chars=block.notes_budget_chars)
    specs = [profile.model] if block.models is None else block.models
    config = trained_config(profile) if block.trained else None
    plans = trained_plans(profile, config) if config else []
    total = sum(
        len(sets.episodes(*arm_scope(block, policy, model_pairs(block, spec, len(sets.unperturbed)))))
        for spec in specs
        for _, policy in arms(block, spec.get("name"))
    )
    total += len(plans) * len(sets.episodes(len(sets.unperturbed)))
    runs = []
    with study_progress(profile, NOTEBOOK_ROBUSTNESS, total, progress) as bar:
        for spec in specs:
            model = profiles.model_for(spec, profile)
            for condition, policy in arms(block, spec.get("name")):
                pairs, labels = arm_scope(block, policy, model_pairs(block, spec, len(sets.unperturbed)))
                arm_settings = settings.with_changes(**memory_policy_changes(policy))
                name = default_run_name(condition, model.name, settings.notes_budget_chars, None)
                if memory_policy_changes(policy):
                    name += f"__{policy}"
                run = run_condition(
                    sets.episodes(pairs, labels, by_pair=condition == "full_context"),
                    condition,
                    model,
                    arm_settings,
                    judge=judge,
                    output_dir=directory,
                    run_name=name,
                    progress=bar,
                )
                runs.append(
                    ArmRun(model.name, condition, policy, pairs, run, grader_name(judge), tuple(labels))
                )
            release_model(model)
        if plans:
            runs += run_trained_models(profile, sets, plans, bar, resolve_base_model(config))
    return runs


def pair_frame(arm: ArmRun, sets: RobustnessSets) -> tuple[pd.DataFrame, list[dict]]:
    """One row per (perturbation, unperturbed episode, twin) of this arm, and the pairs left out
    because the run failed on either episode (a failure is neither right nor wrong)."""
    frame = arm.run.frame.assign(
        correct=correct_column(arm.run.frame, arm.use_judge).to_numpy(), failed=failed_mask(arm.run.frame)
    ).set_index("episode_id")
    rows, left_out = [], []
    for label in arm.asked(list(sets.twins)):
        twins = sets.twins[label]
        for base, twin in zip(sets.unperturbed[: arm.pairs], twins[: arm.pairs], strict=True):
            first, second = frame.loc[base.episode_id], frame.loc[twin.episode_id]
            where = {"model": arm.model, "condition": arm.condition, "memory_policy": arm.memory_policy}
            where |= {"perturbation": label, "episode_id": base.episode_id, "twin_id": twin.episode_id}
            if bool(first["failed"]) or bool(second["failed"]):
                left_out.append(where)
                continue
            rows.append(
                where
                | {
                    "gold": first["gold"],
                    "twin_gold": second["gold"],
                    "answer_unperturbed": first["answer"],
                    "answer_perturbed": second["answer"],
                    "verdict_unperturbed": first["verdict"],
                    "verdict_perturbed": second["verdict"],
                    "correct_unperturbed": bool(first["correct"]),
                    "correct_perturbed": bool(second["correct"]),
                    "shortcut_answer": str(twin.metadata.get("shortcut_answer", "")),
                }
            )
    return pd.DataFrame(rows), left_out


def _accuracy(prefix: str, correct: pd.Series) -> dict[str, Any]:
    successes, n = int(correct.sum()), len(correct)
    low, high = wilson_interval(successes, n)
    return {
        f"correct_{prefix}": successes,
        f"accuracy_{prefix}": successes / n if n else float("nan"),
        f"ci_low_{prefix}": low,
        f"ci_high_{prefix}": high,
    }


def drop_row(pairs: pd.DataFrame, failed: int) -> dict[str, Any]:
    """Both accuracies over the compared pairs, the drop (unperturbed minus perturbed) with its
    paired bootstrap interval, exact McNemar, and the stale answers' shares; NaN where no pair is left."""
    base, twin = pairs["correct_unperturbed"].astype(bool), pairs["correct_perturbed"].astype(bool)
    row: dict[str, Any] = {"n": len(pairs), "failed": failed}
    row |= _accuracy(UNPERTURBED, base) | _accuracy("perturbed", twin)
    if len(pairs):
        test = paired_mcnemar(base, twin)
        row |= {"drop": float(base.mean() - twin.mean()), "drop_low": float("nan"), "drop_high": float("nan")}
        if len(pairs) > 1:  # one pair has no spread to resample: its interval stays empty
            drop = paired_bootstrap_diff(base, twin, n_resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
            row |= {"drop": drop.diff, "drop_low": drop.low, "drop_high": drop.high}
        row |= {"mcnemar_b": test.b, "mcnemar_c": test.c, "p_exact": test.p_exact}
        row |= {
            "stale_unperturbed": float((pairs["verdict_unperturbed"] == "stale").mean()),
            "stale_perturbed": float((pairs["verdict_perturbed"] == "stale").mean()),
        }
    else:
        nothing = ("drop", "drop_low", "drop_high", "mcnemar_b", "mcnemar_c", "p_exact")
        row |= dict.fromkeys((*nothing, "stale_unperturbed", "stale_perturbed"), float("nan"))
    return row


def with_holm(drops: pd.DataFrame) -> pd.DataFrame:
    """`p_holm`: the exact McNemar p, Holm-adjusted across the perturbations of one model and
    condition (rows without a test stay empty)."""
    drops = drops.assign(p_holm=float("nan"))
    for _, group in drops.groupby(["model", "condition", "memory_policy"], sort=False):
        tested = group["p_exact"].dropna()
        if len(tested):
            drops.loc[tested.index, "p_holm"] = holm_adjusted(tested.to_numpy())
    return drops


def drops_table(drops: pd.DataFrame) -> pd.DataFrame:
    """The drops as the Markdown shows them: percents, intervals, b/c and both p values."""

    def accuracy(row: Any, prefix: str) -> str:
        interval = f"[{percent(row[f'ci_low_{prefix}'])}, {percent(row[f'ci_high_{prefix}'])}]"
        return f"{percent(row[f'accuracy_{prefix}'])} {interval}"

    def drop(row: Any) -> str:
        if pd.isna(row["drop"]):
            return "—"
        if pd.isna(row["drop_low"]):
            return f"{100 * row['drop']:+.1f} [—]"
        return points_interval(row["drop"], row["drop_low"], row["drop_high"])

    rows = [
        {
            "model": row["model"],
            "condition": arm_label(row["condition"], row["memory_policy"]),
            "perturbation": row["perturbation"],
            "pairs": row["n"] if not row["failed"] else f"{row['n']} ({row['failed']} failed, left out)",
            "unperturbed [95% Wilson]": accuracy(row, UNPERTURBED),
            "perturbed [95% Wilson]": accuracy(row, "perturbed"),
            "drop, points [95% bootstrap]": drop(row),
            "McNemar b / c": "—"
            if pd.isna(row["mcnemar_b"])
            else f"{row['mcnemar_b']:.0f} / {row['mcnemar_c']:.0f}",
            "p exact": format_pvalue(row["p_exact"]),
            "p Holm": format_pvalue(row["p_holm"]),
            "stale (perturbed)": percent(row["stale_perturbed"]),
        }
        for row in drops.to_dict("records")
    ]
    return pd.DataFrame(rows).astype(str)


ARM_KEYS = ("model", "condition", "memory_policy")


def pair_drops(
    per_pair: pd.DataFrame,
    arms: Sequence[tuple[str, str, str]],
    labels: Sequence[str],
    left_out: Sequence[dict[str, str]] = (),
    asked: Mapping[tuple[str, str, str], Sequence[str]] | None = None,
) -> pd.DataFrame:
    """One `drop_row` per (model, condition, memory policy) of `arms` x perturbation label, in that
    order, from the compared pairs (an arm `asked` names: only the labels it was asked); `left_out`
    counts each row's failed pairs; Holm within an arm."""
    drops = []
    for arm in arms:
        where = dict(zip(ARM_KEYS, arm, strict=True))
        mine = per_pair
        for key, value in where.items():
            mine = mine[mine[key] == value] if len(mine) else mine
        for label in (asked or {}).get(arm, labels):
            chosen = mine[mine["perturbation"] == label] if len(mine) else mine
            failures = sum(
                item["perturbation"] == label and all(item[key] == where[key] for key in ARM_KEYS)
                for item in left_out
            )
            drops.append(where | {"perturbation": label} | drop_row(chosen, failures))
    return with_holm(pd.DataFrame(drops))


def analyse_robustness(profile: Profile, runs: list[ArmRun]) -> RobustnessResult:
    """The paired drop per model, condition and perturbation; failed pairs left out and listed; where
    the profile has trained policies, the log's predictions judged on their drops."""
    block: RobustnessBlock = profile.require("robustness")
    sets = robustness_sets(block)
    frames, left_out = [], []
    for arm in runs:
        pairs, failed = pair_frame(arm, sets)
        frames.append(pairs)
        left_out += failed
    per_pair = pd.concat(frames, ignore_index=True)
    keys = [(arm.model, arm.condition, arm.memory_policy) for arm in runs]
    asked = {key: arm.asked(list(sets.twins)) for key, arm in zip(keys, runs, strict=True)}
    drop_frame = pair_drops(per_pair, keys, list(sets.twins), left_out, asked)
    return RobustnessResult(
        profile=profile,
        data_label=block.episodes.label,
        grader=runs[0].grader,
        runs=runs,
        per_pair=per_pair,
        drops=drop_frame,
        table=drops_table(drop_frame),
        left_out=left_out,
        predictions=judge_predictions(drop_frame) if block.trained else pd.DataFrame(),
        prediction_clauses=judge_clauses(drop_frame) if block.trained else pd.DataFrame(),
    )


def robustness_numbers(result: RobustnessResult) -> list[dict[str, Any]]:
    """Headline numbers: per model, condition and perturbation both accuracies, the drop and Holm's p,
    each naming its model, data, profile and n (pairs compared)."""
    numbers = []
    for row in result.drops.to_dict("records"):
        arm = arm_label(row["condition"], row["memory_policy"])
        meta = {"model": row["model"], "data": result.data_label, "profile": result.profile.name}
        meta |= {"n": int(row["n"]), "grader": result.grader}
        for key, name in (
            (f"accuracy_{UNPERTURBED}", "accuracy unperturbed"),
            ("accuracy_perturbed", "accuracy perturbed"),
            ("drop", "drop"),
            ("p_holm", "p Holm"),
        ):
            if pd.notna(row[key]):
                numbers.append(headline_number(f"{arm} {row['perturbation']}: {name}", row[key], **meta))
    return numbers


def write_robustness(result: RobustnessResult, directory: Path | None = None) -> RobustnessResult:
    """Write 09's tables (CSV + Markdown), per-pair CSV, drop figure and summary.json."""
    from supersede_lib.present import plots

    profile = result.profile
    directory = directory or profiles.output_dir(profile, NOTEBOOK_ROBUSTNESS)
    first_line = accuracy_incomplete_line(result.drops)
    tables = [
        write_table(
            directory, "robustness_drops", result.drops, DROP_NOTE, result.table, first_line=first_line
        )
    ]
    if not result.predictions.empty:
        tables.append(
            write_table(
                directory, "predictions", result.prediction_clauses, PREDICTIONS_NOTE, result.predictions
            )
        )
    write_csv_atomic(result.per_pair, directory / "per_pair.csv")
    title = f"ours: {result.data_label}, {profile.name}, {result.grader}"
    figure = plots.perturbation_drop_figure(result.drops, title, label=arm_label)
    result.figures["drops"] = plots.save_figure(figure, directory / "robustness_drops.png")
    config = profile.as_config("robustness", "model", "judge")
    extra: dict[str, Any] = {"runs": [arm.run.run_name for arm in result.runs]}
    if result.left_out:
        extra["left_out"] = result.left_out  # failed pairs: in no number above
    runs = [arm.run.run_name for arm in result.runs]
    numbers = robustness_numbers(result)
    return record_summary(result, directory, NOTEBOOK_ROBUSTNESS, numbers, tables, config, extra, runs=runs)


def run_robustness(profile: Profile, *, progress: bool = True) -> RobustnessResult:
    """The perturbation suite on the profile's models: paired drops from the unperturbed twins."""
    return write_robustness(analyse_robustness(profile, run_robustness_models(profile, progress=progress)))
