"""The settings of one GRPO run: `TrainingConfig`, its presets, and the names of the files a run writes.

Importable without torch or TRL, so studies and notebooks can read configs and run folders cheaply.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from supersede_lib.agent.settings import DEFAULT_ROLLOUT, RolloutSettings
from supersede_lib.data.synthetic.tables import as_tuples
from supersede_lib.models.gguf import MODEL_DIR_ENV, default_model_dir
from supersede_lib.models.numbers import check_numbers

TINY_MODEL = "tiny-random-qwen2"  # resolved to a locally built model by `run.resolve_model_source`
PRESETS = ("smoke", "offline", "cpu_proof", "colab", "paper")  # configs/training/<name>.yaml
PRESETS_DIR = Path(__file__).resolve().parents[2] / "configs" / "training"
CPU_DTYPES = ("auto", "bfloat16", "float32")
REWARDS = ("sparse", "memory", "notes_used", "format")  # train.rewards.scorer_for says what each pays
DEFAULT_REWARD = "sparse"  # the paper's: the answer alone
CURRICULUM_MODES = ("fixed", "adaptive")
LORA_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
METRICS_FILE = "metrics.jsonl"
ROLLOUTS_FILE = "rollouts.jsonl"
SUMMARY_FILE = "run_summary.json"
CONFIG_FILE = "training_config.json"  # the config a run directory was started with
STATE_FILE = "supersede_state.json"  # curriculum + stop counter, saved inside every checkpoint
TRAINING_SEED_BASE = 500  # synthetic.episode_seed(500 + run seed, step * slots + slot)
# Fields that change how a run is displayed or stored, never what it learns: free to differ on resume.
CONFIG_FIELDS_FREE_ON_RESUME = frozenset(
    {
        "output_dir",
        "disable_tqdm",
        "log_rollouts",
        "max_steps",
        "save_steps",
        "requires_cuda",
        "share_prompt_prefix",  # how the loss is computed, not what it is
        "sampling_gap_every",  # a measurement only
    }
)
# Fields a run's record names only where they differ from their defaults: a run recorded without them
# reads as one with their defaults, and its config hash stays what it was (`TrainingConfig.record`).
CONFIG_FIELDS_RECORDED_WHEN_SET = (
    "sampling_gap_every",
    "rollout_is_correction",
    "rollout_is_clip_max",
    "rollout_engine",
)
# TRL's `vllm_importance_sampling_mode` values, and "none": no importance-sampling correction
IS_CORRECTION_MODES = ("none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
DEFAULT_IS_CLIP_MAX = 3.0  # TRL's `vllm_importance_sampling_clip_max` default
# who samples the rollouts: the trained model itself in transformers, or llama.cpp with its LoRA as a
# GGUF adapter (train/llamacpp_rollouts.py)
ROLLOUT_ENGINES = ("policy", "llamacpp")


def model_dir() -> Path:
    """Where the presets look for GGUF files: `$SUPERSEDE_MODEL_DIR`, else the provisioning cache."""
    return Path(os.environ.get(MODEL_DIR_ENV) or default_model_dir())


# fields a profile may override, with the bounds a sane run stays inside
NUMBER_BOUNDS: dict[str, tuple[float, float]] = {
    "learning_rate": (0.0, 1.0),
    "lora_r": (1, 1024),
    "lora_alpha": (1, 4096),
    "lora_dropout": (0.0, 1.0),
    "episodes_per_step": (1, 4096),
    "num_generations": (1, 1024),
    "gradient_accumulation_steps": (1, 4096),
    "max_steps": (1, 1_000_000),
    "max_completion_length": (1, 131_072),
    "temperature": (0.0, 10.0),
    "kl_beta": (0.0, 100.0),
    "notes_budget_chars": (1, 100_000),
    "stale_penalty_weight": (0.0, 100.0),
    "save_steps": (1, 1_000_000),
    "max_seq_length": (16, 1_048_576),
    "sampling_gap_every": (0, 1_000_000),
    "rollout_is_clip_max": (1.0, 1_000.0),
}


def check_training_numbers(values: Mapping[str, Any]) -> None:
    """Every bounded field present a number inside its bounds, and a learning rate above 0:
    `learning_rate: 'fast'` or `max_steps: -5` fail when a config or a profile's overrides are read,
    not hours into a run."""
    check_numbers(values, NUMBER_BOUNDS)
    if values.get("learning_rate") is not None and values["learning_rate"] <= 0:
        raise ValueError(f"learning_rate must be > 0, got {values['learning_rate']!r}")


@dataclass
class TrainingConfig:
    """Everything one GRPO run needs; `TrainingConfig.preset(name)` gives the studied settings."""

    model_name_or_path: str = "Qwen/Qwen2.5-3B-Instruct"
    gguf_file: str | None = None
    output_dir: str = "outputs/training"
    # LoRA (paper: rank 32, alpha 64)
    lora_r: int = 32
    lora_alpha: int = 64
    lora_dropout: float = 0.0
    lora_target_modules: tuple[str, ...] = LORA_TARGET_MODULES
    # GRPO (paper: lr 1e-5, batch 32 = 4 episodes x group 8)
    learning_rate: float = 1e-5
    # Episodes per optimiser step ON EACH PROCESS: N data-parallel processes train on N x this many per
    # step (the paper's 32 trajectories on 4 GPUs: episodes_per_step=1, gradient_accumulation_steps=4).
    episodes_per_step: int = 4
    num_generations: int = 8
    gradient_accumulation_steps: int = 8
    max_steps: int = 250
    max_completion_length: int = 192
    temperature: float = 1.0
    kl_beta: float = 0.0
    kl_log_every: int = 1  # beta 0: measure KL(policy || base) every N steps (0: never; costs 2 passes)
    # log the gap between the sampler's and the training forward's log-probs of the sampled tokens
    # every N steps (train/sampling_logps.py; 0: never; one no-grad pass, shared with the KL's)
    sampling_gap_every: int = 0
    # TRL's importance-sampling correction for that gap (IS_CORRECTION_MODES; it is measured every
    # step then), with the weight's cap
    rollout_is_correction: str = "none"
    rollout_is_clip_max: float = DEFAULT_IS_CLIP_MAX
    # ROLLOUT_ENGINES; with "llamacpp" the sampler's gap is measured every step (needs a GGUF model and
    # a temperature above 0)
    rollout_engine: str = "policy"
    loss_type: str = "dapo"
    skip_zero_advantage_rows: bool = True  # same gradient, less work (see SupersedeGRPOTrainer)
    # run the prompt prefix the rows share once per micro-batch (train/shared_prefix.py): same
    # gradient up to rounding, a fraction of the tokens; not under Unsloth (its patched attention)
    share_prompt_prefix: bool = False
    scale_rewards: str = "group"
    lr_scheduler_type: str = "constant"  # the run length is decided by auto-stop, not max_steps
    # Episodes: procedural, drawn fresh each step at the current difficulty
    difficulty: str = "medium"
    episode_overrides: dict[str, Any] = field(default_factory=dict)
    notes_budget_chars: int = DEFAULT_ROLLOUT.notes_budget_chars
    prompt_variant: str = DEFAULT_ROLLOUT.prompt_variant  # how the policy is asked (prompts.PROMPT_VARIANTS)
    stale_penalty_weight: float = 1.0
    reward: str = DEFAULT_REWARD  # "sparse" (the paper: the answer alone) | "memory" (+ current notes)
    memory_credit: float = 0.5  # the "memory" reward's credit (rewards.memory_credit_scorer)
    # Curriculum (beyond the paper): climb the difficulty ladder when groups saturate
    curriculum: str = "fixed"
    success_reward: float = 1.0  # a rollout "succeeds" when its reward reaches this
    saturation_threshold: float = 0.875  # a group saturates when this fraction of it succeeds
    saturated_group_fraction: float = 0.5  # ... and the batch saturates when this fraction of groups do
    curriculum_patience: int = 2  # consecutive saturated batches before moving up
    # Stopping, checkpoints, logging
    zero_advantage_patience: int = 10  # paper: stopped after 10 zero-advantage batches (step 174)
    save_steps: int = 50
    log_rollouts: bool = True
    disable_tqdm: bool = True
    # Backend
    use_unsloth: bool | None = None  # None: exactly when CUDA is available
    requires_cuda: bool = False  # GPU-sized presets refuse to start on a CPU instead of running for days
    load_in_4bit: bool = True
    fast_inference: bool = False  # Unsloth's vLLM engine: rejected, our rollouts never use it (see below)
    max_seq_length: int = 2048
    gradient_checkpointing: bool | None = None  # None: on for CUDA (Unsloth's own), off on CPU
    cpu_threads: int | None = None  # torch.set_num_threads on CPU runs; 1 avoids thread thrash on busy cores
    # base weights on CPU: "auto" = bf16 where the CPU computes bf16 natively (amx_bf16 or avx512_bf16,
    # hf.fast_dtype), else fp32;
    # LoRA weights and optimizer state stay fp32 either way (grpo.keep_trainable_parameters_fp32)
    cpu_dtype: str = "auto"

    def __post_init__(self) -> None:
        check_training_numbers(dataclasses.asdict(self))
        if self.fast_inference:
            raise ValueError(
                "TrainingConfig.fast_inference=True would start Unsloth's vLLM engine, which reserves a "
                "fixed share of GPU memory (60% by default) while our per-turn rollouts generate with the "
                "policy itself and never call it; leave fast_inference=False"
            )
        if self.reward not in REWARDS:
            raise ValueError(f"TrainingConfig.reward must be one of {REWARDS}, got {self.reward!r}")
        if self.cpu_dtype not in CPU_DTYPES:
            raise ValueError(f"TrainingConfig.cpu_dtype must be one of {CPU_DTYPES}, got {self.cpu_dtype!r}")
        if self.rollout_is_correction not in IS_CORRECTION_MODES:
            raise ValueError(
                f"TrainingConfig.rollout_is_correction must be one of {IS_CORRECTION_MODES}, "
                f"got {self.rollout_is_correction!r}"
            )
        if self.rollout_engine not in ROLLOUT_ENGINES:
            raise ValueError(
                f"TrainingConfig.rollout_engine must be one of {ROLLOUT_ENGINES}, got {self.rollout_engine!r}"
            )
        if self.rollout_engine == "llamacpp" and self.temperature <= 0:
            raise ValueError("TrainingConfig: rollout_engine 'llamacpp' samples at a temperature above 0")
        if self.loss_type == "vespo" and self.rollout_is_correction.startswith("sequence"):
            raise ValueError(
                "TrainingConfig: the vespo loss takes token-level importance weights only; set "
                "rollout_is_correction to 'token_truncate' or 'token_mask'"
            )
        if self.curriculum not in CURRICULUM_MODES:
            raise ValueError(
                f"TrainingConfig.curriculum must be one of {CURRICULUM_MODES}, got {self.curriculum!r}"
            )
        if self.num_generations < 2:
            raise ValueError(
                f"TrainingConfig.num_generations must be >= 2 for GRPO, got {self.num_generations}"
            )
        if self.trajectories_per_step % self.gradient_accumulation_steps:
            raise ValueError(
                "TrainingConfig: episodes_per_step x num_generations "
                f"({self.trajectories_per_step}) must be divisible by gradient_accumulation_steps "
                f"({self.gradient_accumulation_steps})"
            )

    def rollout_settings(self) -> RolloutSettings:
        """The budget and prompt variant every training rollout is built with (the rollout core's type)."""
        return RolloutSettings(notes_budget_chars=self.notes_budget_chars, prompt_variant=self.prompt_variant)

    @property
    def trajectories_per_step(self) -> int:
        """Trajectories per optimiser step on each process (times the process count under a launcher)."""
        return self.episodes_per_step * self.num_generations

    def record(self) -> dict[str, Any]:
        """The fields as a run records them: `CONFIG_FIELDS_RECORDED_WHEN_SET` only where not default."""
        defaults = {field.name: field.default for field in dataclasses.fields(self)}
        return {
            name: value
            for name, value in dataclasses.asdict(self).items()
            if name not in CONFIG_FIELDS_RECORDED_WHEN_SET or value != defaults[name]
        }

    def replace(self, **changes: Any) -> TrainingConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> TrainingConfig:
        """A preset of `configs/training/` (`smoke`: tiny, seconds; `offline`, `cpu_proof`: CPU; `colab`:
        one free T4 session; `paper`: the paper's run) with `overrides` on top."""
        base = read_preset(name)
        base.update(overrides)
        return cls(**base)


def read_preset(name: str, presets_dir: Path = PRESETS_DIR) -> dict[str, Any]:
    """A named training preset, `configs/training/<name>.yaml`, as TrainingConfig's keyword arguments.

    A `model_file` key names a GGUF file in `model_dir()`, looked up when the preset is read."""
    path = presets_dir / f"{name}.yaml"
    if not path.exists():
        known = sorted(file.stem for file in presets_dir.glob("*.yaml"))
        raise ValueError(f"unknown training preset {name!r}: no {path} (known: {', '.join(known)})")
    settings = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    unknown = set(settings) - {field.name for field in dataclasses.fields(TrainingConfig)} - {"model_file"}
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {sorted(unknown)}; the keys are TrainingConfig's fields")
    model_file = settings.pop("model_file", None)
    if model_file is not None:
        settings["model_name_or_path"] = str(model_dir() / model_file)
    return {key: as_tuples(value) for key, value in settings.items()}


def tiny_smoke_config(
    model_path: str | os.PathLike, output_dir: str | os.PathLike, **changes: Any
) -> TrainingConfig:
    """The smoke preset cut down for the tiny random model (`models.tiny`): two steps on two-session
    episodes without trailing distractors, enough to run every part of the training path in seconds.

    The training tests and `gpu_check` start from this one configuration and name what they change
    (`changes`), so their runs differ only where they say so.
    """
    settings: dict[str, Any] = dict(
        model_name_or_path=str(model_path),
        output_dir=str(output_dir),
        max_steps=2,
        episode_overrides={"n_sessions": (2, 2), "trailing_distractors": (0, 0)},
    )
    settings.update(changes)
    return TrainingConfig.preset("smoke", **settings)


def cuda_device_name() -> str | None:
    """The first CUDA GPU's name from `nvidia-smi` (no torch import: safe before installing), or None."""
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        return None
    try:
        listing = subprocess.run(
            [nvidia_smi, "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    names = [line.strip() for line in listing.splitlines() if line.strip()]
    return names[0] if names else None


def preset_for_device(device_name: str | None, default: str) -> str:
    """`colab` on a T4 (the GPU the preset and the `colab` profile are sized for), else `default`.

    `device_name` is a CUDA device name, None without a GPU; notebook 06 passes `cuda_device_name()`.
    """
    return "colab" if device_name and "T4" in device_name else default
