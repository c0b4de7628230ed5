"""Figures drawn for display in notebooks 01 and 05 (returned, not saved: the record is unchanged).

`data_figure`: the data at a glance — sessions and approximate tokens per question for each episode
set, where in a history the evidence (update) sessions fall, and one episode's timeline.
`validation_figure`: notebook 05 at a glance — ours and the paper's in separate panels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from supersede_lib.agent.episode import Episode
from supersede_lib.present.plots import Figure, PercentFormatter, _palette, plt, sns

EVIDENCE_COLOR = "#1565c0"
OTHER_COLOR = "#bdbdbd"


def update_positions(episodes: Sequence[Episode]) -> list[float]:
    """Where each evidence session sits in its history: 0 = the first session, 1 = the last."""
    positions = []
    for episode in episodes:
        last = max(len(episode.sessions) - 1, 1)
        positions += [index / last for index, session in enumerate(episode.sessions) if session.is_evidence]
    return positions


def _histograms(axes, statistics: Mapping[str, pd.DataFrame]) -> None:
    colors = _palette(len(statistics))
    for color, (label, frame) in zip(colors, statistics.items(), strict=True):
        axes[0].hist(
            frame["n_sessions"],
            bins=range(0, int(frame["n_sessions"].max()) + 2),
            alpha=0.6,
            color=color,
            label=label,
        )
        axes[1].hist(frame["approx_tokens"], bins=15, alpha=0.6, color=color, label=label)
    axes[0].set(title="Sessions per question", xlabel="sessions", ylabel="questions")
    axes[1].set(
        title="History length per question", xlabel="approx. tokens (characters / 4)", ylabel="questions"
    )
    axes[0].legend(fontsize=7)


def _timeline(axis, episode: Episode) -> None:
    """One bar per session, as long as its text, evidence sessions coloured and numbered from 1."""
    starts, position = [], 0
    for session in episode.sessions:
        starts.append(position)
        position += session.char_count // 4 + 1
    for number, (session, start) in enumerate(zip(episode.sessions, starts, strict=True), start=1):
        color = EVIDENCE_COLOR if session.is_evidence else OTHER_COLOR
        axis.barh(0, session.char_count // 4 + 1, left=start, color=color, edgecolor="white")
        axis.text(
            start + 2,
            0,
            str(number),
            va="center",
            fontsize=7,
            color="white" if session.is_evidence else "black",
        )
    gold = " | ".join(episode.gold_answers)[:40]
    stale = " | ".join(episode.superseded_values)[:40]
    axis.set(yticks=[], xlabel="approx. tokens into the history (session numbers on the bars)")
    axis.set_title(
        f"One episode ({episode.episode_id}): blue = evidence sessions. Current: {gold}"
        + (f"; superseded: {stale}" if stale else ""),
        fontsize=9,
    )


def data_figure(statistics: Mapping[str, pd.DataFrame], episodes: Sequence[Episode]) -> Figure:
    """Notebook 01's figure: the sets' sizes, where updates fall, and one episode's timeline."""
    sns.set_theme(style="whitegrid")
    figure = plt.figure(figsize=(13, 6.2))
    grid = figure.add_gridspec(2, 3, height_ratios=[3, 1.2])
    top = [figure.add_subplot(grid[0, column]) for column in range(3)]
    _histograms(top[:2], statistics)
    top[2].hist(update_positions(episodes), bins=10, range=(0, 1), color=EVIDENCE_COLOR)
    top[2].set(
        title="Where the evidence sessions fall",
        xlabel="position in the history (0 = first session, 1 = last)",
        ylabel="evidence sessions",
    )
    if episodes:
        _timeline(figure.add_subplot(grid[1, :]), episodes[0])
    figure.tight_layout()
    return figure


def validation_figure(
    ours: Mapping[str, float], paper: Mapping[str, float], *, ours_title: str, paper_title: str
) -> Figure:
    """Notebook 05's figure: the same measures, ours and the paper's in separate panels."""
    sns.set_theme(style="whitegrid")
    figure, axes = plt.subplots(1, 2, figsize=(12, 3.6))
    for axis, values, title in ((axes[0], ours, ours_title), (axes[1], paper, paper_title)):
        names = list(values)
        bars = axis.barh(names, [values[name] for name in names], color=_palette(len(names)))
        axis.bar_label(bars, labels=[f"{100 * values[name]:.1f}%" for name in names], fontsize=8, padding=2)
        axis.set_xlim(0, 1.12)
        axis.xaxis.set_major_formatter(PercentFormatter(1.0))
        axis.set_title(title, fontsize=10)
    for axis in axes:
        axis.invert_yaxis()
    figure.tight_layout()
    return figure
