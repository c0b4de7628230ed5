"""Running GRPO: load the policy, build the trainer, train one seed (resuming), and read runs back.

A run lives in `<output_dir>/seed-<seed>/`: checkpoints, the metrics and rollouts logs, the config
it was started with (a resume under a changed config is refused) and, once finished, its summary.
Under a data-parallel launch every process runs `train`; only the main process writes these files.
Importing this module is cheap; torch, TRL and the trainer are imported when a run is built.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import random
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from supersede_lib.agent.episode import Episode
from supersede_lib.eval.provenance import config_sha256, git_state
from supersede_lib.eval.run_files import machine_facts
from supersede_lib.models.hf import (
    DEFAULT_GGUF_CACHE,
    GGUF_CACHE_ENV,
    adapter_file_fingerprint,
    base_model_file_fingerprint,
    contiguous_lm_head_input,
    dtype_label,
    load_model_and_tokenizer,
    materialize_gguf,
    prepare_chat_tokenizer,
    split_gguf_path,
)
from supersede_lib.models.tiny import build_tiny_model
from supersede_lib.train.config import (
    CONFIG_FIELDS_FREE_ON_RESUME,
    CONFIG_FILE,
    METRICS_FILE,
    ROLLOUTS_FILE,
    SUMMARY_FILE,
    TINY_MODEL,
    TRAINING_SEED_BASE,
    TrainingConfig,
)
from supersede_lib.train.curriculum import Curriculum, EpisodeSource
from supersede_lib.train.llamacpp_rollouts import LlamaCppRolloutSampler
from supersede_lib.train.precision import resolve_cpu_dtype, write_precision
from supersede_lib.train.processes import (
    is_main_process,
    join_process_group,
    local_rank,
    process_count,
    wait_for_everyone,
)

if TYPE_CHECKING:
    from transformers import TrainerCallback

    from supersede_lib.train.grpo import SupersedeGRPOTrainer
    from supersede_lib.train.rewards import TrajectoryScorer

CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")
PROCESSES_KEY = "processes"  # in training_config.json of a data-parallel run


# --------------------------------------------------------------------------- model loading


def resolve_model_source(config: TrainingConfig) -> tuple[str, str | None]:
    """(model path or hub id, gguf filename); builds the tiny model for the smoke preset."""
    if config.model_name_or_path == TINY_MODEL:
        cache = Path(os.environ.get(GGUF_CACHE_ENV) or DEFAULT_GGUF_CACHE)
        return str(build_tiny_model(cache / TINY_MODEL)), None
    return split_gguf_path(config.model_name_or_path, config.gguf_file)


def prepare_model_files(config: TrainingConfig) -> None:
    """Build the tiny model or dequantise a GGUF file into its cache folder, if the policy needs one."""
    source, gguf_file = resolve_model_source(config)
    if gguf_file is not None:
        materialize_gguf(source, gguf_file)


def resolve_base_model(config: TrainingConfig) -> str:
    """A path or hub id that `HFChatModel` loads as this run's base (the adapters' base)."""
    source, gguf_file = resolve_model_source(config)
    return str(Path(source) / gguf_file) if gguf_file else source


def uses_unsloth(config: TrainingConfig) -> bool:
    """Whether the policy is loaded by Unsloth: as configured, else exactly when CUDA is available."""
    import torch

    return torch.cuda.is_available() if config.use_unsloth is None else config.use_unsloth


def cpu_base_dtype(config: TrainingConfig, run_dir: Path | None = None) -> Any:
    """The dtype of the base weights on a CPU (`train.precision.resolve_cpu_dtype`): `cpu_dtype`, else
    the dtype `run_dir` started with, else what "auto" means on this machine."""
    import torch

    label, _ = resolve_cpu_dtype(config.cpu_dtype, run_dir)
    return getattr(torch, label)


def mixed_precision(cpu_dtype: Any = None) -> str:
    """`bf16` on GPUs with bf16 units, `fp16` (autocast + loss scaling) on CUDA GPUs without (T4, V100).

    Emulated bf16 does not count: on a T4 torch reports bf16 as supported by emulation, while Unsloth
    (which asks without emulation) loads the model in fp16. On a CPU, `cpu_dtype` is the base weights'
    dtype: bf16 base weights train under bf16 autocast (the fp32 LoRA weights then compute in bf16
    too instead of casting every activation to fp32, measured ~2x faster here), else `no`.
    """
    import torch

    if not torch.cuda.is_available():
        return "bf16" if cpu_dtype == torch.bfloat16 else "no"
    return "bf16" if torch.cuda.is_bf16_supported(including_emulation=False) else "fp16"


def _check_device(config: TrainingConfig) -> None:
    import torch

    if torch.cuda.is_available():
        return
    if config.requires_cuda:
        raise RuntimeError(
            f"{config.model_name_or_path} with this preset needs a CUDA GPU (it would run for days on a CPU); "
            "use the `offline` preset on a CPU, or pass requires_cuda=False to run it anyway"
        )
    if config.use_unsloth:
        raise RuntimeError(
            "TrainingConfig.use_unsloth=True needs a CUDA GPU; leave it None to pick automatically"
        )


def load_policy(config: TrainingConfig, seed: int = 0, run_dir: Path | None = None) -> tuple[Any, Any, Any]:
    """(model, tokenizer, peft_config): Unsloth 4-bit + LoRA on CUDA, transformers (+ PEFT config) on CPU
    (base weights in the dtype `cpu_base_dtype` gives for `run_dir`)."""
    import torch

    _check_device(config)
    source, gguf_file = resolve_model_source(config)
    if uses_unsloth(config):
        from unsloth import FastLanguageModel  # importable only when CUDA is present

        if gguf_file is not None:
            source = str(materialize_gguf(source, gguf_file))
        placement = {}
        if process_count() > 1:  # data parallel: each process holds its whole replica on its own GPU
            placement["device_map"] = {"": local_rank()}
        # Unsloth loads fp16 where the GPU has no bf16 units; say so explicitly, matching `mixed_precision`.
        model, tokenizer = FastLanguageModel.from_pretrained(
            model_name=source,
            max_seq_length=config.max_seq_length,
            dtype=torch.bfloat16 if mixed_precision() == "bf16" else torch.float16,
            load_in_4bit=config.load_in_4bit,
            **placement,
        )
        model = FastLanguageModel.get_peft_model(
            model,
            r=config.lora_r,
            lora_alpha=config.lora_alpha,
            lora_dropout=config.lora_dropout,
            target_modules=list(config.lora_target_modules),
            use_gradient_checkpointing="unsloth",
            random_state=seed,
        )
        prepare_chat_tokenizer(tokenizer, model)
        return model, tokenizer, None
    from peft import LoraConfig

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = None if device == "cuda" else cpu_base_dtype(config, run_dir)
    model, tokenizer = load_model_and_tokenizer(source, gguf_file, device=device, dtype=dtype)
    if device == "cpu":
        contiguous_lm_head_input(model)
    peft_config = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.lora_target_modules),
        task_type="CAUSAL_LM",
    )
    return model, tokenizer, peft_config


# --------------------------------------------------------------------------- running


@dataclass
class TrainingResult:
    """What one seed's run produced (also written to run_summary.json in its directory)."""

    seed: int
    output_dir: Path
    metrics_path: Path
    checkpoints: list[tuple[int, Path]]
    final_step: int
    stop_reason: str  # "max_steps" | "zero_advantage"
    final_difficulty: str
    curriculum_history: list[dict[str, Any]]
    wall_time_s: float
    seconds_per_step: float
    processes: int = 1  # data-parallel processes; each step trained on processes x trajectories_per_step
    # where it trained, e.g. "cpu (1 torch thread, bfloat16 base weights)"; "" when a summary does not say
    device: str = ""
    # provenance (empty when a summary does not carry it): `run_provenance`
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        record["output_dir"] = str(self.output_dir)
        record["metrics_path"] = str(self.metrics_path)
        record["checkpoints"] = [[step, str(path)] for step, path in self.checkpoints]
        if self.processes == 1:  # written only for a data-parallel run; a summary without it reads as 1
            del record["processes"]
        return record


def run_provenance(
    config_record: dict[str, Any], seed: int, checkpoints: Sequence[tuple[int, Path]]
) -> dict[str, Any]:
    """What makes a run traceable: the code's commit, the whole configuration and its hash, the
    generator seeds its episodes came from, and the hash of the final adapter's weights (evaluation
    rows name the same hash, so a table row can be matched to the adapter that produced it)."""
    final_adapter = checkpoints[-1][1] if checkpoints else None
    return {
        "git": git_state(),
        "config": config_record,
        "config_sha256": config_sha256(config_record),
        "generator_seed_base": TRAINING_SEED_BASE + seed,  # synthetic.episode_seed(base, episode index)
        "adapter_sha256": adapter_file_fingerprint(final_adapter) if final_adapter is not None else None,
        "base_model_sha256": base_model_file_fingerprint(str(config_record.get("model_name_or_path", ""))),
        "machine": machine_facts(),  # with the base file's bytes: what a bit-identical rebuild needs equal
    }


def training_device(model: Any) -> str:
    """Where a run trained and in which base dtype: `cuda: NVIDIA T4 (float16 ...)`, `cpu (1 torch thread, ...)`."""
    import torch

    dtypes = sorted({dtype_label(p.dtype) for p in model.parameters() if not p.requires_grad})
    weights = f"{'/'.join(dtypes) or 'no frozen'} base weights"
    if torch.cuda.is_available():
        return f"cuda: {torch.cuda.get_device_name(0)} ({weights})"
    threads = torch.get_num_threads()
    return f"cpu ({threads} torch thread{'s' if threads != 1 else ''}, {weights})"


def run_dir_for(config: TrainingConfig, seed: int) -> Path:
    """Where one seed's run lives: `<output_dir>/seed-<seed>`."""
    return Path(config.output_dir) / f"seed-{seed}"


def _config_record(config: TrainingConfig, seed: int, processes: int = 1) -> dict[str, Any]:
    record = {**config.record(), "seed": seed}
    if processes > 1:  # a data-parallel run: its batches and episodes depend on the process count
        record[PROCESSES_KEY] = processes
    return json.loads(json.dumps(record, default=str))


def record_of_run(run_dir: Path) -> dict[str, Any]:
    """The configuration a run was started with, as written to its folder."""
    return json.loads((run_dir / CONFIG_FILE).read_text())


def check_run_config(run_dir: Path, config: TrainingConfig, seed: int) -> None:
    """Refuse to continue or reuse a run directory that was started with a different config.

    A resumed or already finished run is only the same experiment when everything that shapes
    learning matches; `max_steps` and `save_steps` may grow (to train on), and output paths may move.
    The process count is checked by `train` only when it trains on: a finished run reads back anywhere.
    """
    path = run_dir / CONFIG_FILE
    if not path.exists():
        return
    changes = config_changes(json.loads(path.read_text()), config, seed)
    if changes:
        raise ValueError(
            f"{run_dir} was started with a different training config ({changes}); "
            "use another output_dir, or delete the run (train.run.remove_run) to start over"
        )


def config_changes(
    saved: dict[str, Any], config: TrainingConfig, seed: int, *, same_model_file: bool = False
) -> str:
    """What differs between a saved `training_config.json` and `config` ("" when it is the same run).

    Fields free on resume (`CONFIG_FIELDS_FREE_ON_RESUME`) are ignored. `same_model_file=True`
    compares the base model by file name only, for runs recorded on another machine.
    """
    current = _config_record(config, seed)
    if same_model_file:
        saved = {**saved, "model_name_or_path": Path(str(saved.get("model_name_or_path"))).name}
        current = {**current, "model_name_or_path": Path(str(current.get("model_name_or_path"))).name}
    differing = sorted(
        key
        for key in saved.keys() | current.keys()
        if key not in CONFIG_FIELDS_FREE_ON_RESUME | {PROCESSES_KEY} and saved.get(key) != current.get(key)
    )
    return ", ".join(f"{key}: {saved.get(key)!r} -> {current.get(key)!r}" for key in differing)


def check_run_processes(run_dir: Path, processes: int, checkpoint_step: int) -> None:
    """Refuse to resume a run under another process count: each step's batch and episodes depend on it."""
    path = run_dir / CONFIG_FILE
    started = json.loads(path.read_text()).get(PROCESSES_KEY, 1) if path.exists() else 1
    if started == processes:
        return
    how = (
        "in one process (notebook 06, or `python -m supersede_lib train ...`)"
        if started == 1
        else f"with `accelerate launch --num_processes {started} -m supersede_lib train ...`"
    )
    raise ValueError(
        f"{run_dir} was trained by {started} process(es) up to checkpoint {checkpoint_step}, this is "
        f"{processes}: resume it {how}, since each step's batch and episodes depend on the process count"
    )


def _grpo_config(config: TrainingConfig, seed: int, run_dir: Path) -> tuple[Any, bool]:
    """TRL's `GRPOConfig` for one seed's run, and whether it checkpoints gradients (the trainer's
    shared prompt prefix needs it off)."""
    import torch
    from trl.trainer.grpo_config import GRPOConfig  # TRL's own: once imported, Unsloth rebinds trl.GRPOConfig

    on_cuda = torch.cuda.is_available()
    precision = mixed_precision(None if on_cuda else cpu_base_dtype(config, run_dir))
    gradient_checkpointing = config.gradient_checkpointing
    if gradient_checkpointing is None:
        gradient_checkpointing = on_cuda and not uses_unsloth(config)  # Unsloth checkpoints by itself
    args = GRPOConfig(
        output_dir=str(run_dir),
        per_device_train_batch_size=config.trajectories_per_step // config.gradient_accumulation_steps,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        num_generations=config.num_generations,
        learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler_type,
        max_steps=config.max_steps,
        max_completion_length=config.max_completion_length,
        temperature=config.temperature,
        beta=config.kl_beta,
        loss_type=config.loss_type,
        scale_rewards=config.scale_rewards,
        logging_steps=1,
        save_strategy="steps",
        save_steps=config.save_steps,
        report_to=[],
        seed=seed,
        data_seed=seed,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        use_cpu=not on_cuda,
        gradient_checkpointing=gradient_checkpointing,
        # data parallel: every LoRA weight is in every forward pass (None: one process, no DDP wrapper)
        ddp_find_unused_parameters=False if process_count() > 1 else None,
        remove_unused_columns=False,
        log_completions=False,
        disable_tqdm=config.disable_tqdm,
        dataloader_num_workers=0,
    )
    return args, gradient_checkpointing


def _curriculum(config: TrainingConfig, next_difficulty: Callable[[str], str | None] | None) -> Curriculum:
    """The run's difficulty ladder: fixed, or adaptive (moves up when groups saturate)."""
    return Curriculum(
        difficulty=config.difficulty,
        adaptive=config.curriculum == "adaptive",
        success_reward=config.success_reward,
        saturation_threshold=config.saturation_threshold,
        saturated_group_fraction=config.saturated_group_fraction,
        patience=config.curriculum_patience,
        next_difficulty=next_difficulty,
    )


def _slot_dataset(slot_count: int) -> Any:
    """TRL's train dataset: one row per episode slot (the trainer builds each slot's prompts itself)."""
    from datasets import Dataset

    return Dataset.from_list(
        [
            {"prompt": [{"role": "user", "content": f"episode slot {slot}"}], "slot": slot}
            for slot in range(slot_count)
        ]
    )


def build_trainer(
    config: TrainingConfig,
    seed: int = 0,
    *,
    episodes: Sequence[Episode] | None = None,
    scorer: TrajectoryScorer | None = None,
    next_difficulty: Callable[[str], str | None] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
) -> SupersedeGRPOTrainer:
    """A ready-to-train `SupersedeGRPOTrainer` for one seed (`train` calls this, then `.train()`)."""
    import torch
    from transformers import set_seed

    # The trainer module imports TRL (heavy) at its top, so it is loaded only when a run is built.
    from supersede_lib.train.callbacks import MetricsFileCallback, ZeroAdvantageStop
    from supersede_lib.train.grpo import SupersedeGRPOTrainer
    from supersede_lib.train.rewards import scorer_for, supersede_rubric

    if episodes is not None and config.curriculum == "adaptive":
        raise ValueError(
            "TrainingConfig.curriculum='adaptive' needs procedural episodes; a fixed pool was given"
        )
    trl_base = SupersedeGRPOTrainer.__mro__[1]
    if trl_base.__module__ != "trl.trainer.grpo_trainer":
        raise RuntimeError(
            f"GRPOTrainer comes from {trl_base.__module__} (Unsloth's patch?): import supersede_lib.train.grpo "
            "before unsloth; the per-turn expansion needs TRL's own GRPOTrainer"
        )
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if config.cpu_threads and not torch.cuda.is_available():
        torch.set_num_threads(config.cpu_threads)
    set_seed(seed)
    random.seed(seed)
    run_dir = run_dir_for(config, seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available() and is_main_process():
        write_precision(run_dir, *resolve_cpu_dtype(config.cpu_dtype, run_dir), torch.get_num_threads())
    args, gradient_checkpointing = _grpo_config(config, seed, run_dir)
    # Each process trains on its own episodes_per_step episodes; TRL's sampler hands them out.
    slots_per_step = config.episodes_per_step * args.world_size
    if episodes is not None and len(episodes) < slots_per_step:
        raise ValueError(
            f"{len(episodes)} episodes given but episodes_per_step={config.episodes_per_step} x "
            f"{args.world_size} process(es) = {slots_per_step} distinct ones per step"
        )
    model, tokenizer, peft_config = load_policy(config, seed, run_dir)
    slot_count = len(episodes) if episodes is not None else slots_per_step
    dataset = _slot_dataset(slot_count)
    curriculum = _curriculum(config, next_difficulty)
    stop = ZeroAdvantageStop(config.zero_advantage_patience)
    metrics = MetricsFileCallback(
        run_dir / METRICS_FILE, context=lambda: {"difficulty": curriculum.difficulty}
    )
    trainer = SupersedeGRPOTrainer(
        model=model,
        reward_funcs=[supersede_rubric],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[stop, metrics, *callbacks],
        episode_source=EpisodeSource(seed, episodes, config.episode_overrides, slot_count),
        scorer=scorer or scorer_for(config.reward, config.stale_penalty_weight, config.memory_credit),
        curriculum=curriculum,
        zero_advantage_stop=stop,
        rollout_settings=config.rollout_settings(),
        kl_log_every=config.kl_log_every,
        sampling_gap_every=config.sampling_gap_every,
        rollout_is_correction=config.rollout_is_correction,
        rollout_is_clip_max=config.rollout_is_clip_max,
        skip_zero_advantage_rows=config.skip_zero_advantage_rows,
        log_rollouts=config.log_rollouts,
        # not under Unsloth (its own attention) nor gradient checkpointing (which drops the prefix cache)
        share_prompt_prefix=config.share_prompt_prefix
        and not uses_unsloth(config)
        and not gradient_checkpointing,
        rollout_sampler=rollout_sampler(config),
    )
    return trainer


def rollout_sampler(config: TrainingConfig) -> LlamaCppRolloutSampler | None:
    """llama.cpp on the GGUF the base was dequantised from, when the config hands it the sampling."""
    import torch

    if config.rollout_engine != "llamacpp":
        return None
    return LlamaCppRolloutSampler(
        resolve_base_model(config), n_threads=torch.get_num_threads(), n_ctx=config.max_seq_length
    )


def _truncate_jsonl(path: Path, max_step: int) -> None:
    """Drop rows logged after `max_step` (an interrupted run's tail that the resumed run redoes)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row["step"] <= max_step and row.get("kind") != "summary":
            kept.append(line + "\n")
    path.write_text("".join(kept))


def _prepare_run_dir(config: TrainingConfig, seed: int, processes: int, resume_step: int | None) -> None:
    """The main process readies the run folder: logs cut back to the resumed step (or removed for a
    new run), the config record written, and the model files prepared once for every process."""
    run_dir = run_dir_for(config, seed)
    for name in (METRICS_FILE, ROLLOUTS_FILE):
        if resume_step is not None:
            _truncate_jsonl(run_dir / name, resume_step)
        elif (run_dir / name).exists():
            (run_dir / name).unlink()
    run_dir.mkdir(parents=True, exist_ok=True)
    record = _config_record(config, seed, processes)
    (run_dir / CONFIG_FILE).write_text(json.dumps(record, indent=2) + "\n")
    if processes > 1:  # once, before the others load it: they would all write the same cache folder
        prepare_model_files(config)


def train(
    config: TrainingConfig,
    seed: int = 0,
    *,
    episodes: Sequence[Episode] | None = None,
    scorer: TrajectoryScorer | None = None,
    next_difficulty: Callable[[str], str | None] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
    resume: bool = True,
) -> TrainingResult:
    """Run (or resume) one seed; writes checkpoints, metrics.jsonl, rollouts.jsonl, run_summary.json.

    With `resume=True` an interrupted run continues from its last checkpoint (step count, optimizer,
    curriculum and stop counter included); a finished run is not retrained. `resume=False` on a
    directory that already holds checkpoints raises instead of mixing two runs.

    Under a data-parallel launch every process calls this: all read the run folder, the main
    process alone writes it (the others wait), and all return the same result.
    """
    import torch

    processes = join_process_group()
    run_dir = run_dir_for(config, seed)
    existing = list_checkpoints(run_dir)
    summary_path = run_dir / SUMMARY_FILE
    if existing and not resume:
        raise FileExistsError(
            f"{run_dir} already holds checkpoints; pass resume=True or use a new output_dir"
        )
    if resume:
        check_run_config(run_dir, config, seed)
        finished = finished_run(config, seed)
        if finished is not None:
            return finished
    resume_from = existing[-1] if (resume and existing) else None
    if resume_from is not None:
        check_run_processes(run_dir, processes, resume_from[0])
    wait_for_everyone()  # every process has read the folder before the main process changes it
    if is_main_process():
        _prepare_run_dir(config, seed, processes, resume_from[0] if resume_from else None)
    wait_for_everyone()
    trainer = build_trainer(
        config, seed, episodes=episodes, scorer=scorer, next_difficulty=next_difficulty, callbacks=callbacks
    )
    start_step = resume_from[0] if resume_from else 0
    started = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=str(resume_from[1]) if resume_from else None)
        wall = time.perf_counter() - started
        wait_for_everyone()  # the last checkpoint is complete (each process saves its RNG state) before listing
        final_step = trainer.state.global_step
        stopped = trainer.zero_advantage_stop.stopped_at_step is not None
        result = TrainingResult(
            seed=seed,
            output_dir=run_dir,
            metrics_path=run_dir / METRICS_FILE,
            checkpoints=list_checkpoints(run_dir),
            final_step=final_step,
            stop_reason="zero_advantage" if stopped else "max_steps",
            final_difficulty=trainer.curriculum.difficulty,
            curriculum_history=list(trainer.curriculum.history),
            wall_time_s=wall,
            seconds_per_step=wall / max(1, final_step - start_step),
            processes=processes,
            device=training_device(trainer.model),
        )
        result.provenance = run_provenance(record_of_run(run_dir), seed, result.checkpoints)
    finally:
        del trainer
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    if is_main_process():
        summary_path.write_text(json.dumps(result.to_dict(), indent=2))
    wait_for_everyone()  # no process goes on (to the next run, or to read this one) before the summary exists
    return result


def finished_run(config: TrainingConfig, seed: int) -> TrainingResult | None:
    """The run's result when it has finished under `config` (stopped, or reached `max_steps`), else None."""
    summary_path = run_dir_for(config, seed) / SUMMARY_FILE
    if not summary_path.exists():
        return None
    finished = read_run_summary(summary_path)
    if finished.stop_reason == "zero_advantage" or finished.final_step >= config.max_steps:
        return finished
    return None


def read_run_summary(path: Path) -> TrainingResult:
    """A finished run's `run_summary.json` as a `TrainingResult`."""
    record = json.loads(path.read_text())
    record["output_dir"] = Path(record["output_dir"])
    record["metrics_path"] = Path(record["metrics_path"])
    record["checkpoints"] = [(int(step), Path(folder)) for step, folder in record["checkpoints"]]
    return TrainingResult(**record)


# --------------------------------------------------------------------------- results


def list_checkpoints(output_dir: str | os.PathLike) -> list[tuple[int, Path]]:
    """(step, path) of every saved adapter checkpoint under `output_dir`, in step order."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = CHECKPOINT_PATTERN.match(child.name)
        if match and child.is_dir() and (child / "adapter_config.json").exists():
            found.append((int(match.group(1)), child))
    return sorted(found)


def load_metrics(metrics_path: str | os.PathLike) -> pd.DataFrame:
    """The per-step training metrics as a pandas DataFrame (summary rows dropped)."""
    rows = [json.loads(line) for line in Path(metrics_path).read_text().splitlines() if line.strip()]
    frame = pd.DataFrame([row for row in rows if row.get("kind", "train") == "train"])
    if frame.empty:
        return frame
    return frame.sort_values("step").drop_duplicates("step", keep="last").reset_index(drop=True)


def remove_run(config: TrainingConfig, seed: int) -> None:
    """Delete one seed's run directory (to retrain from scratch)."""
    shutil.rmtree(run_dir_for(config, seed), ignore_errors=True)
