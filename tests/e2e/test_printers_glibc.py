"""glibc's pthread_mutex_t / pthread_rwlock_t printers (gdb_ext/dbgkit/printers/glibc_locks.py),
registered with a minimal collection of the test's own, the way the toolkit's printer loader
registers them: each `// PRINT: NAME = VALUE` of tests/programs/printers_glibc.c is what `print
NAME` shows at its `// BREAK: here` line (glibc's own printers are kept from loading)."""

from __future__ import annotations

import re
from pathlib import Path

from memdump_e2e import REPO, SOURCES, marker, program, run_gdb

COLLECTION = '''
import re, sys
sys.path[:0] = [{gdb_ext!r}, {analyzer!r}]
import gdb
from dbgkit.printers import glibc_locks


class Collection:
    """add_printer(name, regexp, class); the regexp is tried on the type name as written, then on
    each typedef it leads through, then on the basic type's tag."""

    def __init__(self):
        self.printers = []

    def add_printer(self, name, regexp, printer_class):
        self.printers.append((name, re.compile(regexp), printer_class))

    def __call__(self, val):
        vtype, names = val.type.unqualified(), []
        while vtype.code == gdb.TYPE_CODE_TYPEDEF:
            names.append(vtype.name)
            vtype = vtype.target().unqualified()
        names.append(vtype.tag)
        for name in filter(None, names):
            for _, regexp, printer_class in self.printers:
                if regexp.match(name):
                    return printer_class(val)
        return None


collection = Collection()
glibc_locks.add_printers(collection)
gdb.pretty_printers.insert(0, collection)
print("printers:", ", ".join(p[0] for p in collection.printers))
'''

_PRINT = re.compile(r"//\s*PRINT:\s*(\S+) = (.*)$")


def expectations() -> list[tuple[str, str]]:
    out = []
    for line in (SOURCES / "printers_glibc.c").read_text().splitlines():
        m = _PRINT.search(line)
        if m:
            out.append((m.group(1), m.group(2).strip()))
    return out


def test_glibc_lock_printers(tmp_path: Path) -> None:
    script = tmp_path / "collection.py"
    script.write_text(COLLECTION.format(gdb_ext=str(REPO / "gdb_ext"),
                                        analyzer=str(REPO / "analyzer")))
    cases = expectations()
    assert len(cases) == 10
    here = marker("printers_glibc.c", "here", "BREAK")
    argv = ["gdb", "-nx", "-batch", "-iex", "set auto-load python-scripts off",
            "-ex", f"source {script}", "-ex", f"break {here}", "-ex", "run",
            "-ex", "python print('pid', gdb.selected_inferior().pid)"]
    for name, _ in cases:
        argv += ["-ex", f"print {name}"]
    argv += ["-ex", "kill", str(program("printers_glibc"))]
    out = run_gdb(argv).output
    lines = out.splitlines()
    assert "printers: pthread_mutex_t, pthread_rwlock_t" in lines
    pid = next(line.split()[1] for line in lines if line.startswith("pid "))
    printed = [line.split(" = ", 1)[1] for line in lines if re.match(r"\$\d+ = ", line)]
    assert printed == [value.replace("{pid}", pid) for _, value in cases], out
