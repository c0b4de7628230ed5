"""Memory metrics of a bounded-memory trajectory: writes, updates, placeholders, echoes, holdings."""

import pytest

from supersede_lib.agent.episode import Episode, Session, Turn
from supersede_lib.agent.prompts import is_empty_notes
from supersede_lib.agent.rollout import make_rollout
from supersede_lib.eval.memory_metrics import (
    MemoryMetrics,
    aggregate_memory_metrics,
    echoes_example,
    trajectory_memory_metrics,
)


def _episode(gold=("Denver",), stale=("Austin",), is_abstention=False) -> Episode:
    session = Session("s0", "2023/05/01", (Turn("user", "I moved."), Turn("assistant", "Nice.")))
    return Episode(
        episode_id="ep",
        sessions=(session, session, session),
        question="Where do I live?",
        question_date="2023/06/01",
        gold_answers=gold,
        superseded_values=stale,
        is_abstention=is_abstention,
    )


@pytest.mark.parametrize(
    "notes",
    [
        "",
        "  ",
        "(empty)",
        "- empty",
        "Empty.",
        "None",
        "- none\n- n/a",
        "(nothing recorded yet)",
        "No notes yet.",
    ],
)
def test_placeholders_count_as_empty(notes: str) -> None:
    assert is_empty_notes(notes)


@pytest.mark.parametrize(
    "notes", ["- lives in Denver", "empty nest since May", "city: none of the above, Denver"]
)
def test_real_notes_are_not_empty(notes: str) -> None:
    assert not is_empty_notes(notes)


def test_changed_empty_and_holdings() -> None:
    history = ["(empty)", "city: Austin", "city: Austin", "city: Denver (was Austin)"]
    metrics = trajectory_memory_metrics(history, _episode(), truncated_rewrites=1)
    # "" -> "(empty)" is no change; Austin is written; copied unchanged; updated
    assert (metrics.n_rewrites, metrics.n_changed, metrics.n_empty_states, metrics.n_truncated) == (
        4,
        2,
        1,
        1,
    )
    assert metrics.holds_current is True and metrics.holds_stale is True
    assert metrics.changed_share == 0.5 and metrics.empty_share == 0.25 and metrics.truncation_share == 0.25
    assert not metrics.echoes_example


def test_whitespace_only_differences_are_not_changes() -> None:
    metrics = trajectory_memory_metrics(["city: Austin", "city:  Austin\n"], _episode())
    assert metrics.n_changed == 1
    assert metrics.holds_current is False and metrics.holds_stale is True


def test_holdings_are_none_when_not_measurable() -> None:
    metrics = trajectory_memory_metrics(
        ["x"], _episode(gold=("The information is not available.",), stale=(), is_abstention=True)
    )
    assert metrics.holds_current is None and metrics.holds_stale is None


def test_example_echo_ignores_markers_the_episode_is_about() -> None:
    assert echoes_example(["- lives in Detroit; dog named Rex"], ["Denver"])
    assert echoes_example(["Violin teacher: Mr. Lindqvist"], ["Denver"])
    assert not echoes_example(["dog named Rex"], ["Rex", "Max"])
    assert not echoes_example(["Rexford street"], ["Denver"])  # whole words only


def test_metrics_from_a_real_rollout() -> None:
    rollout = make_rollout(_episode(), "bounded_memory", notes_budget_chars=12)
    for reply in ("city: Austin", "city: Austin", "city: Denver, long text"):
        rollout.step(reply)
    metrics = trajectory_memory_metrics(
        rollout.notes_history, rollout.episode, truncated_rewrites=rollout.truncation_count
    )
    assert metrics.n_truncated == 1 and metrics.holds_current and not metrics.holds_stale


def test_aggregate_pools_rewrites_and_shares_trajectories() -> None:
    first = MemoryMetrics(4, 2, 1, 0, echoes_example=True, holds_current=True, holds_stale=False)
    second = MemoryMetrics(6, 0, 6, 3, echoes_example=False, holds_current=False, holds_stale=None)
    row = aggregate_memory_metrics([first, second.as_dict()])
    assert row["n_trajectories"] == 2 and row["n_rewrites"] == 10
    assert row["changed_share"] == 0.2 and row["empty_share"] == 0.7 and row["truncation_share"] == 0.3
    assert row["echo_share"] == 0.5 and row["holds_current_share"] == 0.5 and row["holds_stale_share"] == 0.0
    assert aggregate_memory_metrics([])["changed_share"] is None


def test_keyed_holding_needs_a_line_that_names_the_asked_thing() -> None:
    """Issue 26: "emergency fund: $825" is no grocery budget held; both metrics are reported apart."""
    from supersede_lib.agent.episode import Episode
    from supersede_lib.eval.memory_metrics import notes_hold_current_keyed, trajectory_memory_metrics

    episode = Episode(
        episode_id="k",
        sessions=(),
        question="How much is my monthly grocery budget at the moment?",
        question_date="",
        gold_answers=("$825",),
        superseded_values=("$725",),
    )
    assert notes_hold_current_keyed("grocery budget: $825", episode) is True
    assert notes_hold_current_keyed("emergency fund: $825\ngrocery budget: $725", episode) is False
    metrics = trajectory_memory_metrics(["emergency fund: $825"], episode)
    assert metrics.holds_current is True and metrics.holds_current_keyed is False


def test_a_line_keyed_to_another_thing_of_the_episode_holds_nothing() -> None:
    """The keyed-line rule: "laptop: Planet Fitness" gives the value to a laptop the user also talked
    about; the copied example key "violin teacher:" names nothing of the conversation and is read by
    its value, with the literal reading (`holds_current_keyed`) beside it."""
    from supersede_lib.agent.episode import Episode, Session, Turn
    from supersede_lib.eval.memory_metrics import notes_holdings, trajectory_memory_metrics

    episode = Episode(
        episode_id="keyed",
        sessions=(
            Session(
                "s1", "2023/05/01 (Mon) 10:00", (Turn("user", "I left Gold's Gym for Planet Fitness.", True),)
            ),
            Session(
                "s2",
                "2023/05/08 (Mon) 10:00",
                (Turn("user", "My new laptop arrived today, so fast.", False),),
            ),
        ),
        question="Which gym do I go to now?",
        question_date="2023/05/09 (Tue) 10:00",
        gold_answers=("Planet Fitness",),
        superseded_values=("Gold's Gym",),
    )
    readings = {
        "laptop: Planet Fitness": (False, False),
        "- laptop: Planet Fitness\n- gym: Gold's Gym": (False, False),
        "violin teacher: Planet Fitness": (True, False),
        "gym: Planet Fitness": (True, True),
        "Planet Fitness": (True, True),
    }
    for notes, (by_value, literal) in readings.items():
        metrics = trajectory_memory_metrics([notes], episode)
        assert (metrics.holds_current, metrics.holds_current_keyed) == (by_value, literal), notes
    assert notes_holdings(["- laptop: Gold's Gym\n- gym: Planet Fitness"], episode) == ([True], [False])
