"""A trained LoRA adapter judged by llama.cpp, checked against the transformers path it was trained on.

Adapters are trained and, until now, judged through `HFChatModel` (the GGUF base dequantised,
float32). `EmbeddedGGUFModel(lora_adapter=...)` applies the same adapter inside llama.cpp's
quantised engine. This bench asks both the same bounded-memory prompts greedily and reports how
often their replies are identical, next to the same share for the base model without the adapter:
the base share is the floor that quantised arithmetic alone sets, so an adapter share near it says
the conversion adds no disagreement of its own. Time per call is reported for each engine.

The prompts are real: bounded-memory rollouts on the registered test set's kind of episodes
(synthetic, easy, 2-3 sessions), driven by the transformers adapter model (the reference); the
three other models answer exactly those prompts.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from supersede_lib.agent.rollout import make_rollout
from supersede_lib.agent.settings import DEFAULT_MAX_TOKENS_ANSWER, RolloutSettings
from supersede_lib.bench.engines import machine_summary
from supersede_lib.data.episodes import load_episodes
from supersede_lib.eval.runner import notes_max_tokens_for
from supersede_lib.models.adapter_files import restore_adapter
from supersede_lib.models.chat import Message
from supersede_lib.models.gguf import EmbeddedGGUFModel
from supersede_lib.models.hf import HFChatModel
from supersede_lib.models.lora_gguf import read_lora_adapter

# the registered test set's kind of episode (configs/cpu_proof_prereg.yaml), another seed
AGREEMENT_EPISODES = {"source": "synthetic", "difficulty": "easy", "seed": 7501, "n_sessions": [2, 3]}
DEFAULT_LORA_BASE = (
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"  # the base every registered adapter was trained on
)
Call = tuple[list[Message], int]  # the prompt and its max_tokens


def reference_calls(
    model: Any, n_calls: int, settings: RolloutSettings | None = None
) -> list[tuple[Call, str, float]]:
    """Up to `n_calls` bounded-memory calls driven by `model`: ((messages, max_tokens), reply, seconds)."""
    settings = settings or RolloutSettings()
    episodes = load_episodes({**AGREEMENT_EPISODES, "n": max(1, n_calls)})
    calls: list[tuple[Call, str, float]] = []
    for episode in episodes:
        rollout = make_rollout(episode, "bounded_memory", settings=settings)
        budget = settings.budget_for(episode)
        while not rollout.done and len(calls) < n_calls:
            kind = rollout.current_kind
            limit = DEFAULT_MAX_TOKENS_ANSWER if kind == "answer" else notes_max_tokens_for(budget)
            messages = rollout.current_messages()
            result = model.chat(messages, max_tokens=limit, temperature=0.0)
            calls.append(((messages, limit), result.text, result.latency_s))
            rollout.step(result.text)
        if len(calls) >= n_calls:
            break
    return calls


def replies_of(model: Any, calls: list[Call]) -> tuple[list[str], float]:
    """`model`'s greedy replies to `calls` and its mean seconds per call."""
    started = time.perf_counter()
    replies = [model.chat(messages, max_tokens=limit, temperature=0.0).text for messages, limit in calls]
    return replies, (time.perf_counter() - started) / max(1, len(calls))


def identical_share(left: list[str], right: list[str]) -> float:
    """The share of positions where both replies are the same text (after trimming whitespace)."""
    pairs = list(zip(left, right, strict=True))
    return sum(a.strip() == b.strip() for a, b in pairs) / max(1, len(pairs))


def _peft_folder(adapter_path: str | Path, scratch: Path) -> Path:
    """A PEFT folder for `HFChatModel`: the folder itself, or a kept record restored into `scratch`."""
    adapter = read_lora_adapter(adapter_path)
    return (
        adapter.source
        if adapter.source.is_dir()
        else restore_adapter(adapter.source, scratch / adapter.label)
    )


def _hf_model(base_gguf: Path, adapter_folder: Path | None) -> HFChatModel:
    import torch

    folder = str(adapter_folder) if adapter_folder is not None else None
    return HFChatModel(str(base_gguf), adapter_path=folder, device="cpu", dtype=torch.float32)


def adapter_agreement(
    base_gguf: str | Path, adapter_path: str | Path, n_calls: int = 20, threads: int = 1, n_ctx: int = 8192
) -> dict[str, Any]:
    """Replies of transformers (float32) and llama.cpp (the GGUF, adapter converted) on the same
    bounded-memory prompts, with and without the adapter: identical shares and seconds per call.

    One model is loaded at a time (the 0.5B in float32 takes ~2 GB); each uses `threads` threads."""
    import torch

    torch.set_num_threads(threads)
    base_gguf = Path(base_gguf)
    with tempfile.TemporaryDirectory(prefix="lora-agreement-") as scratch:
        hf_adapted = _hf_model(base_gguf, _peft_folder(adapter_path, Path(scratch)))
        reference = reference_calls(hf_adapted, n_calls)
        hf_adapted.close()
    calls = [call for call, _, _ in reference]
    replies = {"transformers+adapter": [reply for _, reply, _ in reference]}
    seconds = {"transformers+adapter": sum(latency for *_, latency in reference) / max(1, len(reference))}
    hf_base = _hf_model(base_gguf, None)
    replies["transformers"], seconds["transformers"] = replies_of(hf_base, calls)
    hf_base.close()
    for label, adapter in (("llamacpp+adapter", adapter_path), ("llamacpp", None)):
        model = EmbeddedGGUFModel(base_gguf, n_ctx=n_ctx, n_threads=threads, lora_adapter=adapter)
        model.load()
        replies[label], seconds[label] = replies_of(model, calls)
        model.close()
    return {
        "base": base_gguf.name,
        "adapter": str(adapter_path),
        "calls": len(calls),
        "identical_with_adapter": identical_share(
            replies["transformers+adapter"], replies["llamacpp+adapter"]
        ),
        "identical_base": identical_share(replies["transformers"], replies["llamacpp"]),
        "adapter_changes_transformers": 1
        - identical_share(replies["transformers+adapter"], replies["transformers"]),
        "adapter_changes_llamacpp": 1 - identical_share(replies["llamacpp+adapter"], replies["llamacpp"]),
        "seconds_per_call": seconds,
        "machine": machine_summary(threads),
        "replies": replies,
    }


def agreement_report(result: dict[str, Any]) -> str:
    """The agreement result as a short Markdown table (the machine named above it)."""
    machine = result["machine"]
    seconds = result["seconds_per_call"]
    lines = [
        f"LoRA adapter on llama.cpp vs transformers: {result['adapter']} on {result['base']}, "
        f"{result['calls']} bounded-memory calls, greedy; CPU {machine['cpu']} ({machine['cpu_count']} cores, "
        f"{machine['threads']} thread(s) per engine, load {machine['load_average']})",
        "",
        "| | identical replies | transformers s/call | llama.cpp s/call |",
        "| --- | --- | --- | --- |",
        f"| base | {result['identical_base']:.0%} | {seconds['transformers']:.2f} | {seconds['llamacpp']:.2f} |",
        f"| base + adapter | {result['identical_with_adapter']:.0%} | {seconds['transformers+adapter']:.2f} "
        f"| {seconds['llamacpp+adapter']:.2f} |",
        "",
        f"The adapter changes {result['adapter_changes_transformers']:.0%} of transformers' replies and "
        f"{result['adapter_changes_llamacpp']:.0%} of llama.cpp's.",
    ]
    return "\n".join(lines)
