"""Reads the generator's JSON tables (domains.json, distractors.json) shipped inside this package.

The text content of the generator lives in data files so the modules show its logic; tables are
loaded once at import and frozen (JSON lists become tuples) so no caller can change them.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any


def as_tuples(item: Any) -> Any:
    """JSON or YAML lists as tuples, recursively; objects stay dicts of frozen items (a frozen dataclass
    holding them hashes and compares)."""
    if isinstance(item, list):
        return tuple(as_tuples(element) for element in item)
    if isinstance(item, dict):
        return {key: as_tuples(value) for key, value in item.items()}
    return item


def load_table(file_name: str) -> Any:
    """One JSON file of this package, frozen."""
    text = files(__package__).joinpath(file_name).read_text(encoding="utf-8")
    return as_tuples(json.loads(text))
