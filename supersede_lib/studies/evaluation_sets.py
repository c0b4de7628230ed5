"""Notebook 07's named evaluation sets (`transfer.evaluations`): each judges the base and chosen checkpoints.

`evaluate_sets(profile, runs)` runs every set through the ordinary bounded-memory runner, one folder
of per-model files per set (`07_transfer_eval/<set>/<model>.csv|.manifest.json|.trajectories.jsonl`),
the models named as every profile names them (`base`, `<arm>__seed-N__step-M`). A model whose files
are there is finished and read back; any other resumes from the response cache. Where 06 read its
runs back from the committed files (no adapters here), every model replays its recorded replies
(`RecordedRepliesOnly`) under the model name and cache namespace its committed manifest gives.

`write_evaluation_sets` then writes one accuracy table per set, the engine check, the cost of every
part and the figure (`studies.evidence`). Sets of real LongMemEval records keep their per-question
files in `real_records/` (git-ignored but for the manifests) and their replies in a cache of their
own that is never exported: only counts and verdicts reach the repository.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib import profiles
from supersede_lib.data.episodes import load_episodes
from supersede_lib.eval.run_files import REPO_ROOT
from supersede_lib.eval.runner import RunSettings, run_condition
from supersede_lib.models.cache import CachedChatModel, RecordedRepliesOnly, ResponseCache
from supersede_lib.profiles import EvaluationSet, Profile, ProfileError, TransferBlock
from supersede_lib.results import evidence
from supersede_lib.results.headings import NOTEBOOK_TRAINING, NOTEBOOK_TRANSFER
from supersede_lib.results.outputs import StudyResult, record_summary
from supersede_lib.studies.training import TrainedRun, checkpoint_model_name, model_label, planned_arms
from supersede_lib.train.config import TrainingConfig
from supersede_lib.train.run import resolve_base_model

REAL_RECORDS_FOLDER = "real_records"  # git-ignored but for the manifests: real LongMemEval text
REAL_RECORDS_CACHE = "responses-real-records.sqlite"  # never exported with the recorded responses
BASE = "base"


@dataclass(frozen=True)
class SetModel:
    """One model a set judges: its label, and the adapter folder (None for the base)."""

    label: str
    adapter: Path | None


@dataclass
class EvaluationSetsResult(StudyResult):
    """07 for a profile judged on named evaluation sets: one accuracy table per set, and the rest."""

    profile: Profile
    model: str
    data_label: str
    tables: dict[str, pd.DataFrame]
    side_by_side: pd.DataFrame = field(default_factory=pd.DataFrame)  # base vs a final checkpoint
    side_by_side_title: str = ""


def set_folder(profile: Profile, evaluation: EvaluationSet, root: Path | None = None) -> Path:
    """Where a set's per-model files go: `07_transfer_eval/<set>/`, real records under `real_records/`,
    under `root` (default: the outputs folder; a replay check passes a scratch one)."""
    transfer = (root or profiles.OUTPUT_ROOT) / profile.name / NOTEBOOK_TRANSFER
    return (
        transfer / REAL_RECORDS_FOLDER / evaluation.name
        if evaluation.real_records
        else transfer / evaluation.name
    )


def set_models(profile: Profile, evaluation: EvaluationSet, runs: Sequence[TrainedRun]) -> list[SetModel]:
    """The base and every checkpoint of `runs`, or those the set names (`models:`); names checked."""
    every = [SetModel(BASE, None)] + [
        SetModel(f"{run.label}__step-{step}", Path(adapter))
        for run in runs
        for step, adapter in run.checkpoints
    ]
    if evaluation.models is None:
        return every
    unknown = sorted(set(evaluation.models) - {model.label for model in every})
    if unknown:
        raise ProfileError(
            f"{profile.source}: transfer.evaluations.{evaluation.name}.models: no such checkpoint "
            f"{', '.join(unknown)} (models are base and <arm>__seed-N__step-M of training's runs)"
        )
    return [model for model in every if model.label in evaluation.models]


def run_settings(profile: Profile, runs: Sequence[TrainedRun]) -> RunSettings:
    """The rollout the adapters trained with (`TrainingConfig.rollout_settings`: budget and prompt)
    run under the profile's settings (`Profile.run_settings`: its concurrency), with the transfer
    block's budget and (if asked) the training's token cap on top: built from the two objects that
    hold settings, never spelled again here, so an evaluation cannot drift from its training."""
    block: TransferBlock = profile.require("transfer")
    config = runs[0].config
    variants = {run.config.prompt_variant for run in runs}
    if len(variants) != 1:
        raise ValueError(f"the training runs used different prompt variants: {sorted(variants)}")
    trained = asdict(config.rollout_settings())
    if block.notes_budget_chars:
        trained["notes_budget_chars"] = block.notes_budget_chars
    cap = config.max_completion_length if block.max_tokens_from_training else None
    if cap:
        trained.update(max_tokens_notes=cap, max_tokens_answer=cap)
    return profile.run_settings(**trained)


def set_settings(profile: Profile, evaluation: EvaluationSet, runs: Sequence[TrainedRun]) -> RunSettings:
    """`run_settings`, with the set's own agent and token caps where it names them."""
    settings = run_settings(profile, runs)
    changes = {
        "prompt_variant": evaluation.prompt_variant,
        "max_tokens_notes": evaluation.max_tokens_notes,
        "max_tokens_answer": evaluation.max_tokens_answer,
    }
    return replace(settings, **{key: value for key, value in changes.items() if value is not None})


def recorded_model(folder: Path, label: str) -> tuple[str, str] | None:
    """(model name, cache namespace) under which a model's replies in this set were recorded, or None."""
    path = folder / f"{label}.manifest.json"
    if not path.exists():
        return None
    manifest = json.loads(path.read_text(encoding="utf-8"))
    return manifest["model"]["name"], manifest["cache"]["backend"]


def _finished(folder: Path, label: str) -> bool:
    return (folder / f"{label}.csv").exists() and (folder / f"{label}.manifest.json").exists()


def _set_cache(profile: Profile, evaluation: EvaluationSet, root: Path | None = None) -> ResponseCache:
    if evaluation.real_records:  # replies quote the records: their own cache, never exported
        return ResponseCache(profiles.cache_path(profile, root).with_name(REAL_RECORDS_CACHE))
    return profiles.profile_cache(profile, root)


def _episodes(evaluation: EvaluationSet) -> list | None:
    """The set's episodes; None for real records whose local file is not on this machine."""
    spec = evaluation.episodes
    if spec.local_path:
        path = Path(spec.local_path).expanduser()
        path = path if path.is_absolute() else REPO_ROOT / path
        if not path.exists():
            print(f"{evaluation.name}: skipped ({spec.local_path} is not here; it is never committed)")
            return None
        spec = spec.model_copy(update={"local_path": str(path)})
    return load_episodes(spec)


def live_model(
    block: TransferBlock,
    evaluation: EvaluationSet,
    folder: Path,
    base_path: str,
    model: SetModel,
    dtype: Any = None,
) -> Any:
    """The base or a checkpoint with its weights on the set's engine (also 09's trained policies), in
    `dtype` (None: this CPU's fastest); a checkpoint recorded earlier in `folder` keeps its recorded name."""
    from supersede_lib.models.hf import HFChatModel, adapter_file_fingerprint

    name = None
    if model.adapter is not None:
        sha = adapter_file_fingerprint(model.adapter)
        recorded = recorded_model(folder, model.label)
        name = (
            recorded[0]
            if recorded and recorded[0].endswith(f"@{sha[:12]}")
            else checkpoint_model_name(Path(base_path).name, sha)
        )
    return HFChatModel(
        base_path,
        adapter_path=str(model.adapter) if model.adapter is not None else None,
        name=name,
        merge_adapter=block.merge_adapter,
        prefix_cache=evaluation.engine == "prefix_cache",
        dtype=dtype,
    )


def _replayed_model(folder: Path, model: SetModel) -> Any:
    """A model whose weights are not here: its recorded replies, under its recorded name and namespace."""

    recorded = recorded_model(folder, model.label)
    if recorded is None:
        raise FileNotFoundError(
            f"{folder / model.label}.manifest.json is missing and the adapter is not here: nothing to replay "
            "(train and evaluate again with `python -m supersede_lib reproduce --live --only 06,07`)"
        )
    return RecordedRepliesOnly(*recorded)


def evaluate_set(
    profile: Profile, evaluation: EvaluationSet, runs: Sequence[TrainedRun], progress: bool = True
) -> None:
    """Judge every model of one set not finished yet (live with its weights, else from recorded replies)."""
    # runs read back from 06's committed files have no adapters here: every model replays, as in Table 3
    replay = not profiles.live_calls_forced() and any(run.recorded for run in runs)
    models = set_models(profile, evaluation, runs)
    judge_models(
        profile, evaluation, runs[0].config, models, settings_runs=runs, replay=replay, progress=progress
    )


def judge_models(
    profile: Profile,
    evaluation: EvaluationSet,
    config: TrainingConfig,
    models: Sequence[SetModel],
    *,
    settings_runs: Sequence[TrainedRun] | None = None,
    replay: bool = False,
    progress: bool = True,
    root: Path | None = None,
) -> None:
    """Judge `models` on one set with the agent `config` trained (the base needs no run): each model
    not finished yet runs live with its weights, or (`replay`) from its recorded replies. `root`
    (default: the outputs folder) is where the set's files and the cache go."""
    block: TransferBlock = profile.require("transfer")
    episodes = _episodes(evaluation)
    if episodes is None:
        return
    folder, live = set_folder(profile, evaluation, root), profiles.live_calls_forced()
    folder.mkdir(parents=True, exist_ok=True)
    base_path = resolve_base_model(config)
    settings = set_settings(profile, evaluation, settings_runs or [ConfigOnly(config)])
    cache, evaluated = _set_cache(profile, evaluation, root), False
    for model in models:
        if _finished(folder, model.label) and not live:
            continue
        inner = (
            _replayed_model(folder, model)
            if replay
            else live_model(block, evaluation, folder, base_path, model)
        )
        evaluated = True
        wrapped = CachedChatModel(inner, cache, replay=not live, commit=profiles.commit_label())
        run_condition(
            episodes,
            evaluation.condition,
            wrapped,
            settings,
            output_dir=folder,
            run_name=model.label,
            progress=progress,
        )
        getattr(inner, "close", lambda: None)()
    if evaluated and not replay and not evaluation.real_records:  # a replay adds no recorded reply
        profiles.save_recorded_responses(profile)


@dataclass(frozen=True)
class ConfigOnly:
    """Stands in for a trained run where only its config matters (`run_settings` of the base alone)."""

    config: TrainingConfig


def evaluate_sets(profile: Profile, runs: Sequence[TrainedRun], progress: bool = True) -> None:
    """Every set of `transfer.evaluations`, in the profile's order."""
    for evaluation in profile.require("transfer").evaluations:
        evaluate_set(profile, evaluation, runs, progress)


def _engine_twin(evaluations: Sequence[EvaluationSet]) -> tuple[EvaluationSet, EvaluationSet] | None:
    """The first set judged by both engines: (whole prompt, prompt prefix) on the same episodes."""
    for whole in [item for item in evaluations if item.engine == "whole_prompt"]:
        for prefix in [item for item in evaluations if item.engine == "prefix_cache"]:
            if prefix.episodes == whole.episodes:
                return whole, prefix
    return None


def evaluation_tables(profile: Profile) -> dict[str, pd.DataFrame]:
    """One accuracy table per set whose base is judged, the engine check, then the cost of every part."""
    block: TransferBlock = profile.require("transfer")
    tables: dict[str, pd.DataFrame] = {}
    for evaluation in block.evaluations:
        frames = evidence.evaluation_frames(set_folder(profile, evaluation))
        if BASE in frames:
            tables[evaluation.name] = evidence.evaluation_table(frames)
    twin = _engine_twin(block.evaluations)
    if twin is not None and any(set_folder(profile, twin[1]).glob("*.csv")):
        tables[evidence.ENGINE_CHECK] = evidence.engine_check_table(
            *(set_folder(profile, item) for item in twin)
        )
    sets = [(set_folder(profile, item), item.engine == "prefix_cache") for item in block.evaluations]
    tables[evidence.COST] = evidence.cost_table(profiles.OUTPUT_ROOT / profile.name / NOTEBOOK_TRAINING, sets)
    return tables


def write_evaluation_sets(profile: Profile, runs: Sequence[TrainedRun]) -> EvaluationSetsResult:
    """The tables (`<name>.csv`, `<name>.md`), the figure and summary.json of 07's evaluation sets."""
    from supersede_lib.present.plots import save_figure

    directory = profiles.output_dir(profile, NOTEBOOK_TRANSFER)
    tables = evaluation_tables(profile)
    files = [evidence.write_evidence_table(directory, name, table) for name, table in tables.items()]
    block: TransferBlock = profile.require("transfer")
    # a set skipped here (its real records are not on this machine) keeps the table it had: counts only
    files += [
        f"{item.name}.md"
        for item in block.evaluations
        if item.name not in tables and (directory / f"{item.name}.md").exists()
    ]
    first, twin = block.evaluations[0], _engine_twin(block.evaluations)
    result = EvaluationSetsResult(
        profile=profile, model=model_label(runs[0].config), data_label=first.episodes.label, tables=tables
    )
    if first.name in tables:
        rollouts = evidence.read_rollouts(profiles.OUTPUT_ROOT / profile.name / NOTEBOOK_TRAINING)
        other = tables.get(twin[1].name) if twin is not None and twin[0] == first else None
        figure = evidence.training_and_evaluation_figure(rollouts, tables[first.name], other)
        result.figures["training_and_heldout"] = save_figure(figure, directory / evidence.FIGURE)
    if block.episodes is not None:  # summary.json is Table 3's (`transfer.write_transfer`)
        result.output_dir = directory
        return result
    config = {"transfer": block.model_dump(mode="json", exclude_unset=True)}
    return record_summary(result, directory, NOTEBOOK_TRANSFER, [], files, config)


def read_evaluation_sets(profile: Profile) -> EvaluationSetsResult | None:
    """What 07 wrote for the evaluation sets, read back for display (None when the profile lists none):
    the tables, the figure, and the base beside the first arm's final checkpoint on the first set."""
    block: TransferBlock = profile.require("transfer")
    if not block.evaluations:
        return None
    directory = profiles.OUTPUT_ROOT / profile.name / NOTEBOOK_TRANSFER
    names = [item.name for item in block.evaluations] + [evidence.ENGINE_CHECK, evidence.COST]
    first = block.evaluations[0]
    result = EvaluationSetsResult(
        profile=profile,
        model="",
        data_label=first.episodes.label,
        tables=evidence.read_tables(directory, names),
    )
    result.output_dir = directory
    if (directory / evidence.FIGURE).exists():
        result.figures["training_and_heldout"] = directory / evidence.FIGURE
    if first.name in result.tables:
        arms = [arm.name for arm in planned_arms(profile)]
        final = evidence.final_checkpoints(result.tables[first.name], arms)
        if final:
            result.side_by_side = evidence.side_by_side(set_folder(profile, first), final[0])
            result.side_by_side_title = f"{first.name}: base vs {final[0]}"
    return result
