"""Chat messages the agent sees at each turn, as named prompt variants.

Kept apart from the rollout state machine so prompts can be tuned (and measured on
real models) without touching the no-re-feed logic. A `PromptSet` holds every text one
variant sends (notes rewrite, answer from notes, full context); `PROMPT_VARIANTS` names
them, and docs/prompts.md records how they were measured. The paper does not publish its
prompt text, so every variant here is ours, not the paper's. Every builder returns a fresh
OpenAI-style message list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from supersede_lib.agent.episode import Session
from supersede_lib.agent.messages import Message

# --------------------------------------------------------------------------------------------
# v1: the prompt studies 02-05 were first run with (one worked example as an earlier chat turn)
# --------------------------------------------------------------------------------------------

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
# Words that belong to the worked example only: notes holding them copied the example.
NOTES_EXAMPLE_MARKERS = ("Detroit", "Rex")

NOTES_USER = (
    "Current notes (at most {budget} characters):\n{notes}\n\n"
    "New conversation ({date}):\n{session}\n\n"
    "Write the updated notes (at most {budget} characters)."
)

ANSWER_SYSTEM = (
    "Answer the user's question using only your notes. Give the most recent value when a fact "
    "changed. If the notes do not contain the information, say that you don't know. Answer briefly."
)
ANSWER_USER = "My notes:\n{notes}\n\nCurrent date: {question_date}\nQuestion: {question}"

FULL_CONTEXT_SYSTEM = (
    "You are a helpful assistant with access to the user's past conversations. Answer the question "
    "using the most recent information. If the information is not in the history, say that you don't "
    "know. Answer briefly."
)
FULL_CONTEXT_USER = (
    "Conversation history:\n\n{history}\n\nCurrent date: {question_date}\nQuestion: {question}"
)

# --------------------------------------------------------------------------------------------
# Texts the newer variants share
# --------------------------------------------------------------------------------------------

# Explicit keep / update / add / remove rules and terse one-fact lines, no worked example.
RULES_NOTES_SYSTEM = (
    "You keep a memory file about the user. You will never see this conversation again: the memory "
    "file is all you will have later.\n"
    "Rules:\n"
    "- Record only facts the user states about their own life: people and pets and their names, "
    "places, things they own, and every number, amount, time or date they give, even in passing.\n"
    "- KEEP every line that the conversation does not change.\n"
    "- UPDATE: if the user changes a fact already in the file, replace the old value on its line "
    "with the new one.\n"
    "- ADD one line for each new fact.\n"
    "- REMOVE a line only if the user says it is no longer true.\n"
    "- Ignore the assistant's advice and the user's general questions. Never invent facts.\n"
    "Write one fact per line as `topic: value`. Reply with the whole memory file and nothing else."
)
RULES_NOTES_USER = (
    "Memory file now:\n{notes}\n\n"
    "New conversation ({date}):\n{session}\n\n"
    "Rewrite the whole memory file (at most {budget} characters)."
)
RULES_EMPTY_NOTES = "(nothing recorded yet)"

# v4's measured faults fixed: the model wrote a literal "topic:" before each line and kept the
# assistant's advice, so the format is shown with real subjects and advice is excluded by name.
SUBJECT_LINES_NOTES_SYSTEM = (
    "You keep a memory file about the user. You will never see this conversation again: the memory "
    "file is all you will have later.\n"
    "Write one short line per fact as `subject: value`, for example `city: ...`, `car: ...`, "
    "`partner: ...`.\n"
    "Rules:\n"
    "- Record only what the USER says about their own life: names of people and pets, where they live "
    "or go, what they own, and every number, amount, time or date they give, even in passing.\n"
    "- Never record the assistant's advice, tips or questions.\n"
    "- KEEP every line the conversation does not change.\n"
    "- UPDATE: when the user gives a new value for a fact already in the file, replace the old value "
    "on that line.\n"
    "- Never invent facts. Reply with the memory file only."
)

# v5's measured faults: an example subject invited an invented value ("city: New York") and the
# assistant's tips still filled the file, so here no subject is named and the length is in lines.
SHORT_LINES_NOTES_SYSTEM = (
    "You keep a memory file about the user. You will never see this conversation again: the memory "
    "file is all you will have later.\n"
    "Each line is one fact the USER told you about their own life, written as `subject: value` in a "
    "few words. Keep at most 8 lines.\n"
    "Rules:\n"
    "- Record names of the user's people and pets, where they live or go, what they own, and every "
    "number, amount, time or date they give about themselves, even in passing.\n"
    "- Never record the assistant's advice or tips, and nothing the user only asks about.\n"
    "- KEEP every line the conversation does not change.\n"
    "- UPDATE: when the user gives a new value for a fact already in the file, replace the old value "
    "on that line.\n"
    "- Never invent facts. Reply with the memory file only."
)
SHORT_LINES_FIRST_WRITE_NOTES_USER = (
    "New conversation ({date}):\n{session}\n\n"
    "You have no memory file yet. Start it now: one short `subject: value` line for each fact the "
    "user states about their own life in this conversation."
)
SHORT_LINES_NOTES_USER = (
    "New conversation ({date}):\n{session}\n\n"
    "Your memory file so far:\n{notes}\n\n"
    "Rewrite the whole memory file: keep its lines, replace any value the user changed in this "
    "conversation, add new facts about the user. At most 8 short lines."
)

# v4-v7 all froze once the notes filled the cap: the model copied the full notes and appended
# new facts at the END, where the cap cut them off. Newest-first puts the cut on the oldest lines.
NEWEST_FIRST_NOTES_SYSTEM = (
    "You keep a memory file about the user. You will never see this conversation again: the memory "
    "file is all you will have later. Its length is limited and the end is cut off, so the NEWEST "
    "facts go first.\n"
    "Each line is one fact the user told you about their own life, as `subject: value` in a few "
    "words: names of people and pets, places, things they own, and numbers, amounts, times and dates.\n"
    "When you rewrite the file:\n"
    "1. First write one line for each fact the user gave in this conversation (a new value replaces "
    "the old one).\n"
    "2. Then copy the older lines that are still true; drop a line whose value was replaced.\n"
    "Never record questions, advice or tips. Never invent facts. Reply with the memory file only."
)
NEWEST_FIRST_NOTES_USER = (
    "New conversation ({date}):\n{session}\n\n"
    "Your memory file so far (newest first):\n{notes}\n\n"
    "Rewrite the memory file (at most {budget} characters): first the facts the user gave in this "
    "conversation, then the older lines that are still true."
)
NEWEST_FIRST_ANSWER_SYSTEM = (
    "Answer the user's question using only your memory file. Its newest facts come first: when two "
    "lines disagree, the upper one is current, unless the question asks for an earlier value. If the "
    "memory file does not contain the information, say that you don't know. Answer in one short "
    "sentence."
)

# An example from a domain the generator never uses, so a copied fact is plainly not the user's.
UNRELATED_EXAMPLE_USER = (
    "Memory file now:\n"
    "violin teacher: Ms. Okafor\n"
    "bike: blue Trek\n\n"
    "New conversation (2021/09/14):\n"
    "user: How often should I change violin strings?\n"
    "assistant: Every six to twelve months if you play most days.\n"
    "user: Ms. Okafor retired, so my lessons are with Mr. Lindqvist now. Any tips for a new teacher?\n"
    "assistant: Tell him what you want to work on first.\n\n"
    "Rewrite the whole memory file (at most 120 characters)."
)
UNRELATED_EXAMPLE_REPLY = (
    "violin teacher: Mr. Lindqvist (since 2021/09/14; before: Ms. Okafor)\nbike: blue Trek"
)
UNRELATED_EXAMPLE_MARKERS = ("Okafor", "Lindqvist", "Trek", "violin")

# Never shows a placeholder to copy: while the notes are empty the model is asked to start them,
# and the new session comes before the notes so the request to rewrite sits next to the notes.
FIRST_WRITE_NOTES_USER = (
    "New conversation ({date}):\n{session}\n\n"
    "You have no memory file yet. Start it now: one `topic: value` line for each fact the user states "
    "about their own life in this conversation (at most {budget} characters)."
)
SUBJECT_FIRST_WRITE_NOTES_USER = (
    "New conversation ({date}):\n{session}\n\n"
    "You have no memory file yet. Start it now: one `subject: value` line for each fact the user "
    "states about their own life in this conversation (at most {budget} characters)."
)
SESSION_FIRST_NOTES_USER = (
    "New conversation ({date}):\n{session}\n\n"
    "Your memory file so far:\n{notes}\n\n"
    "Rewrite the whole memory file: keep its lines, replace any value the user changed in this "
    "conversation, add new facts (at most {budget} characters)."
)

# v1-v8 all froze: whole-file rewrites copy the first version and a later fact never fits in.
# Here the model names only new or changed lines; `notes_edits.apply_line_edits` applies them.
LINE_EDITS_NOTES_SYSTEM = (
    "You keep a memory file about the user, one short line per fact, written as the thing, a colon, "
    "and its value. You will never see this conversation again: the memory file is all you will "
    "have later.\n"
    "After each conversation, reply with ONLY the lines to add or change:\n"
    "- one line for each fact the user states about their own life: names of their people and pets, "
    "where they live or go, what they own, and every number, amount, time or date they give about "
    "themselves;\n"
    "- when the user gives a new value for something already in the file, write that line again "
    "with the new value: your line replaces the old one;\n"
    "- the user's questions are not facts; never write the assistant's advice or a line the file "
    "already has.\n"
    "If the user stated no fact about their own life, reply NONE."
)
LINE_EDITS_NOTES_USER = (
    "Memory file now:\n{notes}\n\n"
    "New conversation ({date}), the user's messages:\n{session}\n\n"
    "Reply with the new or changed lines only, or NONE."
)
LINE_EDITS_FIRST_NOTES_USER = (
    "You have no memory file yet.\n\n"
    "New conversation ({date}), the user's messages:\n{session}\n\n"
    "Reply with one line for each fact the user states about their own life, or NONE."
)
# Three example turns from a domain the generator never uses: a first write that skips the
# questions, an update that rewrites one line, and a conversation with no fact at all.
LINE_EDITS_EXAMPLES = (
    (
        LINE_EDITS_FIRST_NOTES_USER.format(
            date="2021/09/14",
            session="user: How often should I change violin strings?\n"
            "user: My teacher Ms. Okafor wants 20 minutes of scales a day. Is that enough?\n"
            "user: I just bought a blue Trek bike for the commute. Any tips for riding in rain?",
        ),
        "violin teacher: Ms. Okafor\nbike: blue Trek\nscales practice: 20 minutes a day",
    ),
    (
        LINE_EDITS_NOTES_USER.format(
            notes="violin teacher: Ms. Okafor\nbike: blue Trek\nscales practice: 20 minutes a day",
            date="2021/10/02",
            session="user: What's a good way to clean rosin off strings?\n"
            "user: Ms. Okafor retired, so my lessons are with Mr. Lindqvist now.",
        ),
        "violin teacher: Mr. Lindqvist",
    ),
    (
        LINE_EDITS_NOTES_USER.format(
            notes="violin teacher: Mr. Lindqvist\nbike: blue Trek\nscales practice: 20 minutes a day",
            date="2021/10/20",
            session="user: Can you recommend a good podcast about history?\nuser: Thanks, I'll try it.",
        ),
        "NONE",
    ),
)
LINE_EDITS_EXAMPLE_MARKERS = ("Okafor", "Lindqvist", "Trek", "violin", "scales")

# v9's measured fault: notes held "PR: 30:31" and the answer to "my personal best 5K time?" was
# "I don't know", so the answer turn is told that lines name things in their own words (no
# example wording: the generator's own phrasings would tune the prompt to the evaluation data).
LINE_EDITS_ANSWER_SYSTEM = (
    "Answer the user's question using only your memory file. Its lines may name things in other "
    "words than the question: answer from the line that fits best. Its newest facts come first: when two lines disagree, the "
    "upper one is current, unless the question asks for an earlier value. Say that you don't know "
    "only if no line is about the question. Answer in one short sentence."
)

NOTES_ANSWER_SYSTEM = (
    "Answer the user's question using only your memory file. When a fact changed, give its current "
    "value unless the question asks for an earlier one. If the memory file does not contain the "
    "information, say that you don't know. Answer in one short sentence."
)
NOTES_ANSWER_USER = "Memory file:\n{notes}\n\nCurrent date: {question_date}\nQuestion: {question}"


NotesUpdate = Literal["rewrite", "line_edits"]


@dataclass(frozen=True)
class PromptSet:
    """Every text one prompt variant sends.

    Templates are `str.format` strings: `notes_user` takes {notes} {budget} {date} {session};
    `first_notes_user` (when set) replaces it while the notes are still empty, so the model is
    asked to start the notes instead of being shown a placeholder it can copy; `answer_user` takes
    {notes} {question_date} {question}; `full_context_user` takes {history} {question_date}
    {question}. `notes_examples` are (user, assistant) turns sent before the real request;
    `example_markers` are words only those examples use (notes holding them copied one);
    `notes_session_roles` are the turns of the new session a notes rewrite shows;
    `notes_update` says how a notes reply becomes the new notes: "rewrite" (the reply IS the new
    notes, cut at the budget) or "line_edits" (the reply lists changed lines, see `notes_edits`;
    `edit_line_chars` caps each new line).
    """

    name: str
    summary: str
    notes_system: str
    notes_user: str
    answer_system: str
    answer_user: str
    notes_examples: tuple[tuple[str, str], ...] = ()
    example_markers: tuple[str, ...] = ()
    empty_notes: str = "(empty)"
    first_notes_user: str | None = None
    notes_session_roles: tuple[str, ...] = ("user", "assistant")
    full_context_system: str = FULL_CONTEXT_SYSTEM
    full_context_user: str = FULL_CONTEXT_USER
    notes_update: NotesUpdate = "rewrite"
    edit_line_chars: int | None = None  # line edits only: each new line is cut to this many characters
    keep_times: bool = False  # line edits only: a colon between digits ("52:15") never splits a line
    repair_prose: bool = False  # line edits only: a reply with no line becomes lines (`repair_prose_reply`)


_V1 = PromptSet(
    name="v1_worked_example",
    summary="prose instructions + one worked example (Detroit/Rex) as an earlier chat turn",
    notes_system=NOTES_SYSTEM,
    notes_user=NOTES_USER,
    answer_system=ANSWER_SYSTEM,
    answer_user=ANSWER_USER,
    notes_examples=((NOTES_EXAMPLE_USER, NOTES_EXAMPLE_REPLY),),
    example_markers=NOTES_EXAMPLE_MARKERS,
)
_V2 = replace(
    _V1,
    name="v2_rules_kv",
    summary="keep/update/add/remove rules, `topic: value` lines, no example",
    notes_system=RULES_NOTES_SYSTEM,
    notes_user=RULES_NOTES_USER,
    answer_system=NOTES_ANSWER_SYSTEM,
    answer_user=NOTES_ANSWER_USER,
    notes_examples=(),
    example_markers=(),
    empty_notes=RULES_EMPTY_NOTES,
)
_V4 = replace(
    _V2,
    name="v4_rules_first_write",
    summary="v2's rules; no placeholder while notes are empty ('start it now'); session before notes",
    notes_user=SESSION_FIRST_NOTES_USER,
    first_notes_user=FIRST_WRITE_NOTES_USER,
)
_V6 = replace(
    _V4,
    name="v6_short_lines",
    summary="v5 without example subjects; length given as at most 8 short lines",
    notes_system=SHORT_LINES_NOTES_SYSTEM,
    notes_user=SHORT_LINES_NOTES_USER,
    first_notes_user=SHORT_LINES_FIRST_WRITE_NOTES_USER,
)
_V7 = replace(
    _V6,
    name="v7_short_lines_user_turns",
    summary="v6, but the notes turn shows only the user's messages of the session",
    notes_session_roles=("user",),
)

# Each variant is its parent with the fields that differ, so the lineage says what was changed.
PROMPT_VARIANTS: dict[str, PromptSet] = {
    variant.name: variant
    for variant in (
        _V1,
        replace(
            _V1,
            name="v1_no_example",
            summary="v1's prose instructions without the worked example",
            notes_examples=(),
            example_markers=(),
        ),
        _V2,
        replace(
            _V2,
            name="v3_rules_unrelated_example",
            summary="v2's rules + one example turn from an unrelated domain (violin teacher) showing an update",
            notes_examples=((UNRELATED_EXAMPLE_USER, UNRELATED_EXAMPLE_REPLY),),
            example_markers=UNRELATED_EXAMPLE_MARKERS,
        ),
        _V4,
        replace(
            _V4,
            name="v5_subject_lines",
            summary="v4 with `subject: value` shown by real subjects and the assistant's advice excluded by name",
            notes_system=SUBJECT_LINES_NOTES_SYSTEM,
            first_notes_user=SUBJECT_FIRST_WRITE_NOTES_USER,
        ),
        _V6,
        _V7,
        replace(
            _V7,
            name="v8_newest_first",
            summary="`subject: value` lines, newest facts first so the cap cuts the oldest; user turns only",
            notes_system=NEWEST_FIRST_NOTES_SYSTEM,
            notes_user=NEWEST_FIRST_NOTES_USER,
            answer_system=NEWEST_FIRST_ANSWER_SYSTEM,
        ),
        replace(
            _V7,
            name="v9_line_edits",
            summary="reply lists only new or changed `thing: value` lines (3 violin-domain example turns); code "
            "replaces same-thing lines, newest first, drops the oldest past the cap (an edit agent, not a rewrite)",
            notes_system=LINE_EDITS_NOTES_SYSTEM,
            notes_user=LINE_EDITS_NOTES_USER,
            first_notes_user=LINE_EDITS_FIRST_NOTES_USER,
            notes_examples=LINE_EDITS_EXAMPLES,
            example_markers=LINE_EDITS_EXAMPLE_MARKERS,
            answer_system=NEWEST_FIRST_ANSWER_SYSTEM,
            notes_update="line_edits",
        ),
    )
}
PROMPT_VARIANTS["v10_line_edits_loose_answer"] = replace(
    PROMPT_VARIANTS["v9_line_edits"],
    name="v10_line_edits_loose_answer",
    summary="v9 with an answer turn told that lines name things in their own words",
    answer_system=LINE_EDITS_ANSWER_SYSTEM,
)
# v10's measured fault (offline 02): one reply of long advice lines pushed every older line out.
PROMPT_VARIANTS["v11_line_edits_short_lines"] = replace(
    PROMPT_VARIANTS["v10_line_edits_loose_answer"],
    name="v11_line_edits_short_lines",
    summary="v10 with each new line cut to 60 characters, so one long reply cannot evict the whole memory",
    edit_line_chars=60,
)
# v10's measured fault (issue 26): a time value's colon split a line ("10K best: 52:15" read back as
# "52: 15" when the model wrote the time first). Same prompts; the parse keeps times whole.
PROMPT_VARIANTS["v12_line_edits_times_kept"] = replace(
    PROMPT_VARIANTS["v10_line_edits_loose_answer"],
    name="v12_line_edits_times_kept",
    summary="v10 whose line parser never splits at a colon between digits (times stay whole)",
    keep_times=True,
)
# The format-controlled base of the pre-registered CPU proof (issue 26): v12 whose prose replies are
# repaired into lines, so a base that writes prose instead of lines keeps what it wrote.
PROMPT_VARIANTS["v12_line_edits_repaired"] = replace(
    PROMPT_VARIANTS["v12_line_edits_times_kept"],
    name="v12_line_edits_repaired",
    summary="v12 whose notes replies without a `subject: value` line are kept as numbered note lines",
    repair_prose=True,
)
DEFAULT_PROMPT_VARIANT = "v1_worked_example"
# Every word any variant's examples use: what `diagnostics.echoes_prompt_example` looks for.
ALL_EXAMPLE_MARKERS = tuple(
    dict.fromkeys(marker for variant in PROMPT_VARIANTS.values() for marker in variant.example_markers)
)


# Notes that say only that there is nothing to say: "(empty)", "- empty", "None.", "No notes yet".
_PLACEHOLDER_LINE = re.compile(
    r"^[\W_]*(?:empty|none|n/?a|nothing(?: recorded| to note)?(?: yet)?|"
    r"no (?:notes|facts|information|memory)(?: file)?(?: yet)?)[\W_]*$",
    re.IGNORECASE,
)


def is_empty_notes(notes: str | None) -> bool:
    """True for notes that are blank or only a placeholder such as "(empty)" or "- none"."""
    lines = [line.strip() for line in (notes or "").splitlines() if line.strip()]
    return all(_PLACEHOLDER_LINE.match(line) for line in lines)


def get_prompt_variant(name: str) -> PromptSet:
    """The PromptSet called `name`; a ValueError naming the allowed ones otherwise."""
    try:
        return PROMPT_VARIANTS[name]
    except KeyError:
        raise ValueError(
            f"unknown prompt variant {name!r}; expected one of {sorted(PROMPT_VARIANTS)}"
        ) from None


def is_notes_request(messages: Sequence[Message]) -> bool:
    """True when `messages` is a notes rewrite of any variant (its system text is a notes system)."""
    notes_systems = {variant.notes_system for variant in PROMPT_VARIANTS.values()}
    return bool(messages) and messages[0]["role"] == "system" and messages[0]["content"] in notes_systems


def render_session(session: Session, roles: Sequence[str] = ("user", "assistant")) -> str:
    """A session as plain `role: content` lines (only the turns of `roles`)."""
    return "\n".join(f"{turn.role}: {turn.content}" for turn in session.turns if turn.role in roles)


def notes_update_messages(
    notes: str, session: Session, notes_budget_chars: int, variant: str = DEFAULT_PROMPT_VARIANT
) -> list[Message]:
    """Prompt for one memory rewrite: current notes + ONE new session, nothing older."""
    prompt_set = get_prompt_variant(variant)
    template = prompt_set.notes_user
    if prompt_set.first_notes_user is not None and is_empty_notes(notes):
        template = prompt_set.first_notes_user
    user = template.format(
        notes=notes or prompt_set.empty_notes,
        budget=notes_budget_chars,
        date=session.date,
        session=render_session(session, prompt_set.notes_session_roles),
    )
    messages: list[Message] = [{"role": "system", "content": prompt_set.notes_system}]
    for example_user, example_reply in prompt_set.notes_examples:
        messages += [
            {"role": "user", "content": example_user},
            {"role": "assistant", "content": example_reply},
        ]
    messages.append({"role": "user", "content": user})
    return messages


def answer_from_notes_messages(
    notes: str, question: str, question_date: str, variant: str = DEFAULT_PROMPT_VARIANT
) -> list[Message]:
    """Prompt for the final answer: notes and question only (raw sessions never re-fed)."""
    prompt_set = get_prompt_variant(variant)
    user = prompt_set.answer_user.format(
        notes=notes or prompt_set.empty_notes, question_date=question_date, question=question
    )
    return [{"role": "system", "content": prompt_set.answer_system}, {"role": "user", "content": user}]


def full_context_messages(
    sessions: Sequence[Session], question: str, question_date: str, variant: str = DEFAULT_PROMPT_VARIANT
) -> list[Message]:
    """The upper-bound condition: every session in date order, then the question."""
    prompt_set = get_prompt_variant(variant)
    blocks = [
        f"### Session {index} ({session.date})\n{render_session(session)}"
        for index, session in enumerate(sessions, start=1)
    ]
    user = prompt_set.full_context_user.format(
        history="\n\n".join(blocks), question_date=question_date, question=question
    )
    return [{"role": "system", "content": prompt_set.full_context_system}, {"role": "user", "content": user}]
