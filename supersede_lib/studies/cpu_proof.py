"""The CPU proof that GRPO training learns: two reward arms of the `cpu_proof` preset, judged on held-out episodes.

A run of each reward (`sparse`, the paper's; `memory`, plus credit for current notes) per seed trains
on fresh episodes of the training distribution. The evidence is read from what the runs recorded:
the success of every training rollout (did the last quarter of steps succeed more often than the
first?) and the held-out accuracy of the base model and of every checkpoint, greedy, on episodes of
the same distribution drawn from a generator seed training never uses (McNemar against the base).
The harder transfer set of the offline profile is reported beside it.

`python -m supersede_lib.studies.cpu_proof train|evaluate|report` runs the three parts; each resumes
(training from its last checkpoint, evaluation from the response cache), so a stopped session loses
nothing finished.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib.data.episodes import EpisodeSpec, load_episodes
from supersede_lib.eval.run_files import REPO_ROOT
from supersede_lib.eval.stats import quarter_steps, success_trend
from supersede_lib.studies.common import accuracy_row, markdown_table, mcnemar_dict
from supersede_lib.studies.training import copy_run_folder_files
from supersede_lib.train.config import ROLLOUTS_FILE, TRAINING_SEED_BASE, TrainingConfig

PRESET = "cpu_proof"
REWARD_ARMS = ("sparse", "memory")
PROOF_DIR = Path(
    "outputs/offline/06_grpo_training/cpu_proof"
)  # committed: run files, tables, figure, replies
RUNS_ROOT = Path("outputs/offline/training/cpu_proof")  # checkpoints (not committed: ~70 MB per adapter)
RESPONSES_FILE = "responses.jsonl.gz"
# Held out: the training distribution (easy, 2-3 sessions) from generator seed 7201; training draws
# from seeds 500 + run seed, and the base success rate (20%) was measured on seed 7101.
HELDOUT = EpisodeSpec(source="synthetic", n=100, difficulty="easy", seed=7201, n_sessions=(2, 3))
# The offline profile's transfer set: harder wording, retractions, 4-5 sessions.
HARD = EpisodeSpec(source="synthetic", n=20, difficulty="hard", seed=1001, n_sessions=(4, 5))
EVAL_SETS = {"heldout": HELDOUT, "hard": HARD}
LONGMEMEVAL = "longmemeval"  # real knowledge-update records from a local file (`--longmemeval PATH`)
# evaluations whose prompts reuse the shared prefix's keys and values (`hf.PromptPrefixCache`) go to
# `<set>-prefix-cache/`: a second engine, checked against the whole-prompt one on the same models
PREFIX_CACHE_SUFFIX = "-prefix-cache"
HELDOUT_NAME = "heldout"
ENGINE_CHECK = "engine_check"
COST = "cost"  # what each training run and evaluation took (minutes of one core)
NOTES_PAYOFF = "notes_payoff"  # what writing notes earned against empty notes, and who ended with none
# evaluation sets as judged by the faster engine (the runs replicated with the shared-prefix engine)
PREFIX_CACHE_SETS = tuple(name + PREFIX_CACHE_SUFFIX for name in (*EVAL_SETS, LONGMEMEVAL))
# every table the report may hold, in reading order
REPORT_TABLES = ("trend", NOTES_PAYOFF, *EVAL_SETS, LONGMEMEVAL, *PREFIX_CACHE_SETS, ENGINE_CHECK, COST)


def eval_spec(which: str, longmemeval_path: str | None = None) -> EpisodeSpec:
    """The episodes of an evaluation set; `longmemeval` reads the knowledge-update records of a local file."""
    if which == LONGMEMEVAL:
        if not longmemeval_path:
            raise ValueError("the longmemeval evaluation set needs a local file: --longmemeval PATH")
        return EpisodeSpec(
            source="longmemeval", local_path=longmemeval_path, question_type="knowledge-update"
        )
    return EVAL_SETS[which]


@dataclass(frozen=True)
class Variant:
    """A sweep arm's departure from the preset: another learning rate, another stale penalty (λ in
    r = r_cur - λ r_stale; the paper's reward has λ > 0). None keeps the preset's value."""

    learning_rate: float | None = None
    stale_penalty: float | None = None

    def overrides(self) -> dict[str, float]:
        """The preset fields this variant changes (values equal to the preset's change nothing)."""
        preset = TrainingConfig.preset(PRESET)
        fields = {"learning_rate": self.learning_rate, "stale_penalty_weight": self.stale_penalty}
        return {
            name: value
            for name, value in fields.items()
            if value is not None and value != getattr(preset, name)
        }

    @property
    def suffix(self) -> str:
        """`` for the preset, `-lr2e-05`, `-stale0`, or both: part of the arm's folder and run label."""
        changed = self.overrides()
        parts = []
        if "learning_rate" in changed:
            parts.append(f"-lr{changed['learning_rate']:.0e}")
        if "stale_penalty_weight" in changed:
            parts.append(f"-stale{changed['stale_penalty_weight']:g}")
        return "".join(parts)


PRESET_VARIANT = Variant()


def arm_name(reward: str, variant: Variant = PRESET_VARIANT) -> str:
    """`sparse` for an arm at the preset's settings; `sparse-lr1e-04`, `sparse-stale0` for sweep arms."""
    return f"{reward}{variant.suffix}"


def reward_of(arm: str) -> str:
    """The reward of an arm name (`sparse-lr1e-04` -> `sparse`)."""
    return arm.split("-", 1)[0]


def proof_config(reward: str, variant: Variant = PRESET_VARIANT) -> TrainingConfig:
    """The preset for one arm, each in its own folder under `RUNS_ROOT`; a sweep arm runs as many
    steps as the preset's, so its checkpoints stand beside theirs."""
    overrides: dict[str, Any] = {"reward": reward, "output_dir": str(RUNS_ROOT / arm_name(reward, variant))}
    return TrainingConfig.preset(PRESET, **overrides, **variant.overrides())


def run_label(reward: str, seed: int, variant: Variant = PRESET_VARIANT) -> str:
    return f"{arm_name(reward, variant)}__seed-{seed}"


def train_arms(
    rewards: Sequence[str] = REWARD_ARMS,
    seeds: Sequence[int] = (0,),
    variant: Variant = PRESET_VARIANT,
) -> None:
    """Train (or resume, or read back) every arm x seed, copying its small files to `PROOF_DIR`."""
    from supersede_lib.train.run import train

    for seed in seeds:
        for reward in rewards:
            train(proof_config(reward, variant), seed=seed)
            copy_run_files(reward, seed, variant=variant)


def copy_run_files(
    reward: str, seed: int, directory: Path = PROOF_DIR, variant: Variant = PRESET_VARIANT
) -> None:
    """Metrics, rollouts, summary and config of a run, as `runs/<arm>__seed-N.<file>`."""
    from supersede_lib.train.run import run_dir_for

    copy_run_folder_files(
        run_dir_for(proof_config(reward, variant), seed),
        run_label(reward, seed, variant),
        directory / "runs",
    )


def read_rollouts(directory: Path = PROOF_DIR) -> pd.DataFrame:
    """Every training rollout of every committed run: run, reward arm, seed, step, reward, success."""
    rows = []
    for path in sorted((directory / "runs").glob(f"*.{ROLLOUTS_FILE}")):
        label = path.name.removesuffix(f".{ROLLOUTS_FILE}")
        arm, seed = label.split("__seed-")
        for line in path.read_text().splitlines():
            record = json.loads(line)
            rows.append(
                {
                    "run": label,
                    "arm": arm,
                    "reward_type": reward_of(arm),
                    "seed": int(seed),
                    "step": int(record["step"]),
                    "reward": float(record["reward"]),
                    "success": record.get("verdict") == "correct",
                    "stale": record.get("verdict") == "stale",
                    "notes_empty": not str(record.get("final_notes") or "").strip(),
                    "notes_hold_current": record.get("notes_hold_current"),
                }
            )
    return pd.DataFrame(rows)


def trend_table(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Per run: success in the first vs the last quarter of steps; one-sided Fisher exact p over rollouts
    (the target's test), and Mann-Whitney over per-step rates beside it (steps as units, conservative)."""
    rows = []
    for run, frame in rollouts.groupby("run", sort=True):
        trend = success_trend(frame["step"], frame["success"])
        rows.append(
            {
                "run": run,
                "reward_type": frame["reward_type"].iloc[0],
                "seed": int(frame["seed"].iloc[0]),
                "steps": int(frame["step"].nunique()),
                "rollouts": len(frame),
                "first_quarter": f"{trend.first_successes}/{trend.first_n}",
                "first_rate": trend.first_rate,
                "last_quarter": f"{trend.last_successes}/{trend.last_n}",
                "last_rate": trend.last_rate,
                "p_one_sided": trend.p_one_sided,
                "p_steps_one_sided": trend.p_steps_one_sided,
                "rises": trend.last_rate > trend.first_rate and trend.p_one_sided < 0.05,
                **_quarter_shares(frame, "stale"),
                **_quarter_shares(frame, "notes_empty"),
            }
        )
    return pd.DataFrame(rows)


def notes_payoff_table(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Per run: in the first half of steps, the mean reward of rollouts that wrote notes and of those
    that left them empty, and the share of note-writers punished (reward < 0, a stale answer under the
    stale penalty); then the share of empty notes in the last quarter. A run whose notes earn no more
    than empty notes early on has no gradient towards keeping them: that is where notes collapse."""
    rows = []
    for run, frame in rollouts.groupby("run", sort=True):
        steps = sorted(frame["step"].unique())
        early = frame[frame["step"].isin(steps[: len(steps) // 2])]
        written, empty = early[~early["notes_empty"]], early[early["notes_empty"]]
        _, last_steps = quarter_steps(frame["step"])
        rows.append(
            {
                "run": run,
                "seed": int(frame["seed"].iloc[0]),
                "first_half_steps": len(steps) // 2,
                "notes_written": len(written),
                "reward_notes_written": written["reward"].mean() if len(written) else float("nan"),
                "punished_share_written": (written["reward"] < 0).mean() if len(written) else float("nan"),
                "notes_empty": len(empty),
                "reward_notes_empty": empty["reward"].mean() if len(empty) else float("nan"),
                "notes_empty_last_quarter": frame[frame["step"].isin(last_steps)]["notes_empty"].mean(),
            }
        )
    return pd.DataFrame(rows)


def _quarter_shares(frame: pd.DataFrame, column: str) -> dict[str, float]:
    """The share of rollouts with `column` true in the first and the last quarter of steps (as the
    trend counts them): stale answers and empty notes show what a reward change bought."""
    first_steps, last_steps = quarter_steps(frame["step"])
    return {
        f"{column}_first": float(frame[frame["step"].isin(first_steps)][column].mean()),
        f"{column}_last": float(frame[frame["step"].isin(last_steps)][column].mean()),
    }


def checkpoints_to_evaluate(
    seeds: Sequence[int] = (0,), variant: Variant = PRESET_VARIANT
) -> list[tuple[str, str | None]]:
    """(label, adapter folder or None for the base) for the base and every saved checkpoint."""
    from supersede_lib.train.run import list_checkpoints, run_dir_for

    models: list[tuple[str, str | None]] = [("base", None)]
    for seed in seeds:
        for reward in REWARD_ARMS:
            for step, folder in list_checkpoints(run_dir_for(proof_config(reward, variant), seed)):
                models.append((f"{run_label(reward, seed, variant)}__step-{step}", str(folder)))
    return models


def evaluate(
    label: str,
    adapter: str | None,
    which: str,
    directory: Path = PROOF_DIR,
    longmemeval_path: str | None = None,
    prefix_cache: bool = False,
) -> pd.DataFrame:
    """Greedy bounded-memory accuracy of one model on one evaluation set; replies cached and recorded.
    `prefix_cache` runs the faster engine that reuses the shared prompt prefix (its own folder)."""
    from supersede_lib.eval.runner import RunSettings, run_condition
    from supersede_lib.models.cache import CachedChatModel, ResponseCache
    from supersede_lib.models.hf import HFChatModel, adapter_file_fingerprint
    from supersede_lib.train.run import resolve_base_model

    out = directory / (which + (PREFIX_CACHE_SUFFIX if prefix_cache else ""))
    csv = out / f"{label}.csv"
    if csv.exists():
        return pd.read_csv(csv)
    config = proof_config("sparse")
    # replies on real LongMemEval records quote them: their own cache, never exported with ours
    real_records = which == LONGMEMEVAL
    cache = ResponseCache(
        RUNS_ROOT / ("responses-longmemeval.sqlite" if real_records else "responses.sqlite")
    )
    responses = directory / RESPONSES_FILE
    if responses.exists() and not real_records:
        cache.import_responses(responses)
    # named by the run and the adapter's hash, so no two checkpoints share cached replies
    name = f"{label}@{adapter_file_fingerprint(adapter)[:12]}" if adapter else None
    inner = HFChatModel(
        resolve_base_model(config),
        adapter_path=adapter,
        name=name,
        merge_adapter=True,
        prefix_cache=prefix_cache,
    )
    model = CachedChatModel(inner, cache)
    # the token cap the policy trained under, for base and checkpoints alike: a trained policy that
    # rambles would otherwise run to the evaluation's larger default cap, text the budget cuts anyway
    settings = RunSettings(
        prompt_variant=config.prompt_variant,
        notes_budget_chars=config.notes_budget_chars,
        concurrency=1,
        max_tokens_notes=config.max_completion_length,
        max_tokens_answer=config.max_completion_length,
    )
    result = run_condition(
        load_episodes(eval_spec(which, longmemeval_path)),
        "bounded_memory",
        model,
        settings,
        output_dir=out,
        run_name=label,
        progress=True,
    )
    if not real_records:
        cache.export_responses(responses)
    inner.close()
    return result.frame


def heldout_table(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Accuracy (Wilson 95%) of every model, and McNemar against the base on the same questions."""
    base = frames["base"].set_index("episode_id")["verdict"].eq("correct")
    rows = []
    for label, frame in frames.items():
        correct = frame.set_index("episode_id")["verdict"].eq("correct").reindex(base.index)
        row = accuracy_row(label, "bounded_memory", list(correct), "matcher")
        if label != "base":
            test = mcnemar_dict(list(base), list(correct))
            row.update({"b_base_only": test["b"], "c_model_only": test["c"], "p_exact": test["p_exact"]})
        rows.append(row)
    table = pd.DataFrame(rows)
    for column in [column for column in ("b_base_only", "c_model_only") if column in table]:
        table[column] = table[column].astype("Int64")  # counts, blank for the base
    return table


def engine_check_table(which: str = "heldout", directory: Path = PROOF_DIR) -> pd.DataFrame:
    """Every model evaluated by both engines on one set: accuracy, McNemar against the base under each,
    how often the verdicts and answers agree, and the wall time of each (replies made live)."""
    whole = evaluation_frames(which, directory)
    reused = evaluation_frames(which + PREFIX_CACHE_SUFFIX, directory)
    tables = {"whole": heldout_table(whole), "prefix": heldout_table(reused)} if "base" in reused else {}
    rows = []
    for label in [label for label in reused if label in whole]:
        pair = whole[label].merge(reused[label], on="episode_id", suffixes=("_whole", "_prefix"))
        row: dict[str, Any] = {"model": label, "n": len(pair)}
        for engine, folder in (("whole", which), ("prefix", which + PREFIX_CACHE_SUFFIX)):
            accuracy = tables[engine].set_index("model").loc[label] if tables else None
            row[f"correct_{engine}"] = int(pair[f"verdict_{engine}"].eq("correct").sum())
            row[f"p_vs_base_{engine}"] = accuracy.get("p_exact") if accuracy is not None else None
            manifest = json.loads((directory / folder / f"{label}.manifest.json").read_text())
            row[f"wall_s_{engine}"] = manifest.get("wall_s")
        row["verdicts_agree"] = int((pair["verdict_whole"] == pair["verdict_prefix"]).sum())
        row["answers_identical"] = int((pair["answer_whole"] == pair["answer_prefix"]).sum())
        rows.append(row)
    return pd.DataFrame(rows)


def cost_table(directory: Path = PROOF_DIR) -> pd.DataFrame:
    """Minutes of one core per training run and per evaluation, and the engine each ran on.

    Every process here runs one torch thread, so minutes add up to core-minutes: the budget of the
    whole proof on 2 cores is half their sum at best. An evaluation resumed from its response cache
    counts only the replies it made live (`live_calls` of `calls`)."""
    rows: list[dict[str, Any]] = []
    for path in sorted((directory / "runs").glob("*.run_summary.json")):
        label = path.name.removesuffix(".run_summary.json")
        summary = json.loads(path.read_text())
        step_seconds = _step_seconds(directory / "runs" / f"{label}.metrics.jsonl")
        config_path = directory / "runs" / f"{label}.training_config.json"
        config = json.loads(config_path.read_text()) if config_path.exists() else {}
        rows.append(
            {
                "part": "train",
                "set": "",
                "model": label,
                "engine": "shared prefix" if config.get("share_prompt_prefix") else "whole rows",
                "steps": summary.get("final_step"),
                "calls": None,
                "live_calls": None,
                "minutes": round(sum(step_seconds.values()) / 60, 1),
            }
        )
    for which in (*EVAL_SETS, LONGMEMEVAL, *PREFIX_CACHE_SETS):
        for path in sorted((directory / which).glob("*.manifest.json")):
            manifest = json.loads(path.read_text())
            totals = manifest.get("totals") or {}
            calls = int(totals.get("calls", 0))
            rows.append(
                {
                    "part": "evaluate",
                    "set": which.removesuffix(PREFIX_CACHE_SUFFIX),
                    "model": path.name.removesuffix(".manifest.json"),
                    "engine": "prefix cache" if which.endswith(PREFIX_CACHE_SUFFIX) else "whole prompt",
                    "steps": None,
                    "calls": calls,
                    "live_calls": calls - int(totals.get("cached_calls", 0)),
                    "minutes": round(float(manifest.get("wall_s") or 0.0) / 60, 1),
                }
            )
    columns = ["part", "set", "model", "engine", "steps", "calls", "live_calls", "minutes"]
    table = pd.DataFrame(rows, columns=columns)
    for column in ("steps", "calls", "live_calls"):
        table[column] = table[column].astype("Int64")
    return table


def _step_seconds(metrics_path: Path) -> dict[int, float]:
    """Seconds of each optimiser step (TRL's `step_time`: sampling, scoring and the loss), the last
    record of a step winning; summed over steps it spans every session of a resumed run, unlike
    the run summary's wall time (that of its last session only)."""
    seconds: dict[int, float] = {}
    if metrics_path.exists():
        for line in metrics_path.read_text().splitlines():
            record = json.loads(line)
            if "step_time" in record:
                seconds[int(record["step"])] = float(record["step_time"])
    return seconds


def evaluation_frames(which: str, directory: Path = PROOF_DIR) -> dict[str, pd.DataFrame]:
    """The committed per-model CSVs of one evaluation set, base first."""
    paths = sorted((directory / which).glob("*.csv"), key=lambda path: (path.stem != "base", path.stem))
    return {path.stem: pd.read_csv(path) for path in paths}


def _step_of(label: str) -> int:
    return int(label.rsplit("__step-", 1)[1]) if "__step-" in label else 0


def proof_figure(
    rollouts: pd.DataFrame, heldout: pd.DataFrame, other_engine: pd.DataFrame | None = None
) -> Any:
    """Left: training success per step, each arm's seeds pooled (Wilson 95% per step); right: held-out
    accuracy per checkpoint, one line per run.

    Runs judged only by the prompt-prefix engine (`other_engine`, its own base) are drawn dashed."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib.ticker import MaxNLocator

    from supersede_lib.eval.stats import wilson_interval

    sns.set_theme(style="whitegrid")
    figure, (train_ax, held_ax) = plt.subplots(1, 2, figsize=(13, 4.5))
    runs = sorted(rollouts["run"].unique())
    colors = dict(
        zip(runs, sns.color_palette("husl" if len(runs) > 10 else "colorblind", len(runs)), strict=True)
    )
    arm_colors = dict(zip(sorted(rollouts["arm"].unique()), sns.color_palette("colorblind"), strict=False))
    for arm, frame in rollouts.groupby("arm"):
        per_step = frame.groupby("step")["success"].agg(["sum", "count"]).reset_index()
        bounds = [
            wilson_interval(int(s), int(n)) for s, n in zip(per_step["sum"], per_step["count"], strict=True)
        ]
        seeds = frame["run"].nunique()
        label = (
            f"{arm} ({seeds} seed{'s' if seeds != 1 else ''}, {int(per_step['count'].max())} rollouts/step)"
        )
        train_ax.plot(
            per_step["step"],
            per_step["sum"] / per_step["count"],
            marker=".",
            color=arm_colors[arm],
            label=label,
        )
        train_ax.fill_between(
            per_step["step"],
            [b[0] for b in bounds],
            [b[1] for b in bounds],
            color=arm_colors[arm],
            alpha=0.15,
        )
    train_ax.set(xlabel="GRPO step", ylabel="training rollouts correct", ylim=(-0.02, 1.02))
    train_ax.set_title("Training success per step, seeds pooled per arm (Wilson 95%)", fontsize=10)
    train_ax.legend(fontsize=8, loc="upper left")
    for run, color in colors.items():
        table, style = heldout, "-"
        if not heldout["model"].str.startswith(f"{run}__").any() and other_engine is not None:
            table, style = other_engine, "--"
        base = table[table["model"] == "base"].iloc[0]
        points = table[table["model"].str.startswith(f"{run}__")]
        steps = [0, *(_step_of(label) for label in points["model"])]
        values = [base["accuracy"], *points["accuracy"]]
        low = [base["ci_low"], *points["ci_low"]]
        high = [base["ci_high"], *points["ci_high"]]
        held_ax.errorbar(
            steps,
            values,
            yerr=[  # clipped at 0: Wilson's bound at 0 or n correct can sit a rounding error past it
                [max(v - lo, 0.0) for v, lo in zip(values, low, strict=True)],
                [max(hi - v, 0.0) for v, hi in zip(values, high, strict=True)],
            ],
            marker="o",
            capsize=3,
            color=color,
            linestyle=style,
            label=run if style == "-" else f"{run} (prefix engine)",
        )
    held_ax.set(xlabel="checkpoint step (0 = base)", ylabel="held-out accuracy", ylim=(-0.02, 1.02))
    n = int(heldout.loc[heldout["model"] == "base", "n"].iloc[0])
    held_ax.set_title(f"Held-out, training distribution (n = {n}, greedy)", fontsize=10)
    held_ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    for axis in (train_ax, held_ax):
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    figure.tight_layout()
    return figure


def write_report(directory: Path = PROOF_DIR) -> dict[str, pd.DataFrame]:
    """Tables (trend, held-out, hard) as CSV and Markdown, and the figure, from the committed files."""
    from supersede_lib.present.plots import save_figure

    rollouts = read_rollouts(directory)
    tables = {"trend": trend_table(rollouts), NOTES_PAYOFF: notes_payoff_table(rollouts)}
    for which in (*EVAL_SETS, LONGMEMEVAL, *PREFIX_CACHE_SETS):
        frames = evaluation_frames(which, directory)
        if "base" in frames:
            tables[which] = heldout_table(frames)
    if any((directory / (HELDOUT_NAME + PREFIX_CACHE_SUFFIX)).glob("*.csv")):  # a finished evaluation
        tables[ENGINE_CHECK] = engine_check_table(HELDOUT_NAME, directory)
    tables[COST] = cost_table(directory)
    for name, table in tables.items():
        table.to_csv(directory / f"{name}.csv", index=False)
        (directory / f"{name}.md").write_text(markdown_table(_for_display(table)) + "\n")
    if "heldout" in tables:
        other_engine = tables.get(HELDOUT_NAME + PREFIX_CACHE_SUFFIX)
        save_figure(proof_figure(rollouts, tables["heldout"], other_engine), directory / "cpu_proof.png")
    return tables


def _for_display(table: pd.DataFrame) -> pd.DataFrame:
    """Rates to 3 decimals, p-values to 2 significant digits (0.0002 must not print as 0.0)."""
    shown = table.round(3)
    for column in [column for column in table.columns if str(column).startswith("p_")]:
        shown[column] = table[column].map(lambda p: p if pd.isna(p) else float(f"{p:.2g}")).astype(object)
    return shown


def committed_dir() -> Path:
    """The proof's committed folder, wherever the caller runs (papermill runs notebooks in `notebooks/`)."""
    return REPO_ROOT / PROOF_DIR


def read_tables(directory: Path = PROOF_DIR) -> dict[str, pd.DataFrame]:
    """The tables `write_report` last wrote (trend, heldout, hard, longmemeval when present), read only."""
    return {
        name: pd.read_csv(directory / f"{name}.csv")
        for name in REPORT_TABLES
        if (directory / f"{name}.csv").exists()
    }


def side_by_side(model: str, which: str = "heldout", n: int = 6, directory: Path = PROOF_DIR) -> pd.DataFrame:
    """The base's and one checkpoint's final notes and answers on the same questions, those where the
    verdicts differ first: what a reader checks before believing the accuracy table."""
    columns = ["episode_id", "question", "gold", "final_notes", "answer", "verdict"]
    base = pd.read_csv(directory / which / "base.csv")[columns]
    trained = pd.read_csv(directory / which / f"{model}.csv")[columns[:1] + columns[3:]]
    both = base.merge(trained, on="episode_id", suffixes=(" (base)", f" ({model})"))
    differs = both["verdict (base)"] != both[f"verdict ({model})"]
    return pd.concat([both[differs], both[~differs]]).head(n).reset_index(drop=True)


def _spec_line(spec: EpisodeSpec) -> str:
    sessions = "-".join(str(n) for n in spec.generator_overrides.get("n_sessions", ("?",)))
    return f"synthetic {spec.difficulty}, {sessions} sessions, generator seed {spec.seed}, n = {spec.n}"


TABLE_TITLES = {
    "trend": "Training success, first vs last quarter of steps (one-sided: Fisher over rollouts; Mann-Whitney over steps)",
    NOTES_PAYOFF: "What notes paid in the first half of training (mean reward with notes written vs empty; "
    "share of note-writers punished below 0), and empty notes in the last quarter",
    "heldout": f"Held-out, training distribution ({_spec_line(HELDOUT)}; greedy, matcher, McNemar vs base)",
    "hard": f"Transfer to the harder set ({_spec_line(HARD)}; greedy, matcher, McNemar vs base)",
    LONGMEMEVAL: "Real LongMemEval knowledge-update records (local file; greedy, matcher)",
    ENGINE_CHECK: "The held-out set again with the prompt-prefix cache (a second engine): same models, "
    "accuracy and McNemar under each engine, agreement, wall time",
    COST: "What each part took: minutes of one core per training run and evaluation, and its engine",
}
TABLE_TITLES.update(  # the same sets, judged by the prompt-prefix engine (against its own base run)
    {
        name: TABLE_TITLES[name.removesuffix(PREFIX_CACHE_SUFFIX)] + ", prompt-prefix engine"
        for name in PREFIX_CACHE_SETS
    }
)


def final_checkpoints(table: pd.DataFrame) -> list[str]:
    """The last evaluated checkpoint of every run in an evaluation table (`model` column): the preset's
    arms before the sweep arms, sparse before memory, then by seed."""
    trained = [label for label in table["model"] if "__step-" in label]
    last: dict[str, str] = {}
    for label in sorted(trained, key=_step_of):
        last[label.rsplit("__step-", 1)[0]] = label

    def order(run: str) -> tuple[bool, bool, str]:
        arm = run.split("__seed-")[0]
        return (arm not in REWARD_ARMS, reward_of(arm) != "sparse", run)

    return [last[run] for run in sorted(last, key=order)]


def report_section(directory: Path = PROOF_DIR, report_dir: Path | None = None) -> str:
    """The proof as a REPORT.md section: what was trained and on what it was judged, then its tables
    and figure as committed (run `report` first); empty when the proof has not been run."""
    tables = [name for name in REPORT_TABLES if (directory / f"{name}.md").exists()]
    if not tables:
        return ""
    config_files = sorted((directory / "runs").glob("*.training_config.json"))
    config = json.loads(config_files[0].read_text()) if config_files else {}
    model = Path(str(config.get("model_name_or_path", "?"))).name
    where = (
        directory.relative_to(report_dir)
        if report_dir and directory.is_relative_to(report_dir)
        else directory
    )
    lines = [
        f"### The CPU proof: does GRPO training learn? (preset `{PRESET}`, `{where.as_posix()}/`)",
        "",
        f"Model: `{model}` with LoRA r = {config.get('lora_r', '?')}; agent prompt "
        f"`{config.get('prompt_variant', '?')}`, notes budget {config.get('notes_budget_chars', '?')} chars; "
        f"{config.get('num_generations', '?')} rollouts per step at lr {config.get('learning_rate', '?')}, "
        f"{config.get('max_steps', '?')} steps planned; training episodes synthetic "
        f"{config.get('difficulty', '?')} from generator seed {TRAINING_SEED_BASE} + run seed. "
        "Arms: `sparse` (the paper's reward) and `memory` (plus credit when the notes hold the current value); "
        "`<reward>-lr<rate>`, `<reward>-stale<λ>`: sweep arms (another learning rate, another stale penalty). "
        "Rows name the run, seed and checkpoint step; n is in each table.",
        "",
    ]
    for name in tables:
        lines += [
            f"**{TABLE_TITLES[name]}** (`{name}.md`)",
            "",
            (directory / f"{name}.md").read_text().strip(),
            "",
        ]
    figure = directory / "cpu_proof.png"
    if figure.exists():
        link = figure.relative_to(report_dir) if report_dir and figure.is_relative_to(report_dir) else figure
        lines += [f"![cpu_proof]({link.as_posix()})", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m supersede_lib.studies.cpu_proof", description=__doc__)
    parser.add_argument("part", choices=("train", "evaluate", "report"))
    parser.add_argument("--reward", nargs="+", default=list(REWARD_ARMS), choices=REWARD_ARMS)
    parser.add_argument("--seed", nargs="+", type=int, default=[0])
    parser.add_argument("--set", dest="which", default="heldout", choices=(*EVAL_SETS, LONGMEMEVAL))
    parser.add_argument("--longmemeval", metavar="PATH", help="LongMemEval JSON file for --set longmemeval")
    parser.add_argument("--only", nargs="*", help="evaluate only these model labels (e.g. base)")
    parser.add_argument(
        "--prefix-cache",
        action="store_true",
        help=f"reuse the shared prompt prefix's keys and values (faster; results in <set>{PREFIX_CACHE_SUFFIX}/)",
    )
    parser.add_argument("--lr", type=float, help="a sweep arm at this learning rate (default: the preset's)")
    parser.add_argument(
        "--stale-penalty", type=float, help="a sweep arm with this stale penalty λ (default: the preset's)"
    )
    args = parser.parse_args(argv)
    variant = Variant(learning_rate=args.lr, stale_penalty=args.stale_penalty)
    if args.part == "train":
        train_arms(args.reward, args.seed, variant)
    elif args.part == "evaluate":
        for label, adapter in checkpoints_to_evaluate(args.seed, variant):
            if not args.only or label in args.only:
                evaluate(
                    label,
                    adapter,
                    args.which,
                    longmemeval_path=args.longmemeval,
                    prefix_cache=args.prefix_cache,
                )
    else:
        for name, table in write_report().items():
            print(f"## {name}\n{markdown_table(table)}\n")


if __name__ == "__main__":
    main()
