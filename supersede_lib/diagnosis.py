"""Diagnose any model: Table 1 (full context vs bounded memory) for one OpenAI-compatible endpoint.

A researcher with a model behind any OpenAI-compatible URL (OpenAI, vLLM, llama.cpp, Ollama) gets
the paper's isolation test without writing a profile: `diagnosis_profile` builds one in memory,
`estimate` says before any call how many calls and tokens the run will take and, for OpenAI's own
endpoint, what it costs at list prices; `measure_seconds_per_call` times the calls (the cache's
recorded latencies, else one real call before the run); the isolation study then runs (progress
bar, response cache: a stopped run resumes and pays for nothing twice), and `write_diagnosis` puts
everything a reader needs on one page, the estimate beside the time the run really took.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from supersede_lib import profiles
from supersede_lib.agent.memory import DEFAULT_MEMORY, MEMORY_POLICIES, get_memory_policy
from supersede_lib.agent.rollout import make_rollout
from supersede_lib.agent.settings import AUTO
from supersede_lib.data.episodes import episode_sample
from supersede_lib.eval.memory_metrics import embedding_calls
from supersede_lib.eval.run_files import now_utc
from supersede_lib.eval.runner import MissingCapabilityError, RunSettings, notes_max_tokens_for, run_condition
from supersede_lib.eval.scheduling import run_sync
from supersede_lib.models.cache import ResponseCache
from supersede_lib.models.chat import redact_credentials
from supersede_lib.models.openai_api import (
    cache_endpoint,
    estimate_cost_usd,
    is_local_url,
    is_openai_endpoint,
)
from supersede_lib.profiles import Profile
from supersede_lib.results.comparison import incomplete_line as comparison_incomplete_line
from supersede_lib.results.comparison import shares_as_percent
from supersede_lib.results.outputs import STUDY_SUMMARY_FILE, markdown_table, write_text_atomic

SUITES = ("isolation", "robustness")
# the perturbations `diagnose --suite robustness` asks: each setting of notebook 09's offline record
SUITE_PERTURBATIONS = (
    {"name": "k_facts", "k": 2},
    {"name": "k_facts", "k": 4},
    "someone_else",
    "considered_not_made",
    "reverted",
    "indirect",
    "past_tense_later",
    "held_out_vocab",
    {"name": "distractor_density", "count": 8},
    {"name": "last_update_position", "position": "early"},
)
SYNTHETIC_SEED = 11  # the generator seed of the synthetic questions unless `--seed` names another
CHARS_PER_TOKEN = 4  # a rough count: the endpoint's tokenizer is not known here
REPORT_FILE = "DIAGNOSIS.md"
# seconds one call takes when nothing was measured (an --estimate-only run with an empty cache): a hosted
# API answers a short prompt in about 2 s; a local CPU model of 0.5-1.5B takes 5 to 70 s a call
ASSUMED_SECONDS_PER_CALL = {"local": 5.0, "remote": 2.0}
ASSUMED_BASIS = "assumed; a run measures it with one call first, or give --seconds-per-call"
# the estimate builds the prompts of at most this many questions (each is a few ms) and scales the rest
# from them, so any --n is estimated in bounded time and memory
SAMPLE_QUESTIONS = 200
RECORDED_LATENCIES = 1000  # the latest live calls in the cache that time a call
PROBE_CALLS = 3  # the first warms the server up, the others are timed; the run reuses every reply
MIN_TOKEN_SPREAD = 8  # tokens by which the timed calls' lengths must differ to fit a line through them


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
    basis: str = ASSUMED_BASIS  # where seconds_per_call comes from: assumed, as given, or measured
    sampled: int | None = None  # questions whose prompts were built, when fewer than `questions`
    sessions: int = 0  # sessions of every question (scaled like the rest when sampled)
    policies: tuple[PolicyEstimate, ...] = ()  # `--memory`: each policy's own run, measured by a probe
    probe_calls: int = 0  # Table 1's calls the probe made (their replies are in the cache)
    probe_seconds: float = 0.0  # wall time the probe took, already spent
    cap_seconds_per_call: float | None = None  # a Table 1 call's time if every reply ran to its cap

    @property
    def seconds(self) -> float:
        """Wall time of the whole diagnosis: the probes' measured time (spent) and the calls still to
        make, spread over the questions in flight, each memory policy's at the pace its probe measured."""
        return self.spent_seconds + self.seconds_to_go

    @property
    def spent_seconds(self) -> float:
        """Wall time the probes took before the estimate was printed (their replies are cached)."""
        return self.probe_seconds + sum(policy.probe_seconds for policy in self.policies)

    @property
    def seconds_to_go(self) -> float:
        """Wall time of the calls still to make: every call but the probes', each part at its pace."""
        return self.calls_seconds(self.calls - self.probe_calls) + sum(
            self.calls_seconds(
                policy.calls - policy.probe_calls, policy.seconds_per_call or self.seconds_per_call
            )
            for policy in self.policies
        )

    @property
    def total_calls(self) -> int:
        """Every call the diagnosis makes: both conditions and each memory policy's run."""
        return self.calls + sum(policy.calls for policy in self.policies)

    @property
    def calls_to_go(self) -> int:
        """The calls still to make once the probes' replies are in the cache."""
        return self.total_calls - self.probe_calls - sum(policy.probe_calls for policy in self.policies)

    def calls_seconds(self, calls: int, seconds_per_call: float | None = None) -> float:
        """Wall time of `calls` live calls, `concurrency` in flight, at `seconds_per_call` (this
        estimate's pace unless another is given)."""
        pace = self.seconds_per_call if seconds_per_call is None else seconds_per_call
        return calls * pace / self.concurrency

    def timed(self, seconds_per_call: float, basis: str) -> Estimate:
        """The same estimate at a measured (or given) pace."""
        return replace(self, seconds_per_call=seconds_per_call, basis=basis)

    def line(self) -> str:
        cost = f"about ${self.usd:.2f} at OpenAI list prices" if self.usd is not None else "no price known"
        scaled = f" (scaled from the first {self.sampled})" if self.sampled else ""
        policies = "".join(f"; {policy.line()}" for policy in self.policies)
        spent = (
            f" ({self.spent_seconds / 60:.1f} min of probes done, about {self.seconds_to_go / 60:.1f} min to go)"
            if self.spent_seconds
            else ""
        )
        return (
            f"{self.questions} questions x 2 conditions: about {self.calls} calls{scaled}, "
            f"~{self.prompt_tokens:,} prompt and ~{self.completion_tokens:,} completion tokens; {cost}"
            f"{policies}; in all about {self.total_calls} calls, about {self.seconds / 60:.1f} min{spent} at "
            f"{self.seconds_per_call:.3g} s a call and {self.concurrency} in flight ({self.basis}"
            f"{self._cap_note()}; calls already in the cache are free)"
        )

    def _cap_note(self) -> str:
        """Table 1's time if every reply ran to its token cap: the bound the estimate stays under
        unless the model writes longer replies later in a question than in the probe."""
        if self.cap_seconds_per_call is None or self.cap_seconds_per_call <= self.seconds_per_call:
            return ""
        bound = self.calls_seconds(self.calls - self.probe_calls, self.cap_seconds_per_call)
        return f"; Table 1's calls up to ~{bound / 60:.1f} min if every reply ran to its cap"


@dataclass(frozen=True)
class PolicyEstimate:
    """One memory policy's run in `diagnose --memory`: its calls (per-session calls, reflector passes,
    extraction and update calls, embeddings: whatever the policy makes) as one probe question measured
    them, scaled to every question's sessions; None-valued pace: the probe's calls all came from the cache."""

    name: str
    calls: int
    embed_calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds_per_call: float | None
    basis: str
    refused: str | None = None  # the capability the server lacks: the run will refuse it too
    probe_calls: int = 0  # the probe question's calls (their replies are in the cache)
    probe_seconds: float = 0.0  # wall time the probe question took, already spent

    def line(self) -> str:
        if self.refused:
            return f"memory policy {self.name}: refused ({self.refused})"
        return (
            f"memory policy {self.name}: about {self.calls} calls ({self.embed_calls} embeddings), "
            f"~{self.prompt_tokens:,} prompt and ~{self.completion_tokens:,} completion tokens ({self.basis})"
        )


def episodes_block(data: str, n: int, difficulty: str, seed: int = SYNTHETIC_SEED) -> dict[str, Any]:
    """The `episodes:` of the diagnosis: `synthetic` (drawn with `seed`), `longmemeval`
    (knowledge-update) or a local file."""
    if data == "synthetic":
        return {"source": "synthetic", "n": n, "difficulty": difficulty, "seed": seed}
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
    timeout_s: float | None = None,
    max_tokens_notes: int | None = None,
    max_tokens_answer: int | None = None,
    cache_namespace: str | None = None,
    memory_policies: Sequence[str] = (),
    suite: str = "isolation",
) -> Profile:
    """An in-memory profile for one endpoint (validated like any configs/*.yaml); a setting left None
    keeps the default (the isolation block's budget, the runner's token caps, the model's timeout).
    Cached replies are keyed on the endpoint and what it serves unless `cache_namespace` names replies
    to share on purpose. `memory_policies` (`--memory`) adds a `memory_systems:` block: the same
    questions through each named policy, beside the notes (the reference, Table 1's bounded memory).
    `suite="robustness"` adds the perturbation suite (notebook 09) on the same unperturbed episodes:
    every `SUITE_PERTURBATIONS` twin of each, both conditions; it refuses `memory_policies`, whose
    estimate is measured on Table 1's questions and whose table pairs policies on them, not on twins."""
    name = "diagnose-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", model).strip("-") or "model")
    model_spec = {"backend": "openai", "model": model, "base_url": base_url, "api_key_env": api_key_env}
    if cache_namespace is not None:
        if not cache_namespace.strip() or not cache_namespace.isprintable():
            raise ValueError(f"--cache-namespace {cache_namespace!r}: give a printable, non-empty name")
        model_spec["cache_namespace"] = cache_namespace.strip()
    chosen = {
        "notes_budget_chars": notes_budget_chars,
        "max_tokens_notes": max_tokens_notes,
        "max_tokens_answer": max_tokens_answer,
    }
    data = {
        "name": name,
        "description": f"Diagnosis of {model} at {redact_credentials(base_url)}.",
        "data_label": "synthetic (procedural generator)"
        if episodes["source"] == "synthetic"
        else "LongMemEval",
        "model": model_spec | ({} if timeout_s is None else {"timeout_s": timeout_s}),
        # a local server usually has one slot: more in flight only queues (and times out) there
        "concurrency": concurrency or (1 if is_local_url(base_url) else 8),
        "isolation": {"episodes": episodes}
        | {key: value for key, value in chosen.items() if value is not None},
    }
    if memory_policies and suite != "isolation":
        raise ValueError(
            f"--memory {','.join(memory_policies)} with --suite {suite}: the policy table and its probe "
            "estimate are Table 1's (--suite isolation); to compare memory policies under perturbation, "
            "name them in a profile's robustness.memory_policies (notebook 09)"
        )
    if memory_policies:
        data["memory_systems"] = memory_block(data, memory_policies)
    if suite == "robustness":
        if episodes["source"] != "synthetic":
            raise ValueError("--suite robustness perturbs synthetic episodes: use --data synthetic")
        data["robustness"] = {"episodes": episodes, "perturbations": list(SUITE_PERTURBATIONS)} | {
            key: value for key, value in chosen.items() if key == "notes_budget_chars" and value is not None
        }
    elif suite != "isolation":
        raise ValueError(f"--suite {suite!r}: expected one of {', '.join(SUITES)}")
    return profiles.validate_profile(data, "<diagnose>")


def memory_policy_names(requested: Sequence[str]) -> list[str]:
    """`--memory` values (names, comma lists or `all`) as the policies to run beside the notes,
    each once, in `MEMORY_POLICIES` order for `all`; an unknown name fails listing the known ones."""
    names: list[str] = []
    for value in requested:
        for name in (part.strip() for part in value.split(",")):
            chosen = [*MEMORY_POLICIES] if name == "all" else [get_memory_policy(name).name] if name else []
            names += [item for item in chosen if item not in names and item != DEFAULT_MEMORY]
    return names


def memory_block(data: dict[str, Any], policies: Sequence[str]) -> dict[str, Any]:
    """The `memory_systems:` block of a diagnosis: its questions, model, budget and caps, the notes as
    the reference (Table 1's bounded memory, whose replies the cache already holds) and each policy."""
    isolation = data["isolation"]
    caps = ("notes_budget_chars", "max_tokens_notes", "max_tokens_answer")
    return {
        "episodes": isolation["episodes"],
        "models": [data["model"]],
        "policies": [{"name": name, "memory": name} for name in (DEFAULT_MEMORY, *policies)],
        "reference": DEFAULT_MEMORY,
        "full_context": False,  # Table 1 has it
        **{key: isolation[key] for key in caps if key in isolation},
    }


def _prompt_chars(messages: list[dict[str, str]]) -> int:
    return sum(len(message["content"]) for message in messages)


def run_settings(profile: Profile) -> RunSettings:
    """The settings the isolation study runs both conditions with (budget and token caps included)."""
    block = profile.require("isolation")
    return profile.run_settings(**block.settings_changes())


def notes_token_cap(settings: RunSettings) -> int | None:
    """The max_tokens a notes call is sent with (the runner's automatic cap unless one is set)."""
    cap = settings.max_tokens_notes
    return notes_max_tokens_for(settings.notes_budget_chars) if cap == AUTO else cap


def _episode_cost(episode: Any, settings: RunSettings) -> tuple[int, int, int]:
    """(calls, prompt characters, completion characters) of one question in both conditions.

    Prompts are built by the rollouts themselves; the bounded-memory notes are counted full (B
    characters in every later prompt and every rewrite) and each answer at its token cap, so the
    estimate errs high, not low.
    """
    budget = settings.notes_budget_chars
    full = make_rollout(episode, "full_context", settings=settings)
    bounded = make_rollout(episode, "bounded_memory", settings=settings)
    first = _prompt_chars(bounded.current_messages())
    sessions = len(episode.sessions)
    prompt = _prompt_chars(full.current_messages()) + sessions * (first + budget) + first + budget
    answer_tokens = settings.max_tokens_answer or 0
    completion = 2 * answer_tokens * CHARS_PER_TOKEN + sessions * budget
    return 2 + sessions, prompt, completion


def question_sets(profile: Profile) -> list[Any]:
    """The episode blocks a diagnosis asks in both conditions: the isolation block's, or with the
    robustness suite its unperturbed episodes and every perturbation's twins (the extra calls)."""
    block = profile.robustness
    if block is None:
        return [profile.require("isolation").episodes]
    return [block.episodes, *(spec for _, spec in block.perturbed_specs())]


def estimate(profile: Profile, seconds_per_call: float | None = None) -> Estimate:
    """Calls and tokens (4 characters a token) from the prompts the rollouts build, priced for OpenAI
    only; time from `seconds_per_call` (else `ASSUMED_SECONDS_PER_CALL`, until a measurement replaces
    it: `Estimate.timed`) and the profile's concurrency. Above `SAMPLE_QUESTIONS` questions the
    counts are the first ones' scaled up, so no n costs more than that many prompts to estimate."""
    settings = run_settings(profile)
    questions, sampled, sessions, parts = 0, 0, 0.0, [0.0, 0.0, 0.0]
    for spec in question_sets(profile):
        count, sample = episode_sample(spec, SAMPLE_QUESTIONS)
        costs = [_episode_cost(episode, settings) for episode in sample]
        questions, sampled = questions + count, sampled + len(sample)
        sessions += sum(len(episode.sessions) for episode in sample) * count / len(sample)
        for part in range(3):
            parts[part] += sum(cost[part] for cost in costs) * count / len(sample)

    def total(part: int) -> int:
        return round(parts[part])

    calls, prompt, completion = total(0), total(1) // CHARS_PER_TOKEN, total(2) // CHARS_PER_TOKEN
    model = profile.model
    usd = (
        estimate_cost_usd(model["model"], prompt, completion)
        if is_openai_endpoint(model["base_url"])
        else None
    )
    assumed = ASSUMED_SECONDS_PER_CALL["local" if is_local_url(model["base_url"]) else "remote"]
    return Estimate(
        questions,
        calls,
        prompt,
        completion,
        usd,
        seconds_per_call=seconds_per_call or assumed,
        concurrency=profile.concurrency,
        basis="as given" if seconds_per_call is not None else ASSUMED_BASIS,
        sampled=sampled if sampled < questions else None,
        sessions=round(sessions),
    )


def recorded_seconds_per_call(profile: Profile) -> tuple[float, str] | None:
    """The median latency of the live calls the profile's response cache recorded (a run stopped and
    resumed, or run again), with how it was found; None when the cache holds none."""
    path = profiles.cache_path(profile, create=False)
    if not path.is_file():
        return None
    latencies = ResponseCache(path).recorded_latencies(RECORDED_LATENCIES)
    if not latencies:
        return None
    seconds = statistics.median(latencies)
    return seconds, f"measured: median of {len(latencies)} calls in the response cache"


async def _probe_replies(model: Any, rollout: Any, settings: RunSettings) -> list[Any]:
    """The rollout's first `PROBE_CALLS` notes calls, each timed, exactly as the run will send them."""
    replies = []
    while len(replies) < PROBE_CALLS and not rollout.done and rollout.current_kind == "notes":
        started = time.perf_counter()
        reply = await model.achat(
            rollout.current_messages(),
            max_tokens=notes_token_cap(settings),
            temperature=settings.temperature,
            seed=settings.seed,
        )
        # the model's own timing of the request (what the cache records of every call), without this
        # process's one-off setup (the client, the cache file) that the run pays once, not per call
        replies.append((reply, reply.latency_s or time.perf_counter() - started))
        rollout.step(reply.text)
    return replies


def seconds_for_tokens(timed: list[tuple[int, float]], tokens: float) -> float:
    """Seconds a call generating `tokens` takes, from (tokens, seconds) of timed calls.

    When their lengths differ enough, a line through them (a fixed part: the prompt, the network;
    and a part per token) gives it; else every second is put on the tokens, which on a CPU server
    (where generating dominates) is right and elsewhere errs high, never low."""
    counts = [count for count, _ in timed]
    total_seconds, total_tokens = sum(seconds for _, seconds in timed), sum(counts)
    if not total_tokens:
        return max(seconds for _, seconds in timed)
    spread = max(counts) - min(counts)
    if len(timed) > 1 and spread >= max(MIN_TOKEN_SPREAD, max(counts) / 4):
        mean_tokens, mean_seconds = total_tokens / len(timed), total_seconds / len(timed)
        slope = sum((count - mean_tokens) * (seconds - mean_seconds) for count, seconds in timed) / sum(
            (count - mean_tokens) ** 2 for count in counts
        )
        fixed = mean_seconds - slope * mean_tokens
        if slope >= 0 and fixed >= 0:
            return fixed + slope * tokens
    return total_seconds / total_tokens * tokens


def probe_seconds_per_call(
    profile: Profile, cap_tokens_per_call: float, model: Any = None
) -> dict[str, Any] | None:
    """Real calls before the run, timed: the first question's first `PROBE_CALLS` notes calls, sent
    as the run sends them and through the response cache, so the run finds the replies there and
    pays for them once. The first is not timed (a server's first call also loads the model's
    weights and reads the prompt cold, several times slower on a CPU); the others' mean is the
    seconds a Table 1 call takes, at the lengths the model writes. The estimate counts every
    reply at its cap (`cap_tokens_per_call` an average call), which on a CPU server, where a reply's
    length sets the time, is only a bound (`seconds_for_tokens`): the changes to the `Estimate`,
    None when every reply came from the cache. `model`: the run's own (so the server is probed
    once a run), else built from the profile."""
    settings = run_settings(profile)
    _, (episode, *_) = episode_sample(profile.require("isolation").episodes, 1)
    rollout = make_rollout(episode, "bounded_memory", settings=settings)
    model = model if model is not None else profiles.model_for(profile.model, profile)
    started = time.perf_counter()
    # on the runner's own long-lived loop: the model's HTTP client, opened here, serves the run too
    replies = run_sync(_probe_replies(model, rollout, settings))
    live = [(reply.completion_tokens, seconds) for reply, seconds in replies if not reply.cached]
    timed = live[1:] or live
    if not timed:
        return None
    seconds, tokens = sum(latency for _, latency in timed), sum(count for count, _ in timed)
    rate = f" ({tokens / seconds:.1f} tokens/s)" if tokens and seconds > 0 else ""
    return {
        "seconds_per_call": seconds / len(timed),
        "basis": f"measured: {len(live)} probe calls, {seconds:.2f} s for {tokens} tokens{rate} timed",
        "probe_calls": len(replies),
        "probe_seconds": time.perf_counter() - started,
        "cap_seconds_per_call": seconds_for_tokens(timed, cap_tokens_per_call),
    }


def measured(planned: Estimate, profile: Profile, *, probe: bool, model: Any = None) -> Estimate:
    """`planned` at the pace the calls really go: the cache's recorded latencies when it holds any,
    else (with `probe`) timed real calls; unchanged when neither is there."""
    found = recorded_seconds_per_call(profile)
    if found is not None:
        return planned.timed(*found)
    changes = (
        probe_seconds_per_call(profile, planned.completion_tokens / max(planned.calls, 1), model)
        if probe
        else None
    )
    return replace(planned, **changes) if changes else planned


def _first_reads(turns: list[dict[str, Any]]) -> set[int]:
    """Indexes of the calls that first sent a prompt the probe sends again (the same first 200
    characters): a server reads such a prompt cold once and then finds its prefix in its prompt
    cache, so these calls are slower than the run's calls of the same prompt."""
    prefixes = [json.dumps(turn.get("messages") or [])[:200] for turn in turns]
    recurring = {prefix for prefix in prefixes if prefixes.count(prefix) > 1}
    return {prefixes.index(prefix) for prefix in recurring}


def live_pace(turns: list[dict[str, Any]]) -> float | None:
    """Mean seconds of the probe's live calls, leaving out each recurring prompt's cold first read
    (`_first_reads`) when other live calls remain; None when every reply came from the cache."""
    cold = _first_reads(turns)
    live = [turn["latency_s"] for turn in turns if not turn["cached"]]
    warm = [turn["latency_s"] for index, turn in enumerate(turns) if not turn["cached"] and index not in cold]
    chosen = warm or live
    return sum(chosen) / len(chosen) if chosen else None


def probe_policy(
    name: str, episode: Any, settings: RunSettings, model: Any, planned: Estimate
) -> PolicyEstimate:
    """One policy's calls measured on one real question (through the response cache, so the run
    reuses every reply), scaled to the diagnosis: its memory calls per session x every question's
    sessions, plus one answer each. A policy makes as many calls as its design and the model's
    replies ask for (a reflector pass when the log outgrows B; Mem0's extraction, update and
    embedding calls), so they are counted on a real question, never assumed. Its pace leaves out
    the cold first reads of the prompts it repeats (`live_pace`): the run finds them warm."""
    started = time.perf_counter()
    try:
        run = run_condition(
            [episode], "bounded_memory", model, settings.with_changes(store_messages=True), progress=False
        )
    except MissingCapabilityError as error:
        return PolicyEstimate(name, 0, 0, 0, 0, None, "refused", refused=str(error))
    turns = run.trajectories[0]["turns"]
    sessions = max(len(episode.sessions), 1)
    per_session = max(len(turns) - 1, 0) / sessions
    calls = round(planned.sessions * per_session) + planned.questions
    scale = calls / max(len(turns), 1)
    pace = live_pace(turns)
    embeds = embedding_calls(turns)
    basis = (
        f"measured: a probe question of {sessions} sessions made {len(turns)} calls ({embeds} embeddings)"
        + (f", {pace:.3g} s a warm live call" if pace is not None else ", all from the cache")
    )
    return PolicyEstimate(
        name,
        calls,
        round(embeds * scale),
        round(sum(turn["prompt_tokens"] for turn in turns) * scale),
        round(sum(turn["completion_tokens"] for turn in turns) * scale),
        pace,
        basis,
        probe_calls=len(turns),
        probe_seconds=time.perf_counter() - started,
    )


def probed_policies(planned: Estimate, profile: Profile, model: Any = None) -> Estimate:
    """`planned` with each `--memory` policy's calls measured by a probe question (`probe_policy`);
    the notes are Table 1's bounded memory, already counted."""
    block = profile.memory_systems
    if block is None:
        return planned
    _, (episode, *_) = episode_sample(profile.require("isolation").episodes, 1)
    model = model if model is not None else profiles.model_for(profile.model, profile)
    settings = run_settings(profile)
    found = [
        probe_policy(entry.name, episode, settings.with_changes(memory=entry.memory), model, planned)
        for entry in block.policies
        if entry.memory != DEFAULT_MEMORY
    ]
    return replace(planned, policies=tuple(found))


def unprobed_policies(planned: Estimate, profile: Profile) -> Estimate:
    """`--estimate-only` makes no call, so no policy is probed: each is counted at its floor (one
    memory call a session and the answer), said so on the line."""
    block = profile.memory_systems
    if block is None:
        return planned
    calls = planned.sessions + planned.questions
    basis = "not measured (--estimate-only makes no call): at least one call a session; a run probes it"
    found = [
        PolicyEstimate(entry.name, calls, 0, 0, 0, None, basis)
        for entry in block.policies
        if entry.memory != DEFAULT_MEMORY
    ]
    return replace(planned, policies=tuple(found))


def _run_totals(manifests: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """What each of this run's conditions took, from the manifests it wrote (never the folder's others).
    A manifest still in memory does not carry its run name, so a row is named by its key: the
    condition for Table 1's runs, the run name for a policy's."""
    rows = []
    for run_name, manifest in manifests.items():
        totals = manifest.get("totals") or {}
        rows.append(
            {
                "run": manifest.get("run_name") or run_name,
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
    first = comparison_incomplete_line(len(comparison.left_out), comparison.questions)
    return (
        f"{first} The server failed these questions (connection, timeouts, 5xx after "
        f"retries; the `error` column of the run CSVs says why). They are left out of every number below, "
        f"which compares the {comparison.n} questions both conditions answered; finished answers are in "
        "the response cache, so the re-run asks only for the rest."
    )


def _manifest_totals(manifests: dict[str, dict[str, Any]]) -> list[tuple[dict[str, Any], float]]:
    """(totals, wall seconds) of each of this run's manifests."""
    return [
        (manifest.get("totals") or {}, float(manifest.get("wall_s") or 0.0))
        for manifest in manifests.values()
    ]


def estimate_vs_real(planned: Estimate, manifests: dict[str, dict[str, Any]]) -> str:
    """One line: the estimated time of the calls made live beside the wall time the runs took."""
    runs = _manifest_totals(manifests)
    wall = sum(seconds for _, seconds in runs)
    live = sum(int(totals.get("calls") or 0) - int(totals.get("cached_calls") or 0) for totals, _ in runs)
    if live <= 0:
        return f"Time: every call came from the response cache; the runs took {wall:.1f} s."
    # each part at its own pace: the calls still to make when the estimate was printed
    expected = live * planned.seconds_to_go / max(planned.calls_to_go, 1)
    return (
        f"Time: {live} calls made live, estimated {expected / 60:.1f} min at {planned.seconds_per_call:.3g} s "
        f"a call; they took {wall / 60:.1f} min ({wall / expected:.2f}x the estimate)."
    )


def cut_calls_advice(profile: Profile, manifests: dict[str, dict[str, Any]]) -> list[str]:
    """When replies were cut at the token limit: the `diagnose` options that raise it, with their values."""
    cut = sum(int(totals.get("cut_calls") or 0) for totals, _ in _manifest_totals(manifests))
    if not cut:
        return []
    settings = run_settings(profile)
    return [
        f"Replies cut at the token limit: {cut}, so some notes or answers are incomplete: run again "
        f"with a larger --max-tokens-notes (now {notes_token_cap(settings)}) or --max-tokens-answer "
        f"(now {settings.max_tokens_answer}).",
        "",
    ]


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


POLICY_NOTE = (
    "Each memory policy on the same questions, budget, answer prompt and matcher as Table 1's bounded "
    "memory (the `notes` row, the reference). Stale answers: the answer asserted a superseded value; "
    "memory held: what the memory the answer read conveyed; memory failures: replies the policy could "
    "not use; calls per episode count every call, embeddings in brackets; b / c: the notes right and the "
    "policy wrong / the reverse, exact McNemar, Holm across the policies. A refused row is a policy whose "
    "capability (tools, embeddings) this server lacks: refused before any call."
)


def write_diagnosis(
    result: Any,
    planned: Estimate,
    policies: pd.DataFrame | None = None,
    policy_manifests: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """The one-page report beside the study's files: Table 1, memory, failures, what it cost; built
    from this run's results only, and written whole (a reader never sees half a page). `policies`:
    the `--memory` policy table (one row per policy), whose runs' manifests count in what it took."""
    directory: Path = result.output_dir
    profile: Profile = result.profile
    manifests = {**result.comparison.manifests, **(policy_manifests or {})}
    policy_lines = (
        ["## Memory policies", "", markdown_table(policies), POLICY_NOTE, ""] if policies is not None else []
    )
    incomplete = incomplete_line(result.comparison)
    lines = [
        *([incomplete, ""] if incomplete else []),
        f"# Diagnosis: {result.model}",
        "",
        f"{profile.description} Data: {result.data_label}, n = {result.n}; grader: {result.grader}. "
        "Paper numbers (gpt-4.1-mini on LongMemEval) are quoted beside ours, never mixed.",
        "",
        served_line(profile, list(result.comparison.manifests.values())),
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
        *policy_lines,
        *what_it_took(
            profile, planned, manifests, f"`{directory}` (run CSVs, trajectories, manifests, tables)"
        ),
    ]
    return write_text_atomic(directory / REPORT_FILE, redact_credentials("\n".join(lines)))


def what_it_took(
    profile: Profile, planned: Estimate, manifests: dict[str, dict[str, Any]], files: str
) -> list[str]:
    """A page's closing section, the same for every suite: the estimate beside what the runs took, the
    cut-calls advice, the runs' totals and where the files are (`files`)."""
    return [
        "## What it took",
        "",
        f"Estimated before the run: {planned.line()}.",
        "",
        estimate_vs_real(planned, manifests),
        "",
        *cut_calls_advice(profile, manifests),
        markdown_table(_run_totals(manifests)),
        f"Files: {files}. Run the same command again to resume: finished calls come from the response cache.",
        "",
    ]


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


LOCK_FILE = ".diagnose.lock"


class FolderInUseError(RuntimeError):
    """Another `diagnose` run holds the results folder: its page, tables and run files are its own."""


@contextlib.contextmanager
def folder_lock(directory: Path) -> Iterator[Path]:
    """Hold `directory` for this run alone, or raise `FolderInUseError` at once, naming the lock file
    and the process that holds it.

    Two runs on one model share the folder's run names, summary, tables and page: one lock for the
    whole folder keeps every file there one run's (distinct run ids would still leave one page and one
    summary to fight over). An OS lock (`flock`) on an open file, so a process that dies frees it."""
    import fcntl  # POSIX; diagnose runs where llama.cpp and vLLM serve

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    handle = path.open("a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = " ".join(handle.read().split()) or "a process that has not said who it is yet"
        handle.close()
        raise FolderInUseError(
            f"another diagnose run is writing {directory} (lock {path}, held by {holder}): wait for it "
            "to finish, or give this run its own --out"
        ) from None
    handle.seek(0)
    handle.truncate()
    command = " ".join(["python -m supersede_lib diagnose", *sys.argv[1:]])[:300]
    handle.write(
        f"pid {os.getpid()} on {socket.gethostname()}, started {now_utc()}: {redact_credentials(command)}\n"
    )
    handle.flush()
    try:
        yield path
    finally:
        handle.truncate(0)
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def robustness_incomplete_line(result: Any) -> str | None:
    """The robustness page's first line when pairs failed (None when every pair was compared)."""
    if not result.left_out:
        return None
    asked = len(result.per_pair) + len(result.left_out)
    first = comparison_incomplete_line(len(result.left_out), asked)
    return (
        f"{first} A pair is left out of every number when the server failed either of its questions "
        "(the `error` column of the run CSVs says why); the re-run asks only for what is not in the cache."
    )


def write_robustness_diagnosis(result: Any, planned: Estimate) -> Path:
    """The suite's one-page report beside its files: the drop table and figure, what it took; from
    this run's results only (`studies.robustness.RobustnessResult`), written whole."""
    directory: Path = result.output_dir
    profile: Profile = result.profile
    manifests = {arm.run.run_name: arm.run.manifest for arm in result.runs}
    incomplete = robustness_incomplete_line(result)
    figure = result.figures.get("drops")
    lines = [
        *([incomplete, ""] if incomplete else []),
        f"# Robustness diagnosis: {', '.join(result.model)}",
        "",
        f"{profile.description} Data: {result.data_label}, n = {result.n} pairs per perturbation; grader: "
        f"{result.grader}. Each perturbation's twin keeps the answer determined (docs/perturbations.md): a "
        "drop says the model's memory took a shortcut the twin breaks.",
        "",
        served_line(profile, list(manifests.values())),
        "",
        "## Drop from the unperturbed twin",
        "",
        markdown_table(result.table),
        *([f"![drops]({figure.name})", ""] if figure is not None else []),
        *what_it_took(
            profile,
            planned,
            manifests,
            f"`{directory}` (run CSVs, trajectories, manifests, per_pair.csv, tables)",
        ),
    ]
    return write_text_atomic(directory / REPORT_FILE, redact_credentials("\n".join(lines)))
