"""Notebook 10: an optimised memory instruction (GEPA, fast weights) against trained weights (GRPO, slow).

Everything the comparison reads was fixed before the first GEPA call (docs/fast-slow-log.md) and is
stated by the profile's `fast_slow:` block. `run_fast_slow(profile)` runs, in order, each piece whose
inputs are here (a missing one prints one line and is skipped):

- one GEPA run per budget (`instruction.optimise_instruction`, resumable) under `gepa-<budget>/`;
- each chosen instruction judged once on the test set through 07's engine (a `notes_system` override
  of 07's `set_settings`), and the combination (the instruction with each kept twin adapter), as
  per-model run files under `test/` that a replay remakes from the recorded replies;
- the test-set table: the registered rows read back from 07's files and re-graded by the current
  matcher, exact McNemar against the format-controlled base and each `verdict` seed (Holm across the
  seeds), bootstrap intervals and the pre-registered label (`rl_label`);
- the curve (GEPA's best validation score against metric calls, GRPO's training success rate against
  rollouts), the instruction beside the original, the cost, drift (token-level KL of each twin from
  the base on a fixed probe set; 0 for GEPA by construction) and the perturbation suite's drops.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib import profiles
from supersede_lib.agent.episode import Episode
from supersede_lib.agent.prompts import answer_from_notes_messages, notes_update_messages
from supersede_lib.data.episodes import load_episodes
from supersede_lib.eval.matcher import score_episode_answer
from supersede_lib.eval.run_files import write_bytes_atomic
from supersede_lib.eval.runner import RunSettings, run_condition
from supersede_lib.eval.stats import holm_adjusted, paired_bootstrap_diff, paired_mcnemar, wilson_interval
from supersede_lib.instruction import Optimisation, optimise_instruction
from supersede_lib.models.chat import release_model
from supersede_lib.models.cpu_features import cpu_model_name, read_cpuinfo
from supersede_lib.profiles import EvaluationSet, FastSlowBlock, Profile, TrainedPolicy, trained_run_label
from supersede_lib.results.comparison import failed_mask
from supersede_lib.results.headings import (
    MATCHER,
    NOTEBOOK_FAST_SLOW,
    NOTEBOOK_ROBUSTNESS,
    NOTEBOOK_TRAINING,
    format_pvalue,
    headline_number,
    percent,
    points_interval,
)
from supersede_lib.results.outputs import StudyResult, record_summary, write_csv_atomic, write_table
from supersede_lib.studies import robustness
from supersede_lib.studies.evaluation_sets import BASE, ConfigOnly, set_folder, set_settings
from supersede_lib.studies.training import arm_config
from supersede_lib.train.run import resolve_base_model

ALPHA = 0.05
SEEDS_NEEDED = 2  # "at least 2 of the 3 `verdict` seeds"
BOOTSTRAP_RESAMPLES = 10_000  # docs/fast-slow-log.md: over episodes, seed 0
BOOTSTRAP_SEED = 0
AS_GOOD, BETTER, FALLS_SHORT = "as good as RL", "better than RL", "falls short of RL"
FINAL_STEP = 20
REFERENCE = "format-controlled base"
TEST_FOLDER, ROBUSTNESS_FOLDER = "test", "robustness"
COST_FILE, KL_FILE = "cost.json", "kl_drift.csv"
LABEL_NOTE = (
    "GEPA on the test set (never shown to GEPA) against the format-controlled base and each registered "
    "`verdict` seed, paired by episode: difference in points with its 95% bootstrap interval (10,000 "
    "resamples over episodes, seed 0), exact two-sided McNemar (b: GEPA right only, c: the other right "
    "only), Holm across the seeds. Label (docs/fast-slow-log.md): as good as RL when it beats the "
    "format-controlled base with p < 0.05 and is not worse (Holm p < 0.05) than at least 2 of the 3 seeds; "
    "better than RL when it is also better (Holm p < 0.05) than at least 2; else falls short of RL. Every "
    "row graded by the current matcher (the registered rows re-graded from 07's answers)."
)
TABLE_NOTE = (
    "Accuracy on the registered test set (95% Wilson), answers the matcher calls stale, and the share of "
    "episodes whose final notes held the current (stale) value; registered rows read from 07's files and "
    "re-graded by the current matcher; a failed question is left out of its row."
)


# --------------------------------------------------------------------------------------------
# The pre-registered label
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Paired:
    """GEPA against one other row on the episodes both answered: difference (GEPA minus other) with its
    bootstrap interval, McNemar's discordant counts and exact p, and Holm's p among the seeds."""

    other: str
    n: int
    diff: float
    low: float
    high: float
    b: int
    c: int
    p_exact: float
    p_holm: float = float("nan")


def rl_label(reference: Paired, seeds: Sequence[Paired]) -> str:
    """The pre-registered label of one GEPA row: `AS_GOOD`, `BETTER` or `FALLS_SHORT` (docs/fast-slow-log.md)."""
    beats_reference = reference.diff > 0 and reference.p_exact < ALPHA
    not_worse = sum(not (seed.diff < 0 and seed.p_holm < ALPHA) for seed in seeds)
    better = sum(seed.diff > 0 and seed.p_holm < ALPHA for seed in seeds)
    if not (beats_reference and not_worse >= SEEDS_NEEDED):
        return FALLS_SHORT
    return BETTER if better >= SEEDS_NEEDED else AS_GOOD


def paired(name: str, mine: pd.Series, other: pd.Series, *, resamples: int = BOOTSTRAP_RESAMPLES) -> Paired:
    """`mine` against `other` (booleans indexed by episode) on the episodes both have."""
    both = pd.concat([mine.rename("a"), other.rename("b")], axis=1, join="inner").astype(bool)
    test = paired_mcnemar(both["a"], both["b"])
    diff = float(both["a"].mean() - both["b"].mean()) if len(both) else float("nan")
    low = high = float("nan")
    if len(both) > 1:
        interval = paired_bootstrap_diff(both["a"], both["b"], n_resamples=resamples, seed=BOOTSTRAP_SEED)
        diff, low, high = interval.diff, interval.low, interval.high
    return Paired(name, len(both), diff, low, high, test.b, test.c, test.p_exact)


def with_holm(seeds: Sequence[Paired]) -> list[Paired]:
    """Holm's adjustment of the seeds' exact p values."""
    adjusted = holm_adjusted([seed.p_exact for seed in seeds])
    return [replace(seed, p_holm=p) for seed, p in zip(seeds, adjusted, strict=True)]


# --------------------------------------------------------------------------------------------
# Settings, sets and rows
# --------------------------------------------------------------------------------------------


def agent_settings(profile: Profile) -> RunSettings:
    """07's settings of the test set for the arm's training (prompt variant, B, token caps)."""
    block: FastSlowBlock = profile.require("fast_slow")
    return set_settings(
        profile,
        profile.evaluation(block.test),
        [ConfigOnly(arm_config(profile, block.arm))],
    )


def registered_rows(profile: Profile) -> dict[str, Path]:
    """The registered rows' per-model CSVs from 07: base, format-controlled base, each verdict seed."""
    block: FastSlowBlock = profile.require("fast_slow")
    test = set_folder(profile, profile.evaluation(block.test))
    rows = {"base": test / f"{BASE}.csv"}
    rows[REFERENCE] = set_folder(profile, profile.evaluation(block.reference)) / f"{BASE}.csv"
    for seed in block.verdict_seeds:
        rows[f"{block.arm} s{seed}"] = test / f"{block.arm}__seed-{seed}__step-{FINAL_STEP}.csv"
    return rows


def regraded(frame: pd.DataFrame, episodes: dict[str, Episode]) -> pd.DataFrame:
    """A run's rows without its failed questions, each answer graded again by the current matcher."""
    rows = frame[~failed_mask(frame)].copy()
    rows["verdict"] = [
        score_episode_answer(
            episodes[str(row.episode_id)], "" if pd.isna(row.answer) else str(row.answer)
        ).verdict
        for row in rows.itertuples()
    ]
    return rows.set_index("episode_id")


def row_counts(model: str, rows: pd.DataFrame) -> dict[str, Any]:
    """Accuracy with its Wilson interval, the stale share and the notes' holdings of one row."""
    correct = int(rows["verdict"].eq("correct").sum())
    low, high = wilson_interval(correct, len(rows))
    counts = {
        "model": model,
        "n": len(rows),
        "correct": correct,
        "accuracy": correct / len(rows) if len(rows) else float("nan"),
    }
    counts |= {"ci_low": low, "ci_high": high, "stale": float(rows["verdict"].eq("stale").mean())}
    for column in ("notes_hold_current", "notes_hold_stale"):
        counts[column] = float(rows[column].astype(float).mean()) if column in rows else float("nan")
    return counts


# --------------------------------------------------------------------------------------------
# (a) GEPA, one run per budget
# --------------------------------------------------------------------------------------------


def gepa_folder(profile: Profile, budget: int) -> Path:
    return profiles.output_dir(profile, NOTEBOOK_FAST_SLOW) / f"gepa-{budget}"


def run_gepa(profile: Profile, budget: int, *, progress: bool = True) -> Optimisation:
    """One GEPA run of the block's set-up at `budget` metric calls, resumed from its folder when it holds
    a saved state; its cost (a live measurement) is kept in `cost.json` once written."""
    block: FastSlowBlock = profile.require("fast_slow")
    selection = load_episodes(profile.evaluation(block.selection).episodes)
    task = profiles.model_for(block.task_model, profile)
    reflection = profiles.model_for(block.reflection_model, profile)
    folder = gepa_folder(profile, budget)
    try:
        optimisation = optimise_instruction(
            task,
            reflection,
            selection,
            agent_settings(profile),
            folder,
            max_metric_calls=budget,
            validation_n=block.validation_n,
            minibatch_size=block.minibatch_size,
            seed=block.seed,
            max_instruction_chars=block.max_instruction_chars,
            progress=progress,
        )
    finally:
        release_model(task)
        release_model(reflection)
    if profiles.live_calls_forced() or not (folder / COST_FILE).exists():
        write_bytes_atomic(folder / COST_FILE, _json_bytes(gepa_cost(optimisation)))
    return optimisation


def gepa_cost(optimisation: Optimisation) -> dict[str, Any]:
    """What one GEPA run cost: metric calls, reflection and task-model calls and tokens, wall time, CPU."""
    rollouts, reflection = optimisation.rollouts, optimisation.reflection
    return {
        "metric_calls": optimisation.metric_calls,
        "task_calls": rollouts["model_calls"],
        "task_cached_calls": rollouts["cached_calls"],
        "task_prompt_tokens": rollouts["prompt_tokens"],
        "task_completion_tokens": rollouts["completion_tokens"],
        "reflection": reflection,
        "wall_s": optimisation.wall_s,
        "cpu": cpu_model_name(read_cpuinfo()) or platform.processor() or platform.machine(),
    }


def read_optimisation(folder: Path) -> dict[str, Any] | None:
    path = folder / "optimisation.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


# --------------------------------------------------------------------------------------------
# (b, h) the chosen instructions on the test set, alone and with each kept twin adapter
# --------------------------------------------------------------------------------------------


def gepa_label(budget: int) -> str:
    return f"GEPA {budget}"


def instruction_plans(
    profile: Profile, instructions: dict[int, str], evaluation: EvaluationSet
) -> list[robustness.TrainedPlan]:
    """The base with each chosen instruction, then the combination's instruction with each kept twin
    (a twin whose record is not here yet is named and skipped)."""
    block: FastSlowBlock = profile.require("fast_slow")
    settings = agent_settings(profile)
    policies = [(TrainedPolicy(label=gepa_label(budget)), instructions[budget]) for budget in instructions]
    if block.combination_budget in instructions:
        for twin in block.twins:
            if not (profiles.REPO_ROOT / twin.adapter).is_file():
                print(f"{twin.label}: skipped (its kept adapter {twin.adapter} is not here yet)")
                continue
            label = f"{gepa_label(block.combination_budget)} with {twin.label}"
            policies.append(
                (twin.model_copy(update={"label": label}), instructions[block.combination_budget])
            )
    return [
        robustness.TrainedPlan(
            policy,
            trained_run_label(policy.label),
            evaluation,
            replace(settings, notes_system=instruction),
            profiles.REPO_ROOT / policy.adapter if policy.adapter else None,
        )
        for policy, instruction in policies
    ]


def judge_plans(
    profile: Profile,
    plans: Sequence[robustness.TrainedPlan],
    episodes: Sequence[Episode],
    folder: Path,
    progress: bool,
    engine: str | None = None,
) -> dict[str, pd.DataFrame]:
    """Each plan's run over `episodes` in `folder` (finished runs read back), on `engine` (default: the
    engine of the block's test set): recorded replies where its run is recorded, else its weights."""
    block: FastSlowBlock = profile.require("fast_slow")
    engine = engine or profile.evaluation(block.test).engine
    base_path = resolve_base_model(arm_config(profile, block.arm))
    folder.mkdir(parents=True, exist_ok=True)
    frames = {}
    for plan in plans:
        csv = folder / f"{plan.run_name}.csv"
        if (
            csv.exists()
            and (folder / f"{plan.run_name}.manifest.json").exists()
            and not profiles.live_calls_forced()
        ):
            frames[plan.policy.label] = pd.read_csv(csv)
            continue
        model = robustness.trained_model(profile, plan, base_path, folder, engine)
        if model is None:
            continue
        run = run_condition(
            episodes,
            "bounded_memory",
            model,
            plan.settings,
            output_dir=folder,
            run_name=plan.run_name,
            progress=progress,
        )
        frames[plan.policy.label] = run.frame
        release_model(model)
    return frames


# --------------------------------------------------------------------------------------------
# (d) the curve: accuracy against rollouts spent
# --------------------------------------------------------------------------------------------


def gepa_curve(optimisation: dict[str, Any], label: str) -> pd.DataFrame:
    """The validation score of the best candidate so far at each candidate's discovery (metric calls),
    held to the calls the run spent (a run that found nothing better is a flat line, not one point)."""
    found = sorted(zip(optimisation["found_at_metric_calls"], optimisation["validation_scores"], strict=True))
    rows, best = [], float("-inf")
    for calls, score in found:
        best = max(best, float(score))
        rows.append({"method": label, "rollouts": int(calls), "score": best})
    spent = int(optimisation.get("metric_calls") or 0)
    if rows and spent > rows[-1]["rollouts"]:
        rows.append({"method": label, "rollouts": spent, "score": best})
    return pd.DataFrame(rows).assign(kind="GEPA validation (best so far)")


def grpo_curve(training_dir: Path, arm: str, seeds: Sequence[int], per_step: int) -> pd.DataFrame:
    """Each seed's recorded training success rate per step, at step x rollouts per step."""
    rows = []
    for seed in seeds:
        path = training_dir / f"{arm}__seed-{seed}.metrics.jsonl"
        if not path.exists():
            print(f"{arm} s{seed}: no training curve ({path.name} is not here)")
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line) if line.strip() else {}
            if record.get("kind") == "train" and "success_rate" in record:
                rows.append(
                    {
                        "method": f"GRPO {arm} s{seed}",
                        "rollouts": int(record["step"]) * per_step,
                        "score": float(record["success_rate"]),
                        "kind": "GRPO training success rate",
                    }
                )
    return pd.DataFrame(rows, columns=["method", "rollouts", "score", "kind"])


def curve_figure(curve: pd.DataFrame, points: pd.DataFrame, title: str) -> Any:
    """Lines: GEPA's validation score and GRPO's training success rate against rollouts; markers: the
    test-set accuracy of each GEPA budget and each seed's final checkpoint at the rollouts it spent.
    A run's line and its test marker share a colour (`GRPO verdict s11` and `verdict s11`)."""
    import matplotlib.pyplot as plt

    def series(name: str) -> str:
        return name.removeprefix("GRPO ")

    names = list(dict.fromkeys([series(name) for name in curve.get("method", [])] + list(points["model"])))
    palette = plt.get_cmap("tab10")
    colour = {name: palette(index % 10) for index, name in enumerate(names)}
    figure, axis = plt.subplots(figsize=(9, 4.5))
    for (method, kind), group in curve.groupby(["method", "kind"], sort=False):
        gepa = kind.startswith("GEPA")
        axis.plot(
            group["rollouts"],
            group["score"],
            "-" if gepa else ":",
            drawstyle="steps-post" if gepa else "default",
            color=colour[series(method)],
            label=f"{method} ({kind})",
        )
    for row in points.itertuples():
        axis.scatter(
            row.rollouts,
            row.accuracy,
            marker="*" if row.model.startswith("GEPA") else "o",
            s=90,
            zorder=3,
            color=colour[series(row.model)],
            edgecolor="black",
            label=f"{row.model}: test accuracy",
        )
    axis.set(
        xlabel="rollouts spent (GEPA: metric calls; GRPO: steps x 8)",
        ylabel="accuracy / success rate",
        ylim=(0, 1.02),
        title=title,
    )
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    return figure


# --------------------------------------------------------------------------------------------
# (g) drift: token-level KL(base || adapter) on a fixed probe set
# --------------------------------------------------------------------------------------------


def probe_prompts(profile: Profile) -> list[list[dict[str, str]]]:
    """The fixed probe set: for each of the first `kl_probe_episodes` selection episodes, the agent's
    first notes prompt (empty notes, the first session) and its answer prompt over empty notes; built
    from the episodes alone, so every adapter is probed on the same text with no model call."""
    block: FastSlowBlock = profile.require("fast_slow")
    settings = agent_settings(profile)
    episodes = load_episodes(profile.evaluation(block.selection).episodes)[: block.kl_probe_episodes]
    prompts = []
    for episode in episodes:
        budget = settings.budget_for(episode)
        prompts.append(notes_update_messages("", episode.sessions[0], budget, settings.prompt_variant))
        prompts.append(
            answer_from_notes_messages("", episode.question, episode.question_date, settings.prompt_variant)
        )
    return prompts


def token_kl(
    base_path: str, adapter_folder: Path, prompts: Sequence[list[dict[str, str]]]
) -> dict[str, float]:
    """Mean over the probe prompts of KL(base || adapter) of the next-token distributions, averaged over
    every position of the chat-templated prompt and at its last position (the reply's first token);
    one forward pass per prompt for each of the two, float32 on the CPU."""
    import torch
    from peft import PeftModel

    from supersede_lib.models.hf import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(base_path, device="cpu", dtype=torch.float32)
    model = PeftModel.from_pretrained(model, str(adapter_folder)).eval()
    per_token, last = [], []
    for messages in prompts:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            adapted = model(input_ids=ids).logits.float().log_softmax(-1)[0]
            with model.disable_adapter():
                base = model(input_ids=ids).logits.float().log_softmax(-1)[0]
        kl = (base.exp() * (base - adapted)).sum(-1)
        per_token.append(float(kl.mean()))
        last.append(float(kl[-1]))
    del model
    return {"kl_per_token": sum(per_token) / len(per_token), "kl_first_reply_token": sum(last) / len(last)}


def kl_drift(profile: Profile, budgets: Sequence[int], folder: Path) -> pd.DataFrame:
    """GEPA's drift (0 by construction: the weights are the base's) and each kept twin's: its recorded
    row where the study's table has one (a replay has no weights), else measured where the base model
    and the twin are here, else skipped and named."""
    block: FastSlowBlock = profile.require("fast_slow")
    path = folder / f"{KL_FILE}"
    recorded = pd.read_csv(path).set_index("model") if path.exists() else pd.DataFrame()
    base_path = resolve_base_model(arm_config(profile, block.arm))
    weights_here = not Path(base_path).is_absolute() or Path(base_path).exists()
    rows = [
        {
            "model": gepa_label(budget),
            "kl_per_token": 0.0,
            "kl_first_reply_token": 0.0,
            "how": "0 by construction",
        }
        for budget in budgets
    ]
    prompts = None
    for twin in block.twins:
        record = profiles.REPO_ROOT / twin.adapter
        if twin.label in recorded.index and not (weights_here and profiles.live_calls_forced()):
            rows.append({"model": twin.label, **recorded.loc[twin.label].to_dict()})
            continue
        if not record.is_file() or not weights_here:
            missing = "the base model" if record.is_file() else "its kept adapter"
            print(f"{twin.label}: drift skipped ({missing} is not here)")
            continue
        from supersede_lib.train.kept_adapters import restore_adapter

        prompts = prompts or probe_prompts(profile)
        restored = restore_adapter(
            record, profiles.cache_path(profile).parent / "adapters" / trained_run_label(twin.label)
        )
        rows.append(
            {
                "model": twin.label,
                **token_kl(base_path, restored, prompts),
                "how": f"measured, {len(prompts)} prompts",
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# (i) the perturbation suite
# --------------------------------------------------------------------------------------------


def suite_drops(
    profile: Profile, plans: Sequence[robustness.TrainedPlan], folder: Path, progress: bool
) -> pd.DataFrame:
    """The combination budget's instruction (alone and with each twin) on 09's perturbation suite and
    09's engine, the paired drop per perturbation as 09 computes it, beside 09's own rows where recorded."""
    from supersede_lib.agent.memory import DEFAULT_MEMORY

    if profile.robustness is None:
        print("robustness: skipped (the profile has no robustness: block, so no perturbation suite)")
        return pd.DataFrame()
    sets = robustness.robustness_sets(profile.robustness)
    pairs = len(sets.unperturbed)
    trained = profile.robustness.trained  # the engine 09 judged the twins with, so the drops pair up
    engine = trained.engine if trained is not None else None
    frames = judge_plans(profile, plans, sets.episodes(pairs), folder, progress, engine)
    per_pair, left_out, arms = [], [], []
    for plan in plans:
        if plan.policy.label not in frames:
            continue
        run = _FrameRun(frames[plan.policy.label])
        arm = robustness.ArmRun(plan.policy.label, "bounded_memory", DEFAULT_MEMORY, pairs, run, MATCHER)
        rows, failed = robustness.pair_frame(arm, sets)
        per_pair.append(rows)
        left_out += failed
        arms.append((plan.policy.label, "bounded_memory", DEFAULT_MEMORY))
    drops = (
        robustness.pair_drops(pd.concat(per_pair, ignore_index=True), arms, list(sets.twins), left_out)
        if arms
        else pd.DataFrame()
    )
    recorded = profiles.OUTPUT_ROOT / profile.name / NOTEBOOK_ROBUSTNESS / "robustness_drops.csv"
    if recorded.exists():
        drops = pd.concat([pd.read_csv(recorded), drops], ignore_index=True)
    return drops


@dataclass
class _FrameRun:
    """A run's rows where `robustness.pair_frame` reads a `RunResult` (it needs only the frame)."""

    frame: pd.DataFrame


# --------------------------------------------------------------------------------------------
# The study: run, analyse, write
# --------------------------------------------------------------------------------------------


@dataclass
class FastSlowResult(StudyResult):
    """Notebook 10: the test-set table with the pre-registered labels, the curve, the instructions,
    the cost, the drift and the perturbation drops (each empty where its inputs were missing)."""

    profile: Profile
    data_label: str
    table: pd.DataFrame  # one row per model on the test set, as the Markdown shows it
    rows: pd.DataFrame  # the same, tidy
    comparisons: pd.DataFrame  # GEPA (and each combination) against each registered row
    labels: dict[str, str]  # GEPA budget label -> the pre-registered label
    curve: pd.DataFrame
    points: pd.DataFrame  # test accuracy at the rollouts spent: GEPA budgets and the seeds' final steps
    instructions: dict[str, str]  # "original" and each GEPA budget's chosen instruction
    cost: pd.DataFrame
    kl: pd.DataFrame
    drops: pd.DataFrame
    drops_table: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def model(self) -> str:
        return str(self.profile.require("fast_slow").task_model.get("name", "task model"))


def _comparisons(
    block: FastSlowBlock, rows: dict[str, pd.DataFrame], ours: Sequence[str]
) -> tuple[pd.DataFrame, dict[str, str]]:
    """Each of `ours` against the format-controlled base and each seed (Holm across the seeds), and
    the label of each pure GEPA row whose registered rows are all here."""
    correct = {label: frame["verdict"].eq("correct") for label, frame in rows.items()}
    seeds = [f"{block.arm} s{seed}" for seed in block.verdict_seeds]
    records, labels = [], {}
    for label in ours:
        reference = paired(REFERENCE, correct[label], correct[REFERENCE]) if REFERENCE in correct else None
        against = with_holm(
            [paired(seed, correct[label], correct[seed]) for seed in seeds if seed in correct]
        )
        complete = reference is not None and len(against) == len(seeds)
        verdict = rl_label(reference, against) if complete else "not evaluable (a registered row is missing)"
        if label.startswith("GEPA") and " with " not in label:
            labels[label] = verdict
        for item in ([reference] if reference else []) + against:
            records.append({"model": label} | item.__dict__ | {"label": labels.get(label, "—")})
    return pd.DataFrame(records), labels


def _display(rows: pd.DataFrame, comparisons: pd.DataFrame) -> pd.DataFrame:
    def versus(model: str) -> tuple[str, str]:
        match = (
            comparisons[(comparisons["model"] == model) & (comparisons["other"] == REFERENCE)]
            if len(comparisons)
            else comparisons
        )
        if not len(match):
            return "—", "—"
        item = match.iloc[0]
        return points_interval(item["diff"], item["low"], item["high"]), format_pvalue(item["p_exact"])

    shown = []
    for row in rows.to_dict("records"):
        diff, p = versus(row["model"])
        label = comparisons[comparisons["model"] == row["model"]]["label"].iloc[0] if diff != "—" else "—"
        shown.append(
            {
                "model": row["model"],
                "correct / n": f"{row['correct']} / {row['n']}",
                "accuracy [95% Wilson]": f"{percent(row['accuracy'])} [{percent(row['ci_low'])}, {percent(row['ci_high'])}]",
                "stale": percent(row["stale"]),
                "notes hold current": percent(row["notes_hold_current"]),
                "notes hold stale": percent(row["notes_hold_stale"]),
                f"vs {REFERENCE}, points [95% bootstrap]": diff,
                "p exact": p,
                "label": label,
            }
        )
    return pd.DataFrame(shown).astype(str)


def comparisons_display(comparisons: pd.DataFrame) -> pd.DataFrame:
    """The comparisons as a reader wants them: points with the interval, b / c and readable p values."""
    return pd.DataFrame(
        [
            {
                "model": row["model"],
                "against": row["other"],
                "n": row["n"],
                "difference, points [95% bootstrap]": points_interval(row["diff"], row["low"], row["high"]),
                "McNemar b / c": f"{row['b']} / {row['c']}",
                "p exact": format_pvalue(row["p_exact"]),
                "p Holm": format_pvalue(row["p_holm"]),
                "label": row["label"],
            }
            for row in comparisons.to_dict("records")
        ]
    ).astype(str)


def kl_display(kl: pd.DataFrame) -> pd.DataFrame:
    """The drift table to three places, its units named."""
    return pd.DataFrame(
        [
            {
                "model": row["model"],
                "KL per prompt token (nats)": f"{row['kl_per_token']:.3f}",
                "KL at the reply's first token (nats)": f"{row['kl_first_reply_token']:.3f}",
                "how": row["how"],
            }
            for row in kl.to_dict("records")
        ]
    ).astype(str)


def cost_display(cost: pd.DataFrame) -> pd.DataFrame:
    """Each GEPA run's cost on one readable row: calls with how many came from the cache, tokens, the
    reflection replies skipped and why, the live wall time and the CPU."""

    def count(row: dict[str, Any], key: str) -> str:
        value = row.get(key)
        return "—" if value is None or pd.isna(value) else f"{int(value):,}"

    return pd.DataFrame(
        [
            {
                "method": row["method"],
                "metric calls": count(row, "metric_calls"),
                "task calls (cached)": f"{count(row, 'task_calls')} ({count(row, 'task_cached_calls')})",
                "task tokens, prompt / completion": f"{count(row, 'task_prompt_tokens')} / "
                f"{count(row, 'task_completion_tokens')}",
                "reflections (cached)": f"{count(row, 'reflection_calls')} ({count(row, 'reflection_cached_calls')})",
                "proposals": count(row, "reflection_proposals"),
                "skipped: too long / no instruction / failed": f"{count(row, 'reflection_too_long')} / "
                f"{count(row, 'reflection_no_instruction')} / {count(row, 'reflection_failed_calls')}",
                "wall, live part (min)": f"{row['wall_s'] / 60:.1f}",
                "CPU": row.get("cpu", "—"),
            }
            for row in cost.to_dict("records")
        ]
    ).astype(str)


def analyse_fast_slow(
    profile: Profile, optimisations: dict[int, dict[str, Any]], frames: dict[str, pd.DataFrame]
) -> FastSlowResult:
    """The tables and the curve from the runs' files (nothing here makes a model call)."""
    block: FastSlowBlock = profile.require("fast_slow")
    test = profile.evaluation(block.test)
    episodes = {episode.episode_id: episode for episode in load_episodes(test.episodes)}
    rows: dict[str, pd.DataFrame] = {}
    for label, path in registered_rows(profile).items():
        if path.exists():
            rows[label] = regraded(pd.read_csv(path), episodes)
        else:
            print(f"{label}: not in the table ({path.name} is not in 07's files)")
    rows |= {label: regraded(frame, episodes) for label, frame in frames.items()}
    tidy = pd.DataFrame([row_counts(label, frame) for label, frame in rows.items()])
    comparisons, labels = _comparisons(block, rows, list(frames))
    config = arm_config(profile, block.arm)
    curve = pd.concat(
        [gepa_curve(opt, gepa_label(budget)) for budget, opt in optimisations.items()]
        + [
            grpo_curve(
                profiles.OUTPUT_ROOT / profile.name / NOTEBOOK_TRAINING,
                block.arm,
                block.verdict_seeds,
                config.num_generations,
            )
        ],
        ignore_index=True,
    )
    spent = {gepa_label(budget): opt["metric_calls"] for budget, opt in optimisations.items()}
    spent |= {f"{block.arm} s{seed}": FINAL_STEP * config.num_generations for seed in block.verdict_seeds}
    points = tidy[tidy["model"].isin(spent)].assign(rollouts=lambda frame: frame["model"].map(spent))
    instructions = {"original": agent_instruction(profile)}
    instructions |= {gepa_label(budget): opt["best_instruction"] for budget, opt in optimisations.items()}
    return FastSlowResult(
        profile=profile,
        data_label=test.episodes.label,
        table=_display(tidy, comparisons) if len(tidy) else pd.DataFrame(),
        rows=tidy,
        comparisons=comparisons,
        labels=labels,
        curve=curve,
        points=points[["model", "rollouts", "accuracy"]].reset_index(drop=True)
        if len(points)
        else pd.DataFrame(columns=["model", "rollouts", "accuracy"]),
        instructions=instructions,
        cost=pd.DataFrame(),
        kl=pd.DataFrame(),
        drops=pd.DataFrame(),
    )


def agent_instruction(profile: Profile) -> str:
    """The notes instruction GEPA starts from: the registered agent's notes system text."""
    from supersede_lib.instruction import seed_instruction

    return seed_instruction(agent_settings(profile))


COST_NOTE = (
    "The wall time is what the run's own processes spent; a call read back from the cache (the counts in "
    "brackets) cost none of it, so a run finished from recorded replies times its live part only "
    "(docs/fast-slow-log.md says what each run took in all). A reflection reply over the instruction "
    "budget or without an instruction is counted and skipped."
)
KL_NOTE = (
    "KL(base || adapter) of the next-token distributions on the fixed probe prompts (the agent's first "
    "notes prompt and its answer prompt over empty notes, per probe episode), float32 on the CPU: the "
    "mean over every prompt position and at the last one, where the reply's first token is chosen."
)


def cost_table(profile: Profile, budgets: Sequence[int]) -> pd.DataFrame:
    """Each GEPA run's recorded cost (`cost.json`, kept from the live run). Never read from
    `optimisation.json`: a replay re-runs GEPA from the recorded replies and rewrites that file with
    every call cached, while `cost.json` stays the live run's."""
    rows = []
    for budget in budgets:
        path = gepa_folder(profile, budget) / COST_FILE
        if path.exists():
            cost = json.loads(path.read_text(encoding="utf-8"))
            reflection = cost.pop("reflection")
            rows.append(
                {"method": gepa_label(budget)}
                | cost
                | {f"reflection_{key}": value for key, value in reflection.items()}
            )
    return pd.DataFrame(rows)


def fast_slow_numbers(result: FastSlowResult) -> list[dict[str, Any]]:
    """Headline numbers: each row's test accuracy, each comparison's difference and p values."""
    meta = {"data": result.data_label, "profile": result.profile.name, "grader": MATCHER}
    numbers = [
        headline_number(
            f"{row['model']}: test accuracy", row["accuracy"], model=row["model"], n=int(row["n"]), **meta
        )
        for row in result.rows.to_dict("records")
    ]
    for row in result.comparisons.to_dict("records"):
        for key, name in (("diff", "difference"), ("p_exact", "p exact"), ("p_holm", "p Holm")):
            if pd.notna(row[key]):
                numbers.append(
                    headline_number(
                        f"{row['model']} vs {row['other']}: {name}",
                        row[key],
                        model=row["model"],
                        n=int(row["n"]),
                        **meta,
                    )
                )
    return numbers


def write_fast_slow(result: FastSlowResult) -> FastSlowResult:
    """10's tables (CSV + Markdown), the curve figure, the instructions and summary.json."""
    from supersede_lib.present.plots import save_figure

    profile = result.profile
    directory = profiles.output_dir(profile, NOTEBOOK_FAST_SLOW)
    tables = []
    if len(result.rows):
        tables.append(write_table(directory, "test_set", result.rows, TABLE_NOTE, result.table))
    if len(result.comparisons):
        shown = comparisons_display(result.comparisons)
        tables.append(write_table(directory, "comparisons", result.comparisons, LABEL_NOTE, shown))
    if len(result.cost):
        tables.append(write_table(directory, "cost", result.cost, COST_NOTE, cost_display(result.cost)))
    if len(result.kl):
        tables.append(write_table(directory, "kl_drift", result.kl, KL_NOTE, kl_display(result.kl)))
    if len(result.drops):
        tables.append(
            write_table(directory, "robustness_drops", result.drops, robustness.DROP_NOTE, result.drops_table)
        )
    write_csv_atomic(result.curve, directory / "curve.csv")
    if len(result.curve) or len(result.points):
        title = f"ours: {result.model}, {result.data_label}, {profile.name}"
        result.figures["curve"] = save_figure(
            curve_figure(result.curve, result.points, title), directory / "curve.png"
        )
    text = "\n\n".join(
        f"## {label}\n\n```\n{instruction}\n```" for label, instruction in result.instructions.items()
    )
    write_bytes_atomic(directory / "instructions.md", (f"# The notes instruction\n\n{text}\n").encode())
    extra = {"labels": result.labels, "instructions": result.instructions}
    config = profile.as_config("fast_slow")
    return record_summary(
        result, directory, NOTEBOOK_FAST_SLOW, fast_slow_numbers(result), tables, config, extra, runs=[]
    )


def run_fast_slow(
    profile: Profile, *, budgets: Sequence[int] | None = None, progress: bool = True
) -> FastSlowResult:
    """Every piece of the study whose inputs are here, in order; the rest named and skipped. `budgets`
    limits which GEPA runs are made (or resumed) now; another budget's finished run is read back."""
    block: FastSlowBlock = profile.require("fast_slow")
    directory = profiles.output_dir(profile, NOTEBOOK_FAST_SLOW)
    optimisations = {}
    for budget in block.budgets:
        if budgets is None or budget in budgets:
            optimisations[budget] = run_gepa(profile, budget, progress=progress).as_dict()
        elif (done := read_optimisation(gepa_folder(profile, budget))) is not None:
            optimisations[budget] = done
        else:
            print(
                f"{gepa_label(budget)}: skipped (its GEPA run has not been made; run_fast_slow(budgets=[{budget}]))"
            )
    instructions = {budget: opt["best_instruction"] for budget, opt in optimisations.items()}
    test = profile.evaluation(block.test)
    plans = instruction_plans(profile, instructions, test)
    frames = judge_plans(profile, plans, load_episodes(test.episodes), directory / TEST_FOLDER, progress)
    result = analyse_fast_slow(profile, optimisations, frames)
    result.cost = cost_table(profile, block.budgets)
    result.kl = kl_drift(profile, list(optimisations), directory)
    combined = gepa_label(block.combination_budget)
    suite = [plan for plan in plans if plan.policy.label.split(" with ")[0] == combined]
    result.drops = suite_drops(profile, suite, directory / ROBUSTNESS_FOLDER, progress)
    if len(result.drops):
        result.drops_table = robustness.drops_table(result.drops)
    return write_fast_slow(result)
