"""Chat messages the agent sees at each turn.

Kept apart from the rollout state machine so prompts can be tuned (and measured on
real models) without touching the no-re-feed logic. Every builder returns a fresh
OpenAI-style message list.
"""

from __future__ import annotations

from collections.abc import Sequence

from supersede_lib.episode import Session
from supersede_lib.models.chat import Message

NOTES_SYSTEM = (
    "You keep a short memory about the user. You cannot reread past conversations: your notes are "
    "the only thing you will have later. After each conversation, rewrite the notes. Keep facts about "
    "the user's own life: where they live and work, people, pets, things they own or plan, and numbers, "
    "prices, dates and counts they mention, even in passing. When a fact changes, write the new value "
    "and drop or shorten the old one. Leave out the assistant's advice and general questions. Reply "
    "with the notes only."
)

# One worked example, sent as an earlier chat turn (docs/prompts.md: measured better on the 1.5B
# model than the same example inside the system message, which the model echoed into its notes).
NOTES_EXAMPLE_USER = (
    "Current notes (at most 120 characters):\n"
    "- lives in Detroit; dog named Rex\n\n"
    "New conversation (2023/04/02):\n"
    "user: How do I get wine stains out of a carpet?\n"
    "assistant: Blot it, then dab with cold water and a little dish soap.\n"
    "user: We finally moved to the suburbs last week, Rex loves the yard.\n"
    "assistant: Congratulations on the move!\n\n"
    "Write the updated notes (at most 120 characters)."
)
NOTES_EXAMPLE_REPLY = "- lives in the suburbs (moved from Detroit, Apr 2023); dog named Rex"
# Words that belong to the worked example only: notes holding them copied the example
# (diagnostics.echoes_prompt_example), unless the episode itself is about them.
NOTES_EXAMPLE_MARKERS = ("Detroit", "Rex")

ANSWER_SYSTEM = (
    "Answer the user's question using only your notes. Give the most recent value when a fact "
    "changed. If the notes do not contain the information, say that you don't know. Answer briefly."
)

FULL_CONTEXT_SYSTEM = (
    "You are a helpful assistant with access to the user's past conversations. Answer the question "
    "using the most recent information. If the information is not in the history, say that you don't "
    "know. Answer briefly."
)


def render_session(session: Session) -> str:
    """A session as plain `role: content` lines."""
    return "\n".join(f"{turn.role}: {turn.content}" for turn in session.turns)


def notes_update_messages(notes: str, session: Session, notes_budget_chars: int) -> list[Message]:
    """Prompt for one memory rewrite: current notes + ONE new session, nothing older."""
    user = (
        f"Current notes (at most {notes_budget_chars} characters):\n{notes or '(empty)'}\n\n"
        f"New conversation ({session.date}):\n{render_session(session)}\n\n"
        f"Write the updated notes (at most {notes_budget_chars} characters)."
    )
    return [
        {"role": "system", "content": NOTES_SYSTEM},
        {"role": "user", "content": NOTES_EXAMPLE_USER},
        {"role": "assistant", "content": NOTES_EXAMPLE_REPLY},
        {"role": "user", "content": user},
    ]


def answer_from_notes_messages(notes: str, question: str, question_date: str) -> list[Message]:
    """Prompt for the final answer: notes and question only (raw sessions never re-fed)."""
    user = f"My notes:\n{notes or '(empty)'}\n\nCurrent date: {question_date}\nQuestion: {question}"
    return [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": user}]


def full_context_messages(sessions: Sequence[Session], question: str, question_date: str) -> list[Message]:
    """The upper-bound condition: every session in date order, then the question."""
    blocks = [
        f"### Session {index} ({session.date})\n{render_session(session)}"
        for index, session in enumerate(sessions, start=1)
    ]
    user = (
        "Conversation history:\n\n"
        + "\n\n".join(blocks)
        + f"\n\nCurrent date: {question_date}\nQuestion: {question}"
    )
    return [{"role": "system", "content": FULL_CONTEXT_SYSTEM}, {"role": "user", "content": user}]
