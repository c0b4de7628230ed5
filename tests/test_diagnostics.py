"""Failure classes from hand-built trajectories: one test per class, plus the rules' edges."""

import pandas as pd
import pytest

from supersede_lib.eval.diagnostics import (
    FAILURE_CLASSES,
    classify_failure,
    echoes_prompt_example,
    failure_breakdown,
    failure_counts,
)


def _trajectory(holds_current, holds_stale=None, verdict="wrong", **extra):
    record = {
        "episode_id": "ep",
        "model": "m",
        "condition": "bounded_memory",
        "notes_budget_chars": 300,
        "holds_current": holds_current,
        "holds_stale": holds_stale,
        "verdict": verdict,
        "judge_correct": None,
    }
    record.update(extra)
    return record


def test_correct_answer_is_correct_whatever_the_notes_held() -> None:
    assert classify_failure(_trajectory([False, False], [True, True], verdict="correct")) == "correct"


def test_never_entered_when_current_value_never_in_notes() -> None:
    assert classify_failure(_trajectory([False, False, False], [False, False, False])) == "never_entered"


def test_squeezed_out_when_value_entered_then_vanished() -> None:
    assert classify_failure(_trajectory([False, True, False], [False, False, False])) == "squeezed_out"


def test_kept_stale_when_final_notes_hold_old_value_only() -> None:
    assert classify_failure(_trajectory([False, False], [True, True])) == "kept_stale"


def test_kept_stale_takes_precedence_over_squeezed_out() -> None:
    # the new value was written once, then the notes fell back to the old one
    assert classify_failure(_trajectory([False, True, False], [True, False, True])) == "kept_stale"


def test_held_but_missed_when_final_notes_hold_current_value() -> None:
    assert classify_failure(_trajectory([False, True, True], [True, True, True])) == "held_but_missed"


def test_missing_stale_information_treated_as_no_stale_value() -> None:
    assert classify_failure(_trajectory([False, False], None)) == "never_entered"


def test_judge_verdict_used_when_asked() -> None:
    trajectory = _trajectory([True], [False], verdict="wrong", judge_correct=True)
    assert classify_failure(trajectory) == "held_but_missed"
    assert classify_failure(trajectory, use_judge=True) == "correct"


def test_judge_verdict_missing_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="'ep'.*judge_correct"):
        classify_failure(_trajectory([True], [False]), use_judge=True)


def test_full_context_and_abstention_cannot_be_classified() -> None:
    with pytest.raises(ValueError, match="holds_current"):
        classify_failure(_trajectory([], None, condition="full_context"))
    with pytest.raises(ValueError, match="holds_current"):
        classify_failure(_trajectory(None, [False]))


def test_mismatched_flag_lengths_name_the_record_and_field() -> None:
    with pytest.raises(ValueError, match="'ep'.*holds_stale"):
        classify_failure(_trajectory([False, False], [True]))


def test_missing_verdict_names_the_field() -> None:
    trajectory = _trajectory([False])
    del trajectory["verdict"]
    with pytest.raises(ValueError, match="'verdict'"):
        classify_failure(trajectory)


def test_breakdown_rows_skips_and_counts() -> None:
    trajectories = [
        _trajectory([False, True], [False, False], verdict="correct", episode_id="a"),
        _trajectory([False, True, False], [False, False, False], episode_id="b"),
        _trajectory([False, False], [True, True], episode_id="c"),
        _trajectory(None, None, episode_id="abstention"),
        _trajectory([], None, condition="full_context", episode_id="full"),
    ]
    breakdown = failure_breakdown(trajectories)
    assert list(breakdown["episode_id"]) == ["a", "b", "c"]
    assert list(breakdown["failure"]) == ["correct", "squeezed_out", "kept_stale"]
    assert breakdown.attrs["skipped"] == 2
    row_b = breakdown.set_index("episode_id").loc["b"]
    assert row_b["entered_after"] == 1 and row_b["last_held_after"] == 1
    assert pd.isna(breakdown.set_index("episode_id").loc["c", "entered_after"])

    counts = failure_counts(breakdown)
    assert list(counts.columns) == ["model", *FAILURE_CLASSES, "total", "notes_echo_prompt_example"]
    only = counts.iloc[0]
    assert (only["correct"], only["squeezed_out"], only["kept_stale"], only["never_entered"]) == (1, 1, 1, 0)
    assert only["total"] == 3


def test_notes_that_copy_the_prompt_example_are_flagged_and_counted() -> None:
    copied = _trajectory(
        [False, False],
        episode_id="copied",
        gold_answers=["Equinox"],
        superseded_values=["Crunch"],
        notes_history=["- empty", "- lives in the suburbs (moved from Detroit, Apr 2023); dog named Rex"],
    )
    own = _trajectory(
        [True, True], episode_id="own", gold_answers=["Equinox"], notes_history=["- goes to Equinox"]
    )
    # an episode about a dog called Rex may hold the name; "Rexford" is not the marker
    about_rex = _trajectory(
        [True], episode_id="rex", gold_answers=["Rex"], notes_history=["- dog Rex; Rexford St"]
    )
    assert echoes_prompt_example(copied)
    assert not echoes_prompt_example(own)
    assert not echoes_prompt_example(about_rex)
    breakdown = failure_breakdown([copied, own, about_rex])
    assert list(breakdown["echoes_example"]) == [True, False, False]
    assert failure_counts(breakdown).iloc[0]["notes_echo_prompt_example"] == 1


def test_notes_never_written_is_told_apart_from_a_fact_omitted() -> None:
    placeholders = ["(empty)", "- none", ""]
    assert (
        classify_failure(_trajectory([False] * 3, [False] * 3, notes_history=placeholders))
        == "notes_never_written"
    )
    written = ["city: Oslo", "city: Oslo", "pet: cat"]
    assert classify_failure(_trajectory([False] * 3, [False] * 3, notes_history=written)) == "never_entered"
