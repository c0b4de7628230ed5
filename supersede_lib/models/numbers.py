"""Bounded numeric settings: the one check model specs, training configs and profiles share.

A profile typo such as `concurrency: 1e9`, `learning_rate: 'fast'` or `timeout_s: -1` must fail when
the file is read, with the setting's name and its bounds, not hours into a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def check_number(name: str, value: Any, low: float, high: float) -> None:
    """Raise `ValueError` unless `value` is a number (not a bool) in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ValueError(f"{name} must be a number in [{low:g}, {high:g}], got {value!r}")


def check_numbers(values: Mapping[str, Any], bounds: Mapping[str, tuple[float, float]]) -> None:
    """`check_number` for every bounded key present in `values` (None: unset, allowed)."""
    for name, (low, high) in bounds.items():
        if values.get(name) is not None:
            check_number(name, values[name], low, high)


def check_integers(values: Mapping[str, Any], names: frozenset[str] | set[str]) -> None:
    """Raise `ValueError` naming the key when a setting that counts something (retries, tokens,
    threads) is not a whole number: `max_retries: 2.5` must fail when the file is read, not at the
    first call with an error that names no key. None means unset and passes."""
    for name in sorted(names):
        value = values.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"{name} must be an integer (a whole number, no decimal point), got {value!r}")
