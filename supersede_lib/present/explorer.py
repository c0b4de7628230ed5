"""An ipywidgets explorer: step through an episode's sessions and the notes the agent kept.

`episode_explorer(episodes, trajectories)` shows one episode at a time: a dropdown picks the
episode, a slider picks the step (session 1..n, then n + 1: the answer with the final notes); a
strip numbers the sessions and marks the evidence ones. A collapsed static walk-through of the
first episode follows it, for copies without a live kernel (executed notebooks, their HTML). Each session is shown as the
agent saw it; when a bounded-memory run exists (notebook 02's trajectories JSONL), the notes the
agent held after that session are shown beside it, flagged when they still conveyed the current
value or a stale one. The HTML is built by `episode_step_html`, which tests call directly.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from supersede_lib.agent.episode import Episode

Trajectory = Mapping[str, Any]


def index_trajectories(
    trajectories: Iterable[Trajectory] | Mapping[str, Trajectory] | str | Path | None,
) -> dict[str, Trajectory]:
    """Trajectories by episode id, from a list, a dict, or a `.trajectories.jsonl` path."""
    if trajectories is None:
        return {}
    if isinstance(trajectories, str | Path):
        with Path(trajectories).open(encoding="utf-8") as handle:
            trajectories = [json.loads(line) for line in handle if line.strip()]
    if isinstance(trajectories, Mapping):
        return {str(key): value for key, value in trajectories.items()}
    indexed = {}
    for position, trajectory in enumerate(trajectories):
        if "episode_id" not in trajectory:
            raise ValueError(f"trajectories[{position}]: missing field 'episode_id'")
        indexed[str(trajectory["episode_id"])] = trajectory
    return indexed


def _flag(values: Sequence[bool] | None, index: int) -> bool | None:
    if not values or index >= len(values):
        return None
    return bool(values[index])


def _notes_block(trajectory: Trajectory | None, session_index: int) -> str:
    if trajectory is None:
        return "<p><i>No run yet: run notebook 02 to see the notes the agent kept.</i></p>"
    history = trajectory.get("notes_history") or []
    if session_index >= len(history):
        return "<p><i>This trajectory has no notes for this session.</i></p>"
    notes = history[session_index]
    flags = []
    if _flag(trajectory.get("holds_current"), session_index):
        flags.append("<span style='color:#2e7d32'>holds the current value</span>")
    if _flag(trajectory.get("holds_stale"), session_index):
        flags.append("<span style='color:#c62828'>holds a stale value</span>")
    budget = trajectory.get("notes_budget_chars")
    header = f"Notes after this session ({len(notes)}" + (f"/{budget}" if budget else "") + " chars)"
    return (
        f"<p><b>{html.escape(header)}</b> {' · '.join(flags)}</p>"
        f"<pre style='white-space:pre-wrap;background:#f6f6f6;padding:6px'>{html.escape(notes) or '(empty)'}</pre>"
    )


def _session_strip(episode: Episode, step: int) -> str:
    """Every session as a numbered chip: evidence sessions blue (with *), the one shown outlined."""
    chips = []
    for number, session in enumerate(episode.sessions, start=1):
        background = "#1565c0;color:white" if session.is_evidence else "#e0e0e0"
        outline = "outline:2px solid #000;" if number == step else ""
        mark = "*" if session.is_evidence else ""
        chips.append(
            f"<span style='{outline}background:{background};padding:1px 6px;margin-right:3px;"
            f"border-radius:3px'>{number}{mark}</span>"
        )
    return (
        f"<p style='margin:4px 0'>Sessions: {''.join(chips)} "
        "<small>(<span style='color:#1565c0'>blue *</span> = evidence: the fact or its update)</small></p>"
    )


def _answer_block(trajectory: Trajectory | None) -> str:
    """The last step: the notes the agent answered from, its answer and the verdict."""
    if trajectory is None:
        return "<p><i>No run yet.</i></p>"
    history = trajectory.get("notes_history") or []
    final = history[-1] if history else ""
    return (
        "<p><b>Final notes</b> (all the agent had when it answered)</p>"
        f"<pre style='white-space:pre-wrap;background:#f6f6f6;padding:6px'>{html.escape(final) or '(empty)'}</pre>"
        f"<p><b>Agent's answer</b>: {html.escape(str(trajectory.get('answer', '')))}<br>"
        f"<b>Verdict</b>: {html.escape(str(trajectory.get('verdict', '?')))}</p>"
    )


def episode_step_html(episode: Episode, step: int, trajectory: Trajectory | None = None) -> str:
    """HTML for one step, counted from 1: step k <= n shows session k (+ the notes after it); step
    n + 1 shows the question's answer with the final notes."""
    n_sessions = len(episode.sessions)
    if not 1 <= step <= n_sessions + 1:
        raise ValueError(f"episode {episode.episode_id!r}: step must be 1..{n_sessions + 1}, got {step}")
    parts = [
        f"<h4>{html.escape(episode.episode_id)} · {html.escape(episode.source or '')}</h4>",
        f"<p><b>Question</b> ({html.escape(episode.question_date)}): {html.escape(episode.question)}<br>"
        f"<b>Gold</b>: {html.escape(' | '.join(episode.gold_answers))}"
        + (
            f"<br><b>Superseded</b>: {html.escape(' | '.join(episode.superseded_values))}"
            if episode.superseded_values
            else ""
        )
        + "</p>",
        _session_strip(episode, step),
    ]
    if step <= n_sessions:
        session = episode.sessions[step - 1]
        evidence = " · <span style='color:#1565c0'>evidence session</span>" if session.is_evidence else ""
        parts.append(f"<p><b>Session {step}/{n_sessions}</b> · {html.escape(session.date)}{evidence}</p>")
        turns = []
        for turn in session.turns:
            style = "font-weight:bold" if turn.has_answer else ""
            turns.append(
                f"<div style='{style};white-space:pre-wrap'><code>{html.escape(turn.role)}</code>: "
                f"{html.escape(turn.content)}</div>"
            )
        parts.append(
            f"<div style='max-height:320px;overflow:auto;border:1px solid #ddd;padding:6px'>{''.join(turns)}</div>"
        )
        parts.append(_notes_block(trajectory, step - 1))
    else:
        parts.append(f"<p><b>Answer step</b> (after all {n_sessions} sessions)</p>")
        parts.append(_answer_block(trajectory))
    return "\n".join(parts)


def static_walkthrough_html(episode: Episode, trajectory: Trajectory | None = None) -> str:
    """Every step of one episode, one after another: what an executed or HTML copy shows."""
    steps = range(1, len(episode.sessions) + 2)
    return (
        "<div><p><i>Static view (every step of the first episode): the interactive explorer needs a "
        "live kernel.</i></p>"
        + "<hr>".join(episode_step_html(episode, step, trajectory) for step in steps)
        + "</div>"
    )


class ExplorerView:
    """The explorer widget, then the same episode as static HTML in a collapsed section: a live kernel
    draws the widget; an executed copy or its nbconvert HTML holds no widget state (the widget is
    empty there), so the static walk-through is what they show."""

    def __init__(self, box: Any, static_html: str) -> None:
        self.box, self.static_html = box, static_html

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        display(self.box)
        display(
            HTML(
                "<details><summary>Every step of the first episode as static HTML (what an executed or "
                f"HTML copy shows in place of the widget)</summary>{self.static_html}</details>"
            )
        )


def episode_explorer(
    episodes: Sequence[Episode],
    trajectories: Iterable[Trajectory] | Mapping[str, Trajectory] | str | Path | None = None,
) -> ExplorerView:
    """An ipywidgets box (episode dropdown + step slider counted from 1 + the step's HTML), shown
    with a static walk-through of the first episode for copies without a live kernel (`.box`)."""
    import ipywidgets as widgets

    if not episodes:
        raise ValueError("episode_explorer needs at least one episode")
    by_id = {episode.episode_id: episode for episode in episodes}
    runs = index_trajectories(trajectories)
    dropdown = widgets.Dropdown(
        options=[
            (f"{episode.episode_id}: {episode.question[:60]}", episode.episode_id) for episode in episodes
        ],
        description="episode",
        layout=widgets.Layout(width="95%"),
    )
    slider = widgets.IntSlider(value=1, min=1, max=len(episodes[0].sessions) + 1, description="step")
    view = widgets.HTML()

    def render(*_: Any) -> None:
        episode = by_id[dropdown.value]
        slider.max = len(episode.sessions) + 1
        view.value = episode_step_html(episode, min(slider.value, slider.max), runs.get(episode.episode_id))

    dropdown.observe(render, names="value")
    slider.observe(render, names="value")
    render()
    first = episodes[0]
    return ExplorerView(
        widgets.VBox([dropdown, slider, view]), static_walkthrough_html(first, runs.get(first.episode_id))
    )
