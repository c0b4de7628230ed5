"""What training runs and evaluation sets recorded, read as evidence that training learned.

Studies 06 and 07 call these for every profile: from the rollouts each run logged, whether the last
quarter of steps succeeded more often than the first (`trend_table`) and what writing notes paid
early on (`notes_payoff_table`); from the per-model files of each named evaluation set
(`transfer.evaluations`), accuracy and McNemar against the base (`evaluation_table`), the same
models under both engines (`engine_check_table`), what every part cost (`cost_table`) and one
figure of both (`training_and_evaluation_figure`). Everything here reads files, so a clone without
adapters re-derives every table from the committed ones.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib.eval.run_files import live_measurements
from supersede_lib.eval.stats import quarter_steps, success_trend
from supersede_lib.results.comparison import (
    accuracy_row,
    failed_ids,
    incomplete_line,
    mcnemar_dict,
)
from supersede_lib.results.outputs import markdown_table, write_csv_atomic, write_text_atomic
from supersede_lib.train.config import CONFIG_FILE, METRICS_FILE, ROLLOUTS_FILE, SUMMARY_FILE

TREND = "trend"
NOTES_PAYOFF = "notes_payoff"  # what writing notes earned against empty notes, and who ended with none
ENGINE_CHECK = "engine_check"
COST = "cost"  # what each training run and evaluation took (minutes of one core)
FIGURE = "training_and_heldout.png"
# a prompt-prefix set is named after the whole-prompt set it repeats: `heldout-prefix-cache`
PREFIX_CACHE_SUFFIX = "-prefix-cache"


TITLES = {
    TREND: "Training success, first vs last quarter of steps (one-sided: Fisher over rollouts; "
    "Mann-Whitney over steps)",
    NOTES_PAYOFF: "What notes paid in the first half of training (mean reward with notes written vs empty; "
    "share of note-writers punished below 0), and empty notes in the last quarter",
    ENGINE_CHECK: "The first set judged by both engines: same models, accuracy and McNemar under each "
    "engine, agreement, wall time",
    COST: "What each part took: minutes of one core per training run and evaluation, and its engine",
}


def read_tables(directory: Path, names: Sequence[str]) -> dict[str, pd.DataFrame]:
    """The tables among `names` that `directory` holds (`<name>.csv`), in that order."""
    return {
        name: pd.read_csv(directory / f"{name}.csv") for name in names if (directory / f"{name}.csv").exists()
    }


def write_evidence_table(directory: Path, name: str, table: pd.DataFrame) -> str:
    """`<name>.csv` as computed and `<name>.md` as shown (`for_display`); returns the .md name. A
    table some of whose questions failed (a `failed` column) opens with the incomplete line."""
    write_csv_atomic(table, directory / f"{name}.csv")
    text = markdown_table(for_display(table)) + "\n"
    first_line = table_incomplete_line(table)
    write_text_atomic(directory / f"{name}.md", f"{first_line}\n\n{text}" if first_line else text)
    return f"{name}.md"


def table_incomplete_line(table: pd.DataFrame) -> str | None:
    """`comparison.incomplete_line` of a table whose rows count the questions left out (`failed`,
    beside the `n` compared): the row with the most left out names the questions asked."""
    if "failed" not in table.columns or not table["failed"].fillna(0).any():
        return None
    worst = table.loc[table["failed"].fillna(0).astype(int).idxmax()]
    return incomplete_line(int(worst["failed"]), int(worst["n"]) + int(worst["failed"]))


def for_display(table: pd.DataFrame) -> pd.DataFrame:
    """Rates to 3 decimals, p-values to 2 significant digits (0.0002 must not print as 0.0)."""
    shown = table.round(3)
    for column in [column for column in table.columns if str(column).startswith("p_")]:
        shown[column] = table[column].map(lambda p: p if pd.isna(p) else float(f"{p:.2g}")).astype(object)
    return shown


# --------------------------------------------------------------------------------------------
# Training: the rollouts every run logged
# --------------------------------------------------------------------------------------------


def read_rollouts(directory: Path) -> pd.DataFrame:
    """Every logged training rollout of the runs copied to `directory` (`<arm>__seed-N.rollouts.jsonl`):
    run, arm, reward type (from the run's config), seed, step, reward, success, stale, empty notes."""
    rows = []
    for path in sorted(directory.glob(f"*.{ROLLOUTS_FILE}")):
        label = path.name.removesuffix(f".{ROLLOUTS_FILE}")
        arm, seed = label.split("__seed-")
        config_path = directory / f"{label}.{CONFIG_FILE}"
        config = json.loads(config_path.read_text()) if config_path.exists() else {}
        for line in path.read_text().splitlines():
            record = json.loads(line)
            rows.append(
                {
                    "run": label,
                    "arm": arm,
                    "reward_type": config.get("reward", arm.split("-", 1)[0]),
                    "seed": int(seed),
                    "step": int(record["step"]),
                    "reward": float(record["reward"]),
                    "advantage": float(record.get("advantage", float("nan"))),
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
    than empty notes early on has no gradient towards keeping them: that is where notes collapse.

    Those means mix episodes; GRPO compares rollouts only within a step's group (one episode).
    `advantage_empty_first_half` sums the logged advantage of the empty-notes rollouts of the first
    half: the push the update gave towards (> 0) or away from (< 0) empty notes, within groups."""
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
                "advantage_empty_first_half": float(empty["advantage"].sum()),
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


def write_training_evidence(directory: Path) -> list[str]:
    """`trend` and `notes_payoff` beside 06's run files; nothing when no run logged its rollouts."""
    rollouts = read_rollouts(directory)
    if rollouts.empty:
        return []
    return [
        write_evidence_table(directory, TREND, trend_table(rollouts)),
        write_evidence_table(directory, NOTES_PAYOFF, notes_payoff_table(rollouts)),
    ]


# --------------------------------------------------------------------------------------------
# Evaluation sets: one folder of per-model files each
# --------------------------------------------------------------------------------------------


def evaluation_frames(folder: Path) -> dict[str, pd.DataFrame]:
    """The per-model CSVs of one evaluation set's folder, base first."""
    paths = sorted(folder.glob("*.csv"), key=lambda path: (path.stem != "base", path.stem))
    return {path.stem: pd.read_csv(path) for path in paths}


def evaluation_table(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Accuracy (Wilson 95%) of every model, and McNemar against the base on the same questions.

    A question any model's run failed on (the runner's `failed`) is neither right nor wrong: it
    leaves every row, so all accuracies and tests stand on the same questions, and `failed` says
    how many were left out (a column only when there are any)."""
    left_out = failed_ids(*frames.values())
    base = frames["base"].set_index("episode_id")["verdict"].eq("correct")
    base = base[~base.index.astype(str).isin(left_out)]
    rows = []
    for label, frame in frames.items():
        correct = frame.set_index("episode_id")["verdict"].eq("correct").reindex(base.index)
        row = accuracy_row(label, "bounded_memory", list(correct), "matcher", failed=len(left_out) or None)
        if label != "base":
            test = mcnemar_dict(list(base), list(correct))
            row.update({"b_base_only": test["b"], "c_model_only": test["c"], "p_exact": test["p_exact"]})
        rows.append(row)
    table = pd.DataFrame(rows)
    for column in [column for column in ("b_base_only", "c_model_only") if column in table]:
        table[column] = table[column].astype("Int64")  # counts, blank for the base
    return table


def engine_check_table(whole: Path, prefix: Path) -> pd.DataFrame:
    """Every model evaluated by both engines on one set (`whole`, `prefix`: the two folders): accuracy,
    McNemar against the base under each, how often verdicts and answers agree, the wall time of each."""
    frames = {"whole": evaluation_frames(whole), "prefix": evaluation_frames(prefix)}
    folders = {"whole": whole, "prefix": prefix}
    both_bases = "base" in frames["prefix"]
    tables = {engine: evaluation_table(found) for engine, found in frames.items()} if both_bases else {}
    rows = []
    for label in [label for label in frames["prefix"] if label in frames["whole"]]:
        pair = frames["whole"][label].merge(
            frames["prefix"][label], on="episode_id", suffixes=("_whole", "_prefix")
        )
        left_out = failed_ids(frames["whole"][label], frames["prefix"][label])
        pair = pair[
            ~pair["episode_id"].astype(str).isin(left_out)
        ]  # either engine failed: nothing to compare
        row: dict[str, Any] = {
            "model": label,
            "n": len(pair),
            **({"failed": len(left_out)} if left_out else {}),
        }
        for engine in ("whole", "prefix"):
            accuracy = tables[engine].set_index("model").loc[label] if tables else None
            row[f"correct_{engine}"] = int(pair[f"verdict_{engine}"].eq("correct").sum())
            row[f"p_vs_base_{engine}"] = accuracy.get("p_exact") if accuracy is not None else None
            manifest = json.loads((folders[engine] / f"{label}.manifest.json").read_text())
            row[f"wall_s_{engine}"] = live_measurements(manifest)["wall_s"]
        row["verdicts_agree"] = int((pair["verdict_whole"] == pair["verdict_prefix"]).sum())
        row["answers_identical"] = int((pair["answer_whole"] == pair["answer_prefix"]).sum())
        rows.append(row)
    return pd.DataFrame(rows)


def cost_table(runs_dir: Path, evaluation_dirs: Sequence[tuple[Path, bool]]) -> pd.DataFrame:
    """Minutes of one core per training run (`runs_dir`: 06's copied run files) and per evaluation
    (`evaluation_dirs`: (folder, prefix-cache engine?) of each set), and the engine each ran on.

    Every process here runs one torch thread, so minutes add up to core-minutes. An evaluation resumed
    from its response cache counts only the replies it made live (`live_calls` of `calls`)."""
    rows = [_training_cost(runs_dir, path) for path in sorted(runs_dir.glob(f"*.{SUMMARY_FILE}"))]
    for folder, prefix_cache in evaluation_dirs:
        rows += [
            _evaluation_cost(folder, path, prefix_cache) for path in sorted(folder.glob("*.manifest.json"))
        ]
    columns = ["part", "set", "model", "engine", "steps", "calls", "live_calls", "minutes"]
    table = pd.DataFrame(rows, columns=columns)
    for column in ("steps", "calls", "live_calls"):
        table[column] = table[column].astype("Int64")
    return table


def _training_cost(runs_dir: Path, summary_path: Path) -> dict[str, Any]:
    label = summary_path.name.removesuffix(f".{SUMMARY_FILE}")
    summary = json.loads(summary_path.read_text())
    step_seconds = _step_seconds(runs_dir / f"{label}.{METRICS_FILE}")
    config_path = runs_dir / f"{label}.{CONFIG_FILE}"
    config = json.loads(config_path.read_text()) if config_path.exists() else {}
    return {
        "part": "train",
        "set": "",
        "model": label,
        "engine": "shared prefix" if config.get("share_prompt_prefix") else "whole rows",
        "steps": summary.get("final_step"),
        "calls": None,
        "live_calls": None,
        "minutes": round(sum(step_seconds.values()) / 60, 1),
    }


def _evaluation_cost(folder: Path, manifest_path: Path, prefix_cache: bool) -> dict[str, Any]:
    measured = live_measurements(json.loads(manifest_path.read_text()))  # the live run's, not a replay's
    totals = measured["totals"]
    calls = int(totals.get("calls", 0))
    return {
        "part": "evaluate",
        "set": folder.name.removesuffix(PREFIX_CACHE_SUFFIX),
        "model": manifest_path.name.removesuffix(".manifest.json"),
        "engine": "prefix cache" if prefix_cache else "whole prompt",
        "steps": None,
        "calls": calls,
        "live_calls": calls - int(totals.get("cached_calls", 0)),
        "minutes": round(float(measured["wall_s"] or 0.0) / 60, 1),
    }


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


def step_of(label: str) -> int:
    """The checkpoint step of a model label (`sparse__seed-0__step-20` -> 20; the base -> 0)."""
    return int(label.rsplit("__step-", 1)[1]) if "__step-" in label else 0


def final_checkpoints(table: pd.DataFrame, arms: Sequence[str]) -> list[str]:
    """The last evaluated checkpoint of every run in an evaluation table (`model` column), in the
    order of `arms` (the profile's), then by seed."""
    trained = [label for label in table["model"] if "__step-" in label]
    last: dict[str, str] = {}
    for label in sorted(trained, key=step_of):
        last[label.rsplit("__step-", 1)[0]] = label

    def order(run: str) -> tuple[int, str]:
        arm = run.split("__seed-")[0]
        return (list(arms).index(arm) if arm in arms else len(arms), run)

    return [last[run] for run in sorted(last, key=order)]


def side_by_side(folder: Path, model: str, n: int = 6) -> pd.DataFrame:
    """The base's and one checkpoint's final notes and answers on the same questions, those where the
    verdicts differ first: what a reader checks before believing the accuracy table."""
    columns = ["episode_id", "question", "gold", "final_notes", "answer", "verdict"]
    base = pd.read_csv(folder / "base.csv")[columns]
    trained = pd.read_csv(folder / f"{model}.csv")[columns[:1] + columns[3:]]
    both = base.merge(trained, on="episode_id", suffixes=(" (base)", f" ({model})"))
    differs = both["verdict (base)"] != both[f"verdict ({model})"]
    return pd.concat([both[differs], both[~differs]]).head(n).reset_index(drop=True)


def training_and_evaluation_figure(
    rollouts: pd.DataFrame,
    heldout: pd.DataFrame,
    other_engine: pd.DataFrame | None = None,
    *,
    by_arm: bool = False,
) -> Any:
    """Left: training success per step, each arm's seeds pooled (Wilson 95% per step); right: held-out
    accuracy per checkpoint, one line per run (`heldout`: the first evaluation set's table).

    Right, by default (the committed record's PNG): one colour per run, runs judged only by the
    prompt-prefix engine (`other_engine`, its own base) dashed. `by_arm=True` (what notebook 06 shows):
    the arm's colour as on the left, line style by seed, square markers for the prompt-prefix engine."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib.ticker import MaxNLocator

    sns.set_theme(style="whitegrid")
    figure, (train_ax, held_ax) = plt.subplots(1, 2, figsize=(13, 4.5))
    runs = sorted(rollouts["run"].unique())
    arm_colors = dict(zip(sorted(rollouts["arm"].unique()), sns.color_palette("colorblind"), strict=False))
    run_colors = dict(
        zip(runs, sns.color_palette("husl" if len(runs) > 10 else "colorblind", len(runs)), strict=True)
    )
    _plot_training_success(train_ax, rollouts, arm_colors)
    lines = _arm_seed_lines(runs, arm_colors) if by_arm else _run_lines(run_colors)
    _plot_checkpoint_accuracy(held_ax, lines, heldout, other_engine)
    for axis in (train_ax, held_ax):
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    figure.tight_layout()
    return figure


def _plot_training_success(axis: Any, rollouts: pd.DataFrame, arm_colors: dict[str, Any]) -> None:
    """Success per step of every arm, its seeds pooled, with a Wilson 95% band."""
    from supersede_lib.eval.stats import wilson_interval

    for arm, frame in rollouts.groupby("arm"):
        per_step = frame.groupby("step")["success"].agg(["sum", "count"]).reset_index()
        bounds = [
            wilson_interval(int(s), int(n)) for s, n in zip(per_step["sum"], per_step["count"], strict=True)
        ]
        seeds = frame["run"].nunique()
        label = (
            f"{arm} ({seeds} seed{'s' if seeds != 1 else ''}, {int(per_step['count'].max())} rollouts/step)"
        )
        rates = per_step["sum"] / per_step["count"]
        axis.plot(per_step["step"], rates, marker=".", color=arm_colors[arm], label=label)
        lows, highs = [b[0] for b in bounds], [b[1] for b in bounds]
        axis.fill_between(per_step["step"], lows, highs, color=arm_colors[arm], alpha=0.15)
    axis.set(xlabel="GRPO step", ylabel="training rollouts correct", ylim=(-0.02, 1.02))
    axis.set_title("Training success per step, seeds pooled per arm (Wilson 95%)", fontsize=10)
    axis.legend(fontsize=8, loc="upper left")


SEED_STYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))


def _run_lines(run_colors: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """One colour per run; the prompt-prefix engine's runs dashed (the record's figure)."""
    return {
        run: {"color": color, "own": ("-", "o", run), "other": ("--", "o", f"{run} (prefix engine)")}
        for run, color in run_colors.items()
    }


def _arm_seed_lines(runs: list[str], arm_colors: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The arm's colour, a line style per seed, square markers for the prompt-prefix engine."""
    lines = {}
    for run in runs:
        arm, _, seed = run.partition("__seed-")
        style = SEED_STYLES[int(seed) % len(SEED_STYLES)] if seed.isdigit() else "-"
        label = f"{arm}, seed {seed}"
        lines[run] = {
            "color": arm_colors.get(arm, "black"),
            "own": (style, "o", label),
            "other": (style, "s", f"{label} (prefix engine)"),
        }
    return lines


def _plot_checkpoint_accuracy(
    axis: Any, lines: dict[str, dict[str, Any]], heldout: pd.DataFrame, other_engine: pd.DataFrame | None
) -> None:
    """Held-out accuracy of the base (step 0) and every checkpoint of each run, one line per run
    (`lines`: its colour, and line style, marker and label for each engine's table)."""
    for run, line in lines.items():
        table, (style, marker, label) = heldout, line["own"]
        if not heldout["model"].str.startswith(f"{run}__").any() and other_engine is not None:
            table, (style, marker, label) = other_engine, line["other"]
        base = table[table["model"] == "base"].iloc[0]
        points = table[table["model"].str.startswith(f"{run}__")]
        steps = [0, *(step_of(model) for model in points["model"])]
        values = [base["accuracy"], *points["accuracy"]]
        low = [base["ci_low"], *points["ci_low"]]
        high = [base["ci_high"], *points["ci_high"]]
        axis.errorbar(
            steps,
            values,
            yerr=[  # clipped at 0: Wilson's bound at 0 or n correct can sit a rounding error past it
                [max(v - lo, 0.0) for v, lo in zip(values, low, strict=True)],
                [max(hi - v, 0.0) for v, hi in zip(values, high, strict=True)],
            ],
            marker=marker,
            capsize=3,
            color=line["color"],
            linestyle=style,
            label=label,
        )
    axis.set(xlabel="checkpoint step (0 = base)", ylabel="held-out accuracy", ylim=(-0.02, 1.02))
    n = int(heldout.loc[heldout["model"] == "base", "n"].iloc[0])
    axis.set_title(f"Held-out, training distribution (n = {n}, greedy)", fontsize=10)
    axis.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
