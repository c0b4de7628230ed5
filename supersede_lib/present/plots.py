"""Figures for the study notebooks (paper Figures 2 and 3, failure breakdowns).

Every function takes a tidy DataFrame, returns a matplotlib `Figure`, and never mixes the
paper's numbers with ours: when both are drawn they get separate, labelled panels.
Headless processes (tests, papermill without a display) get the Agg backend.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Any

import matplotlib

if "ipykernel" not in sys.modules and not os.environ.get("DISPLAY"):
    matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import PercentFormatter  # noqa: E402

from supersede_lib.eval.diagnostics import FAILURE_CLASSES  # noqa: E402
from supersede_lib.eval.run_files import write_bytes_atomic  # noqa: E402

CONDITION_LABELS = {"full_context": "full context", "bounded_memory": "bounded memory"}
FAILURE_COLORS = {
    "correct": "#4c9a5b",
    "notes_never_written": "#9a9a9a",
    "never_entered": "#d08c3c",
    "squeezed_out": "#c8553d",
    "kept_stale": "#7b4f9d",
    "held_but_missed": "#4f7cac",
}


def _palette(n: int) -> list:
    return sns.color_palette("colorblind", n_colors=max(n, 1))


def grouped_accuracy_bars(
    frame: pd.DataFrame,
    *,
    group: str,
    hue: str,
    ax: Axes,
    title: str,
    hue_labels: dict[str, str] | None = None,
) -> Axes:
    """Bars of `accuracy` per (group, hue); error bars from `ci_low`/`ci_high` where present.

    Groups and hues keep the order in which they first appear in `frame`.
    """
    for column in (group, hue, "accuracy"):
        if column not in frame.columns:
            raise KeyError(f"grouped_accuracy_bars needs a {column!r} column; got {list(frame.columns)}")
    groups = list(dict.fromkeys(frame[group].tolist()))
    hues = list(dict.fromkeys(frame[hue].tolist()))
    width = 0.8 / max(len(hues), 1)
    colors = _palette(len(hues))
    for hue_index, hue_value in enumerate(hues):
        subset = frame[frame[hue] == hue_value].set_index(group)
        positions, heights, lower, upper = [], [], [], []
        for group_index, group_value in enumerate(groups):
            if group_value not in subset.index:
                continue
            row = subset.loc[group_value]
            accuracy = float(row["accuracy"])
            positions.append(group_index + (hue_index - (len(hues) - 1) / 2) * width)
            heights.append(accuracy)
            has_ci = "ci_low" in row.index and pd.notna(row.get("ci_low")) and pd.notna(row.get("ci_high"))
            # max(0, ...): Wilson bounds at 0% / 100% can sit a rounding error past the estimate
            lower.append(max(0.0, accuracy - float(row["ci_low"])) if has_ci else 0.0)
            upper.append(max(0.0, float(row["ci_high"]) - accuracy) if has_ci else 0.0)
        label = (hue_labels or {}).get(hue_value, str(hue_value))
        bars = ax.bar(positions, heights, width=width * 0.95, color=colors[hue_index], label=label)
        if any(lower) or any(upper):
            ax.errorbar(positions, heights, yerr=[lower, upper], fmt="none", ecolor="black", capsize=3, lw=1)
        ax.bar_label(bars, labels=[f"{height:.0%}" for height in heights], padding=2, fontsize=8)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([str(value) for value in groups], rotation=15 if len(groups) > 2 else 0, ha="center")
    ax.set_ylim(0, 1.25)  # headroom for the bar labels and the legend
    ax.set_yticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylabel("accuracy")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper center", ncol=max(len(hues), 1))
    return ax


def accuracy_by_model_figure(
    ours: pd.DataFrame,
    ours_title: str,
    paper: pd.DataFrame | None = None,
    paper_title: str | None = None,
    reference: tuple[float, str] | None = None,
) -> Figure:
    """Figure 2: full context vs bounded memory per model (Wilson 95% intervals on ours).

    `ours`/`paper` are tidy frames with model, condition, accuracy (and ci_low/ci_high).
    `reference` = (accuracy, label) draws a dotted line on our panel (e.g. our synthetic
    full-context check); the paper panel is drawn from the paper's numbers only.
    """
    sns.set_theme(style="whitegrid")
    panels = 2 if paper is not None else 1
    figure, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.2), squeeze=False)
    grouped_accuracy_bars(
        ours, group="model", hue="condition", ax=axes[0][0], title=ours_title, hue_labels=CONDITION_LABELS
    )
    if reference is not None:
        axes[0][0].axhline(reference[0], ls=":", color="gray", lw=1.2, label=reference[1])
        axes[0][0].legend(fontsize=8, loc="upper center", ncol=3)
    if paper is not None:
        grouped_accuracy_bars(
            paper,
            group="model",
            hue="condition",
            ax=axes[0][1],
            title=paper_title or "paper",
            hue_labels=CONDITION_LABELS,
        )
    figure.tight_layout()
    return figure


def scale_figure(
    ours: pd.DataFrame,
    ours_title: str,
    paper: pd.DataFrame | None = None,
    paper_title: str | None = None,
) -> Figure:
    """Figure 3: accuracy per scale condition (short/long history, fixed/proportional memory).

    Frames hold `condition` (the bar label), `accuracy` and optional ci_low/ci_high.
    """
    sns.set_theme(style="whitegrid")
    panels = 2 if paper is not None else 1
    figure, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.2), squeeze=False)
    for ax, frame, title in ((axes[0][0], ours, ours_title), (axes[0][-1], paper, paper_title)):
        if frame is None:
            continue
        tidy = frame.assign(series="accuracy")
        grouped_accuracy_bars(tidy, group="condition", hue="series", ax=ax, title=title or "")
        legend = ax.get_legend()
        if legend is not None:
            legend.remove()
    figure.tight_layout()
    return figure


def failure_breakdown_figure(counts: pd.DataFrame, *, group: str = "model", title: str = "") -> Figure:
    """Stacked bars: share of each failure class per group (from `diagnostics.failure_counts`)."""
    if group not in counts.columns:
        raise KeyError(f"failure_breakdown_figure needs a {group!r} column; got {list(counts.columns)}")
    sns.set_theme(style="whitegrid")
    figure, ax = plt.subplots(figsize=(max(4.5, 1.6 * len(counts) + 2.5), 4.0))
    labels = [str(value) for value in counts[group].tolist()]
    totals = counts[list(FAILURE_CLASSES)].sum(axis=1).clip(lower=1)
    bottom = pd.Series(0.0, index=counts.index)
    for failure in FAILURE_CLASSES:
        share = counts[failure] / totals
        ax.bar(labels, share, bottom=bottom, color=FAILURE_COLORS[failure], label=failure.replace("_", " "))
        bottom = bottom + share
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylim(0, 1.0)
    ax.set_ylabel("share of classifiable questions")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, bbox_to_anchor=(1.01, 1), loc="upper left")
    figure.tight_layout()
    return figure


def memory_systems_figure(rows: pd.DataFrame, title: str) -> Figure:
    """08: accuracy against cost (tokens per episode) per memory policy, a 95% Wilson interval on each
    point, one marker shape per model; beside it the share of stale answers per policy and model.

    `rows` are the study's accuracy rows (model, policy, accuracy, ci_low, ci_high, tokens_per_episode,
    stale_answer_rate), refused rows already left out. Cost is on a log axis: full context costs
    many times what a bounded memory does."""
    sns.set_theme(style="whitegrid")
    policies = list(dict.fromkeys(rows["policy"]))
    models = list(dict.fromkeys(rows["model"]))
    colors = dict(zip(policies, _palette(len(policies)), strict=True))
    markers = dict(zip(models, "osD^vP*X", strict=False))
    figure, (cost_ax, stale_ax) = plt.subplots(
        1, 2, figsize=(11.5, 4.6), gridspec_kw={"width_ratios": [1.5, 1]}
    )
    for row in rows.to_dict("records"):
        low, high = row.get("ci_low"), row.get("ci_high")
        errors = None
        if low is not None and high is not None and not pd.isna(low):
            errors = [[max(row["accuracy"] - low, 0.0)], [max(high - row["accuracy"], 0.0)]]
        cost_ax.errorbar(
            row["tokens_per_episode"],
            row["accuracy"],
            yerr=errors,
            fmt=markers.get(row["model"], "o"),
            color=colors[row["policy"]],
            capsize=3,
            markersize=7,
        )
    cost_ax.set_xscale("log")
    cost_ax.set_xlabel("tokens per episode (prompt + completion, log scale)")
    cost_ax.set_ylabel("accuracy (95% Wilson)")
    cost_ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    cost_ax.set_ylim(0, 1.02)
    cost_ax.set_title(f"accuracy vs cost\n{title}", fontsize=10)
    handles = [plt.Line2D([], [], color=colors[name], marker="o", ls="", label=name) for name in policies]
    handles += [plt.Line2D([], [], color="gray", marker=markers[name], ls="", label=name) for name in models]
    cost_ax.legend(handles=handles, fontsize=7, loc="best")
    stale = rows.pivot_table(index="policy", columns="model", values="stale_answer_rate", sort=False)
    stale = stale.reindex(policies)
    stale.plot.barh(ax=stale_ax, color=_palette(len(models)), legend=len(models) > 1)
    stale_ax.invert_yaxis()
    stale_ax.set_xlim(0, max(0.05, float(stale.fillna(0).to_numpy().max()) * 1.15))  # a share: never below 0
    stale_ax.xaxis.set_major_formatter(PercentFormatter(1.0))
    stale_ax.set_xlabel("stale answers (share of questions)")
    stale_ax.set_ylabel("")
    stale_ax.set_title("answered a superseded value", fontsize=10)
    figure.tight_layout()
    return figure


def perturbation_drop_figure(drops: pd.DataFrame, title: str, *, label: Any = None) -> Figure:
    """LIBERO-PRO style: one panel per model and condition, one bar per perturbation, its height the
    paired drop from the unperturbed twin in points (positive: worse when perturbed), error bars the
    bootstrap 95% interval, each bar labelled with both accuracies. `label(condition, memory_policy)`
    names a panel's condition (default: the condition)."""
    needed = ("model", "condition", "memory_policy", "perturbation", "drop", "drop_low", "drop_high")
    missing = [column for column in needed if column not in drops.columns]
    if missing:
        raise KeyError(f"perturbation_drop_figure needs columns {missing}; got {list(drops.columns)}")
    sns.set_theme(style="whitegrid")
    panels = list(dict.fromkeys(zip(drops["model"], drops["condition"], drops["memory_policy"], strict=True)))
    perturbations = list(dict.fromkeys(drops["perturbation"]))
    columns = min(len(panels), 2)
    rows = -(-len(panels) // columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(0.7 * len(perturbations) * columns + 2.5, 3.6 * rows), squeeze=False
    )
    colors = dict(zip(perturbations, _palette(len(perturbations)), strict=True))
    for ax, (model, condition, policy) in zip(axes.flat, panels, strict=False):
        panel = drops[
            (drops["model"] == model) & (drops["condition"] == condition) & (drops["memory_policy"] == policy)
        ]
        heights = 100 * panel["drop"].fillna(0.0)
        # no interval (one pair, or none): no whisker
        lower = (heights - 100 * panel["drop_low"].fillna(panel["drop"]).fillna(0.0)).clip(lower=0)
        upper = (100 * panel["drop_high"].fillna(panel["drop"]).fillna(0.0) - heights).clip(lower=0)
        positions = range(len(panel))
        ax.bar(positions, heights, color=[colors[name] for name in panel["perturbation"]])
        ax.errorbar(positions, heights, yerr=[lower, upper], fmt="none", ecolor="black", capsize=3, lw=1)
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(list(positions))
        ax.set_xticklabels(panel["perturbation"], rotation=45, ha="right", fontsize=8)
        for position, row in zip(positions, panel.to_dict("records"), strict=True):
            if pd.notna(row["drop"]):
                text = f"{row['accuracy_unperturbed']:.0%}\u2192{row['accuracy_perturbed']:.0%}"
                ax.annotate(text, (position, 98), ha="center", va="top", fontsize=7)
        shown = label(condition, policy) if label else condition
        n = int(panel["n"].max()) if "n" in panel.columns and len(panel) else 0
        ax.set_title(f"{model}\n{CONDITION_LABELS.get(shown, shown)}, n = {n} pairs", fontsize=9)
        ax.set_ylim(-105, 105)
        ax.set_ylabel("drop (points)")
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    figure.suptitle(
        title + "\n(bars: paired drop; whiskers: bootstrap 95%; labels: unperturbed\u2192perturbed)",
        fontsize=9,
    )
    figure.tight_layout()
    return figure


def save_figure(figure: Figure, path: str | os.PathLike) -> Path:
    """Write a PNG (150 dpi), whole or not at all (`write_bytes_atomic`), and close the figure so long
    sessions do not pile them up."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    image = io.BytesIO()
    figure.savefig(image, format=path.suffix.lstrip(".") or "png", dpi=150, bbox_inches="tight")
    write_bytes_atomic(path, image.getvalue())
    plt.close(figure)
    return path


def _arm_colors(runs: pd.DataFrame) -> dict[tuple[str, str], Any]:
    """One colour per (curriculum, reward_type) arm, in order of appearance."""
    arms = list(dict.fromkeys(zip(runs["curriculum"], runs["reward_type"], strict=True)))
    return dict(zip(arms, _palette(len(arms)), strict=True))


def training_curves_figure(
    metrics: pd.DataFrame,
    *,
    title: str,
    paper: tuple[float, float, int] | None = None,
    window: int = 5,
) -> Figure:
    """Figure 4a: GRPO reward per step for every run (rolling mean), zero-advantage share below.

    `metrics` is tidy (step, reward, zero_advantage_fraction, difficulty, curriculum, reward_type,
    seed, run); one colour per (curriculum, reward type) arm. Curriculum moves are marked where a
    run's difficulty changes. `paper` = (reward at start, reward at end, stop step): the paper
    reports only these, so its panel shows two points.
    """
    sns.set_theme(style="whitegrid")
    columns = 2 if paper is not None else 1
    figure, axes = plt.subplots(
        2, columns, figsize=(6.0 * columns, 5.6), squeeze=False, sharex="col", height_ratios=[3, 1.4]
    )
    reward_ax, zero_ax = axes[0][0], axes[1][0]
    colors = _arm_colors(metrics)
    for _, run in metrics.groupby("run", sort=False):
        run = run.sort_values("step")
        curriculum, reward_type, seed = run.iloc[0][["curriculum", "reward_type", "seed"]]
        label = f"{curriculum}, {reward_type} reward, seed {seed}"
        color = colors[(curriculum, reward_type)]
        reward_ax.plot(run["step"], run["reward"], color=color, alpha=0.3, lw=1)
        smooth = run["reward"].rolling(window, min_periods=1).mean()
        reward_ax.plot(run["step"], smooth, color=color, lw=2, label=f"{label} ({window}-step mean)")
        zero_ax.plot(run["step"], run["zero_advantage_fraction"], color=color, lw=1.5, marker=".")
        if "difficulty" in run:
            changed = run[run["difficulty"] != run["difficulty"].shift()].iloc[1:]
            for change in changed.itertuples(index=False):
                reward_ax.axvline(change.step, color=color, ls="--", lw=1)
                reward_ax.annotate(
                    f"→ {change.difficulty}", (change.step, 1.02), fontsize=8, color=color, ha="left"
                )
    reward_ax.set_ylabel("reward (batch mean)")
    reward_ax.set_ylim(-1.05, 1.15)
    reward_ax.set_title(title, fontsize=10)
    reward_ax.legend(fontsize=7, loc="lower right")
    zero_ax.set_ylabel("zero-advantage\nshare of groups")
    zero_ax.set_ylim(-0.05, 1.05)
    zero_ax.set_xlabel("GRPO step")
    if paper is not None:
        start, end, stop_step = paper
        paper_ax = axes[0][1]
        paper_ax.plot([1, stop_step], [start, end], color="0.4", ls=":", marker="o")
        paper_ax.annotate(f"{start:.2f}", (1, start), textcoords="offset points", xytext=(4, -12), fontsize=8)
        paper_ax.annotate(
            f"{end:.2f}, auto-stop at step {stop_step}",
            (stop_step, end),
            textcoords="offset points",
            xytext=(-150, 6),
            fontsize=8,
        )
        paper_ax.set_ylim(-1.05, 1.15)
        paper_ax.set_title("paper (Figure 4a): reported start and end only", fontsize=10)
        paper_ax.set_ylabel("reward")
        axes[1][1].axis("off")
        axes[1][1].text(
            0.0,
            0.5,
            "Qwen2.5-3B-Instruct, 32 trajectories per step,\nprocedural 6-8 session episodes",
            fontsize=8,
            va="center",
        )
    figure.tight_layout()
    return figure


def _draw_seed_means(ax: Any, by_step: pd.DataFrame, colors: dict[tuple[str, str], Any]) -> None:
    """Each arm trained on several seeds: its mean accuracy by step as a line, with its band."""
    for (curriculum, reward_type), group in by_step.groupby(["curriculum", "reward_type"], sort=False):
        if group["seeds"].max() < 2:
            continue
        group = group.sort_values("step")
        ax.plot(
            group["step"],
            group["mean_accuracy"],
            color=colors.get((curriculum, reward_type), "black"),
            lw=2.5,
            label=f"{curriculum}, {reward_type} reward, mean of {int(group['seeds'].max())} seeds",
        )
        ax.fill_between(
            group["step"],
            group["ci_low"],
            group["ci_high"],
            color=colors.get((curriculum, reward_type), "black"),
            alpha=0.15,
        )


def transfer_figure(
    checkpoints: pd.DataFrame,
    by_step: pd.DataFrame,
    *,
    title: str,
    paper: list[dict] | None = None,
    paper_title: str = "paper",
) -> Figure:
    """Figure 4b: held-out accuracy by training step, per run (Wilson 95%) and the mean over seeds.

    The base model is drawn at step 0 for every run; one colour per (curriculum, reward_type) arm.
    With several seeds the mean line carries a band from resampling questions
    (`studies.transfer.seed_aggregate`).
    """
    sns.set_theme(style="whitegrid")
    columns = 2 if paper is not None else 1
    figure, axes = plt.subplots(1, columns, figsize=(5.8 * columns, 4.2), squeeze=False)
    ax = axes[0][0]
    base = checkpoints[checkpoints["run"] == "base"].iloc[0]
    trained = checkpoints[checkpoints["run"] != "base"]
    colors = _arm_colors(trained)
    offsets = {arm: 0.08 * (index - (len(colors) - 1) / 2) for index, arm in enumerate(colors)}
    span = max(1, int(trained["step"].max()) if len(trained) else 1)
    for _, run in trained.groupby("run_group", sort=False):
        run = run.sort_values("step")
        curriculum, reward_type, seed = run.iloc[0][["curriculum", "reward_type", "seed"]]
        arm = (curriculum, reward_type)
        steps = [0, *run["step"].tolist()]
        accuracy = [base["accuracy"], *run["accuracy"].tolist()]
        low = [base["ci_low"], *run["ci_low"].tolist()]
        high = [base["ci_high"], *run["ci_high"].tolist()]
        x = [step + offsets[arm] * span for step in steps]
        ax.errorbar(
            x,
            accuracy,
            yerr=[
                [max(0.0, a - lo) for a, lo in zip(accuracy, low, strict=True)],
                [max(0.0, hi - a) for a, hi in zip(accuracy, high, strict=True)],
            ],
            color=colors[arm],
            marker="o",
            capsize=3,
            lw=1,
            alpha=0.6,
            label=f"{curriculum}, {reward_type} reward, seed {int(seed)} (Wilson 95%)",
        )
    _draw_seed_means(ax, by_step, colors)
    ax.axhline(base["accuracy"], color="0.5", ls=":", lw=1, label="base (untrained)")
    ax.set_xlabel("GRPO step (0 = base)")
    ax.set_ylabel("held-out accuracy")
    ax.set_ylim(0, 1.05)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    if paper is not None:
        paper_ax = axes[0][1]
        steps = [row["step"] for row in paper]
        accuracy = [row["correct"] / row["n"] for row in paper]
        paper_ax.plot(steps, accuracy, color="0.4", marker="o")
        paper_ax.set_ylim(0, 1.05)
        paper_ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        paper_ax.set_xlabel("GRPO step")
        paper_ax.set_title(paper_title, fontsize=10)
    figure.tight_layout()
    return figure
