"""The base dtype of a CPU training run: chosen by the CPU, kept by a run folder, refused against a record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supersede_lib import profiles
from supersede_lib.models import cpu_features
from supersede_lib.train.precision import (
    CPU_DTYPE_ENV,
    PRECISION_FILE,
    PrecisionMismatch,
    check_recorded_precision,
    dtype_for_auto,
    dtype_in_device,
    resolve_cpu_dtype,
    write_precision,
)

AMX_CPUINFO = "model name\t: Intel Xeon\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_int8\n"
AVX2_CPUINFO = "model name\t: AMD EPYC\nflags\t\t: fpu avx2 fma\n"


@pytest.fixture
def amx_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CPU_DTYPE_ENV, raising=False)
    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda *args: AMX_CPUINFO)


@pytest.fixture
def avx2_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CPU_DTYPE_ENV, raising=False)
    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda *args: AVX2_CPUINFO)


def test_auto_is_bf16_where_the_cpu_has_native_bf16_and_float32_elsewhere(monkeypatch) -> None:
    monkeypatch.delenv(CPU_DTYPE_ENV, raising=False)
    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda *args: AMX_CPUINFO)
    dtype, why = dtype_for_auto()
    assert dtype == "bfloat16" and "amx_bf16" in why
    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda *args: AVX2_CPUINFO)
    assert dtype_for_auto() == ("float32", "auto: no native bf16")


def test_the_variable_decides_what_auto_means_and_a_bad_value_is_named(amx_cpu, monkeypatch) -> None:
    monkeypatch.setenv(CPU_DTYPE_ENV, "float32")
    assert dtype_for_auto() == ("float32", f"{CPU_DTYPE_ENV}=float32")
    monkeypatch.setenv(CPU_DTYPE_ENV, "float16")
    with pytest.raises(ValueError, match=f"{CPU_DTYPE_ENV}='float16'"):
        dtype_for_auto()


def test_a_run_folder_keeps_the_dtype_it_started_with_on_another_cpu(amx_cpu, tmp_path: Path) -> None:
    write_precision(tmp_path, "float32", "auto: no native bf16", threads=1)
    record = json.loads((tmp_path / PRECISION_FILE).read_text())
    assert record["base_dtype"] == "float32" and record["torch_threads"] == 1
    assert resolve_cpu_dtype("auto", tmp_path)[0] == "float32"  # this CPU alone would say bfloat16
    assert resolve_cpu_dtype("auto", tmp_path / "new")[0] == "bfloat16"
    write_precision(tmp_path, "bfloat16", "again", threads=2)  # the first record stays
    assert json.loads((tmp_path / PRECISION_FILE).read_text())["base_dtype"] == "float32"


def test_a_folder_started_in_one_dtype_and_configured_for_another_is_refused(avx2_cpu, tmp_path) -> None:
    write_precision(tmp_path, "float32", "auto: no native bf16", threads=1)
    assert resolve_cpu_dtype("float32", tmp_path) == ("float32", "named in the config")
    with pytest.raises(PrecisionMismatch, match="started with float32"):
        resolve_cpu_dtype("bfloat16", tmp_path)


def test_a_broken_precision_record_is_named(tmp_path: Path) -> None:
    (tmp_path / PRECISION_FILE).write_text("{}")
    with pytest.raises(ValueError, match=f"{PRECISION_FILE}.*base_dtype"):
        resolve_cpu_dtype("auto", tmp_path)


def test_the_dtype_is_read_from_a_run_summarys_device() -> None:
    assert dtype_in_device("cpu (1 torch thread, float32 base weights)") == "float32"
    assert dtype_in_device("cpu (2 torch threads, bfloat16 base weights)") == "bfloat16"
    assert dtype_in_device("") is None


def test_retraining_a_recorded_float32_run_on_an_amx_cpu_is_refused_unless_asked(
    amx_cpu, monkeypatch
) -> None:
    device = "cpu (1 torch thread, float32 base weights)"
    with pytest.raises(PrecisionMismatch, match=f"{CPU_DTYPE_ENV}=float32"):
        check_recorded_precision(Path("summary.json"), "auto", device)
    check_recorded_precision(Path("summary.json"), "float32", device)  # the config names it: no surprise
    monkeypatch.setenv(CPU_DTYPE_ENV, "float32")
    check_recorded_precision(Path("summary.json"), "auto", device)


def test_the_registered_runs_are_refused_in_bf16_on_an_amx_cpu(amx_cpu, monkeypatch) -> None:
    from supersede_lib.studies.training import check_committed_precision, planned_arms

    profile = profiles.load_profile("cpu_proof_prereg")
    verdict = next(arm for arm in planned_arms(profile) if arm.name == "verdict")
    with pytest.raises(PrecisionMismatch, match="verdict__seed-12.run_summary.json"):
        check_committed_precision(profile, verdict.config, 12, verdict.name)
    monkeypatch.setenv(CPU_DTYPE_ENV, "float32")
    check_committed_precision(profile, verdict.config, 12, verdict.name)


def test_build_trainer_records_the_precision_and_a_resume_keeps_it(tiny_path, tmp_path, avx2_cpu) -> None:
    import torch

    from supersede_lib.train.config import tiny_smoke_config
    from supersede_lib.train.run import build_trainer, run_dir_for

    config = tiny_smoke_config(tiny_path, tmp_path, max_steps=1, cpu_dtype="auto", save_steps=1)
    run_dir = run_dir_for(config, 0)
    run_dir.mkdir(parents=True)
    write_precision(run_dir, "bfloat16", "started on an AMX CPU", threads=2)
    trainer = build_trainer(config, seed=0)
    frozen = {p.dtype for p in trainer.model.parameters() if not p.requires_grad}
    assert frozen == {torch.bfloat16}  # this (AVX2) CPU alone would have said float32
    assert trainer.args.bf16
    fresh = build_trainer(config, seed=1)
    assert json.loads((run_dir_for(config, 1) / PRECISION_FILE).read_text())["base_dtype"] == "float32"
    assert {p.dtype for p in fresh.model.parameters() if not p.requires_grad} == {torch.float32}
