"""memdump end to end: the frames of libraries whose separate debug files GDB did not read.

`scripts/memdump.sh` tells GDB to read no separate debug file (`set debug-file-directory`, empty):
reading and indexing glibc's (libc6-dbg) is most of GDB's time on a small program. memdump then
reads the lines of the frames the dump holds from those files with memdump-symbolize (libdw,
gdb_ext/symbolize/). The frames must come out as GDB names them when it reads the files itself:
function, file, line and inlined calls, frame by frame.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from memdump_analyzer.dumpfile import DumpReader
from memdump_e2e import GDB_TIMEOUT, build_dir, program

ROOT = Path(__file__).resolve().parents[2]
SYMBOLIZE = build_dir() / "gdb_ext" / "symbolize" / "memdump-symbolize"
LIBC_DEBUG = Path("/usr/lib/debug/.build-id")

pytestmark = [
    pytest.mark.skipif(not SYMBOLIZE.is_file(), reason="memdump-symbolize not built (libdw-dev)"),
    pytest.mark.skipif(not LIBC_DEBUG.is_dir(), reason="no separate debug files (libc6-dbg)"),
]


def _record(tmp_path: Path, name: str, *, read_debug: bool, symbolizer: str) -> Path:
    dump = tmp_path / f"{name}-{read_debug}-{bool(symbolizer)}.memdump"
    early = [] if read_debug else ["-iex", "set debug-file-directory"]
    env = {**os.environ, "MEMDUMP_SYMBOLIZE": symbolizer}
    proc = subprocess.run(
        ["gdb", "-nx", "-batch", *early, "-ex", f"source {ROOT / 'gdb_ext' / 'memdump.py'}",
         "-ex", f"memdump -o {dump}", "-ex", "run", str(program(name))],
        capture_output=True, text=True, timeout=GDB_TIMEOUT, env=env, stdin=subprocess.DEVNULL)
    assert dump.is_file(), proc.stdout + proc.stderr
    return dump


def _frames(dump: Path) -> dict[tuple[str | None, int], tuple]:
    """(module, offset) -> (function, file, line, the inlined levels) of every frame."""
    with DumpReader(str(dump)) as reader:
        list(reader.records())
        return {(f.module, f.offset): (f.function, f.file, f.line, tuple(
                    (o.function, o.file, o.line) for o in reader.inlined_into.get(ident, ())))
                for ident, f in reader.frames.items() if ident}


def _libc(frames: dict) -> dict:
    return {k: v for k, v in frames.items() if k[0] and "/libc.so" in k[0]}


@pytest.mark.parametrize("name", ["leak_strdup", "chunk_tails", "leak_threads"])
def test_frames_from_debug_files_equal_gdbs(tmp_path: Path, name: str) -> None:
    """Every frame is what GDB says with glibc's debug file read (a thread's clone3, from the
    assembler, named from the symbol tables as GDB does); without memdump-symbolize,
    glibc's frames would have no file and line (GDB's symbol tables only)."""
    gdb_read = _frames(_record(tmp_path, name, read_debug=True, symbolizer=""))
    late = _frames(_record(tmp_path, name, read_debug=False, symbolizer=str(SYMBOLIZE)))
    bare = _frames(_record(tmp_path, name, read_debug=False, symbolizer="/nonexistent"))
    libc = _libc(gdb_read)
    assert len(libc) >= 2 and all(v[1] for v in libc.values()), libc
    assert late == gdb_read
    assert not any(v[1] for v in _libc(bare).values())


def test_memdump_sh_reads_no_debug_file(tmp_path: Path) -> None:
    """memdump.sh's dump has glibc's frames with their files and lines all the same."""
    dump = tmp_path / "sh.memdump"
    proc = subprocess.run([str(ROOT / "scripts" / "memdump.sh"), "-o", str(dump),
                           str(program("leak_strdup"))], capture_output=True, text=True,
                          timeout=GDB_TIMEOUT, stdin=subprocess.DEVNULL)
    assert dump.is_file(), proc.stderr
    libc = _libc(_frames(dump))
    assert libc and all(v[1] for v in libc.values()), libc


def test_symbolize_bad_input(tmp_path: Path) -> None:
    """One line naming the problem, and a non-zero exit."""
    proc = subprocess.run([str(SYMBOLIZE), "-a"], capture_output=True, text=True, input="")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == "memdump-symbolize: no module (-e MODULE)"
    missing = tmp_path / "missing.so"
    proc = subprocess.run([str(SYMBOLIZE), "-e", str(missing)], capture_output=True, text=True,
                          input="0x10\n")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"memdump-symbolize: {missing}: "), proc.stderr
    assert len(proc.stderr.splitlines()) == 1
