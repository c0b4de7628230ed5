"""Diagnose any model: Table 1 (full context vs bounded memory) for one OpenAI-compatible endpoint.

A researcher with a model behind any OpenAI-compatible URL (OpenAI, vLLM, llama.cpp, Ollama) gets
the paper's isolation test without writing a profile: `diagnosis_profile` builds one in memory,
`estimate` says before any call how many calls and tokens the run will take and, for OpenAI's own
endpoint, what it costs at list prices; the isolation study then runs (progress bar, response
cache: a stopped run resumes and pays for nothing twice), and `write_diagnosis` puts everything a
reader needs on one page.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib import profiles
from supersede_lib.agent.rollout import make_rollout
from supersede_lib.data.episodes import load_episodes
from supersede_lib.models.chat import redact_credentials
from supersede_lib.models.openai_api import estimate_cost_usd, is_local_url, is_openai_endpoint
from supersede_lib.profiles import Profile
from supersede_lib.results.comparison import shares_as_percent
from supersede_lib.results.outputs import STUDY_SUMMARY_FILE, markdown_table, write_text_atomic

CHARS_PER_TOKEN = 4  # a rough count: the endpoint's tokenizer is not known here
ANSWER_TOKENS = 64  # the runner's answer cap
REPORT_FILE = "DIAGNOSIS.md"
# seconds one call takes when nothing better is known (--seconds-per-call: one you measured): a hosted
# API answers a short prompt in about 2 s; a local CPU model of 0.5-1.5B takes about 5 s a call here
ASSUMED_SECONDS_PER_CALL = {"local": 5.0, "remote": 2.0}


@dataclass(frozen=True)
class Estimate:
    """What a diagnosis will take, before any call."""

    questions: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    usd: float | None  # OpenAI list price; None for any other server
    seconds_per_call: float = ASSUMED_SECONDS_PER_CALL["remote"]
    concurrency: int = 1
    seconds_measured: bool = False  # seconds_per_call given by the user, not assumed

    @property
    def seconds(self) -> float:
        """Wall time if every call is live: calls x seconds a call, spread over the questions in flight."""
        return self.calls * self.seconds_per_call / self.concurrency

    def line(self) -> str:
        cost = f"about ${self.usd:.2f} at OpenAI list prices" if self.usd is not None else "no price known"
        basis = "as given" if self.seconds_measured else "assumed; --seconds-per-call to use your own"
        return (
            f"{self.questions} questions x 2 conditions: about {self.calls} calls, "
            f"~{self.prompt_tokens:,} prompt and ~{self.completion_tokens:,} completion tokens; {cost}; "
            f"about {self.seconds / 60:.1f} min at {self.seconds_per_call:g} s a call and "
            f"{self.concurrency} in flight ({basis}; calls already in the cache are free)"
        )


def episodes_block(data: str, n: int, difficulty: str) -> dict[str, Any]:
    """The `episodes:` of the diagnosis: `synthetic`, `longmemeval` (knowledge-update) or a local file."""
    if data == "synthetic":
        return {"source": "synthetic", "n": n, "difficulty": difficulty, "seed": 11}
    if data == "longmemeval":
        return {"source": "longmemeval", "n": n, "question_type": "knowledge-update"}
    return {"source": "longmemeval", "n": n, "question_type": "knowledge-update", "local_path": data}


def diagnosis_profile(
    *,
    base_url: str,
    model: str,
    api_key_env: str,
    episodes: dict[str, Any],
    notes_budget_chars: int | None = None,
    concurrency: int | None = None,
) -> Profile:
    """An in-memory profile for one endpoint (validated like any configs/*.yaml); without
    `notes_budget_chars`, the isolation block's default budget."""
    name = "diagnose-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", model).strip("-") or "model")
    data = {
        "name": name,
        "description": f"Diagnosis of {model} at {redact_credentials(base_url)}.",
        "data_label": "synthetic (procedural generator)"
        if episodes["source"] == "synthetic"
        else "LongMemEval",
        "model": {"backend": "openai", "model": model, "base_url": base_url, "api_key_env": api_key_env},
        # a local server usually has one slot: more in flight only queues (and times out) there
        "concurrency": concurrency or (1 if is_local_url(base_url) else 8),
        "isolation": {"episodes": episodes}
        | ({} if notes_budget_chars is None else {"notes_budget_chars": notes_budget_chars}),
    }
    return profiles.validate_profile(data, "<diagnose>")


def _prompt_chars(messages: list[dict[str, str]]) -> int:
    return sum(len(message["content"]) for message in messages)


def _episode_cost(episode: Any, profile: Profile, budget: int) -> tuple[int, int, int]:
    """(calls, prompt characters, completion characters) of one question in both conditions.

    Prompts are built by the rollouts themselves; the bounded-memory notes are counted full (B
    characters in every later prompt and every rewrite), so the estimate errs high, not low.
    """
    full = make_rollout(episode, "full_context", prompt_variant=profile.prompt_variant)
    bounded = make_rollout(
        episode, "bounded_memory", notes_budget_chars=budget, prompt_variant=profile.prompt_variant
    )
    first = _prompt_chars(bounded.current_messages())
    sessions = len(episode.sessions)
    prompt = _prompt_chars(full.current_messages()) + sessions * (first + budget) + first + budget
    completion = 2 * ANSWER_TOKENS * CHARS_PER_TOKEN + sessions * budget
    return 2 + sessions, prompt, completion


def estimate(profile: Profile, seconds_per_call: float | None = None) -> Estimate:
    """Calls and tokens (4 characters a token) from the prompts the rollouts build, priced for OpenAI
    only; time from `seconds_per_call` (else `ASSUMED_SECONDS_PER_CALL`) and the profile's concurrency."""
    block = profile.require("isolation")
    episodes = load_episodes(block.episodes)
    costs = [_episode_cost(episode, profile, block.notes_budget_chars) for episode in episodes]
    calls = sum(cost[0] for cost in costs)
    prompt = sum(cost[1] for cost in costs) // CHARS_PER_TOKEN
    completion = sum(cost[2] for cost in costs) // CHARS_PER_TOKEN
    model = profile.model
    usd = (
        estimate_cost_usd(model["model"], prompt, completion)
        if is_openai_endpoint(model["base_url"])
        else None
    )
    assumed = ASSUMED_SECONDS_PER_CALL["local" if is_local_url(model["base_url"]) else "remote"]
    return Estimate(
        len(episodes),
        calls,
        prompt,
        completion,
        usd,
        seconds_per_call=seconds_per_call or assumed,
        concurrency=profile.concurrency,
        seconds_measured=seconds_per_call is not None,
    )


def _run_totals(manifests: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """What each of this run's conditions took, from the manifests it wrote (never the folder's others)."""
    rows = []
    for manifest in manifests.values():
        totals = manifest.get("totals") or {}
        rows.append(
            {
                "run": manifest.get("run_name"),
                "questions": totals.get("questions"),
                "failed": totals.get("failed_questions"),
                "calls (from cache)": f"{totals.get('calls')} ({totals.get('cached_calls')})",
                "prompt tokens": totals.get("prompt_tokens"),
                "completion tokens": totals.get("completion_tokens"),
                "cut at the token limit": totals.get("cut_calls"),
                "wall s": manifest.get("wall_s"),
            }
        )
    return pd.DataFrame(rows)


def incomplete_line(comparison: Any) -> str | None:
    """The page's first line when questions failed (None when every question was compared): a
    failure is neither right nor wrong, so the table is unfinished, not a finding."""
    if not comparison.left_out:
        return None
    return (
        f"> **incomplete: {len(comparison.left_out)} of {comparison.questions} failed — re-run the same "
        "command to finish.** The server failed these questions (connection, timeouts, 5xx after "
        f"retries; the `error` column of the run CSVs says why). They are left out of every number below, "
        f"which compares the {comparison.n} questions both conditions answered; finished answers are in "
        "the response cache, so the re-run asks only for the rest."
    )


def write_diagnosis(result: Any, planned: Estimate) -> Path:
    """The one-page report beside the study's files: Table 1, memory, failures, what it cost; built
    from this run's results only, and written whole (a reader never sees half a page)."""
    directory: Path = result.output_dir
    profile: Profile = result.profile
    incomplete = incomplete_line(result.comparison)
    lines = [
        *([incomplete, ""] if incomplete else []),
        f"# Diagnosis: {result.model}",
        "",
        f"{profile.description} Data: {result.data_label}, n = {result.n}; grader: {result.grader}. "
        "Paper numbers (gpt-4.1-mini on LongMemEval) are quoted beside ours, never mixed.",
        "",
        "## Table 1: full context vs bounded memory",
        "",
        markdown_table(result.table),
        "## What the notes held (bounded memory)",
        "",
        markdown_table(shares_as_percent(result.comparison.memory)),
        "## Why bounded memory failed",
        "",
        markdown_table(result.failure_counts)
        if not result.failure_counts.empty
        else "_No failures to classify._\n",
        "## What it took",
        "",
        f"Estimated before the run: {planned.line()}.",
        "",
        markdown_table(_run_totals(result.comparison.manifests)),
        f"Files: `{directory}` (run CSVs, trajectories, manifests, tables). Run the same command again to "
        "resume: finished calls come from the response cache.",
        "",
    ]
    return write_text_atomic(directory / REPORT_FILE, redact_credentials("\n".join(lines)))


OUTDATED_MARK = "> **OUTDATED**"


def _without_mark(text: str) -> str:
    if text.startswith(OUTDATED_MARK):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        return text.removeprefix("\n")
    return text


def mark_outdated(directory: Path, reason: str) -> list[Path]:
    """Mark the page an earlier run left in `directory` as not describing the run files beside it:
    DIAGNOSIS.md and the Markdown tables its summary.json names get a first line saying why, and
    summary.json an `outdated` key. Called when a run starts (a run that dies leaves the mark) and
    when it stops; a run that finishes writes a fresh page without it. Returns the files marked."""
    reason = redact_credentials(" ".join(reason.split()))
    summary_path = directory / STUDY_SUMMARY_FILE
    marked: list[Path] = []
    tables: list[str] = []
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # no earlier summary (or not one of ours): the page alone is marked
        summary = None
    if isinstance(summary, dict):
        tables = [name for name in summary.get("tables") or [] if str(name).endswith(".md")]
        summary = {"outdated": reason, **{key: value for key, value in summary.items() if key != "outdated"}}
        write_text_atomic(summary_path, json.dumps(summary, indent=2) + "\n")
        marked.append(summary_path)
    banner = (
        f"{OUTDATED_MARK}: {reason} This page is from an earlier run and does not describe the run "
        "files beside it; the same command, run to the end, replaces it.\n\n"
    )
    for path in [directory / REPORT_FILE, *(directory / name for name in tables)]:
        if path.exists():
            write_text_atomic(path, banner + _without_mark(path.read_text(encoding="utf-8")))
            marked.append(path)
    return marked
