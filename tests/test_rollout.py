"""The rollout core: what the model sees at each turn, and the notes cap."""

import pytest
from conftest import make_episode

from supersede_lib.agent.episode import Episode
from supersede_lib.agent.prompts import DEFAULT_PROMPT_VARIANT, PROMPT_VARIANTS, is_notes_request
from supersede_lib.agent.rollout import (
    BoundedMemoryRollout,
    FullContextRollout,
    make_rollout,
)
from supersede_lib.agent.settings import RolloutSettings


def _all_text(messages: list[dict[str, str]]) -> str:
    return "\n".join(message["content"] for message in messages)


def test_bounded_memory_shows_each_session_once_and_never_again() -> None:
    episode = make_episode("ep-1", 3)
    rollout = BoundedMemoryRollout(episode, notes_budget_chars=300)
    prompts_seen = []
    while not rollout.done:
        messages = rollout.current_messages()
        prompts_seen.append((rollout.current_kind, _all_text(messages)))
        rollout.step(f"notes after turn {len(prompts_seen)}")

    kinds = [kind for kind, _ in prompts_seen]
    assert kinds == ["notes", "notes", "notes", "answer"]
    for turn_index, (kind, text) in enumerate(prompts_seen):
        for session_index in range(3):
            shown = f"SESSION-{session_index}-TEXT" in text
            assert shown == (kind == "notes" and session_index == turn_index)
    # the answer prompt carries the notes and the question, not the sessions
    assert "notes after turn 3" in prompts_seen[-1][1]
    assert episode.question in prompts_seen[-1][1]


def test_notes_turn_carries_previous_notes() -> None:
    rollout = BoundedMemoryRollout(make_episode("ep-1", 2), notes_budget_chars=300)
    rollout.step("lives in city0")
    assert "lives in city0" in _all_text(rollout.current_messages())
    assert rollout.notes_history == ["lives in city0"]


def test_notes_are_hard_capped_and_truncations_counted() -> None:
    rollout = BoundedMemoryRollout(make_episode("ep-1", 2), notes_budget_chars=10)
    rollout.step("x" * 25)
    rollout.step("short")
    assert rollout.notes_history == ["x" * 10, "short"]
    assert rollout.turns[0].truncated_chars == 15
    assert rollout.truncation_count == 1
    assert "x" * 11 not in _all_text(rollout.current_messages())


def test_answer_ends_rollout_and_further_steps_fail() -> None:
    rollout = BoundedMemoryRollout(make_episode("ep-1", 1), notes_budget_chars=50)
    rollout.step("notes")
    rollout.step("  city0  ")
    assert rollout.done and rollout.answer == "city0"
    with pytest.raises(RuntimeError, match="ep-1"):
        rollout.step("again")


def test_full_context_single_turn_has_every_session_in_order() -> None:
    rollout = FullContextRollout(make_episode("ep-1", 3))
    text = _all_text(rollout.current_messages())
    positions = [text.index(f"SESSION-{index}-TEXT") for index in range(3)]
    assert positions == sorted(positions)
    rollout.step("city2")
    assert rollout.done and rollout.answer == "city2"


def test_budget_modes() -> None:
    episode = make_episode("ep-1", 4)
    assert RolloutSettings(notes_budget_chars=300).budget_for(episode) == 300
    assert RolloutSettings(notes_budget_chars=300, chars_per_session=150).budget_for(episode) == 600
    assert make_rollout(episode, "bounded_memory", chars_per_session=150).notes_budget_chars == 600
    settings = RolloutSettings(notes_budget_chars=120, prompt_variant="v9_line_edits")
    built = make_rollout(episode, "bounded_memory", settings=settings)
    assert (built.notes_budget_chars, built.prompt_variant) == (120, "v9_line_edits")
    assert (
        make_rollout(episode, "bounded_memory", settings=settings, notes_budget_chars=90).notes_budget_chars
        == 90
    )
    with pytest.raises(ValueError, match="notes_budget_chars"):
        RolloutSettings(notes_budget_chars=None).budget_for(episode)
    with pytest.raises(TypeError):
        make_rollout(episode, "bounded_memory", 300)  # the budget is named, never positional
    with pytest.raises(ValueError, match="unknown condition"):
        make_rollout(episode, "no_memory")


def test_episode_round_trips_through_dict() -> None:
    episode = make_episode("ep-1", 2)
    assert Episode.from_dict(episode.to_dict()) == episode


def test_every_prompt_variant_keeps_the_no_re_feed_contract() -> None:
    for variant in PROMPT_VARIANTS:
        rollout = make_rollout(
            make_episode("ep-1", 2), "bounded_memory", notes_budget_chars=300, prompt_variant=variant
        )
        first = _all_text(rollout.current_messages())
        assert "SESSION-0-TEXT" in first and "SESSION-1-TEXT" not in first
        rollout.step("note: NOTES-ONE")  # a line every notes_update kind keeps
        second = _all_text(rollout.current_messages())
        assert "NOTES-ONE" in second and "SESSION-0-TEXT" not in second
        rollout.step("note: NOTES-TWO")
        answer = _all_text(rollout.current_messages())
        assert "NOTES-TWO" in answer and "Which city do I live in now?" in answer
        assert "SESSION-" not in answer
        full = make_rollout(make_episode("ep-1", 2), "full_context", prompt_variant=variant)
        assert "SESSION-1-TEXT" in _all_text(full.current_messages())


def test_unknown_prompt_variant_lists_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="v1_worked_example"):
        make_rollout(make_episode("ep-1", 2), "bounded_memory", prompt_variant="no-such-prompt")
    with pytest.raises(ValueError, match="unknown prompt variant"):
        FullContextRollout(make_episode("ep-1", 2), prompt_variant="no-such-prompt")


def test_default_variant_sends_its_own_texts() -> None:
    rollout = make_rollout(make_episode("ep-1", 1), "bounded_memory", notes_budget_chars=300)
    prompt_set = PROMPT_VARIANTS[DEFAULT_PROMPT_VARIANT]
    messages = rollout.current_messages()
    assert messages[0]["content"] == prompt_set.notes_system
    assert len(messages) == 2 + 2 * len(prompt_set.notes_examples)
    assert is_notes_request(messages)
    rollout.step("")
    assert not is_notes_request(rollout.current_messages())
    assert prompt_set.empty_notes in rollout.current_messages()[-1]["content"]


def test_v1_variant_sends_the_worked_example_before_the_request() -> None:
    messages = make_rollout(
        make_episode("ep-1", 1), "bounded_memory", notes_budget_chars=300, prompt_variant="v1_worked_example"
    ).current_messages()
    assert [message["role"] for message in messages] == ["system", "user", "assistant", "user"]
    assert "Detroit" in messages[2]["content"]
    assert messages[3]["content"].startswith("Current notes (at most 300 characters):\n(empty)\n\n")
