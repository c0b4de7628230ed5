"""Chat messages the agent sees at each turn, as named prompt variants.

Kept apart from the rollout state machine so prompts can be tuned (and measured on real models)
without touching the no-re-feed logic. The texts are data, in `prompt_variants.yaml` beside this
module: a `PromptSet` holds every text one variant sends (notes rewrite, answer from notes, full
context), `PROMPT_VARIANTS` names them, and docs/prompts.md records how they were measured and
which commit holds the retired ones. The paper does not publish its prompt text, so every variant
here is ours, not the paper's. Every builder returns a fresh OpenAI-style message list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from supersede_lib.agent.episode import Session
from supersede_lib.agent.messages import Message

VARIANTS_FILE = Path(__file__).with_name("prompt_variants.yaml")
DEFAULT_PROMPT_VARIANT = "v1_worked_example"

NotesUpdate = Literal["rewrite", "line_edits"]


@dataclass(frozen=True)
class PromptSet:
    """Every text one prompt variant sends.

    Templates are `str.format` strings: `notes_user` takes {notes} {budget} {date} {session};
    `first_notes_user` (when set) replaces it while the notes are still empty, so the model is
    asked to start the notes instead of being shown a placeholder it can copy; `answer_user` takes
    {notes} {question_date} {question}; `full_context_user` takes {history} {question_date}
    {question}. `empty_notes` stands in for notes that are still empty. `notes_examples` are
    (user, assistant) turns sent before the real request; `example_markers` are words only those
    examples use (notes holding them copied one); `notes_session_roles` are the turns of the new
    session a notes rewrite shows; `notes_update` says how a notes reply becomes the new notes:
    "rewrite" (the reply IS the new notes, cut at the budget) or "line_edits" (the reply lists
    changed lines, see `notes_edits`).
    """

    name: str
    summary: str
    notes_system: str
    notes_user: str
    answer_system: str
    answer_user: str
    full_context_system: str
    full_context_user: str
    empty_notes: str
    notes_session_roles: tuple[str, ...]
    first_notes_user: str | None = None
    notes_examples: tuple[tuple[str, str], ...] = ()
    example_markers: tuple[str, ...] = ()
    notes_update: NotesUpdate = "rewrite"
    edit_line_chars: int | None = None  # line edits only: each new line is cut to this many characters
    keep_times: bool = False  # line edits only: a colon between digits ("52:15") never splits a line
    repair_prose: bool = False  # line edits only: a reply with no line becomes lines (`repair_prose_reply`)


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


def _notes_request(prompt_set: PromptSet, notes: str, budget: int | None, date: str, session: str) -> str:
    """The user text of one notes rewrite; worked examples are rendered by it too, so they look
    exactly like the real request."""
    template = prompt_set.notes_user
    if prompt_set.first_notes_user is not None and is_empty_notes(notes):
        template = prompt_set.first_notes_user
    return template.format(notes=notes or prompt_set.empty_notes, budget=budget, date=date, session=session)


def _prompt_set(name: str, spec: Mapping[str, Any]) -> PromptSet:
    """One variant's resolved entry as a PromptSet, its worked examples rendered into chat turns."""
    plain = {
        key: tuple(value) if isinstance(value, list) else value
        for key, value in spec.items()
        if key != "notes_examples"
    }
    prompt_set = PromptSet(name=name, **plain)
    examples = tuple(
        (
            _notes_request(
                prompt_set,
                example.get("notes", ""),
                example.get("budget"),
                example["date"],
                example["session"],
            ),
            example["reply"],
        )
        for example in spec.get("notes_examples", ())
    )
    return replace(prompt_set, notes_examples=examples)


def load_prompt_variants(path: Path = VARIANTS_FILE) -> dict[str, PromptSet]:
    """Every variant in `path`, each resolved from `defaults` or its `based_on` variant."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    allowed = {field.name for field in fields(PromptSet)} - {"name"}
    resolved: dict[str, dict[str, Any]] = {}
    for name, entry in data["variants"].items():
        entry = dict(entry)
        parent = entry.pop("based_on", None)
        if parent is not None and parent not in resolved:
            raise ValueError(f"{path.name}: {name}.based_on: {parent!r} is not a variant defined above it")
        unknown = sorted(set(entry) - allowed)
        if unknown:
            raise ValueError(f"{path.name}: {name}: unknown keys {unknown} (allowed: {sorted(allowed)})")
        resolved[name] = {**(resolved[parent] if parent else data["defaults"]), **entry}
    return {name: _prompt_set(name, spec) for name, spec in resolved.items()}


PROMPT_VARIANTS: dict[str, PromptSet] = load_prompt_variants()
# Every word any variant's examples use: what `diagnostics.echoes_prompt_example` looks for.
ALL_EXAMPLE_MARKERS = tuple(
    dict.fromkeys(marker for variant in PROMPT_VARIANTS.values() for marker in variant.example_markers)
)


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
    notes: str,
    session: Session,
    notes_budget_chars: int,
    variant: str = DEFAULT_PROMPT_VARIANT,
    notes_system: str | None = None,
) -> list[Message]:
    """Prompt for one memory rewrite: current notes + ONE new session, nothing older. `notes_system`
    replaces the variant's system text (an instruction under optimisation); None keeps the variant's."""
    prompt_set = get_prompt_variant(variant)
    session_text = render_session(session, prompt_set.notes_session_roles)
    user = _notes_request(prompt_set, notes, notes_budget_chars, session.date, session_text)
    system = prompt_set.notes_system if notes_system is None else notes_system
    messages: list[Message] = [{"role": "system", "content": system}]
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


def _load_memory_prompts(path: Path = VARIANTS_FILE) -> dict[str, dict[str, str]]:
    """The `memory_policies` texts of `path`: per policy step, a system and a user template."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {name: dict(texts) for name, texts in (data.get("memory_policies") or {}).items()}


MEMORY_PROMPTS: dict[str, dict[str, str]] = _load_memory_prompts()


def memory_policy_messages(step: str, session: Session | None = None, **fields: Any) -> list[Message]:
    """The prompt of one memory-policy call (`step`: a key of `memory_policies` in prompt_variants.yaml),
    its templates filled from `fields` and, given `session`, its {date} and {session} (user and
    assistant turns, as the notes see them)."""
    try:
        texts = MEMORY_PROMPTS[step]
    except KeyError:
        raise ValueError(
            f"no memory-policy prompt {step!r}; expected one of {sorted(MEMORY_PROMPTS)}"
        ) from None
    if session is not None:
        fields = {"date": session.date, "session": render_session(session), **fields}
    return [
        {"role": "system", "content": texts["system"].format(**fields)},
        {"role": "user", "content": texts["user"].format(**fields)},
    ]
