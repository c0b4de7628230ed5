"""Rollouts sampled by llama.cpp: the base GGUF with the policy's current LoRA as a GGUF adapter.

On a CPU without fast bfloat16 matmuls (AVX2 only) llama.cpp's quantised kernels sample several
times faster than transformers, while the loss still needs transformers' gradients. So the trainer
can hand the sampling to llama.cpp (`TrainingConfig.rollout_engine = "llamacpp"`): before a step's
first rollout the current LoRA is saved, converted to a GGUF adapter (`models.lora_gguf`) and the
engine reloaded with it; every prompt of a turn is then sampled in its own llama.cpp slot, from the
trainer's own token ids, with the trainer's temperature and no other truncation.

The sampler is then another program, so what it computed is kept: llama.cpp reports the probability
of every drawn token after its sampler chain (the logits divided by the temperature, nothing cut),
which is TRL's training log-prob definition. The trainer logs the gap to its own forward each step
and can correct for it with TRL's importance-sampling weights (`train.sampling_logps`).
"""

from __future__ import annotations

import concurrent.futures
import math
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

from supersede_lib.models.chat import ModelCallError, ModelConfigError, one_line
from supersede_lib.models.gguf import server_params
from supersede_lib.models.lora_gguf import convert_lora_adapter

MAX_SLOTS = 8  # llama.cpp slots decoded together; more only queue on a 2-core CPU


def completion_body(
    prompt_ids: list[int], *, max_new_tokens: int, temperature: float, seed: int
) -> dict[str, Any]:
    """llama.cpp's completion request for one prompt: sample with `temperature` alone (no top-k, top-p or
    min-p, as TRL samples by default) and report each drawn token's probability after that."""
    if temperature <= 0:
        raise ValueError(f"llama.cpp rollouts sample at a temperature above 0, got {temperature}")
    return {
        "prompt": list(prompt_ids),
        "n_predict": max_new_tokens,
        "temperature": temperature,
        "top_k": 0,
        "top_p": 1.0,
        "min_p": 0.0,
        "seed": seed,
        "n_probs": 1,
        "post_sampling_probs": True,  # the probability under logits / temperature, as TRL's log-probs
        "cache_prompt": True,
    }


def read_completion(response: dict[str, Any]) -> tuple[list[int], list[float]]:
    """The drawn token ids (an end-of-generation token included, as TRL keeps it) and their log-probs."""
    try:
        content = response["choices"][0]["logprobs"]["content"]
        tokens = [int(entry["id"]) for entry in content]
        probabilities = [float(entry["prob"]) for entry in content]
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise ModelCallError(
            f"llama.cpp's completion lacks per-token ids and probabilities: {error!r}"
        ) from error
    if any(not 0.0 < probability <= 1.0 for probability in probabilities):
        raise ModelCallError(
            f"llama.cpp reported a drawn token's probability outside (0, 1]: {probabilities}"
        )
    return tokens, [math.log(probability) for probability in probabilities]


class LlamaCppRolloutSampler:
    """Samples a turn's replies with llama.cpp, reloaded with the policy's LoRA whenever it changed.

    `base_gguf` must be the GGUF the trainer's base weights were dequantised from, so that the two
    engines differ only in arithmetic (llama.cpp's quantised dot products), not in weights.
    """

    def __init__(self, base_gguf: str | Path, *, n_threads: int, n_ctx: int) -> None:
        self.base_gguf = Path(base_gguf)
        if self.base_gguf.suffix != ".gguf" or not self.base_gguf.is_file():
            raise ModelConfigError(
                f"rollout_engine 'llamacpp' samples from the policy's GGUF file, and {self.base_gguf} is not "
                "one: train from a .gguf model (model_file in the preset), or use rollout_engine 'policy'"
            )
        # the saved LoRA and its GGUF form, replaced at every reload, removed with the sampler
        self.workdir = Path(tempfile.mkdtemp(prefix="supersede-llamacpp-rollouts-"))
        weakref.finalize(self, shutil.rmtree, self.workdir, True)
        self.n_threads = n_threads
        self.n_ctx = n_ctx
        self.version: int | None = None  # the optimiser step whose LoRA the engine holds
        self.adapter_gguf: Path | None = None
        self._server: Any = None
        self._slots = 0

    def sync(self, model: Any, version: int, slots: int) -> None:
        """Reload the engine with `model`'s LoRA unless it already holds version `version` with `slots`."""
        slots = max(1, min(MAX_SLOTS, slots))
        if self._server is not None and self.version == version and self._slots >= slots:
            return
        folder = self.workdir / "adapter"
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(self.workdir / "gguf", ignore_errors=True)
        model.save_pretrained(str(folder))
        self.adapter_gguf = convert_lora_adapter(folder, self.base_gguf, cache_dir=self.workdir / "gguf")
        self._server = None  # frees the previous engine before the next one loads
        self._server = self._load(self.adapter_gguf, slots)
        self.version, self._slots = version, slots

    def _load(self, adapter_gguf: Path, slots: int) -> Any:
        import xllamacpp

        params = server_params(
            self.base_gguf,
            n_ctx=self.n_ctx,
            n_parallel=slots,
            n_threads=self.n_threads,
            lora_gguf=adapter_gguf,
        )
        try:
            return xllamacpp.Server(params)
        except RuntimeError as error:
            raise ModelConfigError(
                f"xllamacpp could not load {self.base_gguf} with the LoRA {adapter_gguf}: {one_line(error)}"
            ) from error

    def sample(
        self, prompt_ids: list[list[int]], *, max_new_tokens: int, temperature: float, seed: int
    ) -> tuple[list[list[int]], list[list[float]]]:
        """One reply per prompt (each with its own seed), and the log-prob of each reply token."""
        if self._server is None:
            raise RuntimeError("LlamaCppRolloutSampler.sample before sync: no LoRA loaded")
        bodies = [
            completion_body(ids, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed + index)
            for index, ids in enumerate(prompt_ids)
        ]
        with concurrent.futures.ThreadPoolExecutor(max_workers=self._slots) as pool:
            responses = list(pool.map(self._complete, bodies))
        replies = [read_completion(response) for response in responses]
        return [tokens for tokens, _ in replies], [logps for _, logps in replies]

    def _complete(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._server.handle_completions(body)
        except ValueError as error:  # xllamacpp raises on a request it rejects
            response = {"error": one_line(error)}
        if "error" in response:  # a prompt longer than a slot's context comes back as an error reply
            raise ModelCallError(
                f"llama.cpp rejected a rollout prompt of {len(body['prompt'])} tokens (a slot holds "
                f"{self.n_ctx}): {response['error']}"
            )
        return response

    def close(self) -> None:
        self._server = None
        shutil.rmtree(self.workdir, ignore_errors=True)
