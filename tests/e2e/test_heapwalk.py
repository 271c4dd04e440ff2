"""The heap walk (gdb_ext/dbgkit/core/heap/) on heapwalk_basic, a program that lists every block it
holds and stops itself: the walk finds exactly those blocks, with malloc_usable_size()'s sizes,
in the stopped process and in its core, with libc6-dbg's symbols and with the layout table alone;
the free chunks (tcache, fastbin, unsorted bin, top) are not counted live; the leak kinds equal
valgrind's leak check at the same point; a corrupt chunk or fastbin pointer is reported where it
is and the walk goes on; glibc's layout table is libc6-dbg's, offset for offset."""

from __future__ import annotations

import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from memdump_e2e import REPO, program

sys.path[:0] = [str(REPO / "gdb_ext"), str(REPO / "analyzer")]

from dbgkit.core import reach_fast  # noqa: E402
from dbgkit.core.heap import kinds, layout, libc, source, walk  # noqa: E402

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
#: the free chunks of heapwalk_basic: in tcache its first thread's 4 of 24 bytes, 7 of the main
#: thread's 10 of 56 bytes (a tcache bin holds 7) and a chunk of 528 bytes the C library freed;
#: the other 3 of 56 bytes in a fastbin, the rest of its 2,008 bytes in the unsorted bin (the
#: threads' DTVs were cut from it), and each arena's top
FREE = {"tcache": 12, "fastbin": 3, "bin": 1, "top": 3}


class Stopped:
    """heapwalk_basic, stopped at its checkpoint: its pid and the blocks it lists
    (address -> (requested, usable))."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([str(program("heapwalk_basic"))], stdout=subprocess.PIPE,
                                     text=True)
        self.listed: dict[int, tuple[int, int]] = {}
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line == "READY\n":
                break
            _, addr, requested, usable = line.split()
            self.listed[int(addr, 16)] = (int(requested), int(usable))
        deadline = time.monotonic() + 60
        while _state(self.proc.pid) != "T":
            assert time.monotonic() < deadline, "heapwalk_basic did not stop itself"
            time.sleep(0.01)

    @property
    def pid(self) -> int:
        return self.proc.pid


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().rsplit(") ", 1)[1][0]


@pytest.fixture(scope="module")
def stopped():
    """The stopped program; after the module's tests it runs on and ends as it would have."""
    prog = Stopped()
    yield prog
    prog.proc.send_signal(signal.SIGCONT)
    rest = prog.proc.communicate(timeout=60)[0]
    assert (prog.proc.returncode, rest) == (0, "")


@pytest.fixture(scope="module")
def core(stopped: Stopped, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GDB's core of the stopped program (gcore: generate-core-file)."""
    if shutil.which("gdb") is None:
        pytest.skip("gdb is not installed")
    path = tmp_path_factory.mktemp("core") / "heapwalk.core"
    subprocess.run(["gdb", "-nx", "-batch", "-p", str(stopped.pid), "-ex",
                    f"generate-core-file {path}"], capture_output=True, timeout=120, check=True)
    assert _state(stopped.pid) == "T"
    return path


def _walk(src, debug: bool) -> walk.HeapWalk:
    return walk.walk(src, debug_root=libc.DEBUG_ROOT if debug else "/nonexistent")


def _open(stopped: Stopped, core: Path | None):
    return source.CoreFile(str(core)) if core is not None else source.LiveProcess(stopped.pid)


def _check_walk(result: walk.HeapWalk, stopped: Stopped) -> None:
    assert result.problems == []
    assert result.blocks == {a: usable for a, (_, usable) in stopped.listed.items()}
    assert Counter(w for _, w in result.free.values()) == FREE
    assert not {c + 16 for c in result.free} & set(result.blocks)
    # every thread's tcache_perthread_struct (640 bytes in a 0x290 chunk) is glibc's
    assert sorted(result.internal.values()) == [648] * 3
    assert [(a.main, len(a.heaps)) for a in result.arenas] == [(True, 1), (False, 2), (False, 1)]
    assert result.mmapped == 2


@pytest.mark.parametrize("debug", [True, False], ids=["libc6-dbg", "table"])
def test_live_walk_is_the_programs_list(stopped: Stopped, debug: bool) -> None:
    """Attached late, the walk's blocks are the program's, at malloc_usable_size() bytes (the
    request rounded up to its chunk: 272 requested bytes of a thread's DTV hold 280)."""
    src = source.LiveProcess(stopped.pid)
    try:
        result = _walk(src, debug)
    finally:
        src.close()
    assert result.symbols == ("debug" if debug else "table")
    _check_walk(result, stopped)
    assert sum(1 for r, u in stopped.listed.values() if r != u) == 5  # DTVs, mmapped, 8,800 B


@pytest.mark.parametrize("debug", [True, False], ids=["libc6-dbg", "table"])
def test_core_walk_is_the_programs_list(stopped: Stopped, core: Path, debug: bool) -> None:
    src = source.CoreFile(str(core))
    try:
        result = _walk(src, debug)
    finally:
        src.close()
    _check_walk(result, stopped)


def _valgrind_summary() -> dict[str, tuple[int, int]]:
    """valgrind's leak check at the program's checkpoint (VALGRIND_DO_LEAK_CHECK): kind ->
    (bytes, blocks), the first LEAK SUMMARY of the run."""
    exe = program("heapwalk_basic")
    vg = exe.with_name("heapwalk_basic_valgrind")
    if not vg.exists() or shutil.which("valgrind") is None:
        pytest.skip("valgrind or its memcheck.h is not installed")
    run = subprocess.run(["valgrind", "--leak-check=full", "--show-leak-kinds=all", str(vg)],
                         capture_output=True, text=True, timeout=300, check=True)
    summary = run.stderr.split("LEAK SUMMARY:", 1)[1]
    out = {}
    for kind, label in (("definite", "definitely lost"), ("indirect", "indirectly lost"),
                        ("possible", "possibly lost"), ("reachable", "still reachable")):
        m = re.search(rf"{label}: ([\d,]+) bytes in ([\d,]+) blocks", summary)
        assert m is not None, summary
        out[kind] = (int(m[1].replace(",", "")), int(m[2].replace(",", "")))
    return out


@pytest.fixture(scope="module")
def valgrind_kinds() -> dict[str, tuple[int, int]]:
    return _valgrind_summary()


@pytest.mark.parametrize("engine", ["c", "python"])
@pytest.mark.parametrize("from_core", [False, True], ids=["attached", "core"])
def test_kinds_are_valgrinds(stopped: Stopped, core: Path, from_core: bool, engine: str,
                             valgrind_kinds: dict[str, tuple[int, int]],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The pointer scan over the walked blocks, with the process's roots, gives valgrind's kinds
    at the same point of the same program run from the start: blocks per kind exactly, bytes
    as requested (valgrind counts requests; the walk knows the usable size, which the program's
    listing maps back). In C (libmemdump_scan.so: the walk's loops and the scan) and in Python,
    the reference, as without the library."""
    if engine == "python":
        monkeypatch.setattr(reach_fast, "library", lambda: None)
    src = _open(stopped, core if from_core else None)
    try:
        result = _walk(src, True)
        found = kinds.leak_kinds(src, result)
    finally:
        src.close()
    assert found["engine"] == engine
    totals = {k: (0, 0) for k in valgrind_kinds}
    for addr, _, kind, _ in found["blocks"]:
        nbytes, blocks = totals[kind]
        totals[kind] = (nbytes + stopped.listed[addr][0], blocks + 1)
    assert totals == valgrind_kinds
    assert {k: v[1] for k, v in valgrind_kinds.items()} == \
        {"definite": 16, "indirect": 4, "possible": 3, "reachable": 1113}


def _patched_core(core: Path, tmp_path: Path, address: int, word: int) -> Path:
    """A copy of CORE with the 8 bytes at ADDRESS replaced by WORD."""
    src = source.CoreFile(str(core))
    try:
        for vaddr, _, filesz, off, _ in src.segments:
            if vaddr <= address < vaddr + filesz:
                offset = off + address - vaddr
                break
        else:
            raise AssertionError(f"{address:#x} not in the core")
    finally:
        src.close()
    out = tmp_path / "patched.core"
    shutil.copyfile(core, out)
    with open(out, "r+b") as f:
        f.seek(offset)
        f.write(struct.pack("<Q", word))
    return out


def test_a_corrupt_chunk_is_reported_and_the_walk_goes_on(stopped: Stopped, core: Path,
                                                           tmp_path: Path) -> None:
    """A size word smashed in the main heap ends that heap's walk there, said with the address
    and what was expected; the thread arenas are walked all the same."""
    src = source.CoreFile(str(core))
    try:
        whole = _walk(src, True)
    finally:
        src.close()
    main = whole.arenas[0]
    victim = sorted(a for a in whole.blocks if main.heaps[0][0] <= a < main.heaps[0][1])[10]
    patched = _patched_core(core, tmp_path, victim - 8, 0x4241)
    src = source.CoreFile(str(patched))
    try:
        result = _walk(src, True)
    finally:
        src.close()
    assert result.problems[0] == (
        f"arena {main.address:#x}: chunk at {victim - 16:#x} has size word 0x4241: expected a "
        f"multiple of 16, at least 32, not mmapped, ending by {main.top:#x}; rest of this heap "
        "not walked")
    # the free lists that lead past the break are reported, each where it leaves the walk
    tid = stopped.pid
    assert [re.sub(r"holds 0x[0-9a-f]+", "holds X", p) for p in result.problems[1:]] == [
        f"arena {main.address:#x}: fastbin 2 holds X: expected a chunk of 64 bytes in the "
        "arena's heap",
        f"arena {main.address:#x}: bin 1 holds X: expected a free chunk of the arena's heap",
        f"thread {tid}: tcache bin 2 holds X: expected a block of a 64-byte chunk in the arena's "
        "heap"]
    assert all(int(m[1], 16) > victim for p in result.problems[1:]
               for m in [re.search(r"holds (0x[0-9a-f]+)", p)])
    others = {a for a in whole.blocks if not main.heaps[0][0] <= a < main.heaps[0][1]}
    assert others <= set(result.blocks)
    assert {a for a in result.blocks if main.heaps[0][0] <= a < victim} == \
        {a for a in whole.blocks if main.heaps[0][0] <= a < victim}


def test_a_fastbin_pointer_out_of_the_heap_is_reported(stopped: Stopped, core: Path,
                                                        tmp_path: Path) -> None:
    src = source.CoreFile(str(core))
    try:
        whole = _walk(src, True)
    finally:
        src.close()
    main = whole.arenas[0].address
    slot = main + layout.GLIBC_236.off("malloc_state", "fastbinsY") + 8 * 2  # 64-byte chunks
    patched = _patched_core(core, tmp_path, slot, 0x1000)
    src = source.CoreFile(str(patched))
    try:
        result = _walk(src, True)
    finally:
        src.close()
    assert result.problems == [f"arena {main:#x}: fastbin 2 holds 0x1000: expected a chunk of "
                               "64 bytes in the arena's heap"]
    # the three chunks it held now look in use: the rest is as before
    assert len(result.blocks) == len(whole.blocks) + 3


@pytest.mark.parametrize("target,message", [
    ("/etc/hostname", "heapwalk: /etc/hostname: not a 64-bit little-endian ELF core file"),
    (LIBC, f"heapwalk: {LIBC}: an ELF file but not a core (e_type 3)"),
    ("/nonexistent/core", "heapwalk: /nonexistent/core: cannot open: No such file or directory"),
    ("999999999", "heapwalk: process 999999999: cannot read /proc/999999999: No such file or "
                  "directory"),
])
def test_bad_input_is_one_line(target: str, message: str) -> None:
    run = subprocess.run([sys.executable, "-m", "dbgkit.core.heap", target], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(REPO / "gdb_ext")},
                         timeout=60)
    assert (run.returncode, run.stdout, run.stderr) == (1, "", message + "\n")


_STRUCTS = {"malloc_state": "struct malloc_state", "malloc_chunk": "struct malloc_chunk",
            "_heap_info": "struct _heap_info",
            "tcache_perthread_struct": "struct tcache_perthread_struct",
            "malloc_par": "struct malloc_par"}


def test_layout_table_is_libc6_dbgs() -> None:
    """Every offset and size of the table is what GDB reads in libc6-dbg's debug information."""
    found = libc.find_libc(source.read_maps(os.getpid()))
    if shutil.which("gdb") is None or found is None or found.debug_file is None:
        pytest.skip("gdb or libc6-dbg is not installed")
    argv = ["gdb", "-nx", "-batch"]
    for name in _STRUCTS.values():
        argv += ["-ex", f"ptype/o {name}"]
    text = subprocess.run(argv + [LIBC], capture_output=True, text=True, timeout=120,
                          check=True).stdout
    parts = text.split("type = ")[1:]
    table = layout.GLIBC_236
    for (key, _), part in zip(_STRUCTS.items(), parts, strict=True):
        offsets = {m[2]: int(m[1]) for m in
                   re.finditer(r"/\*\s+(\d+)\s+\|\s+\d+ \*/\s+[^;]*?\**(\w+)(?:\[\d+\])?;", part)}
        size = int(re.search(r"total size \(bytes\):\s+(\d+)", part)[1])
        assert {f: offsets[f] for f in table.offsets[key]} == table.offsets[key], key
        assert table.sizes[key] == size, key


def test_a_fastbin_loop_is_reported(stopped: Stopped, core: Path, tmp_path: Path) -> None:
    """A fastbin chunk whose safe-linked `fd` names itself: the list loops; said once, the walk
    ends."""
    src = source.CoreFile(str(core))
    try:
        whole = _walk(src, True)
        main = whole.arenas[0].address
        slot = main + layout.GLIBC_236.off("malloc_state", "fastbinsY") + 8 * 2
        head = struct.unpack("<Q", src.read(slot, 8))[0]
    finally:
        src.close()
    patched = _patched_core(core, tmp_path, head + 16, ((head + 16) >> 12) ^ head)
    src = source.CoreFile(str(patched))
    try:
        result = _walk(src, True)
    finally:
        src.close()
    assert result.problems == [f"arena {main:#x}: fastbin 2 loops (more entries than its heap "
                               "has chunks)"]
    # the two chunks after the first are no longer on the list: in use, as their headers say
    assert len(result.blocks) == len(whole.blocks) + 2


def test_a_running_process_runs_on() -> None:
    """Seized, walked and let go, a running process is running again (sleeping in nanosleep)."""
    proc = subprocess.Popen(["sleep", "60"])
    try:
        time.sleep(0.2)
        src = source.LiveProcess(proc.pid)
        try:
            assert _state(proc.pid) == "t"  # stopped by the walker (ptrace)
            result = _walk(src, True)
        finally:
            src.close()
        assert result.problems == [] and result.arenas[0].main
        time.sleep(0.2)
        assert _state(proc.pid) == "S" and proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_the_driver_gives_the_walk_and_kinds_as_json(stopped: Stopped, core: Path) -> None:
    """`python3 -m dbgkit.core.heap CORE --kinds`: the blocks and the kinds' blocks in JSON."""
    import json

    run = subprocess.run([sys.executable, "-m", "dbgkit.core.heap", str(core), "--kinds"],
                         capture_output=True, text=True, timeout=120, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "gdb_ext")})
    doc = json.loads(run.stdout)
    assert (doc["source"], doc["symbols"], doc["problems"]) == ("core", "debug", [])
    assert {a: s for a, s in doc["blocks"]} == {a: u for a, (_, u) in stopped.listed.items()}
    assert {k: v[1] for k, v in doc["kinds"]["totals"].items()} == \
        {"definite": 16, "indirect": 4, "possible": 3, "reachable": 1113}
    assert [a["live_blocks"] for a in doc["arenas"]] == [28, 1101, 5]


def test_the_kernels_core(tmp_path: Path, valgrind_kinds: dict[str, tuple[int, int]]) -> None:
    """The kernel's core of heapwalk_basic (SIGABRT at its checkpoint, ulimit -c unlimited): the
    same blocks and valgrind's kinds, as from GDB's core."""
    with open("/proc/sys/kernel/core_pattern", encoding="ascii") as f:
        if f.read().strip() != "core":
            pytest.skip("core_pattern is not `core`: the kernel's core goes elsewhere")
    import resource

    def unlimited() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    proc = subprocess.Popen([str(program("heapwalk_basic"))], stdout=subprocess.PIPE, text=True,
                            cwd=tmp_path, preexec_fn=unlimited)
    assert proc.stdout is not None
    listed = {}
    for line in proc.stdout:
        if line == "READY\n":
            break
        _, addr, requested, usable = line.split()
        listed[int(addr, 16)] = (int(requested), int(usable))
    while _state(proc.pid) != "T":
        time.sleep(0.01)
    proc.send_signal(signal.SIGABRT)
    proc.send_signal(signal.SIGCONT)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGABRT
    src = source.CoreFile(str(tmp_path / "core"))
    try:
        result = _walk(src, True)
        found = kinds.leak_kinds(src, result)
    finally:
        src.close()
    assert result.problems == []
    assert dict(result.blocks) == {a: u for a, (_, u) in listed.items()}
    totals = {k: (0, 0) for k in valgrind_kinds}
    for addr, _, kind, _ in found["blocks"]:
        nbytes, blocks = totals[kind]
        totals[kind] = (nbytes + listed[addr][0], blocks + 1)
    assert totals == valgrind_kinds


def test_a_foreign_heap_info_and_a_wrong_mmap_count_are_reported(stopped: Stopped, core: Path,
                                                                   tmp_path: Path) -> None:
    """The older heap of the second thread's arena naming another arena is not walked (its
    blocks are missing, the newer heap's are there); mp_.n_mmaps against the chunks found."""
    src = source.CoreFile(str(core))
    try:
        whole = _walk(src, True)
        mp = libc.find_libc(src.maps).mp
    finally:
        src.close()
    arena = whole.arenas[1]
    newer, older = arena.heaps
    patched = _patched_core(core, tmp_path, older[0], 0x4141)
    src = source.CoreFile(str(patched))
    try:
        result = _walk(src, True)
    finally:
        src.close()
    assert result.problems == [
        f"arena {arena.address:#x}: heap_info at {older[0]:#x} names arena 0x4141 (size "
        f"{older[1] - older[0]:#x}): expected this arena; its older heaps are not walked"]
    assert set(result.blocks) == {a for a in whole.blocks if not older[0] <= a < older[1]}
    assert any(older[0] <= a < older[1] for a in whole.blocks)

    n_mmaps = mp + layout.GLIBC_236.off("malloc_par", "n_mmaps")
    src = source.CoreFile(str(core))
    try:
        word = struct.unpack("<Q", src.read(n_mmaps, 8))[0]
    finally:
        src.close()
    patched = _patched_core(core, tmp_path, n_mmaps, (word & ~0xFFFFFFFF) | 5)
    src = source.CoreFile(str(patched))
    try:
        result = _walk(src, True)
    finally:
        src.close()
    assert result.problems == ["mp_.n_mmaps says 5 mmapped chunks, 2 found in the mappings"]
