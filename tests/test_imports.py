"""The import rule of docs/ARCHITECTURE.md, checked on the source: no cycles, nothing imports upward.

Every `import` / `from ... import` in every module of `supersede_lib` is read with `ast`, including
the ones inside functions (a lazy import still ties two modules together). The layers are
`supersede_lib.LAYERS`; a module may import its own top-level package or module and anything in a
lower layer, never a peer in the same layer (peers stay independent) nor anything higher.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import supersede_lib

PACKAGE_DIR = Path(supersede_lib.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _all_modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE_DIR.rglob("*.py"))}


def _resolve(imported: str, modules: dict[str, Path]) -> str | None:
    """The longest known module name that `imported` names (an attribute import names its module)."""
    parts = imported.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def _imports(module: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int]]:
    """(imported module, line) for every import of a `supersede_lib` module in `path`."""
    found: list[tuple[str, int]] = []
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            # `from package import submodule` imports the submodule; `from module import name` the module
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            target = _resolve(name, modules) if name.startswith("supersede_lib") else None
            if target and target != module:
                found.append((target, node.lineno))
    return found


def _unit(module: str) -> str:
    """The top-level package or module under `supersede_lib` that a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer_of() -> dict[str, int]:
    return {unit: level for level, units in enumerate(supersede_lib.LAYERS) for unit in units}


def _graph() -> dict[str, list[tuple[str, int]]]:
    modules = _all_modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_every_top_level_unit_has_a_layer() -> None:
    layer_of = _layer_of()
    units = {_unit(name) for name in _all_modules()} - {"__init__"}
    assert units <= set(layer_of), f"not in supersede_lib.LAYERS: {sorted(units - set(layer_of))}"


def test_nothing_imports_upward_or_sideways() -> None:
    layer_of = _layer_of()
    offending = []
    for module, imports in _graph().items():
        if module == "supersede_lib":
            continue
        source = _unit(module)
        for target, line in imports:
            destination = _unit(target)
            if destination == source or destination == "__init__":
                continue
            if layer_of[destination] >= layer_of[source]:
                kind = "a peer" if layer_of[destination] == layer_of[source] else "a higher layer"
                offending.append(f"{module} (line {line}) imports {target}: {kind} ({destination})")
    assert not offending, "imports against supersede_lib.LAYERS:\n" + "\n".join(offending)


def test_no_import_cycles() -> None:
    graph = {module: sorted({target for target, _ in imports}) for module, imports in _graph().items()}
    cycles: list[list[str]] = []
    state: dict[str, str] = {}  # "open" while on the DFS stack, "done" after
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = "open"
        stack.append(module)
        for target in graph.get(module, []):
            if state.get(target) == "open":
                cycles.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_architecture_page_names_every_module() -> None:
    """docs/ARCHITECTURE.md is where a newcomer looks a module up: a new module must appear there."""
    page = (PACKAGE_DIR.parent / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    unnamed = [
        name
        for name in _all_modules()
        if not re.search(rf"\b{re.escape(name.rsplit('.', 1)[-1])}\b", page) and name != "supersede_lib"
    ]
    assert not unnamed, f"modules docs/ARCHITECTURE.md does not name: {unnamed}"
