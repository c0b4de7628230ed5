"""Check the GPU training path on the machine at hand, in about two minutes, before a long run.

    python -m supersede_lib gpu-check --out outputs/gpu_check   # make gpu-check: the same

Each check trains the tiny random Qwen2 (`models.tiny`, built offline) for two GRPO steps through
`train.run.train`, the entry point notebook 06 uses, and then reads what the run wrote:

- `unsloth`: Unsloth's 4-bit loading and LoRA, in the precision `run.mixed_precision` picks here;
- `unsloth_fp16`: the same as on a GPU without bf16 units (T4, V100): torch is told bf16 is missing,
  so Unsloth loads fp16 and the Trainer scales the loss;
- `transformers`: plain transformers + PEFT on CUDA (no Unsloth), gradient checkpointing on;
- `transformers_prefix`: the same without checkpointing, with the shared prompt prefix;
- `transformers_is`: plain PEFT with TRL's importance-sampling correction (`token_truncate`): the
  sampler's log-probs against the training forward's, their gap and the weight logged each step;
- `generation`: the last trained adapter answers through `HFChatModel` on CUDA in a fresh process
  (as notebook 07 evaluates; Unsloth, once imported, patches transformers' models), greedy replies
  the same with and without the prompt-prefix cache.

A training check passes when both steps ran with a finite loss, the adapter moved (its LoRA B
matrices start at zero) and the adapter weights and the optimizer's moments are float32 (bf16
adapters barely move at lr 1e-5). The tiny model's replies are noise, so the reward is a stand-in
that only spreads each group (`reply_hash_reward`); what the real reward learns is the CPU proof's
question, not this one's. The report (`gpu_check.json`, `gpu_check.md`) names the GPU and versions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import json
import math
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from supersede_lib.agent.episode import Episode
from supersede_lib.agent.rollout import BoundedMemoryRollout
from supersede_lib.models.tiny import build_tiny_model
from supersede_lib.train.config import TrainingConfig, tiny_smoke_config

CHECKS = ("unsloth", "unsloth_fp16", "transformers", "transformers_prefix", "transformers_is", "generation")
# what a run with the sampler's log-probs measured logs each step (train/grpo.py, TRL's names)
SAMPLING_GAP_METRIC = "sampling/sampling_logp_difference/mean"
IS_RATIO_METRIC = "sampling/importance_sampling_ratio/mean"
PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "unsloth", "unsloth_zoo", "bitsandbytes")
REPORT_JSON = "gpu_check.json"
REPORT_MD = "gpu_check.md"


@dataclasses.dataclass
class CheckResult:
    """One check's outcome; `detail` holds what was measured, `error` the failure (None when it passed)."""

    name: str
    ok: bool
    seconds: float
    detail: dict[str, Any]
    error: str | None = None


def reply_hash_reward(episode: Episode, rollout: BoundedMemoryRollout) -> float:
    """A stand-in reward for the tiny model's noise replies: a deterministic spread in [0, 1)."""
    return (sum(map(ord, rollout.answer or "")) % 7) / 7.0


def environment() -> dict[str, Any]:
    """The device and the versions of the packages the GPU path uses (None where one is missing)."""
    import torch

    report: dict[str, Any] = {"cuda": torch.cuda.is_available()}
    if report["cuda"]:
        report["device"] = torch.cuda.get_device_name(0)
        report["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
        report["bf16_units"] = torch.cuda.is_bf16_supported(including_emulation=False)
        report["torch_cuda"] = torch.version.cuda
    for package in PACKAGES:
        try:
            report[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            report[package] = None
    return report


@contextlib.contextmanager
def without_bf16_units() -> Iterator[None]:
    """Make torch report what it reports on a T4: bf16 only by emulation."""
    import torch

    original = torch.cuda.is_bf16_supported
    torch.cuda.is_bf16_supported = lambda including_emulation=True: bool(including_emulation)
    try:
        yield
    finally:
        torch.cuda.is_bf16_supported = original


def tensor_dtypes(path: Path) -> set[str]:
    """The dtypes of the tensors in a safetensors file."""
    from safetensors.torch import load_file

    return {str(tensor.dtype) for tensor in load_file(str(path)).values()}


def lora_b_is_zero(path: Path) -> bool:
    """True when every LoRA B matrix in an adapter file is still all zeros (the adapter never moved)."""
    from safetensors.torch import load_file

    weights = load_file(str(path))
    return all(not tensor.any() for key, tensor in weights.items() if "lora_B" in key)


def optimizer_moment_dtypes(checkpoint: Path) -> set[str]:
    """The dtypes of the Adam moments saved in a Trainer checkpoint's optimizer.pt."""
    import torch

    state = torch.load(checkpoint / "optimizer.pt", map_location="cpu", weights_only=False)["state"]
    return {str(tensor.dtype) for moments in state.values() for tensor in moments.values() if tensor.dim()}


def training_config(model_path: Path, output_dir: Path, **changes: Any) -> TrainingConfig:
    """`tiny_smoke_config` as a GPU check runs it: KL measured every step (the adapter-off pass), one
    checkpoint, the machine's own thread count."""
    settings: dict[str, Any] = dict(save_steps=2, kl_log_every=1, max_completion_length=12, cpu_threads=None)
    return tiny_smoke_config(model_path, output_dir, **{**settings, **changes})


def check_training(config: TrainingConfig) -> dict[str, Any]:
    """Train `config` for its steps and return what the run wrote; raises AssertionError when it is wrong."""
    import torch

    from supersede_lib.train.run import cpu_base_dtype, load_metrics, mixed_precision, train

    result = train(config, seed=0, scorer=reply_hash_reward, resume=False)
    losses = [float(value) for value in load_metrics(result.metrics_path)["loss"].dropna()]
    step, checkpoint = result.checkpoints[-1]
    adapter = checkpoint / "adapter_model.safetensors"
    detail = {
        "device": result.device,
        "precision": mixed_precision(None if torch.cuda.is_available() else cpu_base_dtype(config)),
        "final_step": result.final_step,
        "seconds_per_step": round(result.seconds_per_step, 2),
        "losses": losses,
        "adapter_dtypes": sorted(tensor_dtypes(adapter)),
        "optimizer_moment_dtypes": sorted(optimizer_moment_dtypes(checkpoint)),
        "adapter_moved": not lora_b_is_zero(adapter),
        "checkpoint": str(checkpoint),
        **sampling_gap_detail(config, load_metrics(result.metrics_path)),
    }
    problems = []
    if result.final_step != config.max_steps or step != config.max_steps:
        problems.append(f"stopped at step {result.final_step} (checkpoint {step}), not {config.max_steps}")
    if not losses or not all(math.isfinite(loss) for loss in losses):
        problems.append(f"losses not all finite: {losses}")
    if detail["adapter_dtypes"] != ["torch.float32"]:
        problems.append(f"adapter saved as {detail['adapter_dtypes']}, not float32")
    if detail["optimizer_moment_dtypes"] != ["torch.float32"]:
        problems.append(f"optimizer moments are {detail['optimizer_moment_dtypes']}, not float32")
    if not detail["adapter_moved"]:
        problems.append("every LoRA B matrix is still zero: the adapter never moved")
    if config.rollout_is_correction != "none":
        measured = [detail["sampling_logp_gap"], detail["is_ratio"]]
        if any(len(values) != config.max_steps or not all(map(math.isfinite, values)) for values in measured):
            problems.append(
                f"the sampler's log-prob gap and importance weight not finite every step: {measured}"
            )
    if problems:
        raise AssertionError("; ".join(problems) + f" ({json.dumps(detail, default=str)})")
    return detail


def sampling_gap_detail(config: TrainingConfig, metrics: Any) -> dict[str, list[float]]:
    """Per step, the mean |training - sampling| log-prob of the sampled tokens and the mean importance
    weight, for a run that measures them (empty for one that does not)."""
    if config.sampling_gap_every == 0 and config.rollout_is_correction == "none":
        return {}
    columns = {"sampling_logp_gap": SAMPLING_GAP_METRIC, "is_ratio": IS_RATIO_METRIC}
    return {
        name: [round(float(value), 5) for value in metrics[column].dropna()] if column in metrics else []
        for name, column in columns.items()
    }


MAX_LOGIT_GAP = 0.02  # |whole - cached| / |whole| of next-token logits; bf16 sums in another order


def prefix_logit_gap(model: Any, messages: list[dict[str, str]]) -> float:
    """Relative gap between the next-token logits of a whole-prompt prefill and of the same prompt
    continued from its cached prefix (`PromptPrefixCache`, what `prefix_cache=True` generates from)."""
    import torch

    from supersede_lib.models.hf import PromptPrefixCache

    tokenizer, network = model.tokenizer, model.model
    ids = list(
        tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"]
    )
    cache = PromptPrefixCache()
    prefix = cache.prefix_ids(tokenizer, messages, ids)
    if not prefix:
        raise AssertionError("the conversation has no reusable prefix")
    with torch.no_grad():
        whole = network(input_ids=torch.tensor([ids], device=network.device)).logits[0, -1].float()
        rest = torch.tensor([ids[len(prefix) :]], device=network.device)
        continued = (
            network(input_ids=rest, past_key_values=cache.cache_for(network, prefix)).logits[0, -1].float()
        )
    return float((whole - continued).norm() / whole.norm())


def check_generation(model_path: Path, adapter: Path, device: str) -> dict[str, Any]:
    """The adapter on `device`: the prefix-cached logits match a whole prefill, and greedy replies
    match with and without the cache (the tiny model's greedy reply is often its end token at once,
    so the logits are the check that can fail)."""
    from supersede_lib.agent import prompts
    from supersede_lib.models.hf import HFChatModel

    answer_system = prompts.get_prompt_variant(prompts.DEFAULT_PROMPT_VARIANT).answer_system
    conversations = [
        [{"role": "system", "content": answer_system}, {"role": "user", "content": question}]
        for question in ("Where do I live now?", "What is my dog called?")
    ]
    replies, tokens, gaps = {}, [], []
    for cached in (False, True):
        model = HFChatModel(str(model_path), adapter_path=str(adapter), device=device, prefix_cache=cached)
        results = [model.chat(messages, max_tokens=12) for messages in conversations]
        replies[cached] = [result.text for result in results]
        if not cached:
            tokens = [result.completion_tokens for result in results]
            gaps = [prefix_logit_gap(model, messages) for messages in conversations]
        model.close()
    detail = {"device": device, "replies": replies[False], "reply_tokens": tokens, "logit_gaps": gaps}
    if max(gaps) > MAX_LOGIT_GAP:
        raise AssertionError(
            f"prefix-cached logits differ from a whole prefill by {max(gaps):.3g} ({detail})"
        )
    if replies[True] != replies[False]:
        raise AssertionError(f"prefix-cache replies differ: {replies[True]} vs {replies[False]}")
    return detail


def in_fresh_process(function: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """`function(*args)` in a spawned Python process: one that has not imported Unsloth."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)


def _timed(name: str, check: Callable[[], dict[str, Any]]) -> CheckResult:
    started = time.perf_counter()
    try:
        detail = check()
        return CheckResult(name, True, round(time.perf_counter() - started, 1), detail)
    except Exception as error:  # noqa: BLE001 - every failure is reported, and the other checks still run
        message = f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-6)}"
        return CheckResult(name, False, round(time.perf_counter() - started, 1), {}, message)


# each training check: the config's changes to `training_config`, and whether torch is told bf16 is missing
TRAININGS: dict[str, tuple[dict[str, Any], bool]] = {
    "unsloth": (dict(use_unsloth=True), False),
    "unsloth_fp16": (dict(use_unsloth=True), True),
    "transformers": (dict(use_unsloth=False), False),
    "transformers_prefix": (
        dict(use_unsloth=False, gradient_checkpointing=False, share_prompt_prefix=True),
        False,
    ),
    "transformers_is": (dict(use_unsloth=False, rollout_is_correction="token_truncate"), False),
}


def train_and_check(config: TrainingConfig, as_on_a_t4: bool) -> dict[str, Any]:
    """`check_training(config)`, with torch reporting no bf16 units when `as_on_a_t4`."""
    with without_bf16_units() if as_on_a_t4 else contextlib.nullcontext():
        return check_training(config)


def run_checks(work_dir: Path, checks: Sequence[str] = CHECKS) -> list[CheckResult]:
    """Run `checks` in order under `work_dir`, each in a fresh process (Unsloth, once imported, patches
    transformers' model classes for the rest of a process); `generation` uses the last trained adapter."""
    import torch

    unknown = set(checks) - set(CHECKS)
    if unknown:
        raise ValueError(f"unknown checks {sorted(unknown)}; expected some of {CHECKS}")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model_path = build_tiny_model(work_dir / "tiny")
    results: list[CheckResult] = []
    adapter: Path | None = None
    for name in checks:
        if name == "generation":
            trained = adapter
            if trained is None:
                results.append(CheckResult(name, False, 0.0, {}, "no training check passed: no adapter"))
                continue
            results.append(
                _timed(
                    name,
                    lambda adapter=trained: in_fresh_process(check_generation, model_path, adapter, device),
                )
            )
            continue
        changes, as_on_a_t4 = TRAININGS[name]
        config = training_config(model_path, work_dir / name, **changes)
        result = _timed(
            name, lambda config=config, t4=as_on_a_t4: in_fresh_process(train_and_check, config, t4)
        )
        if result.ok:  # a temporary folder: used by `generation`, not reported
            adapter = Path(result.detail.pop("checkpoint"))
        results.append(result)
    return results


def write_report(results: Sequence[CheckResult], environment_report: dict[str, Any], out_dir: Path) -> Path:
    """`gpu_check.json` (everything) and `gpu_check.md` (a table) under `out_dir`; returns the table's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    record = {"environment": environment_report, "checks": [dataclasses.asdict(r) for r in results]}
    (out_dir / REPORT_JSON).write_text(json.dumps(record, indent=2, default=str) + "\n")
    versions = ", ".join(f"{name} {environment_report.get(name)}" for name in PACKAGES)
    lines = [
        f"GPU check on {environment_report.get('device', 'no CUDA device')} "
        f"(compute capability {environment_report.get('capability', '-')}, "
        f"bf16 units: {environment_report.get('bf16_units', '-')}); {versions}.",
        "",
        "| check | ok | seconds | what was seen |",
        "| --- | --- | --- | --- |",
    ]
    for result in results:
        if result.ok and "losses" in result.detail:
            seen = (
                f"{result.detail['device']}; precision {result.detail['precision']}; "
                f"{result.detail['final_step']} steps, {result.detail['seconds_per_step']} s/step; "
                f"adapter {'/'.join(result.detail['adapter_dtypes'])}, "
                f"Adam moments {'/'.join(result.detail['optimizer_moment_dtypes'])}"
            )
            if result.detail.get("is_ratio"):
                seen += (
                    f"; sampler-trainer log-prob gap per step {result.detail['sampling_logp_gap']}, "
                    f"mean importance weight {result.detail['is_ratio']}"
                )
        elif result.ok:
            seen = (
                f"on {result.detail['device']}: prefix-cached next-token logits within "
                f"{max(result.detail['logit_gaps']):.1e} of a whole prefill (relative); greedy replies "
                f"({result.detail['reply_tokens']} tokens) match with and without the cache"
            )
        else:
            seen = (result.error or "").splitlines()[0].replace("|", "/")[:300]
        lines.append(f"| {result.name} | {'yes' if result.ok else 'NO'} | {result.seconds} | {seen} |")
    path = out_dir / REPORT_MD
    path.write_text("\n".join(lines) + "\n")
    return path


def run_gpu_check(out: Path, checks: Sequence[str], *, keep: bool = False) -> int:
    """Run the named checks in a scratch folder, write the report under `out`, print it; 0 if all passed."""
    report = environment()
    if not report["cuda"]:
        checks = [name for name in checks if not name.startswith("unsloth")]
    work_dir = Path(tempfile.mkdtemp(prefix="supersede-gpu-check-"))
    try:
        results = run_checks(work_dir, checks)
    finally:
        if keep:
            print(f"runs kept in {work_dir}")
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
    table = write_report(results, report, out)
    print(table.read_text())
    for result in results:
        if not result.ok:
            print(f"--- {result.name} failed:\n{result.error}")
    return 0 if all(result.ok for result in results) else 1
