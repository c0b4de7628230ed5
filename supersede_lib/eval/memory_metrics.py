"""Memory metrics: did the bounded-memory agent actually write, update and keep its notes?

Accuracy alone cannot tell "the notes were never written" from "the update was missed". These
metrics read one rollout's notes after every session (its `notes_history`) against the episode:

- `changed_share`: share of rewrites whose notes differ from the notes before them (a rewrite that
  returns the notes unchanged, or a placeholder again, did nothing);
- `empty_share`: share of notes states that are empty or a placeholder ("(empty)", "- none", ...);
- `echoes_example`: some notes hold a word of a prompt variant's worked example that the episode
  itself does not use (the model copied the example into the user's memory);
- `holds_current` / `holds_stale`: the FINAL notes convey the current gold value / a superseded
  value (matcher `conveys_value`; None when the episode has no such value), read line by line under
  the keyed-line rule below;
- `holds_current_keyed`: the literal reading: the same, counting only a notes line that names the
  asked thing (a word of the question besides the value: "grocery budget: $675" holds the grocery
  budget, "emergency fund: $675" and the copied "violin teacher: $675" do not) or has no key at all
  ("$675"). Both are reported, named apart;
- `truncation_share`: share of rewrites the notes cap had to cut.

The keyed-line rule (the same for notes and answers; labelling README, matcher docs): a line
`key: value` gives its value to its key. A key that names another thing the episode talks about (a
word only the sessions' turns without evidence use, `other_turn_topics`: "laptop: Planet Fitness"
when the user also talked about a laptop) holds nothing of the asked thing. A key the conversation
never uses (the prompt example's `violin teacher:`, copied) names nothing of the user's: the line is
read by its value, and the literal reading (`holds_current_keyed`) is reported beside it.

`trajectory_memory_metrics` scores one rollout; `aggregate_memory_metrics` pools many (rewrite- and
state-level shares are pooled over rewrites/states, the rest are shares of trajectories).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from supersede_lib.agent.episode import Episode
from supersede_lib.agent.prompts import ALL_EXAMPLE_MARKERS, is_empty_notes
from supersede_lib.eval.matcher import analyse, content_stems, conveys_value, other_turn_topics


def _comparable(notes: str | None) -> str:
    return "" if is_empty_notes(notes) else " ".join((notes or "").split())


def echoes_example(
    notes_history: Sequence[str], episode_values: Iterable[str], markers: Iterable[str] = ALL_EXAMPLE_MARKERS
) -> bool:
    """True when some notes hold a prompt-example word that none of `episode_values` contains."""
    values = " ".join(str(value) for value in episode_values)
    foreign = [
        marker for marker in markers if not re.search(rf"\b{re.escape(marker)}\b", values, re.IGNORECASE)
    ]
    notes = " ".join(str(note) for note in notes_history)
    return any(re.search(rf"\b{re.escape(marker)}\b", notes, re.IGNORECASE) for marker in foreign)


@dataclass(frozen=True)
class MemoryMetrics:
    """Memory metrics of one bounded-memory trajectory (see the module docstring)."""

    n_rewrites: int
    n_changed: int
    n_empty_states: int
    n_truncated: int
    echoes_example: bool
    holds_current: bool | None
    holds_stale: bool | None
    holds_current_keyed: bool | None = None

    @property
    def changed_share(self) -> float:
        return self.n_changed / self.n_rewrites if self.n_rewrites else 0.0

    @property
    def empty_share(self) -> float:
        return self.n_empty_states / self.n_rewrites if self.n_rewrites else 0.0

    @property
    def truncation_share(self) -> float:
        return self.n_truncated / self.n_rewrites if self.n_rewrites else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "changed_share": self.changed_share,
            "empty_share": self.empty_share,
            "truncation_share": self.truncation_share,
        }


def trajectory_memory_metrics(
    notes_history: Sequence[str],
    episode: Episode,
    *,
    truncated_rewrites: int = 0,
    markers: Iterable[str] = ALL_EXAMPLE_MARKERS,
) -> MemoryMetrics:
    """Memory metrics of one rollout from its notes after each session (`notes_history`).

    `truncated_rewrites` is how many rewrites the cap cut (a rollout's `truncation_count`).
    """
    history = [note or "" for note in notes_history]
    before = [""] + history[:-1] if history else []
    n_changed = sum(_comparable(old) != _comparable(new) for old, new in zip(before, history, strict=True))
    final_current, final_stale = notes_holdings([history[-1] if history else ""], episode)
    holds_current = None if final_current is None else final_current[0]
    holds_stale = None if final_stale is None else final_stale[0]
    keyed = notes_hold_current_keyed(history[-1] if history else "", episode)
    return MemoryMetrics(
        n_rewrites=len(history),
        n_changed=n_changed,
        n_empty_states=sum(is_empty_notes(note) for note in history),
        n_truncated=truncated_rewrites,
        echoes_example=echoes_example(history, (*episode.gold_answers, *episode.superseded_values), markers),
        holds_current=holds_current,
        holds_stale=holds_stale,
        holds_current_keyed=keyed,
    )


EMBED_REPLY = re.compile(r"^\[\d+ vectors of \d+\]$")
"""How a trajectory records an embedding call's reply (`agent.memory.rollout`: "[N vectors of D]")."""


def embedding_calls(turns: Iterable[Mapping[str, Any]]) -> int:
    """How many of a trajectory's turns were embedding calls (a memory policy's, e.g. Mem0's search)."""
    return sum(bool(EMBED_REPLY.match(str(turn.get("reply") or ""))) for turn in turns)


@functools.lru_cache(maxsize=8192)
def _conveys(notes: str, value: str) -> bool:
    """`conveys_value`, remembered: a rollout's notes often stay the same from one session to the
    next, and its last notes are read twice (holdings and metrics). The runner scores a finished
    rollout on the event loop, in between the calls of the questions still running (uncached, this
    took a sixth of the client's CPU in the bench with every question in flight)."""
    return conveys_value(notes, value)


def notes_holdings(
    notes_history: Sequence[str], episode: Episode
) -> tuple[list[bool] | None, list[bool] | None]:
    """After each session: did the notes still convey the current gold value / any stale value?

    `None` where the answer is not a value the notes could hold (abstention items, whose gold
    is an explanation) or where no stale values are known.
    """
    others = _other_topics(episode)
    holds_current = None
    if not episode.is_abstention and episode.gold_answers:
        holds_current = [_holds(notes, episode.gold_answers, others) for notes in notes_history]
    holds_stale = None
    if episode.superseded_values:
        holds_stale = [_holds(notes, episode.superseded_values, others) for notes in notes_history]
    return holds_current, holds_stale


def _other_topics(episode: Episode) -> frozenset[str]:
    """`other_turn_topics` less the question's words: a key naming the asked thing is never another's."""
    return other_turn_topics(episode) - set(content_stems(analyse(episode.question).words))


_KEY = re.compile(r"^\s*(?:[-*\u2022]\s*)?([^:\n]{1,60}):")


def _line_key(line: str) -> set[str]:
    """The content stems of a notes line's key ("- laptop: Planet Fitness" -> {"laptop"}); empty when
    the line has no key."""
    found = _KEY.match(line)
    return set(content_stems(analyse(found[1]).words)) if found else set()


def _holds(notes: str, values: Sequence[str], other_topics: frozenset[str]) -> bool:
    """Some line of `notes` conveys one of `values` under a key that names no other thing of the
    episode (the keyed-line rule, module doc). One line at a time, unless no line is keyed to
    another thing: then the notes are read whole, as a value may run across lines."""
    lines = (notes or "").splitlines()
    if not any(_line_key(line) & other_topics for line in lines):
        return any(_conveys(notes or "", value) for value in values)
    return any(
        _conveys(line, value) for line in lines if not _line_key(line) & other_topics for value in values
    )


_WHEN_WORDS = frozenset(
    content_stems(analyse("day days moment now today lately currently week time these").words)
)
"""Words of when, not what: they name no asked thing ("these days", "at the moment")."""


def notes_hold_current_keyed(notes: str, episode: Episode) -> bool | None:
    """The literal reading: whether some line of `notes` conveys the current value AND names the asked
    thing (a word of the question, besides the value and words of when, among the line's other
    words) or has no key. None as `notes_holdings` gives it."""
    if episode.is_abstention or not episode.gold_answers:
        return None
    asked = set(content_stems(analyse(episode.question).words)) - _WHEN_WORDS
    for line in (notes or "").splitlines():
        for gold in episode.gold_answers:
            if conveys_value(line, gold):
                others = set(content_stems(analyse(line).words)) - set(content_stems(analyse(gold).words))
                if others & asked or not _line_key(line):
                    return True
    return False


def _share(flags: list[bool | None]) -> float | None:
    known = [flag for flag in flags if flag is not None]
    return sum(known) / len(known) if known else None


def aggregate_memory_metrics(metrics: Iterable[MemoryMetrics | Mapping[str, Any]]) -> dict[str, Any]:
    """Pool many trajectories' metrics into one row of shares (None where nothing was measurable)."""
    rows = [item.as_dict() if isinstance(item, MemoryMetrics) else dict(item) for item in metrics]
    rewrites = sum(row["n_rewrites"] for row in rows)
    return {
        "n_trajectories": len(rows),
        "n_rewrites": rewrites,
        "changed_share": sum(row["n_changed"] for row in rows) / rewrites if rewrites else None,
        "empty_share": sum(row["n_empty_states"] for row in rows) / rewrites if rewrites else None,
        "truncation_share": sum(row["n_truncated"] for row in rows) / rewrites if rewrites else None,
        "echo_share": _share([bool(row["echoes_example"]) for row in rows]),
        "holds_current_share": _share([row["holds_current"] for row in rows]),
        "holds_stale_share": _share([row["holds_stale"] for row in rows]),
        "holds_current_keyed_share": _share([row.get("holds_current_keyed") for row in rows]),
    }
