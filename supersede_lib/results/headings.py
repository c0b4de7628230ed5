"""Labels and headline numbers every study uses: which notebook, whose number (ours or the paper's), how shown.

A number in a study's table or `summary.json` always says its model, data, profile and n
(`ours_label`, `headline_number`); the paper's numbers get their own `paper_label` columns.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

NOTEBOOK_DATA = "01_data"
NOTEBOOK_ISOLATION = "02_isolation"
NOTEBOOK_FRONTIER = "03_frontier"
NOTEBOOK_SCALE = "04_scale"
NOTEBOOK_ENVIRONMENT = "05_environment_validation"
NOTEBOOK_TRAINING = "06_grpo_training"
NOTEBOOK_TRANSFER = "07_transfer_eval"
NOTEBOOK_MEMORY_SYSTEMS = "08_memory_systems"
NOTEBOOK_ROBUSTNESS = "09_robustness"
NOTEBOOK_FAST_SLOW = "10_fast_slow"

MATCHER = "programmatic matcher"  # the grader named when no LLM judge is set


def ours_label(model: str, data: str, profile_name: str, n: int) -> str:
    """Column header for our numbers: `ours (<model>, <data>, <profile>, n=<n>)`."""
    return f"ours ({model}, {data}, {profile_name}, n={n})"


def paper_label(model: str, n: int | None, data: str = "LongMemEval") -> str:
    """Column header for the paper's numbers: `paper (<model>, LongMemEval, n=<n>)`."""
    return f"paper ({model}, {data}" + (f", n={n})" if n is not None else ")")


def percent(value: float | None) -> str:
    """0.625 -> '62.5%'; a missing value -> '—'."""
    return "—" if value is None or pd.isna(value) else f"{100 * value:.1f}%"


def points_interval(diff: float, low: float, high: float) -> str:
    """A difference of shares and its interval in signed points: 0.035, -0.025, 0.095 -> '+3.5 [-2.5, +9.5]'."""
    return f"{100 * diff:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"


SMALLEST_FIXED_PVALUE = 1e-4  # below it a p value is written in scientific notation


def format_pvalue(value: float | None) -> str:
    """A p value to four places, or to two significant digits below 0.0001 (a bare 0.0000 would read
    as "impossible"); a missing one -> '—'."""
    if value is None or pd.isna(value):
        return "—"
    return f"{value:.1e}" if value < SMALLEST_FIXED_PVALUE else f"{value:.4f}"


def slug(text: str) -> str:
    """A file-name-safe form of a label."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


def headline_number(
    name: str, value: Any, *, model: str, data: str, profile: str, n: int, grader: str | None = None
) -> dict:
    """One headline number and everything needed to read it."""
    if hasattr(value, "item"):
        value = value.item()
    return {
        "name": name,
        "value": value,
        "model": model,
        "data": data,
        "profile": profile,
        "n": int(n),
        "grader": grader,
    }
