"""Notebook 07 (paper Table 3, Figure 4b): the base model and every GRPO checkpoint on held-out episodes.

`run_transfer(profile)` = `evaluate_checkpoints` (the runs notebook 06 left on disk; base and each
adapter through the ordinary bounded-memory runner, so harness, prompts and matcher are those of
studies 02-05; each checkpoint must differ from the base only by its adapter) → `analyse_transfer`
(accuracy and McNemar against the base, mean over seeds by step, fixed vs adaptive curriculum and
sparse vs memory reward at the final checkpoints, Table 3 beside the paper's) → `write_transfer`
(CSVs, tables, Figure 4b, summary.json).

A fresh clone has no adapters: when 06 read its runs back from the committed files, 07 replays
every model's recorded replies (the profile's `recorded_responses`) under the names and dtype its
committed summary.json gives, through the same runner and matcher, so every number is re-derived.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from supersede_lib import profiles
from supersede_lib.data.episodes import load_episodes
from supersede_lib.eval.progress import StudyProgress
from supersede_lib.eval.runner import RunSettings, run_condition
from supersede_lib.eval.stats import paired_bootstrap_diff
from supersede_lib.models.cache import CachedChatModel, RecordedRepliesOnly
from supersede_lib.models.chat import release_model
from supersede_lib.models.hf import HFChatModel, adapter_file_fingerprint, hf_cache_namespace
from supersede_lib.profiles import Profile, ProfileError, TransferBlock
from supersede_lib.results import paper_results
from supersede_lib.results.comparison import accuracy_row, failed_ids, incomplete_line, mcnemar_dict
from supersede_lib.results.headings import (
    MATCHER,
    NOTEBOOK_TRAINING,
    NOTEBOOK_TRANSFER,
    format_pvalue,
    headline_number,
    percent,
)
from supersede_lib.results.outputs import StudyResult, record_summary, study_progress, write_table
from supersede_lib.studies.training import (
    PAPER_MODEL,
    TrainedRun,
    checkpoint_model_name,
    model_label,
    planned_arms,
    recorded_run,
)
from supersede_lib.train.config import CURRICULUM_MODES, SUMMARY_FILE
from supersede_lib.train.run import read_run_summary, resolve_base_model, run_dir_for

if TYPE_CHECKING:
    from supersede_lib.studies.evaluation_sets import EvaluationSetsResult


@dataclass
class TransferRuns:
    """What notebook 07 evaluated: every model's per-question correctness and where it came from."""

    profile: Profile
    runs: list[TrainedRun]
    base_path: str
    base_fingerprint: str
    notes_budget_chars: int
    n: int
    # run, curriculum, reward_type, seed, step; the base first
    evaluated: list[dict[str, Any]] = field(default_factory=list)
    correct_by_model: dict[str, pd.Series] = field(default_factory=dict)  # run -> correct per question
    adapters: dict[str, dict[str, Any]] = field(default_factory=dict)  # run -> adapter path, sha256, check
    dtype: str | None = None  # of the evaluated weights: part of the replies' cache namespace
    left_out: set[str] = field(default_factory=set)  # questions some model's run failed on

    def scored(self) -> dict[str, pd.Series]:
        """Every model's correctness on the questions no model failed: a failed question is neither
        right nor wrong, so it leaves every accuracy and every paired comparison of the study."""
        return {
            run: correct[~correct.index.isin(self.left_out)] for run, correct in self.correct_by_model.items()
        }

    def add(
        self,
        run_name: str,
        frame: pd.DataFrame,
        curriculum: str | None = None,
        seed: int | None = None,
        step: int = 0,
        reward_type: str | None = None,
    ) -> None:
        """Record one evaluated model's per-question correctness (matcher verdicts, by question) and
        the questions its run failed on."""
        correct = frame["verdict"].eq("correct")
        self.correct_by_model[run_name] = correct.set_axis(frame["episode_id"].astype(str).to_numpy())
        self.left_out |= failed_ids(frame)
        self.evaluated.append(
            {
                "run": run_name,
                "curriculum": curriculum,
                "reward_type": reward_type,
                "seed": seed,
                "step": step,
            }
        )


@dataclass
class TransferResult(StudyResult):
    """Notebook 07: base and every checkpoint on held-out episodes (Table 3, Figure 4b)."""

    profile: Profile
    model: str
    data_label: str
    n: int
    checkpoints: pd.DataFrame  # one row per evaluated model: run, step, accuracy, McNemar vs base
    by_step: pd.DataFrame  # per curriculum, reward type and step: mean over seeds with an interval
    curricula: pd.DataFrame  # fixed vs adaptive at the final checkpoint, per reward type
    rewards: pd.DataFrame  # sparse vs memory reward at the final checkpoint, per curriculum
    table: pd.DataFrame  # Table 3 (ours)
    paper_table: pd.DataFrame  # Table 3 (paper)
    raw: TransferRuns


def finished_runs(profile: Profile) -> list[TrainedRun]:
    """The runs 06 left on disk for this profile (with their checkpoints); raises when there are none.

    A run with no folder here is the committed one (`training.recorded_run`) unless live calls
    are forced; its adapters are absent, so 07 replays its recorded replies.
    """
    runs = []
    for arm in planned_arms(profile):
        curriculum, config = arm.curriculum, arm.config
        for seed in arm.seeds:
            summary = run_dir_for(config, seed) / SUMMARY_FILE
            if not summary.exists() and not profiles.live_calls_forced():
                recorded = recorded_run(profile, curriculum, seed, config, arm=arm.name)
                if recorded is not None and recorded.checkpoints:
                    runs.append(recorded)
                    continue
            if not summary.exists():
                raise FileNotFoundError(
                    f"no finished training run at {summary.parent}: run notebook 06 ({NOTEBOOK_TRAINING}) for "
                    f"profile {profile.name!r} first"
                )
            run = TrainedRun(curriculum, seed, config, read_run_summary(summary), arm=arm.name)
            if not run.checkpoints:
                raise FileNotFoundError(f"{summary.parent} holds no adapter checkpoint: re-run notebook 06")
            runs.append(run)
    return runs


def _recorded_transfer(directory: Path) -> dict[str, Any]:
    """The committed summary.json of 07: adapter hashes per checkpoint, base fingerprint and dtype."""
    path = directory / "summary.json"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing: 07 cannot replay recorded checkpoints without it; run 06 and 07 with --live"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def _evaluate(
    model: Any, episodes: list, directory: Path, run_name: str, settings: RunSettings, progress: StudyProgress
) -> pd.DataFrame:
    return run_condition(
        episodes,
        "bounded_memory",
        model,
        settings,
        output_dir=directory,
        run_name=run_name,
        progress=progress,
    ).frame


def checkpoint_row(
    run: str,
    curriculum: str | None,
    seed: int | None,
    step: int,
    correct: pd.Series,
    base_correct: pd.Series,
    reward_type: str | None = None,
    failed: int = 0,
) -> dict[str, Any]:
    """Accuracy of one evaluated model, its Wilson interval, and McNemar against the base model, on
    the questions both answered; `failed`: questions left out because a run failed on them (a
    `failed` column only when there are any, so a complete table keeps its columns)."""
    row = accuracy_row(run, "bounded_memory", correct.tolist(), MATCHER)
    test = mcnemar_dict(base_correct.tolist(), correct.tolist())  # b: base right only; c: trained right only
    return {
        "run": run,
        "curriculum": curriculum,
        "reward_type": reward_type,
        "seed": seed,
        "step": step,
        "n": row["n"],
        "correct": row["correct"],
        "accuracy": row["accuracy"],
        "ci_low": row["ci_low"],
        "ci_high": row["ci_high"],
        "vs_base_points": 100 * (row["accuracy"] - float(base_correct.mean())),
        "base_only_right": test["b"],
        "trained_only_right": test["c"],
        "p_exact": test["p_exact"],
        "p_chi2_corrected": test["p_chi2_corrected"],
        **({"failed": failed} if failed else {}),
    }


def seed_aggregate(
    correct_by_model: dict[str, pd.Series], checkpoints: pd.DataFrame, n_resamples: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Per arm and step: mean accuracy over seeds, with a 95% interval from resampling questions.

    Every seed's run is evaluated on the same questions, so one resample of question indices is
    applied to all seeds at once; with one seed this is a plain bootstrap of that run's accuracy.
    """
    rows = []
    trained = checkpoints[checkpoints["curriculum"].notna()]
    rng = np.random.default_rng(seed)
    for (curriculum, reward_type, step), group in trained.groupby(
        ["curriculum", "reward_type", "step"], sort=True
    ):
        matrix = np.array([correct_by_model[run].to_numpy(dtype=float) for run in group["run"]])
        if matrix.shape[1] == 0:  # every question failed somewhere: nothing to average or resample
            matrix = np.full((len(group), 1), np.nan)
        per_seed = matrix.mean(axis=1)
        indices = rng.integers(0, matrix.shape[1], size=(n_resamples, matrix.shape[1]))
        resampled = matrix[:, indices].mean(axis=2).mean(axis=0)
        rows.append(
            {
                "curriculum": curriculum,
                "reward_type": reward_type,
                "step": int(step),
                "seeds": len(group),
                "mean_accuracy": float(per_seed.mean()),
                "ci_low": float(np.quantile(resampled, 0.025)),
                "ci_high": float(np.quantile(resampled, 0.975)),
                "min_over_seeds": float(per_seed.min()),
                "max_over_seeds": float(per_seed.max()),
            }
        )
    return pd.DataFrame(rows)


def arm_comparison(
    correct_by_model: dict[str, pd.Series], checkpoints: pd.DataFrame, axis: str, arms: tuple[str, str]
) -> pd.DataFrame:
    """`arms[1]` vs `arms[0]` of one axis (`curriculum` or `reward_type`) at each run's final checkpoint.

    Runs are paired per seed within each value of the other axis: McNemar per pair, and per value a
    pooled bootstrap difference. Empty when no seed trained both arms.
    """
    within = "reward_type" if axis == "curriculum" else "curriculum"
    trained = checkpoints[checkpoints["curriculum"].notna()]
    final = trained.loc[trained.groupby("run_group")["step"].idxmax()] if len(trained) else trained
    rows = []
    for kept, group in final.groupby(within, sort=False):
        rows += _paired_arms(correct_by_model, group, axis, arms, {within: kept})
    return pd.DataFrame(rows)


def _paired_arms(
    correct_by_model: dict[str, pd.Series],
    final: pd.DataFrame,
    axis: str,
    arms: tuple[str, str],
    kept: dict[str, str],
) -> list[dict[str, Any]]:
    """Rows of `arm_comparison` for one value of the other axis (`kept`): per seed, then pooled."""
    first, second = arms
    rows, first_all, second_all = [], [], []
    for seed, group in final.groupby("seed"):
        by_arm = group.set_index(axis)
        if not set(arms) <= set(by_arm.index):
            continue
        first_correct = correct_by_model[by_arm.loc[first, "run"]]
        second_correct = correct_by_model[by_arm.loc[second, "run"]]
        first_all += first_correct.tolist()
        second_all += second_correct.tolist()
        test = mcnemar_dict(first_correct.tolist(), second_correct.tolist())
        rows.append(
            {
                **kept,
                "seed": int(seed),
                f"{first} step": int(by_arm.loc[first, "step"]),
                f"{second} step": int(by_arm.loc[second, "step"]),
                f"{first} accuracy": float(first_correct.mean()),
                f"{second} accuracy": float(second_correct.mean()),
                f"{first} only right": test["b"],
                f"{second} only right": test["c"],
                "p_exact": test["p_exact"],
            }
        )
    if rows and first_all:  # no pooled row when every question failed somewhere
        pooled = paired_bootstrap_diff(second_all, first_all)
        pairs = list(zip(first_all, second_all, strict=True))
        rows.append(
            {
                **kept,
                "seed": "all (pooled)",
                f"{first} step": "final",
                f"{second} step": "final",
                f"{first} accuracy": float(np.mean(first_all)),
                f"{second} accuracy": float(np.mean(second_all)),
                f"{first} only right": int(sum(a and not b for a, b in pairs)),
                f"{second} only right": int(sum(b and not a for a, b in pairs)),
                "p_exact": float("nan"),
                f"{second} - {first} (95% CI)": f"{100 * pooled.diff:+.1f} pts "
                f"[{100 * pooled.low:+.1f}, {100 * pooled.high:+.1f}]",
            }
        )
    return rows


def curriculum_comparison(correct_by_model: dict[str, pd.Series], checkpoints: pd.DataFrame) -> pd.DataFrame:
    """Fixed vs adaptive at each run's final checkpoint, per reward type (`arm_comparison`)."""
    return arm_comparison(correct_by_model, checkpoints, "curriculum", CURRICULUM_MODES)


def reward_comparison(correct_by_model: dict[str, pd.Series], checkpoints: pd.DataFrame) -> pd.DataFrame:
    """Sparse vs memory reward at each run's final checkpoint, per curriculum (`arm_comparison`)."""
    return arm_comparison(correct_by_model, checkpoints, "reward_type", ("sparse", "memory"))


def table3(checkpoints: pd.DataFrame) -> pd.DataFrame:
    """Table 3 (ours): correct/n, accuracy and the change against the base model, McNemar p values."""
    rows = []
    for row in checkpoints.itertuples(index=False):
        is_base = row.run == "base"
        rows.append(
            {
                "checkpoint": "base (untrained)" if is_base else f"{row.run_group} step {row.step}",
                "accuracy": f"{row.correct}/{row.n} = {percent(row.accuracy)}" + _left_out_text(row),
                "95% CI": f"{percent(row.ci_low)}-{percent(row.ci_high)}",
                "vs. base": "—" if is_base else f"{row.vs_base_points:+.1f}",
                "McNemar b/c (base only / trained only)": "—"
                if is_base
                else f"{row.base_only_right}/{row.trained_only_right}",
                "p exact": "—" if is_base else format_pvalue(row.p_exact),
                "p chi2 (corrected)": "—" if is_base else format_pvalue(row.p_chi2_corrected),
            }
        )
    return pd.DataFrame(rows)


def _left_out_text(row: Any) -> str:
    """What a Table 3 cell adds when questions were left out: `(2 of 20 failed, left out)`."""
    failed = int(getattr(row, "failed", 0) or 0)
    return f" ({failed} of {row.n + failed} failed, left out)" if failed else ""


def paper_table3() -> pd.DataFrame:
    base = paper_results.TABLE3_TRANSFER[0]
    return pd.DataFrame(
        [
            {
                "checkpoint (paper)": row["checkpoint"],
                "oracle accuracy": f"{row['correct']}/{row['n']} = {percent(row['correct'] / row['n'])}",
                "vs. baseline": "—"
                if row["step"] == 0
                else f"{100 * (row['correct'] - base['correct']) / row['n']:+.1f}",
            }
            for row in paper_results.TABLE3_TRANSFER
        ]
    )


def evaluate_checkpoints(profile: Profile, *, progress: bool = True) -> TransferRuns:
    """The base model and every checkpoint of 06's runs, bounded memory, on `transfer.episodes`.

    Base and checkpoints load the same base weights; each checkpoint is asserted to differ from the
    base only by its adapter (hash of every non-LoRA tensor, hash of the adapter file).
    """
    block: TransferBlock = profile.require("transfer")
    if block.episodes is None:
        raise ProfileError(f"{profile.source}: transfer.episodes: missing (Table 3 needs it)")
    directory = profiles.output_dir(profile, NOTEBOOK_TRANSFER)
    runs = finished_runs(profile)
    base_path = resolve_base_model(runs[0].config)
    others = {resolve_base_model(run.config) for run in runs}
    if others != {base_path}:
        raise ValueError(
            f"training runs of profile {profile.name!r} start from different bases: {sorted(others)}"
        )
    episodes = load_episodes(block.episodes)
    budget = block.notes_budget_chars or runs[0].config.notes_budget_chars
    variants = {run.config.prompt_variant for run in runs}
    if len(variants) != 1:
        raise ValueError(
            f"training runs of profile {profile.name!r} used different prompt variants: {sorted(variants)}"
        )
    # the prompt the adapters were trained with, at the profile's concurrency
    settings = profile.run_settings(notes_budget_chars=budget, prompt_variant=variants.pop())
    total = len(episodes) * (1 + sum(len(run.checkpoints) for run in runs))  # the base, then each checkpoint
    with study_progress(profile, NOTEBOOK_TRANSFER, total, progress) as bar:
        if any(run.recorded for run in runs):
            return _replay_checkpoints(profile, runs, base_path, episodes, directory, settings, bar)
        cache = profiles.profile_cache(profile)

        def cached(model: Any) -> CachedChatModel:
            return CachedChatModel(
                model, cache, replay=not profiles.live_calls_forced(), commit=profiles.commit_label()
            )

        base = HFChatModel(base_path)
        base_name = base.name
        raw = TransferRuns(profile, runs, base_path, base.base_fingerprint(), budget, len(episodes))
        raw.dtype = base.dtype
        raw.add("base", _evaluate(cached(base), episodes, directory, "base", settings, bar))
        release_model(base)
        for run in runs:
            for step, adapter in run.checkpoints:
                sha = adapter_file_fingerprint(adapter)
                name = checkpoint_model_name(base_name, sha)
                trained = HFChatModel(base_path, adapter_path=str(adapter), name=name)
                if trained.base_fingerprint() != raw.base_fingerprint or trained.adapter_fingerprint is None:
                    raise AssertionError(
                        f"{run.label} step {step} ({name}): base weights differ from the untrained base, not only the adapter"
                    )
                run_name = f"{run.label}__step-{step}"
                frame = _evaluate(cached(trained), episodes, directory, run_name, settings, bar)
                raw.add(run_name, frame, run.curriculum, run.seed, step, run.reward)
                release_model(trained)
                raw.adapters[run_name] = {
                    "adapter": str(adapter),
                    "sha256": sha,
                    "differs_only_by_adapter": True,
                }
        return raw


def _replay_checkpoints(
    profile: Profile,
    runs: list[TrainedRun],
    base_path: str,
    episodes: list,
    directory: Path,
    settings: RunSettings,
    progress: StudyProgress,
) -> TransferRuns:
    """Base and every recorded checkpoint from their recorded replies (no weights are loaded)."""
    recorded = _recorded_transfer(directory)
    adapters, dtype = recorded.get("adapters", {}), recorded.get("dtype")
    if dtype is None:
        raise ValueError(
            f"{directory / 'summary.json'} does not say which dtype the models ran in (written before "
            "it was recorded): run 06 and 07 again with --live"
        )
    cache = profiles.profile_cache(profile)
    namespace = hf_cache_namespace(dtype)
    base_name = Path(base_path).name

    def replayed(name: str) -> CachedChatModel:
        return CachedChatModel(RecordedRepliesOnly(name, namespace), cache)

    raw = TransferRuns(
        profile, runs, base_path, recorded["base_fingerprint"], settings.notes_budget_chars, len(episodes)
    )
    raw.dtype = dtype
    raw.add("base", _evaluate(replayed(base_name), episodes, directory, "base", settings, progress))
    for run in runs:
        for step, _ in run.checkpoints:
            run_name = f"{run.label}__step-{step}"
            if run_name not in adapters:
                raise KeyError(f"{directory / 'summary.json'} records no adapter for {run_name}")
            name = checkpoint_model_name(base_name, adapters[run_name]["sha256"])
            frame = _evaluate(replayed(name), episodes, directory, run_name, settings, progress)
            raw.add(run_name, frame, run.curriculum, run.seed, step, run.reward)
            raw.adapters[run_name] = adapters[run_name]
    return raw


def analyse_transfer(raw: TransferRuns) -> TransferResult:
    """Accuracy and McNemar against the base per checkpoint, mean over seeds by step, arms, Table 3."""
    correct_by_model = raw.scored()  # failed questions left out of every number below
    base_correct = correct_by_model["base"]
    checkpoints = pd.DataFrame(
        [
            checkpoint_row(
                item["run"],
                item["curriculum"],
                item["seed"],
                item["step"],
                correct_by_model[item["run"]],
                base_correct,
                item["reward_type"],
                failed=len(raw.left_out),
            )
            for item in raw.evaluated
        ]
    )
    checkpoints["seed"] = checkpoints["seed"].astype("Int64")  # whole numbers, missing for the base row
    checkpoints["run_group"] = [run.split("__step-")[0] for run in checkpoints["run"]]
    return TransferResult(
        profile=raw.profile,
        model=model_label(raw.runs[0].config),
        data_label=raw.profile.require("transfer").episodes.label,
        n=raw.n,
        checkpoints=checkpoints,
        by_step=seed_aggregate(correct_by_model, checkpoints),
        curricula=curriculum_comparison(correct_by_model, checkpoints),
        rewards=reward_comparison(correct_by_model, checkpoints),
        table=table3(checkpoints),
        paper_table=paper_table3(),
        raw=raw,
    )


def _transfer_numbers(result: TransferResult) -> list[dict]:
    numbers = []
    for row in result.checkpoints.itertuples(index=False):
        meta = {
            "model": f"{result.model} ({row.run})",
            "data": result.data_label,
            "profile": result.profile.name,
            "n": row.n,
            "grader": MATCHER,
        }
        numbers.append(headline_number(f"{row.run} accuracy", row.accuracy, **meta))
        if row.run != "base":
            numbers.append(headline_number(f"{row.run} mcnemar p_exact vs base", row.p_exact, **meta))
    return numbers


def write_transfer(result: TransferResult, directory: Path | None = None) -> TransferResult:
    """Write 07's CSVs, Table 3 (ours and the paper's), Figure 4b and summary.json; returns `result`."""
    from supersede_lib.present import plots

    profile, raw, model, data, n = result.profile, result.raw, result.model, result.data_label, result.n
    directory = directory or profiles.output_dir(profile, NOTEBOOK_TRANSFER)
    first_line = incomplete_line(len(raw.left_out), n)  # failed questions: in no number of these tables
    result.checkpoints.to_csv(directory / "checkpoints.csv", index=False)
    result.by_step.to_csv(directory / "accuracy_by_step.csv", index=False)
    tables = [
        write_table(
            directory,
            "table3_transfer",
            result.table,
            f"ours: {model} base and GRPO checkpoints, bounded memory (B = {raw.notes_budget_chars}), {MATCHER}, "
            f"held-out {data}, profile {profile.name}, n = {n}. McNemar is paired on the same questions; "
            "b = right before training only, c = right after training only.",
            first_line=first_line,
        ),
        write_table(
            directory,
            "table3_paper",
            result.paper_table,
            f"paper: {PAPER_MODEL}, LongMemEval knowledge-update oracle, n = 78, bounded memory, matcher "
            "(Table 3). Quoted, not measured here.",
        ),
    ]
    if not result.curricula.empty:
        tables.append(
            write_table(
                directory,
                "curriculum_comparison",
                result.curricula,
                "Fixed (the paper's curriculum) vs adaptive (climbs the difficulty ladder when groups "
                f"saturate), each run's final checkpoint, same held-out questions (n = {n} per seed).",
                first_line=first_line,
            )
        )
    if not result.rewards.empty:
        tables.append(
            write_table(
                directory,
                "reward_comparison",
                result.rewards,
                "Sparse (the paper's: the answer alone) vs memory reward (plus credit when the notes "
                "hold the current value), each run's final checkpoint, same held-out questions "
                f"(n = {n} per seed).",
                first_line=first_line,
            )
        )
    figure = plots.transfer_figure(
        result.checkpoints,
        result.by_step,
        title=f"ours: {model}, held-out {data}, {profile.name}, n={n}",
        paper=paper_results.TABLE3_TRANSFER,
        paper_title=f"paper: {PAPER_MODEL}, LongMemEval oracle, n=78",
    )
    result.figures["figure4b"] = plots.save_figure(figure, directory / "figure4b_transfer.png")
    numbers = _transfer_numbers(result)
    config = {
        "transfer": profile.require("transfer"),
        "notes_budget_chars": raw.notes_budget_chars,
        "base_model": raw.base_path,
    }
    extra = {"adapters": raw.adapters, "base_fingerprint": raw.base_fingerprint, "dtype": raw.dtype}
    if raw.left_out:
        extra["left_out"] = sorted(raw.left_out)  # failed questions: in no number above
    return record_summary(result, directory, NOTEBOOK_TRANSFER, numbers, tables, config, extra)


def run_transfer(profile: Profile, *, progress: bool = True) -> TransferResult | EvaluationSetsResult:
    """Paper Table 3 / Figure 4b: base vs every checkpoint, bounded memory, matcher, held-out data.

    A profile that lists named evaluation sets (`transfer.evaluations`, e.g. the CPU proof's held-out,
    harder and real-record sets under either engine) gets each set's table, the engine check, the
    cost and the figure (`studies.evaluation_sets`); with `transfer.episodes` it gets Table 3 too.
    """
    from supersede_lib.studies import evaluation_sets  # it builds on this module's replay helpers

    block: TransferBlock = profile.require("transfer")
    result = None
    if block.episodes is not None:
        result = write_transfer(analyse_transfer(evaluate_checkpoints(profile, progress=progress)))
    if not block.evaluations:
        return result
    runs = finished_runs(profile)
    evaluation_sets.evaluate_sets(profile, runs, progress=progress)
    sets = evaluation_sets.write_evaluation_sets(profile, runs)
    return result if result is not None else sets


def transfer_summary_line(result: TransferResult) -> str:
    """One honest sentence: did held-out accuracy move, and is it distinguishable from noise?"""
    base = result.checkpoints[result.checkpoints["run"] == "base"].iloc[0]
    trained = result.checkpoints[result.checkpoints["run"] != "base"]
    best = trained.loc[trained["accuracy"].idxmax()]
    verdict = (
        "distinguishable from no change at p < 0.05 (exact McNemar)"
        if best["p_exact"] < 0.05
        else "not distinguishable from no change (exact McNemar)"
    )
    return (
        f"Base {percent(base['accuracy'])} ({base['correct']}/{base['n']}); best checkpoint {best['run']} "
        f"{percent(best['accuracy'])} ({best['correct']}/{best['n']}, {best['vs_base_points']:+.1f} points, "
        f"b/c = {best['base_only_right']}/{best['trained_only_right']}, p = {best['p_exact']:.3f}): {verdict}."
    )
