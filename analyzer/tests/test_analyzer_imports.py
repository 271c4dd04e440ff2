"""The analyser's modules import each other without a cycle, and only at module level; they stay
small. Its subpackages (`views/`) are checked as well: a module is named by its dotted path in the
package (`views.stream`), a package by its `__init__` (`views`)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "memdump_analyzer"


def _name(path: Path) -> str:
    """`dumpfile`, `views` (views/__init__.py), `views.stream`; the package itself: `__init__`."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _module(dotted: str) -> str:
    """The graph's name of a dotted module path of the package ('' is the package)."""
    if not dotted:
        return "__init__"
    path = PACKAGE.joinpath(*dotted.split("."))
    if path.is_dir():
        return dotted
    if path.with_suffix(".py").exists():
        return dotted
    raise AssertionError(f"no module {dotted}")


def _imports(path: Path) -> tuple[set[str], list[int]]:
    """The package's modules that `path` imports, and the lines of imports inside a body."""
    tree = ast.parse(path.read_text(), str(path))
    top = set(map(id, tree.body))
    here = list(path.relative_to(PACKAGE).parent.parts)  # the package `path` is in
    found: set[str] = set()
    nested: list[int] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        if id(node) not in top:
            nested.append(node.lineno)
        base = here[: len(here) - (node.level - 1)]
        if node.module is None:  # `from . import name`: a module, or the package's own name
            for alias in node.names:
                dotted = ".".join([*base, alias.name])
                candidate = PACKAGE.joinpath(*base, alias.name)
                own = candidate.is_dir() or candidate.with_suffix(".py").exists()
                found.add(_module(dotted) if own else _module(".".join(base)))
        else:
            found.add(_module(".".join([*base, *node.module.split(".")])))
    return found, nested


def test_no_import_cycle_and_no_import_inside_a_function() -> None:
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        graph[_name(path)], nested = _imports(path)
        assert nested == [], f"{path.name}: imports inside a body at lines {nested}"
    assert {"views", "views.stream", "views.cli", "dumpfile", "__init__"} <= set(graph)
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
    for path in PACKAGE.rglob("*.py"):
        assert len(path.read_text().splitlines()) < 600, path.name
