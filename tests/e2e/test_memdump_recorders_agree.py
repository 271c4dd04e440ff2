"""The in-process recorder and the breakpoint recorder write the same events with the same stacks.

Each program is recorded twice: every event's operation, arguments other than heap addresses,
and stack (its return addresses, innermost first, as module and offset: the preloaded recorder
moves the shared libraries) must be equal, event by event. Heap addresses differ too (the
recorder's own start-up allocations shift glibc's heap), so pointers are compared through the
event that produced them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from memdump_analyzer.dumpfile import DumpReader
from memdump_e2e import gdb_argv, program, run_gdb

PROGRAMS = [
    ("leak_malloc", ()),
    ("leak_calloc", ()),
    ("leak_realloc", ()),
    ("leak_aligned", ()),
    ("leak_strdup", ()),
    ("leak_new", ()),
    ("leak_new_forms", ()),
    ("mismatched_free", ()),
    ("deep_recursion", ()),
    ("reach_cpp", ()),
    ("inline_frames_gcc_O2", ()),
    ("inline_frames_clang_O3", ()),
    ("live_blocks", ()),
    ("tags_phases", ()),  # a thread that exits: glibc frees its cached chunks, not the program
    ("vector_growth", ()),
    ("leak_nth", ()),
]


def _events(dump: Path) -> list[tuple[str, tuple[str, ...], tuple[tuple[str, int], ...]]]:
    """(op, args with heap pointers renamed by the event that made them, stack pcs) per event."""
    names: dict[bytes, str] = {}
    out = []
    with DumpReader(str(dump)) as reader:
        for fl in reader.records():
            if fl[0] != b"e":
                continue
            op = fl[3].decode()
            args = []
            for tok in fl[6:]:
                args.append(names.get(tok, "?") if tok.startswith(b"0x") else tok.decode())
            if fl[5] not in (b"-", b"0x0"):
                names[fl[5]] = f"block{len(names)}"
            pcs = []
            node = int(fl[4])
            while node:
                node, frame = reader.nodes[node]
                f = reader.frames[frame]
                pcs.append((os.path.basename(f.module or "?"), f.offset))
            out.append((op, tuple(args), tuple(pcs)))
    return out


@pytest.mark.one_recorder
@pytest.mark.parametrize("name,args", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_same_events_and_stacks(tmp_path: Path, name: str, args: tuple[str, ...]) -> None:
    dumps = {}
    for mode in ("in-process", "breakpoints"):
        dump = tmp_path / f"{mode}.memdump"
        run_gdb(gdb_argv([f"set memdump recorder {mode}", f"memdump -o {dump}", "run"],
                         [program(name), *args]), dump)
        dumps[mode] = _events(dump)
    inprocess, breakpoints = dumps["in-process"], dumps["breakpoints"]
    assert len(inprocess) == len(breakpoints)
    for i, (a, b) in enumerate(zip(inprocess, breakpoints, strict=True)):
        assert a == b, f"event {i + 1}: in-process {a} != breakpoints {b}"
