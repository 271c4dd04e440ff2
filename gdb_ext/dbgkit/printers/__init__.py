"""Pretty printers for the targets' types: one collection, "dbgkit", registered with GDB.

Each module here (but the framework, `base`) holds the printers of some types and an
`add_printers(collection)` that adds them to the one registration table with
`collection.add_printer(name, regexp, printer_class)`. `load()` (what `source gdb_ext/dbgkit.py`
runs) registers the collection globally; the `.debug_gdb_scripts` entry CMake links into the targets
calls `register(objfile)` for its own objfile instead (libstdc++'s way). Either is done once: a
second call, or the other one later, leaves one "dbgkit" printer in effect. docs/printers.md.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterator
from typing import Any

import gdb
import gdb.printing

NAME = "dbgkit"
FRAMEWORK = ("base",)


class Subprinter(gdb.printing.SubPrettyPrinter):
    """One type's printer: a regexp on the type name and the class that prints its values."""

    def __init__(self, name: str, regexp: str, printer_class: Callable[[gdb.Value], Any]) -> None:
        super().__init__(name)
        self.regexp = re.compile(regexp)
        self.printer_class = printer_class


class Collection(gdb.printing.PrettyPrinter):
    """The one registration table: `info pretty-printer` lists it as dbgkit with a subprinter per
    type; `disable pretty-printer global dbgkit;NAME` turns one off."""

    def __init__(self) -> None:
        super().__init__(NAME, [])

    def add_printer(self, name: str, regexp: str,
                    printer_class: Callable[[gdb.Value], Any]) -> None:
        """Print values whose type name matches REGEXP (re.match) with PRINTER_CLASS(value)."""
        if ";" in name or any(s.name == name for s in self.subprinters):
            raise ValueError(f"dbgkit printer name {name!r} is taken or has a ';'")
        self.subprinters.append(Subprinter(name, regexp, printer_class))

    def __call__(self, val: gdb.Value) -> Any:
        """The printer for VAL, or None: each subprinter's regexp is tried on the type's name as
        written (cv-qualifiers and references removed), then on each typedef name it leads
        through, then on the basic type's tag (no typedefs left)."""
        if not self.enabled:
            return None
        vtype = val.type
        if vtype.code in (gdb.TYPE_CODE_REF, gdb.TYPE_CODE_RVALUE_REF):
            vtype = vtype.target()
            val = val.referenced_value()
        for name in type_names(vtype):
            for sub in self.subprinters:
                if sub.enabled and sub.regexp.match(name):
                    return sub.printer_class(val)
        return None


def type_names(vtype: gdb.Type) -> Iterator[str]:
    """The names a value's type goes by, as written first: `my_lock`, then `pthread_mutex_t` for
    `typedef pthread_mutex_t my_lock`, then the basic type's tag (None for an anonymous union)."""
    vtype = vtype.unqualified()
    while vtype.code == gdb.TYPE_CODE_TYPEDEF:
        if vtype.name:
            yield vtype.name
        vtype = vtype.target().unqualified()
    if vtype.tag:
        yield vtype.tag


def printer_modules() -> list[str]:
    """The modules that add printers (every module here but the framework)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in FRAMEWORK)


_collection: Collection | None = None


def collection() -> Collection:
    """The registration table, filled on first use from every printer module."""
    global _collection
    if _collection is None:
        table = Collection()
        for name in printer_modules():
            importlib.import_module(f"{__name__}.{name}").add_printers(table)
        _collection = table
    return _collection


def _ours(printers: list[Any]) -> list[Any]:
    return [p for p in printers if getattr(p, "name", None) == NAME]


def register(objfile: gdb.Objfile | None) -> bool:
    """Register the printers for OBJFILE (the auto-load script's; None: the current objfile, as
    gdb.current_objfile() is None outside auto-loading); False when dbgkit's are in effect there
    already (registered globally, or for this objfile)."""
    objfile = objfile or gdb.current_objfile()
    if objfile is None or _ours(gdb.pretty_printers) or _ours(objfile.pretty_printers):
        return False
    objfile.pretty_printers.insert(0, collection())
    return True


def load() -> None:
    """Register the printers globally, once, for every objfile now and later; copies an objfile
    registered before are removed so that one dbgkit printer is in effect (and `disable
    pretty-printer global dbgkit;NAME` disables it everywhere)."""
    if _ours(gdb.pretty_printers):
        return
    for objfile in gdb.objfiles():
        for printer in _ours(objfile.pretty_printers):
            objfile.pretty_printers.remove(printer)
    gdb.pretty_printers.insert(0, collection())
