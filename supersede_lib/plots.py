"""Figures for the study notebooks (paper Figures 2 and 3, failure breakdowns).

Every function takes a tidy DataFrame, returns a matplotlib `Figure`, and never mixes the
paper's numbers with ours: when both are drawn they get separate, labelled panels.
Headless processes (tests, papermill without a display) get the Agg backend.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import matplotlib

if "ipykernel" not in sys.modules and not os.environ.get("DISPLAY"):
    matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import PercentFormatter  # noqa: E402

CONDITION_LABELS = {"full_context": "full context", "bounded_memory": "bounded memory"}
FAILURE_COLORS = {
    "correct": "#4c9a5b",
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
    from supersede_lib.diagnostics import FAILURE_CLASSES

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


def save_figure(figure: Figure, path: str | os.PathLike) -> Path:
    """Write a PNG (150 dpi) and close the figure so long sessions do not pile them up."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(figure)
    return path
