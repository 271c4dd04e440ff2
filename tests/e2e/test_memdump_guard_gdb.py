"""Guard pages from GDB (docs/heap-errors.md): `memdump --guard SPEC` and `set memdump guard
SPEC` write the SPEC into the in-process recorder's control block; the faulting access stops GDB
at the instruction (the frame's file:line is the marked one). A bad SPEC is one line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from memdump_e2e import REPO, gdb_argv, marker, program, run_gdb

pytestmark = pytest.mark.one_recorder
SOURCE = "guard_faults.c"
SOURCE_DIR = REPO / "tests" / "programs"


@pytest.mark.parametrize("how", ["option", "setting"])
def test_the_overflow_stops_gdb_at_its_line(tmp_path: Path, how: str) -> None:
    dump = tmp_path / "g.memdump"
    commands = (["set memdump guard all", f"memdump -o {dump}"] if how == "setting"
                else [f"memdump --guard all -o {dump}"])
    run = run_gdb(gdb_argv([*commands, "run", "frame"], [program("guard_faults"), "past-end"]),
                  dump)
    site = marker(SOURCE, "past-end", "ERROR")
    assert "Program received signal SIGSEGV" in run.output, run.describe()
    assert run.stdout.count(f"past_end () at {SOURCE_DIR / site.file}:{site.line}\n") == 2, \
        run.describe()


@pytest.mark.parametrize(("spec", "message"), [
    ("all,bogus", "memdump: --guard all,bogus: 'bogus' is not all, N%, MIN-MAX, under, over, "
                  "align16 or tag:NAME"),
    ("5%,all", "memdump: --guard 5%,all: 'all': a second share (all or N%)"),
    ("all,,under", "memdump: --guard all,,under: an empty term"),
    ("0%", "memdump: --guard 0%: '0%': a share is 1% to 100%"),
    ("9-3", "memdump: --guard 9-3: '9-3': MIN is larger than MAX"),
])
def test_a_bad_spec_is_one_line(tmp_path: Path, spec: str, message: str) -> None:
    run = run_gdb(gdb_argv([f"memdump --guard {spec} -o {tmp_path / 'g.memdump'}"],
                           [program("guard_faults")]))
    assert run.returncode == 1
    assert run.stderr.splitlines()[0] == message, run.describe()
    assert not (tmp_path / "g.memdump").exists()
