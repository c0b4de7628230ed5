"""Line edits: a notes memory the model updates by naming changed lines, not by copying it whole.

Small models asked to rewrite the whole notes copy the first version they wrote and never fit a
later fact in (docs/prompts.md). In this memory the model replies with only the `subject: value`
lines that are new or changed; the code replaces the line with the same subject, puts changed
lines first and drops the oldest lines when the notes exceed the budget. The model still decides
what to remember and what a fact's subject is; the code only applies its edits. This is a
different agent from the paper's whole-notes rewrite, and studies name it as such.
"""

from __future__ import annotations

import re

# A reply line: optional bullet or number, then `subject: value`.
_EDIT_LINE = re.compile(
    r"^\s*(?:[-*\u2022]|\d+[.)])?\s*`?(?P<subject>[^:`\n]{1,60}?)`?\s*:\s*(?P<value>.*?)`?\s*$"
)
# The same, except that a colon between two digits ("52:15", "10:30") is part of a time, never the
# separator: "10K best: 52:15" keeps its time whole, and a bare "52:15" is no `52: 15` line.
_EDIT_LINE_TIMES_KEPT = re.compile(
    r"^\s*(?:[-*\u2022]|\d+[.)])?\s*`?(?P<subject>(?:[^:`\n]|(?<=\d):(?=\d)){1,60}?)`?"
    r"\s*(?:(?<!\d):|:(?!\d))\s*(?P<value>.*?)`?\s*$"
)
# Small models often write the format's placeholder word literally: "subject: city: Austin".
_PLACEHOLDER_SUBJECTS = frozenset({"subject", "topic", "fact", "key", "line", "new fact", "changed fact"})
# Replies that say there is nothing to add ("NONE", "No new facts.").
_NOTHING = re.compile(
    r"^[\W_]*(?:none|nothing(?: new)?|no (?:new |changed )?(?:facts?|lines?|changes?))[\W_]*$", re.I
)


MAX_REPAIRED_LINES = 5
"""A repaired reply keeps at most this many of its prose lines."""


def repair_prose_reply(reply: str, session_number: int, keep_times: bool = True) -> str:
    """A reply with no `subject: value` line (and not "nothing new") as lines the memory can keep.

    Each non-empty prose line becomes `note <session>.<k>: <line>` (bullets dropped), so nothing the
    model wrote is lost for want of the format, and no line of another session is overwritten. This
    is a deterministic format control: the same model, its replies held to lines.
    """
    if parse_edit_lines(reply, keep_times) or says_nothing_new(reply):
        return reply
    lines = [
        re.sub(r"^\s*(?:[-*\u2022]|\d+[.)])\s*", "", line).strip() for line in (reply or "").splitlines()
    ]
    kept = [line for line in lines if line][:MAX_REPAIRED_LINES]
    return "\n".join(f"note {session_number}.{index}: {line}" for index, line in enumerate(kept, start=1))


def says_nothing_new(reply: str) -> bool:
    """The reply says there is nothing to add ("NONE", "No new facts.")."""
    return bool(_NOTHING.match((reply or "").strip()))


def subject_key(subject: str) -> str:
    """The form two subjects are compared in: lower case, single spaces, no edge punctuation."""
    return re.sub(r"\s+", " ", re.sub(r"^\W+|\W+$", "", subject.lower())).strip()


def parse_edit_lines(reply: str, keep_times: bool = False) -> list[tuple[str, str]]:
    """The (subject, value) pairs a reply states; prose lines and empty values are skipped.

    `keep_times` never splits at a colon between digits, so "10K best: 52:15" keeps its time whole;
    without it a line splits at its first colon, as the variants without `keep_times` were recorded."""
    pattern = _EDIT_LINE_TIMES_KEPT if keep_times else _EDIT_LINE
    edits: list[tuple[str, str]] = []
    for line in (reply or "").splitlines():
        if not line.strip() or _NOTHING.match(line.strip()):
            continue
        match = pattern.match(line)
        if match is None:
            continue
        subject, value = match["subject"].strip(), match["value"].strip()
        inner = pattern.match(value) if subject_key(subject) in _PLACEHOLDER_SUBJECTS else None
        if inner is not None:
            subject, value = inner["subject"].strip(), inner["value"].strip()
        if subject_key(subject) and value and not _NOTHING.match(value):
            edits.append((subject, value))
    return edits


def apply_line_edits(
    notes: str, reply: str, budget_chars: int, max_line_chars: int | None = None, keep_times: bool = False
) -> tuple[str, int]:
    """The notes after a reply's edits, newest first and cut to `budget_chars`; and how many chars were cut.

    An edit whose subject is already in the notes replaces that line (and moves it to the top);
    an edit that repeats a line unchanged leaves it where it is, so copying the notes back is a no-op.
    Whole lines are dropped from the bottom (the least recently changed) until the notes fit.
    `max_line_chars` cuts each new line to that length first, so one long line (a quoted answer,
    a definition) cannot push every older line out at once.
    """
    lines = parse_edit_lines(notes, keep_times)
    by_key = {subject_key(subject): (subject, value) for subject, value in lines}
    changed: list[tuple[str, str]] = []
    for subject, value in parse_edit_lines(reply, keep_times):
        if max_line_chars is not None:
            value = value[: max(1, max_line_chars - len(subject) - 2)].rstrip()
        key = subject_key(subject)
        if by_key.get(key, (None, None))[1] == value:
            continue
        by_key.pop(key, None)
        changed = [edit for edit in changed if subject_key(edit[0]) != key]
        changed.append((subject, value))
    kept = [line for line in lines if subject_key(line[0]) in by_key]
    ordered = [f"{subject}: {value}" for subject, value in changed + kept]
    fitted = list(ordered)
    while fitted and len("\n".join(fitted)) > budget_chars:
        fitted.pop()
    if not fitted and ordered:  # one line longer than the whole budget: keep its head
        fitted = [ordered[0][:budget_chars].rstrip()]
    new_notes = "\n".join(fitted)
    return new_notes, max(0, len("\n".join(ordered)) - len(new_notes))
