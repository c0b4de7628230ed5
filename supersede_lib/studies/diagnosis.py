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
from supersede_lib.models.openai_api import (
    cache_endpoint,
    estimate_cost_usd,
    is_local_url,
    is_openai_endpoint,
)
from supersede_lib.profiles import Profile
from supersede_lib.results.comparison import shares_as_percent
from supersede_lib.results.outputs import markdown_table

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
    cache_namespace: str | None = None,
) -> Profile:
    """An in-memory profile for one endpoint (validated like any configs/*.yaml); without
    `notes_budget_chars`, the isolation block's default budget. Cached replies are keyed on the
    endpoint and what it serves unless `cache_namespace` names replies to share on purpose."""
    name = "diagnose-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", model).strip("-") or "model")
    spec = {"backend": "openai", "model": model, "base_url": base_url, "api_key_env": api_key_env}
    if cache_namespace is not None:
        if not cache_namespace.strip() or not cache_namespace.isprintable():
            raise ValueError(f"--cache-namespace {cache_namespace!r}: give a printable, non-empty name")
        spec["cache_namespace"] = cache_namespace.strip()
    data = {
        "name": name,
        "description": f"Diagnosis of {model} at {redact_credentials(base_url)}.",
        "data_label": "synthetic (procedural generator)"
        if episodes["source"] == "synthetic"
        else "LongMemEval",
        "model": spec,
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


def _run_totals(directory: Path) -> pd.DataFrame:
    rows = []
    for path in sorted(directory.glob("*.manifest.json")):
        manifest = json.loads(path.read_text(encoding="utf-8"))
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


def _run_manifests(directory: Path, run_names: dict[str, str]) -> list[dict[str, Any]]:
    """This run's manifests (one per condition), read from `directory`; a missing one is skipped."""
    paths = [directory / f"{run_name}.manifest.json" for run_name in run_names.values()]
    return [json.loads(path.read_text(encoding="utf-8")) for path in paths if path.is_file()]


def _listed_model(entry: dict[str, Any]) -> str:
    """One GET /v1/models entry: its id, and llama.cpp's size facts or vLLM's root when given."""
    meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
    facts = [
        f"{meta['n_params'] / 1e9:.2f}B parameters" if isinstance(meta.get("n_params"), int) else "",
        str(meta.get("ftype") or ""),
        f"root `{entry['root']}`" if entry.get("root") and entry.get("root") != entry.get("id") else "",
    ]
    described = ", ".join(fact for fact in facts if fact)
    return f"`{entry.get('id')}`" + (f" ({described})" if described else "")


def served_line(profile: Profile, manifests: list[dict[str, Any]]) -> str:
    """What served the calls, for the page: the endpoint, what it reported serving (GET /v1/models,
    llama.cpp's /props), the replies' own model and fingerprint, and how the cache keyed them."""
    spec = profile.model
    parts = [f"Served by `{cache_endpoint(str(spec['base_url']))}`"]
    identities = {(manifest.get("cache") or {}).get("served_by") for manifest in manifests} - {None}
    for identity in sorted(identities):
        served = json.loads(identity)
        listed = served.get("models") or []
        if listed:
            parts.append("GET /v1/models: " + "; ".join(_listed_model(entry) for entry in listed))
        if (served.get("server") or {}).get("model_path"):
            parts.append(f"llama.cpp serves `{served['server']['model_path']}`")
    stats = [manifest.get("model_stats") or {} for manifest in manifests]
    replied = sorted({name for item in stats for name in item.get("served_models") or {}})
    fingerprints = sorted({print_ for item in stats for print_ in item.get("system_fingerprints") or []})
    if replied:
        parts.append("replies name " + ", ".join(f"`{name}`" for name in replied))
    if fingerprints:
        parts.append("system_fingerprint " + ", ".join(f"`{value}`" for value in fingerprints))
    if spec.get("cache_namespace"):
        keyed = f"Cached replies are shared on purpose under the namespace `{spec['cache_namespace']}`."
    elif is_openai_endpoint(str(spec["base_url"])):
        keyed = "Cached replies are keyed on OpenAI's model name."
    else:
        keyed = "Cached replies are keyed on this endpoint and what it serves."
    return "; ".join(parts) + f". {keyed}"


def write_diagnosis(result: Any, planned: Estimate) -> Path:
    """The one-page report beside the study's files: Table 1, memory, failures, what it cost."""
    directory: Path = result.output_dir
    profile: Profile = result.profile
    lines = [
        f"# Diagnosis: {result.model}",
        "",
        f"{profile.description} Data: {result.data_label}, n = {result.n}; grader: {result.grader}. "
        "Paper numbers (gpt-4.1-mini on LongMemEval) are quoted beside ours, never mixed.",
        "",
        served_line(profile, _run_manifests(directory, result.comparison.run_names)),
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
        markdown_table(_run_totals(directory)),
        f"Files: `{directory}` (run CSVs, trajectories, manifests, tables). Run the same command again to "
        "resume: finished calls come from the response cache.",
        "",
    ]
    path = directory / REPORT_FILE
    path.write_text(redact_credentials("\n".join(lines)), encoding="utf-8")
    return path
