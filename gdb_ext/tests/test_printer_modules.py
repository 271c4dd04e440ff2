"""The printers package's contract, read from the source without GDB: every module but the
framework adds its printers with add_printers(collection), every printer class says in one line
what it prints, and no two printers share a name (`disable pretty-printer global dbgkit;NAME`)."""

from __future__ import annotations

import ast
from pathlib import Path

PRINTERS = Path(__file__).resolve().parents[1] / "dbgkit" / "printers"
FRAMEWORK = {"__init__", "base"}


def _modules() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(PRINTERS.glob("*.py"))}


def test_every_printer_module_has_add_printers() -> None:
    modules = _modules()
    assert {"rings", "queues", "pools", "shmemq"} <= set(modules)
    for name, tree in modules.items():
        functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert ("add_printers" in functions) == (name not in FRAMEWORK), name


def test_every_printer_class_has_a_one_line_docstring() -> None:
    for name, tree in _modules().items():
        for node in tree.body if name not in FRAMEWORK else ():
            if isinstance(node, ast.ClassDef) and node.name.endswith("Printer"):
                doc = ast.get_docstring(node)
                assert doc and "\n" not in doc, f"{name}.{node.name}: {doc!r}"


def test_printer_names_are_unique_and_regexps_anchored() -> None:
    seen: dict[str, str] = {}
    for module, tree in _modules().items():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "add_printer" and module not in FRAMEWORK):
                name = ast.literal_eval(node.args[0])
                assert name not in seen, f"{name} in {module} and {seen[name]}"
                seen[name] = module
                regexp = node.args[1]
                text = regexp.values[0].value if isinstance(regexp, ast.JoinedStr) else (
                    ast.literal_eval(regexp))
                assert str(text).startswith("^"), f"{module}: {name}'s regexp is not anchored"
    assert {"LockedRing", "AtomicRing", "CoarseQueue", "FineQueue", "PcRun", "Segment",
            "NewDeletePool", "MutexPool", "SegmentLinearPool", "SegmentTreePool", "shmemq_header",
            "shmemq_t"} <= set(seen)
