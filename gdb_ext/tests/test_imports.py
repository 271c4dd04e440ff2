"""The GDB extension's modules import each other without a cycle, and none is over 600 lines."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dbgkit"


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """The dbgkit modules a relative `from ... import ...` in module IMPORTER names."""
    base = importer.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    target = ".".join([*base, *(node.module.split(".") if node.module else [])])
    names = [f"{target}.{alias.name}" for alias in node.names]
    return [n for n in names if n in MODULES] or [target]


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):  # nested imports count too
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                deps.update(_resolve(name, path.name == "__init__.py", node))
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dbgkit"):
                deps.add(node.module or "")
        # a package's __init__ is imported on the way to any of its modules: not an edge here
        graph[name] = {d for d in deps if d in MODULES and d != name}
    return graph


def test_no_import_cycle() -> None:
    graph = _graph()
    assert "dbgkit.memdump_session" in graph and "dbgkit.core.reach" in graph
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, "import cycle: " + " -> ".join((*path, module))
        if module in done:
            return
        for dep in sorted(graph[module]):
            visit(dep, (*path, module))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())


def test_the_core_never_imports_gdb_or_the_gdb_layer() -> None:
    for name, path in MODULES.items():
        if not name.startswith("dbgkit.core"):
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert all(a.name != "gdb" for a in node.names), f"{name} imports gdb"
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                raise AssertionError(f"{name} imports from the GDB layer: line {node.lineno}")


def test_modules_stay_small() -> None:
    for name, path in MODULES.items():
        assert len(path.read_text().splitlines()) < 600, name
