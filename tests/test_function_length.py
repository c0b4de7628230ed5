"""No function or method in `supersede_lib` runs over 80 lines (its docstring counts, decorators do not).

Long functions were where several steps hid in one body; a step worth a comment is worth a name.
Counted with `ast`: the lines from a function's `def` to its last statement.
"""

from __future__ import annotations

import ast
from pathlib import Path

import supersede_lib

PACKAGE_DIR = Path(supersede_lib.__file__).parent
MAX_FUNCTION_LINES = 80
ALLOWED_LONG: set[str] = set()  # none: split a long function rather than listing it here


def _long_functions(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                found.append(f"{path.relative_to(PACKAGE_DIR)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_over_80_lines() -> None:
    offending = [
        line
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
        if path.relative_to(PACKAGE_DIR).as_posix() not in ALLOWED_LONG
        for line in _long_functions(path)
    ]
    assert not offending, f"functions over {MAX_FUNCTION_LINES} lines (split them):\n" + "\n".join(offending)
