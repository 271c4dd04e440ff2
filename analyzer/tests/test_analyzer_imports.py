"""The analyser's modules import each other without a cycle, and only at module level."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "memdump_analyzer"


def _imports(path: Path) -> tuple[set[str], list[int]]:
    """The package's modules that `path` imports, and the lines of imports inside a body."""
    tree = ast.parse(path.read_text(), str(path))
    top = set(map(id, tree.body))
    found: set[str] = set()
    nested: list[int] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level != 1:
            continue
        if id(node) not in top:
            nested.append(node.lineno)
        if node.module is None:  # `from . import name`: a module, or the package's own name
            for alias in node.names:
                own = (PACKAGE / f"{alias.name}.py").exists()
                found.add(alias.name if own else "__init__")
        else:
            found.add(node.module.split(".")[0])
    return found, nested


def test_no_import_cycle_and_no_import_inside_a_function() -> None:
    graph = {}
    for path in sorted(PACKAGE.glob("*.py")):
        graph[path.stem], nested = _imports(path)
        assert nested == [], f"{path.name}: imports inside a body at lines {nested}"
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, "import cycle: " + " -> ".join((*path, module))
        if module in done:
            return
        for dep in sorted(graph[module]):
            visit(dep, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())


def test_modules_stay_small() -> None:
    for path in PACKAGE.glob("*.py"):
        assert len(path.read_text().splitlines()) < 600, path.name
