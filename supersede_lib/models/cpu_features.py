"""Which bf16 arithmetic this CPU has, read from `/proc/cpuinfo` text (pure, testable on fake text).

`engine` picks an embedded model's engine from these flags and `hf.fast_dtype` its dtype; both
read them here, so `hf` needs nothing from `engine` (which imports `hf` through `batched`).
Tests patch `read_cpuinfo` in this module to stand in for the machine's CPU.
"""

from __future__ import annotations

from pathlib import Path

BF16_MATRIX_FLAGS = ("amx_bf16",)  # matrix tiles: batched bf16 transformers beats llama.cpp
BF16_NATIVE_FLAGS = ("amx_bf16", "avx512_bf16")  # bf16 arithmetic in hardware: bf16 beats fp32 in torch
CPUINFO_PATH = Path("/proc/cpuinfo")


def cpu_flags(cpuinfo_text: str) -> frozenset[str]:
    """The feature flags of the first CPU listed in `/proc/cpuinfo` text (x86 `flags`, ARM `Features`)."""
    for line in cpuinfo_text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cpu_model_name(cpuinfo_text: str) -> str:
    """The first CPU's `model name` in `/proc/cpuinfo` text ("AMD EPYC"), "" where none is given."""
    for line in cpuinfo_text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return value.strip()
    return ""


def bf16_matrix_flags(cpuinfo_text: str) -> list[str]:
    """The bf16 matrix-unit flags (`amx_bf16`) present in `cpuinfo_text`."""
    flags = cpu_flags(cpuinfo_text)
    return [flag for flag in BF16_MATRIX_FLAGS if flag in flags]


def bf16_native_flags(cpuinfo_text: str) -> list[str]:
    """The flags of native bf16 arithmetic (`amx_bf16`, `avx512_bf16`) present in `cpuinfo_text`."""
    flags = cpu_flags(cpuinfo_text)
    return [flag for flag in BF16_NATIVE_FLAGS if flag in flags]


def read_cpuinfo(path: Path = CPUINFO_PATH) -> str:
    """`/proc/cpuinfo` text, or "" where there is none (macOS, Windows)."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
