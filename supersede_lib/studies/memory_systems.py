"""Notebook 08: memory systems on trial, every memory policy on the same questions, model and budget.

`run_memory_systems(profile)` = `run_memory_systems_policies` (per model of `memory_systems.models`,
each policy of `memory_systems.policies` and full context as the ceiling, through the one runner) →
`analyse_memory_systems` (per model and policy: accuracy with its Wilson interval, stale answers, what
the memory held when the answer was asked, memory failures, calls and tokens per episode; each policy
paired with the reference entry, the paper's notes rewrite, by exact McNemar, Holm within a model;
the log's predictions M1-M6 judged on those rows by `results.memory_predictions`) →
`write_memory_systems` (tables, predictions, the accuracy-vs-cost figure, summary.json).

A policy whose capability (tools, embeddings) the server lacks is refused by the runner before any
call: its row says `refused` with the reason and has no number, never a failure. A question a run
failed on (the infrastructure's fault) is left out of every row of that model, so all rows of a
model stay paired; the table then opens with the incomplete line. `analyse_policy_runs` is also what
`diagnose --memory` builds its policy table from.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib import profiles
from supersede_lib.agent.episode import Episode
from supersede_lib.agent.prompts import is_empty_notes
from supersede_lib.data.episodes import load_episodes
from supersede_lib.eval.memory_metrics import embedding_calls
from supersede_lib.eval.progress import StudyProgress
from supersede_lib.eval.run_files import REPO_ROOT, default_run_name
from supersede_lib.eval.runner import MissingCapabilityError, RunResult, RunSettings, run_condition
from supersede_lib.eval.stats import holm_adjusted
from supersede_lib.models.cache import CachedChatModel, ResponseCache
from supersede_lib.models.chat import ChatModel, release_model
from supersede_lib.profiles import MemoryPolicyEntry, MemorySystemsBlock, Profile
from supersede_lib.results.comparison import (
    accuracy_cell,
    accuracy_incomplete_line,
    accuracy_row,
    correct_column,
    failed_ids,
    mcnemar_dict,
)
from supersede_lib.results.headings import (
    MATCHER,
    NOTEBOOK_MEMORY_SYSTEMS,
    format_pvalue,
    headline_number,
    percent,
)
from supersede_lib.results.memory_predictions import judge_memory_clauses, judge_memory_predictions
from supersede_lib.results.outputs import StudyResult, record_summary, study_progress, write_table
from supersede_lib.studies.evaluation_sets import REAL_RECORDS_CACHE, REAL_RECORDS_FOLDER

FULL_CONTEXT = "full_context"  # the ceiling's row: every session in one prompt, no memory
SYNTHETIC, LONGMEMEVAL = "synthetic", "longmemeval"
SANITY_TABLE = "longmemeval_sanity"


@dataclass
class PolicyRun:
    """One model x policy run (or its refusal): what the tables are built from."""

    model: str
    policy: str  # the entry's name; FULL_CONTEXT for the ceiling
    memory: str  # the memory policy ("" under full context)
    prompt_variant: str
    data: str = SYNTHETIC
    run: RunResult | None = None
    refused: str | None = None  # the capability the server lacks, and why: no call was made


@dataclass
class PolicyTables:
    """What `analyse_policy_runs` computes: the tidy rows, the tests, and the questions left out."""

    accuracy: pd.DataFrame  # per model x policy: accuracy, interval, stale, memory held, cost
    mcnemar: pd.DataFrame  # per model x policy: paired with the reference entry, Holm within model
    left_out: dict[str, list[str]] = field(default_factory=dict)  # per model: questions a run failed


@dataclass
class MemorySystemsResult(StudyResult):
    """Notebook 08: every memory policy per model, on the same questions."""

    profile: Profile
    data_label: str
    grader: str
    reference: str
    runs: list[PolicyRun]
    tables: PolicyTables
    table: pd.DataFrame  # the shown table (formatted cells)
    sanity: pd.DataFrame  # LongMemEval real records: counts only (empty when the files are absent)
    # M1-M6 of docs/memory-systems-log.md, kept or broken, and clause by clause with the numbers read
    predictions: pd.DataFrame = field(default_factory=pd.DataFrame)
    prediction_clauses: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def model(self) -> list[str]:
        return list(dict.fromkeys(run.model for run in self.runs))

    @property
    def accuracy(self) -> pd.DataFrame:
        return self.tables.accuracy

    @property
    def mcnemar(self) -> pd.DataFrame:
        return self.tables.mcnemar


def block_changes(block: MemorySystemsBlock) -> dict[str, Any]:
    """The block's budget and the token caps it sets, as `RunSettings` changes."""
    caps = {"max_tokens_notes": block.max_tokens_notes, "max_tokens_answer": block.max_tokens_answer}
    return {
        "notes_budget_chars": block.notes_budget_chars,
        **{k: v for k, v in caps.items() if v is not None},
    }


def entry_settings(profile: Profile, block: MemorySystemsBlock, entry: MemoryPolicyEntry) -> RunSettings:
    """The settings of one policy's runs: the profile's, the block's budget, the entry's policy and variant."""
    changes: dict[str, Any] = {**block_changes(block), "memory": entry.memory}
    if entry.prompt_variant is not None:
        changes["prompt_variant"] = entry.prompt_variant
    return profile.run_settings(**changes)


def policy_run_name(model_name: str, settings: RunSettings, policy: str) -> str:
    """`bounded_memory__<model>__B300__<policy entry>`: two entries of one policy (the notes rewrite
    and the line edits) never share files; full context keeps the runner's own name."""
    if policy == FULL_CONTEXT:
        return default_run_name(FULL_CONTEXT, model_name, None, None)
    base = default_run_name("bounded_memory", model_name, settings.notes_budget_chars, None)
    return f"{base}__{re.sub(r'[^A-Za-z0-9._-]+', '-', policy)}"


def run_policy(
    episodes: Sequence[Episode],
    model: ChatModel,
    settings: RunSettings,
    policy: str,
    *,
    directory: Path | None,
    progress: bool | StudyProgress,
    data: str = SYNTHETIC,
) -> PolicyRun:
    """One policy (or full context) on `episodes`; a missing capability is a refusal, not a failure."""
    condition = FULL_CONTEXT if policy == FULL_CONTEXT else "bounded_memory"
    found = PolicyRun(
        model.name,
        policy,
        "" if condition == FULL_CONTEXT else settings.memory,
        settings.prompt_variant,
        data,
    )
    try:
        found.run = run_condition(
            episodes,
            condition,
            model,
            settings,
            output_dir=directory,
            run_name=policy_run_name(model.name, settings, policy),
            progress=progress,
        )
    except MissingCapabilityError as error:
        found.refused = str(error)
    return found


def run_model_policies(
    profile: Profile,
    episodes: Sequence[Episode],
    model: ChatModel,
    *,
    directory: Path | None,
    progress: bool | StudyProgress = False,
    data: str = SYNTHETIC,
) -> list[PolicyRun]:
    """Full context (when the block asks for it) and every policy of the block, for one model."""
    block: MemorySystemsBlock = profile.require("memory_systems")
    runs = []
    if block.full_context:
        settings = profile.run_settings(**block_changes(block))
        runs.append(
            run_policy(
                episodes, model, settings, FULL_CONTEXT, directory=directory, progress=progress, data=data
            )
        )
    for entry in block.policies:
        settings = entry_settings(profile, block, entry)
        runs.append(
            run_policy(
                episodes, model, settings, entry.name, directory=directory, progress=progress, data=data
            )
        )
    return runs


def real_record_episodes(block: MemorySystemsBlock) -> list[Episode]:
    """The LongMemEval sanity episodes from the files that are on this machine (never committed)."""
    episodes: list[Episode] = []
    for spec in block.longmemeval:
        path = Path(spec.local_path or "").expanduser()
        path = path if path.is_absolute() else REPO_ROOT / path
        if not spec.local_path or not path.exists():
            print(f"LongMemEval sanity row: {spec.local_path} is not here (it is never committed); skipped")
            continue
        episodes += load_episodes(spec.model_copy(update={"local_path": str(path)}))
    return episodes


def _real_records_model(spec: dict[str, Any], profile: Profile) -> ChatModel:
    """The model with a response cache of its own: replies quote the records and are never exported."""
    cache = ResponseCache(profiles.cache_path(profile).with_name(REAL_RECORDS_CACHE))
    return CachedChatModel(
        profiles.model_for(spec, profile, use_cache=False),
        cache,
        replay=not profiles.live_calls_forced(),
        commit=profiles.commit_label(),
        on_damage=profile.cache_on_damage,
    )


def ask_real_records(profile: Profile, directory: Path) -> bool:
    """Whether to ask the real records now: a replay that finds the sanity table already recorded and
    no cache of the records' replies leaves the table as recorded instead of calling the model."""
    recorded = (directory / f"{SANITY_TABLE}.csv").exists()
    cached = profiles.cache_path(profile, create=False).with_name(REAL_RECORDS_CACHE).exists()
    return profiles.live_calls_forced() or cached or not recorded


def run_memory_systems_policies(profile: Profile, *, progress: bool = True) -> list[PolicyRun]:
    """Every model x (full context, each policy) on the block's episodes, one model at a time; then,
    where the files are here, the same on the real LongMemEval records (their files under real_records/)."""
    block: MemorySystemsBlock = profile.require("memory_systems")
    directory = profiles.output_dir(profile, NOTEBOOK_MEMORY_SYSTEMS)
    episodes = load_episodes(block.episodes)
    real = real_record_episodes(block) if ask_real_records(profile, directory) else []
    rows = len(block.policies) + int(block.full_context)
    asked = {
        str(spec.get("name")): episodes[: block.episodes_per_model.get(str(spec.get("name")), len(episodes))]
        for spec in block.models
    }
    total = rows * (sum(len(chosen) for chosen in asked.values()) + len(real) * len(block.models))
    runs: list[PolicyRun] = []
    with study_progress(profile, NOTEBOOK_MEMORY_SYSTEMS, total, progress) as bar:
        for spec in block.models:
            model = profiles.model_for(spec, profile)
            chosen = asked[str(spec.get("name"))]
            runs += run_model_policies(profile, chosen, model, directory=directory, progress=bar)
            release_model(model)
            if real:
                model = _real_records_model(spec, profile)
                folder = directory / REAL_RECORDS_FOLDER
                folder.mkdir(parents=True, exist_ok=True)
                runs += run_model_policies(
                    profile, real, model, directory=folder, progress=bar, data=LONGMEMEVAL
                )
                release_model(model)
    return runs


def _embed_calls(trajectories: Sequence[dict[str, Any]]) -> int:
    return sum(embedding_calls(trajectory.get("turns") or ()) for trajectory in trajectories)


def _share(values: pd.Series) -> float | None:
    known = values.dropna().astype(bool)
    return float(known.mean()) if len(known) else None


def policy_row(found: PolicyRun, left_out: set[str], grader: str) -> dict[str, Any]:
    """One model x policy row: accuracy (Wilson), stale answers, memory held at answer time, failures, cost."""
    if found.run is None:
        row = accuracy_row(found.model, found.policy, [], grader)
        row.update(refused=found.refused, accuracy=None, ci_low=None, ci_high=None)
    else:
        frame = found.run.frame
        kept = frame[~frame["episode_id"].astype(str).isin(left_out)]
        row = accuracy_row(found.model, found.policy, correct_column(kept, False).tolist(), grader)
        trajectories = [t for t in found.run.trajectories if str(t.get("episode_id")) not in left_out]
        n = max(len(kept), 1)
        bounded = found.policy != FULL_CONTEXT
        empty = kept["final_notes"].map(is_empty_notes).astype(bool)
        row.update(
            failed=len(frame) - len(kept),
            stale_answer_rate=float((kept["verdict"] == "stale").mean()) if len(kept) else None,
            held_current_share=_share(kept["notes_hold_current"]) if bounded else None,
            held_stale_share=_share(kept["notes_hold_stale"]) if bounded else None,
            held_empty_share=float(empty.mean()) if bounded and len(kept) else None,
            # M3 of the log: how often a memory that holds something holds a superseded value
            held_stale_share_nonempty=_share(kept.loc[~empty, "notes_hold_stale"]) if bounded else None,
            memory_failures_per_episode=float(kept["memory_failures"].fillna(0).sum()) / n,
            calls_per_episode=float(kept["n_calls"].sum()) / n,
            embed_calls_per_episode=_embed_calls(trajectories) / n,
            tokens_per_episode=float((kept["prompt_tokens"] + kept["completion_tokens"]).sum()) / n,
            refused=None,
        )
    row = {"data": found.data, **row}
    row["policy"] = row.pop("condition")
    return {**row, "memory": found.memory, "prompt_variant": found.prompt_variant}


def mcnemar_rows(
    runs: Sequence[PolicyRun], left_out: set[str], reference: str, model: str, data: str
) -> list[dict[str, Any]]:
    """Each policy of one model paired with `reference` by question (exact McNemar, Holm within model)."""
    answered = {found.policy: found.run.frame for found in runs if found.run is not None}
    if reference not in answered:
        return []

    def correct(policy: str) -> pd.Series:
        frame = answered[policy]
        frame = frame[~frame["episode_id"].astype(str).isin(left_out)]
        return pd.Series(correct_column(frame, False).to_numpy(), index=frame["episode_id"].astype(str))

    base = correct(reference)
    rows = []
    for policy in answered:
        if policy == reference:
            continue
        other = correct(policy).reindex(base.index)
        test = mcnemar_dict(base.tolist(), other.fillna(False).tolist())
        rows.append({"data": data, "model": model, "policy": policy, "reference": reference, **test})
    for row, adjusted in zip(rows, holm_adjusted([row["p_exact"] for row in rows]), strict=True):
        row["p_exact_holm"] = adjusted
    return rows


def analyse_policy_runs(runs: Sequence[PolicyRun], reference: str, grader: str = MATCHER) -> PolicyTables:
    """The accuracy rows and paired tests of `runs`, per (data, model); failed questions of a model
    are left out of all its rows (they stay paired) and counted in each row's `failed`."""
    accuracy, tests, left_out = [], [], {}
    for data, model in dict.fromkeys((found.data, found.model) for found in runs):
        group = [found for found in runs if found.data == data and found.model == model]
        failed = failed_ids(*(found.run.frame for found in group if found.run is not None))
        if failed:
            left_out[model if data == SYNTHETIC else f"{model} ({data})"] = sorted(failed)
        accuracy += [policy_row(found, failed, grader) for found in group]
        tests += mcnemar_rows(group, failed, reference, model, data)
    return PolicyTables(pd.DataFrame(accuracy), pd.DataFrame(tests), left_out)


def _per_episode(value: Any, digits: int = 1) -> str:
    return "—" if value is None or pd.isna(value) else f"{value:.{digits}f}"


def shown_table(tables: PolicyTables) -> pd.DataFrame:
    """The table a reader sees: one row per model x policy, cells formatted, refusals named."""
    tests = {(row["data"], row["model"], row["policy"]): row for row in tables.mcnemar.to_dict("records")}
    rows = []
    for row in tables.accuracy.to_dict("records"):
        test = tests.get((row["data"], row["model"], row["policy"]))
        refused = row.get("refused")
        held = [
            percent(row.get(key)) for key in ("held_current_share", "held_stale_share", "held_empty_share")
        ]
        rows.append(
            {
                "model": row["model"],
                "policy": row["policy"],
                "accuracy [95% Wilson]": f"refused: {refused}" if refused else accuracy_cell(row),
                "stale answers": "—" if refused else percent(row.get("stale_answer_rate")),
                "memory held current / stale / empty": "—" if refused else " / ".join(held),
                "memory failures per episode": "—"
                if refused
                else _per_episode(row.get("memory_failures_per_episode"), 2),
                "calls per episode (embeddings)": "—"
                if refused
                else f"{_per_episode(row.get('calls_per_episode'))} ({_per_episode(row.get('embed_calls_per_episode'))})",
                "tokens per episode": "—" if refused else _per_episode(row.get("tokens_per_episode"), 0),
                "vs reference: b / c, p exact (Holm)": "—"
                if test is None
                else f"{test['b']} / {test['c']}, {format_pvalue(test['p_exact'])} ({format_pvalue(test['p_exact_holm'])})",
            }
        )
    return pd.DataFrame(rows)


def analyse_memory_systems(profile: Profile, runs: list[PolicyRun]) -> MemorySystemsResult:
    """The policy table per model (the synthetic episodes) and the real-records sanity rows apart."""
    block: MemorySystemsBlock = profile.require("memory_systems")
    reference = block.reference_entry.name
    synthetic = [found for found in runs if found.data == SYNTHETIC]
    real = [found for found in runs if found.data == LONGMEMEVAL]
    tables = analyse_policy_runs(synthetic, reference)
    sanity = analyse_policy_runs(real, reference).accuracy if real else pd.DataFrame()
    if not sanity.empty:  # counts and shares only: no text of the records
        sanity = sanity[["model", "policy", "n", "correct", "accuracy", "failed", "refused"]]
    return MemorySystemsResult(
        profile=profile,
        data_label=block.episodes.label,
        grader=MATCHER,
        reference=reference,
        runs=runs,
        tables=tables,
        table=shown_table(tables),
        sanity=sanity,
        predictions=judge_memory_predictions(tables.accuracy),
        prediction_clauses=judge_memory_clauses(tables.accuracy),
    )


TABLE_NOTE = (
    "Every policy sees each session once and hands the same answer prompt at most B characters; the "
    "matcher grades every row. Stale answers: answers the matcher found asserting a superseded value. "
    "Memory held: what the memory the answer call read conveyed (the current value / a stale value / "
    "nothing). Memory failures: replies the policy could not use (a malformed tool call or JSON), per "
    "episode. Calls per episode count every model call, embedding calls (in brackets) included. The "
    "last column pairs each policy with the reference row by question (b: reference right, policy "
    "wrong; c: the reverse), exact McNemar, Holm's adjustment across the policies of one model. A "
    "refused row is a policy whose capability the server lacks: refused before any call, no number."
)


PREDICTIONS_NOTE = (
    "M1-M6 of docs/memory-systems-log.md (committed before any policy but notes ran live), judged by "
    "its rules on the synthetic rows above (`results.memory_predictions`): models by the size tag "
    '(0.5B, 1.5B) in their names; "the highest" of a set holds on a tie; a prediction is kept when '
    "every clause holds, broken when one does not, not evaluable when a model or policy it reads is "
    "missing or refused. The CSV lists every clause with the numbers it read (shares in points)."
)


def _numbers(result: MemorySystemsResult) -> list[dict[str, Any]]:
    """Headline numbers: per model x policy accuracy, stale rate, memory failures, cost; each test's p."""
    meta = {"data": result.data_label, "profile": result.profile.name}
    numbers = []
    for row in result.accuracy.to_dict("records"):
        if row.get("refused") or not row["n"]:
            continue
        where = {**meta, "model": row["model"], "n": int(row["n"])}
        for key in (
            "accuracy",
            "stale_answer_rate",
            "memory_failures_per_episode",
            "calls_per_episode",
            "tokens_per_episode",
        ):
            if row.get(key) is not None and row[key] == row[key]:
                numbers.append(
                    headline_number(f"{key} {row['policy']}", row[key], grader=result.grader, **where)
                )
    for row in result.mcnemar.to_dict("records"):
        where = {**meta, "model": row["model"], "n": int(row["n"])}
        for key in ("b", "c", "p_exact", "p_exact_holm"):
            numbers.append(
                headline_number(f"mcnemar {key} {row['policy']} vs {row['reference']}", row[key], **where)
            )
    return numbers


def write_memory_systems(result: MemorySystemsResult, directory: Path | None = None) -> MemorySystemsResult:
    """Write 08's tables, the accuracy-vs-cost figure and summary.json; returns `result` with them."""
    from supersede_lib.present import plots

    profile = result.profile
    directory = directory or profiles.output_dir(profile, NOTEBOOK_MEMORY_SYSTEMS)
    first_line = accuracy_incomplete_line(result.accuracy)
    note = f"{TABLE_NOTE} Reference: `{result.reference}`."
    tables = [
        write_table(directory, "table_memory_systems", result.table, note, first_line=first_line),
        write_table(directory, "accuracy", result.accuracy),
        write_table(directory, "mcnemar", result.mcnemar),
        write_table(
            directory, "predictions", result.prediction_clauses, PREDICTIONS_NOTE, result.predictions
        ),
    ]
    if not result.sanity.empty:
        tables.append(
            write_table(directory, SANITY_TABLE, result.sanity, "Real LongMemEval records (counts only).")
        )
    answered = result.accuracy[result.accuracy["refused"].isna() & (result.accuracy["n"] > 0)]
    if not answered.empty:
        title = (
            f"{result.data_label}, {profile.name}, B={profile.require('memory_systems').notes_budget_chars}"
        )
        figure = plots.memory_systems_figure(answered, title)
        result.figures["accuracy_vs_cost"] = plots.save_figure(figure, directory / "accuracy_vs_cost.png")
    config = profile.as_config("memory_systems")
    extra: dict[str, Any] = {"reference": result.reference}
    refused = {f"{found.model} {found.policy}": found.refused for found in result.runs if found.refused}
    if refused:
        extra["refused"] = refused
    if result.tables.left_out:
        extra["left_out"] = result.tables.left_out  # failed questions: in no number above
    runs = [found.run.run_name for found in result.runs if found.run is not None and found.data == SYNTHETIC]
    return record_summary(
        result, directory, NOTEBOOK_MEMORY_SYSTEMS, _numbers(result), tables, config, extra, runs=runs
    )


def run_memory_systems(profile: Profile, *, progress: bool = True) -> MemorySystemsResult:
    """Every memory policy per model on the same questions: accuracy, stale answers, memory, cost, tests."""
    return write_memory_systems(
        analyse_memory_systems(profile, run_memory_systems_policies(profile, progress=progress))
    )
