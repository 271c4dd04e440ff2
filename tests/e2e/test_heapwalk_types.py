"""What each block is (gdb_ext/dbgkit/core/heap/blocktypes.py, vtables.py) on heapwalk_types, a
C++ program that lists its blocks with their types and stops itself: the walk names each block's
type as the program does (its C++ class from the vtable at offset 0, a Stream with two bases by
its own vtable, a Handle with a virtual base, char[], pointer array, ?), from the symbols and,
stripped, from the typeinfo; the driver groups the leaks by kind and type with exact bytes and
blocks, in JSON and in text."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from memdump_e2e import REPO, program

sys.path[:0] = [str(REPO / "gdb_ext"), str(REPO / "analyzer")]

from dbgkit.core.heap import blocktypes, source, vtables, walk  # noqa: E402

#: heapwalk_types' leaks and reachable blocks by type: [type, how, bytes, blocks]; the two blocks
#: of 72,712 and 4,104 bytes of no type one can tell are libstdc++'s emergency pool and stdout's
#: buffer
GROUPS = {
    "definite": [["Connection", "vtable", 280, 5], ["Session", "vtable", 72, 3],
                 ["graph::Node", "vtable", 24, 1]],
    "indirect": [["graph::Node", "vtable", 48, 2]],
    "reachable": [["?", "unknown", 77016, 5], ["char[]", "string", 200, 3],
                  ["Session", "vtable", 144, 6], ["pointer array", "pointers", 80, 2],
                  ["Handle", "vtable", 40, 1], ["Stream", "vtable", 40, 1]],
}
TEXT = """\
LEAK 1: 280 bytes in 5 blocks of `Connection` (vtable), definitely lost
LEAK 2: 72 bytes in 3 blocks of `Session` (vtable), definitely lost
LEAK 3: 48 bytes in 2 blocks of `graph::Node` (vtable), indirectly lost
LEAK 4: 24 bytes in 1 block of `graph::Node` (vtable), definitely lost
reachable: 77,016 bytes in 5 blocks of `?` (unknown)
reachable: 200 bytes in 3 blocks of `char[]` (string)
reachable: 144 bytes in 6 blocks of `Session` (vtable)
reachable: 80 bytes in 2 blocks of `pointer array` (pointers)
reachable: 40 bytes in 1 block of `Handle` (vtable)
reachable: 40 bytes in 1 block of `Stream` (vtable)
totals: definitely lost 376 bytes in 9 blocks, indirectly lost 48 bytes in 2 blocks, possibly \
lost 0 bytes in 0 blocks, still reachable 77,520 bytes in 18 blocks
"""


class Stopped:
    """heapwalk_types (or its stripped copy) stopped at its checkpoint: address -> (usable,
    type) of the blocks it lists."""

    def __init__(self, name: str) -> None:
        self.proc = subprocess.Popen([str(program(name))], stdout=subprocess.PIPE, text=True)
        self.listed: dict[int, tuple[int, str]] = {}
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line == "READY\n":
                break
            _, addr, usable, kind = line.rstrip("\n").split(" ", 3)
            self.listed[int(addr, 16)] = (int(usable), kind)
        deadline = time.monotonic() + 60
        while _state(self.proc.pid) != "T":
            assert time.monotonic() < deadline, f"{name} did not stop itself"
            time.sleep(0.01)

    def end(self) -> None:
        self.proc.send_signal(signal.SIGCONT)
        assert self.proc.communicate(timeout=60)[0] == "" and self.proc.returncode == 0


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().rsplit(") ", 1)[1][0]


@pytest.fixture(scope="module", params=["heapwalk_types", "heapwalk_types_stripped"])
def stopped(request):
    prog = Stopped(request.param)
    prog.name = request.param
    yield prog
    prog.end()


def _types(src) -> dict[int, tuple[str, str]]:
    walked = walk.walk(src)
    labels, codes = blocktypes.block_types(src, walked, vtables.vtable_table(src.read, src.maps))
    return {a: labels[c + blocktypes.LABEL_OFFSET] for a, c in zip(walked.blocks.starts, codes,
                                                                   strict=True)}


def test_each_listed_block_has_the_programs_type(stopped: Stopped) -> None:
    """Every block the program lists has its type: from the _ZTV symbols of .symtab, or stripped
    (.dynsym holds none of the program's vtables) from the typeinfo the vtable points at."""
    src = source.LiveProcess(stopped.proc.pid)
    try:
        got = _types(src)
    finally:
        src.close()
    how = "rtti" if stopped.name.endswith("stripped") else "vtable"
    assert {a: got[a][0] for a in stopped.listed} == {a: t for a, (_, t) in stopped.listed.items()}
    assert {got[a][1] for a, (_, t) in stopped.listed.items()
            if t not in ("?", "char[]", "pointer array")} == {how}
    # the blocks it does not list: libstdc++'s emergency pool and stdout's buffer
    starts, sizes = _sizes(stopped.proc.pid)
    assert sorted(s for a, s in zip(starts, sizes, strict=True) if a not in stopped.listed) == \
        [4104, 72712]
    assert sum(1 for t in got.values() if t == ("?", "unknown")) == 5


def _sizes(pid: int):
    src = source.LiveProcess(pid)
    try:
        blocks = walk.walk(src).blocks
        return list(blocks.starts), list(blocks.sizes)
    finally:
        src.close()


def _driver(target: str, *flags: str) -> str:
    return subprocess.run([sys.executable, "-m", "dbgkit.core.heap", target, *flags],
                          capture_output=True, text=True, timeout=120, check=True,
                          env={**os.environ, "PYTHONPATH": str(REPO / "gdb_ext")}).stdout


def test_the_driver_groups_the_leaks_by_type(stopped: Stopped) -> None:
    """--kinds: per kind the groups by type, largest first; --types: each block's type."""
    doc = json.loads(_driver(str(stopped.proc.pid), "--kinds", "--types"))
    how = "rtti" if stopped.name.endswith("stripped") else "vtable"
    expected = {k: [[t, how if h == "vtable" else h, b, n] for t, h, b, n in groups]
                for k, groups in GROUPS.items()}
    assert doc["kinds"]["groups"] == expected
    labels = doc["types"]["labels"]
    named = {a: labels[c][0] for (a, _), c in zip(doc["blocks"], doc["types"]["codes"],
                                                  strict=True)}
    assert {a: named[a] for a in stopped.listed} == {a: t for a, (_, t) in stopped.listed.items()}


def test_the_text_report(stopped: Stopped) -> None:
    text = _driver(str(stopped.proc.pid), "--text")
    head, rest = text.split("\n", 1)
    assert head == ("heap of the process: 29 blocks in use, 77,944 bytes; glibc's layout from "
                    "its debug symbols")
    how = "rtti" if stopped.name.endswith("stripped") else "vtable"
    assert rest == TEXT.replace("(vtable)", f"({how})")


def test_a_core_has_the_same_types(stopped: Stopped, tmp_path: Path) -> None:
    """GDB's core of the stopped program: the same types and groups as the live process."""
    if shutil.which("gdb") is None:
        pytest.skip("gdb is not installed")
    core = tmp_path / "types.core"
    subprocess.run(["gdb", "-nx", "-batch", "-p", str(stopped.proc.pid), "-ex",
                    f"generate-core-file {core}"], capture_output=True, timeout=120, check=True)
    src = source.CoreFile(str(core))
    try:
        got = _types(src)
    finally:
        src.close()
    assert {a: got[a][0] for a in stopped.listed} == {a: t for a, (_, t) in stopped.listed.items()}
    doc = json.loads(_driver(str(core), "--kinds"))
    assert [g[:1] + g[2:] for g in doc["kinds"]["groups"]["definite"]] == \
        [[t, b, n] for t, _, b, n in GROUPS["definite"]]


def test_the_demanglers_agree() -> None:
    """libstdc++'s __cxa_demangle and the c++filt fallback (one process) give the same names."""
    if shutil.which("c++filt") is None:
        pytest.skip("c++filt is not installed")
    mangled = ["10Connection", "N5graph4NodeE", "St13runtime_error",
               "NSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE", "not a type"]
    cxa = vtables.demangle_types(mangled)
    assert cxa == vtables.demangle_types(mangled, use_cxa=False)
    assert cxa == {"10Connection": "Connection", "N5graph4NodeE": "graph::Node",
                   "St13runtime_error": "std::runtime_error",
                   "NSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE":
                   "std::__cxx11::basic_string<char, std::char_traits<char>, "
                   "std::allocator<char> >"}
