"""The GDB extension's modules import each other without a cycle, and none is over 600 lines."""

from __future__ import annotations

import ast
import sys
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
    assert "dbgkit.memdump.recording" in graph and "dbgkit.core.reach" in graph
    assert "dbgkit.core.locks.contention" in graph and "dbgkit.locks.sampler" in graph
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


def _gdb_layer_imports(name: str, is_package: bool, tree: ast.AST) -> list[str]:
    """What module NAME of the core imports of gdb and of dbgkit outside dbgkit.core (the GDB
    layer), as `gdb` or `line N: MODULE`: a relative import is resolved from the module's
    package, so dbgkit.core.locks may import `..locktable` and not `...locks`."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += ["gdb" for a in node.names if a.name == "gdb"]
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found += [f"line {node.lineno}: {t}" for t in _resolve(name, is_package, node)
                      if t != "dbgkit.core" and not t.startswith("dbgkit.core.")]
    return found


def test_the_core_never_imports_gdb_or_the_gdb_layer() -> None:
    found = {name: _gdb_layer_imports(name, path.name == "__init__.py",
                                      ast.parse(path.read_text(), str(path)))
             for name, path in MODULES.items() if name.startswith("dbgkit.core")}
    assert "dbgkit.core.locks.glibc" in found and "dbgkit.core.elf" in found
    assert {name: f for name, f in found.items() if f} == {}


def test_the_gdb_layer_rule_resolves_the_lock_cores_imports() -> None:
    tree = ast.parse("import gdb\nfrom ..locktable import LockCounts\nfrom .glibc import CALLS\n"
                     "def f():\n    from ...locks import sampler\n    from ... import output\n")
    assert _gdb_layer_imports("dbgkit.core.locks.contention", False, tree) == [
        "gdb", "line 5: dbgkit.locks.sampler", "line 6: dbgkit.output"]
    assert _gdb_layer_imports("dbgkit.core.reach", False, ast.parse("from .. import output\n")) \
        == ["line 1: dbgkit.output"]


#: what of the analyser the GDB-free core may import (docs/architecture.md): the format module the
#: recorders and the analyser share, no more
CORE_MAY_IMPORT = frozenset({"memdump_analyzer.dumpformat"})


def _absolute_imports(tree: ast.AST) -> set[str]:
    """The modules a module imports by absolute name, at module level or inside a function:
    `from memdump_analyzer import dumpformat` as `memdump_analyzer.dumpformat`, `from
    memdump_analyzer import analyze` (a name of the package) as `memdump_analyzer`."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if _is_analyser_module(sub) else node.module)
    return found


def _is_analyser_module(name: str) -> bool:
    parts = name.split(".")
    if parts[0] != "memdump_analyzer":
        return False
    base = ANALYSER.joinpath(*parts[1:])
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


ANALYSER = PACKAGE.parents[1] / "analyzer" / "memdump_analyzer"


def test_the_core_imports_the_standard_library_and_the_format_alone() -> None:
    """Each module of dbgkit/core imports the standard library, itself and CORE_MAY_IMPORT."""
    outside: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        if not name.startswith("dbgkit.core"):
            continue
        for module in _absolute_imports(ast.parse(path.read_text(), str(path))):
            if module.split(".")[0] in sys.stdlib_module_names or module in CORE_MAY_IMPORT:
                continue
            outside.setdefault(name, set()).add(module)
    assert outside == {}
    assert "dbgkit.core.dumpwriter" in MODULES and _is_analyser_module(
        "memdump_analyzer.dumpformat")


def test_the_allow_list_sees_every_kind_of_import() -> None:
    tree = ast.parse("import os.path\nfrom memdump_analyzer import analyze, dumpformat\n"
                     "def f():\n    from memdump_analyzer.report import render_text\n"
                     "    import memdump_analyzer.rules\n")
    assert _absolute_imports(tree) == {"os.path", "memdump_analyzer", "memdump_analyzer.dumpformat",
                                       "memdump_analyzer.report", "memdump_analyzer.rules"}


def test_modules_stay_small() -> None:
    for name, path in MODULES.items():
        assert len(path.read_text().splitlines()) < 600, name
