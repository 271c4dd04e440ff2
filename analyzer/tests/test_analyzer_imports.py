"""The analyser's modules import each other without a cycle, and only at module level."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "memdump_analyzer"


def _name(path: Path) -> str:
    """A module's name in the package: `cli`, `exports.pprof`; a subpackage's `__init__.py` is
    the subpackage (`exports`), the package's own is `__init__`."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _package_of(path: Path) -> list[str]:
    """The (sub)package a module's relative imports start from."""
    return list(path.parent.relative_to(PACKAGE).parts)


def _resolve(base: list[str], name: str) -> str:
    """What `from <base> import name` imports: the module `name` if it is one, else base's
    `__init__`."""
    if (PACKAGE.joinpath(*base, f"{name}.py")).exists() or (
            PACKAGE.joinpath(*base, name, "__init__.py")).exists():
        return ".".join((*base, name))
    return ".".join(base) or "__init__"


def _imports(path: Path) -> tuple[set[str], list[int]]:
    """The package's modules that `path` imports, and the lines of imports inside a body."""
    tree = ast.parse(path.read_text(), str(path))
    top = set(map(id, tree.body))
    found: set[str] = set()
    nested: list[int] = []
    package = _package_of(path)
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        if id(node) not in top:
            nested.append(node.lineno)
        base = package[: len(package) - (node.level - 1)]
        if node.module is None:  # `from . import name`: a module, or the package's own name
            for alias in node.names:
                found.add(_resolve(base, alias.name))
        else:
            parts = node.module.split(".")
            found.add(_resolve(base + parts[:-1], parts[-1]))
    return found, nested


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_import_cycle_and_no_import_inside_a_function() -> None:
    graph = {}
    for path in _modules():
        graph[_name(path)], nested = _imports(path)
        assert nested == [], f"{path.name}: imports inside a body at lines {nested}"
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module in graph, f"{path[-1]} imports {module}, which is not a module"
        assert module not in path, "import cycle: " + " -> ".join((*path, module))
        if module in done:
            return
        for dep in sorted(graph[module]):
            visit(dep, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())
    assert {"cli", "exports", "exports.pprof", "__init__"} <= graph.keys()


def test_modules_stay_small() -> None:
    for path in _modules():
        assert len(path.read_text().splitlines()) < 600, path.relative_to(PACKAGE)
