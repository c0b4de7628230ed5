"""Line-edit notes: the reply names changed lines; the code applies them, newest first, within the budget."""

from conftest import make_episode
from hypothesis import given, settings
from hypothesis import strategies as st

from supersede_lib.agent.notes_edits import apply_line_edits, parse_edit_lines
from supersede_lib.agent.prompts import is_empty_notes
from supersede_lib.agent.rollout import make_rollout
from tests.test_rollout import _all_text


def test_first_write_keeps_fact_lines_and_skips_prose_and_bullets() -> None:
    reply = "Here are the facts:\n- mile PR: 9:38\n* `trip`: driving through Minneapolis\n1. cat: Tofu"
    notes, cut = apply_line_edits("", reply, 300)
    assert notes == "mile PR: 9:38\ntrip: driving through Minneapolis\ncat: Tofu"
    assert cut == 0


def test_a_new_value_replaces_the_line_with_the_same_subject_and_moves_it_first() -> None:
    notes = "cat: Tofu\nmile PR: 9:38\ncity: Austin"
    updated, _ = apply_line_edits(notes, "Mile PR: 9:33", 300)
    assert updated == "Mile PR: 9:33\ncat: Tofu\ncity: Austin"
    assert "9:38" not in updated


def test_copying_the_notes_back_or_saying_none_changes_nothing() -> None:
    notes = "mile PR: 9:33\ncat: Tofu"
    assert apply_line_edits(notes, "Memory file now:\nmile PR: 9:33\ncat: Tofu", 300) == (notes, 0)
    assert apply_line_edits(notes, "NONE", 300) == (notes, 0)
    assert apply_line_edits(notes, "No new facts.", 300) == (notes, 0)
    assert apply_line_edits("", "NONE", 300) == ("", 0)


def test_past_the_budget_the_least_recently_changed_lines_go_first() -> None:
    notes = "old fact: " + "a" * 40 + "\nmiddle fact: " + "b" * 40
    updated, cut = apply_line_edits(notes, "new fact: " + "c" * 40, 110)
    assert updated.splitlines() == ["new fact: " + "c" * 40, "old fact: " + "a" * 40]
    assert cut == len("\nmiddle fact: " + "b" * 40)


def test_a_single_line_longer_than_the_budget_keeps_its_head() -> None:
    updated, cut = apply_line_edits("", "story: " + "x" * 200, 50)
    assert updated == ("story: " + "x" * 200)[:50]
    assert cut == 157


@settings(max_examples=200, deadline=None)
@given(
    notes=st.text(max_size=400),
    reply=st.text(max_size=400),
    budget=st.integers(64, 300),  # room for a whole subject (<= 60 chars) and a colon: B is 100+ in use
    line_cap=st.one_of(st.none(), st.integers(10, 100)),
)
def test_edited_notes_never_exceed_the_budget_and_are_stable_under_reapplying(
    notes: str, reply: str, budget: int, line_cap: int | None
) -> None:
    notes, _ = apply_line_edits("", notes, budget, line_cap)  # notes as this memory writes them
    updated, cut = apply_line_edits(notes, reply, budget, line_cap)
    assert len(updated) <= budget
    assert cut >= 0
    again, _ = apply_line_edits(updated, updated, budget, line_cap)  # sending the notes back is a no-op
    assert again == updated


def test_a_line_cap_keeps_one_long_reply_from_evicting_the_whole_memory() -> None:
    notes = "grocery budget: $425\ncar: Nissan Leaf"
    reply = "race condition: " + "a situation where " * 15 + "\ninterview answer: " + "x" * 150
    assert apply_line_edits(notes, reply, 300)[0].count("\n") == 0  # uncapped: one line left
    capped, _ = apply_line_edits(notes, reply, 300, max_line_chars=60)
    assert capped.splitlines()[-2:] == ["grocery budget: $425", "car: Nissan Leaf"]
    assert all(len(line) <= 60 for line in capped.splitlines())


def test_parse_ignores_lines_without_a_value() -> None:
    assert parse_edit_lines("Facts:\nname:\nplain prose line\npet: Rex") == [("pet", "Rex")]


def test_line_edit_rollout_applies_edits_and_shows_only_user_turns() -> None:
    episode = make_episode("ep-1", 3)
    rollout = make_rollout(episode, "bounded_memory", notes_budget_chars=300, prompt_variant="v9_line_edits")
    first = _all_text(rollout.current_messages())
    assert "You have no memory file yet" in first
    assert "SESSION-0-TEXT" in first and "ASSISTANT-0 noted" not in first
    for reply in ("city: city0\npet: Rex", "NONE", "City: city2"):
        rollout.step(reply)
    assert rollout.notes_history == [
        "city: city0\npet: Rex",
        "city: city0\npet: Rex",
        "City: city2\npet: Rex",
    ]
    answer_prompt = _all_text(rollout.current_messages())
    assert "City: city2\npet: Rex" in answer_prompt
    assert not is_empty_notes(rollout.notes)
    rollout.step("city2")
    assert rollout.answer == "city2"


def test_a_literal_placeholder_subject_is_unwrapped() -> None:
    assert parse_edit_lines("subject: city: Austin\ntopic: pet: Rex") == [("city", "Austin"), ("pet", "Rex")]
    assert parse_edit_lines("topic: gardening") == [("topic", "gardening")]


def test_from_v12_a_time_value_survives_the_line_parser() -> None:
    """Issue 26: "52:15" split at its colon became "52: 15". v12 keeps times whole; v10's parse stays
    what its recorded runs replay with."""
    assert parse_edit_lines("10K best: 52:15", keep_times=True) == [("10K best", "52:15")]
    assert parse_edit_lines("52:15", keep_times=True) == []  # a bare time is no line
    assert parse_edit_lines("52:15") == [("52", "15")]  # the older agents' parse, unchanged
    assert parse_edit_lines("meeting 10:30: Tuesday", keep_times=True) == [("meeting 10:30", "Tuesday")]
    notes, _ = apply_line_edits("10K best: 49:20", "10K best: 52:15", 300, keep_times=True)
    assert notes == "10K best: 52:15"
