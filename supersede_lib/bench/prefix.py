"""The prompt-prefix cache against a whole-prompt prefill (part of `make bench`).

The same memory-rewrite calls (synthetic easy episodes, the CPU proof's line-edit prompt, greedy)
go to one transformers model that prefills every prompt whole and one that reuses the keys and
values of the shared system prompt and worked examples (`models.hf.PromptPrefixCache`). The calls
alternate between the two, which one goes first alternating too, so both see the same machine
load. Reported: seconds per call each, the speed-up, and how many replies are identical (bf16 sums
in another order can flip a greedy token; the CPU proof's engine check measures what that does to
accuracy).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from supersede_lib.agent.prompts import notes_update_messages
from supersede_lib.bench.engines import find_local_model, machine_summary
from supersede_lib.data.synthetic import generate_episodes
from supersede_lib.models.hf import HFChatModel

DEFAULT_PREFIX_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"  # the CPU proof's model
PROMPT_VARIANT = "v10_line_edits_loose_answer"  # the CPU proof's agent
NOTES_BUDGET_CHARS = 300
MAX_NEW_TOKENS = 48


def rewrite_calls(n_calls: int, seed: int = 0) -> list[list[dict[str, str]]]:
    """`n_calls` memory-rewrite prompts, one per session of easy 2-3-session episodes."""
    calls: list[list[dict[str, str]]] = []
    for episode in generate_episodes(n_calls, seed=seed, difficulty="easy", n_sessions=(2, 3)):
        for session in episode.sessions:
            calls.append(notes_update_messages("", session, NOTES_BUDGET_CHARS, PROMPT_VARIANT))
    return calls[:n_calls]


def prefix_cache_bench(
    model_path: str | Path | None = None,
    n_calls: int = 16,
    seed: int = 0,
    threads: int | None = None,
) -> dict[str, Any]:
    """Time the two ways on the same calls; `model_path` defaults to the local 0.5B GGUF file."""
    path = model_path or find_local_model(DEFAULT_PREFIX_MODEL)
    if path is None:
        return {"skipped": f"{DEFAULT_PREFIX_MODEL} not found in the local model folders"}
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    whole = HFChatModel(str(path), max_new_tokens_default=MAX_NEW_TOKENS)
    reusing = HFChatModel(str(path), max_new_tokens_default=MAX_NEW_TOKENS, prefix_cache=True)
    seconds = {"whole": 0.0, "prefix": 0.0}
    identical = 0
    prompt_tokens = 0
    for index, messages in enumerate(rewrite_calls(n_calls, seed)):
        order = [("whole", whole), ("prefix", reusing)]
        replies = {}
        for name, model in order if index % 2 == 0 else reversed(order):
            started = time.perf_counter()
            replies[name] = model.chat(messages)
            seconds[name] += time.perf_counter() - started
        identical += replies["whole"].text == replies["prefix"].text
        prompt_tokens += replies["whole"].prompt_tokens
    calls = n_calls if n_calls else 1
    prefix = reusing.prefix_cache
    return {
        "model": Path(str(path)).name,
        "dtype": whole.dtype,
        "calls": n_calls,
        "mean_prompt_tokens": prompt_tokens / calls,
        "prefix_tokens": max(prefix.prefix_lengths(), default=0) if prefix is not None else 0,
        "seconds_per_call_whole": seconds["whole"] / calls,
        "seconds_per_call_prefix": seconds["prefix"] / calls,
        "speedup": seconds["whole"] / seconds["prefix"] if seconds["prefix"] else None,
        "identical_replies": identical,
        "machine": machine_summary(threads),
    }


def prefix_cache_table(result: dict[str, Any]) -> str:
    """The comparison as Markdown (what outputs/bench/prefix_cache.md holds)."""
    if "skipped" in result:
        return f"Prompt-prefix cache comparison skipped: {result['skipped']}"
    machine = result["machine"]
    return "\n".join(
        [
            f"Prompt-prefix cache vs whole-prompt prefill: `{result['model']}` ({result['dtype']}), "
            f"{result['calls']} memory-rewrite calls of ~{result['mean_prompt_tokens']:.0f} tokens "
            f"({result['prefix_tokens']} shared), greedy, {MAX_NEW_TOKENS} new tokens at most; "
            f"{machine['cpu']}, threads {machine['threads']}, load {machine['load_average']}",
            "",
            "| engine | seconds per call | speed-up | identical replies |",
            "| --- | ---: | ---: | ---: |",
            f"| whole prompt | {result['seconds_per_call_whole']:.2f} | 1.00 | — |",
            f"| prefix cache | {result['seconds_per_call_prefix']:.2f} | {result['speedup']:.2f} "
            f"| {result['identical_replies']}/{result['calls']} |",
        ]
    )
