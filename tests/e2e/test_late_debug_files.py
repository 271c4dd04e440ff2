"""memdump end to end: the frames of libraries whose separate debug files GDB did not read.

`scripts/memdump.sh` tells GDB to read no separate debug file (`set debug-file-directory`, empty):
reading and indexing glibc's (libc6-dbg) is most of GDB's time on a small program. memdump then
reads the lines of the frames the dump holds from those files with memdump-symbolize (libdw,
gdb_ext/symbolize/). The frames must come out as GDB names them when it reads the files itself:
function, file, line and inlined calls, frame by frame. GDB's one-liner (`memdump` then `run`)
does the same for the run (gdb_ext/dbgkit/memdump/lazydebug.py), the user's setting put back
and the files read at the first stop the user sees.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from memdump_analyzer.buildid import build_id
from memdump_analyzer.dumpfile import DumpReader
from memdump_e2e import GDB_TIMEOUT, build_dir, program

ROOT = Path(__file__).resolve().parents[2]
SYMBOLIZE = build_dir() / "gdb_ext" / "symbolize" / "memdump-symbolize"
LIBC_DEBUG = Path("/usr/lib/debug/.build-id")

pytestmark = [
    pytest.mark.skipif(not SYMBOLIZE.is_file(), reason="memdump-symbolize not built (libdw-dev)"),
    pytest.mark.skipif(not LIBC_DEBUG.is_dir(), reason="no separate debug files (libc6-dbg)"),
]


def _gdb(tmp_path: Path, name: str, *, read_debug: bool, symbolizer: str,
         after: tuple[str, ...] = (), record: bool = True) -> tuple[Path, str]:
    """GDB's one-liner on NAME (with memdump when RECORD), then the commands AFTER: the dump and
    GDB's output."""
    dump = tmp_path / f"{name}-{read_debug}-{Path(symbolizer).name}.memdump"
    early = [] if read_debug else ["-iex", "set debug-file-directory"]
    env = {**os.environ, "MEMDUMP_SYMBOLIZE": symbolizer}
    memdump = ["-ex", f"memdump -o {dump}"] if record else []
    proc = subprocess.run(
        ["gdb", "-nx", "-batch", *early, "-ex", f"source {ROOT / 'gdb_ext' / 'memdump.py'}",
         *memdump, "-ex", "run", *(a for c in after for a in ("-ex", c)), str(program(name))],
        capture_output=True, text=True, timeout=GDB_TIMEOUT, env=env, stdin=subprocess.DEVNULL)
    assert dump.is_file() or not record, proc.stdout + proc.stderr
    return dump, proc.stdout


def _record(tmp_path: Path, name: str, *, read_debug: bool, symbolizer: str) -> Path:
    return _gdb(tmp_path, name, read_debug=read_debug, symbolizer=symbolizer)[0]


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
    # without memdump-symbolize (a directory in its place), GDB reads the debug files itself
    gdb_read = _frames(_record(tmp_path, name, read_debug=True, symbolizer=str(tmp_path)))
    late = _frames(_record(tmp_path, name, read_debug=False, symbolizer=str(SYMBOLIZE)))
    bare = _frames(_record(tmp_path, name, read_debug=False, symbolizer="/nonexistent/x"))
    libc = _libc(gdb_read)
    assert len(libc) >= 2 and all(v[1] for v in libc.values()), libc
    assert late == gdb_read
    assert not any(v[1] for v in _libc(bare).values())


def test_frames_from_the_symbol_cache_equal_gdbs(tmp_path: Path) -> None:
    """The second recording of a program takes glibc's frames from the symbol cache
    (memdump_analyzer/symcache.py): memdump-symbolize is asked nothing, and the frames are
    GDB's, as they are with the cache off."""
    log = tmp_path / "asked.log"
    counting = tmp_path / "counting-symbolize"
    counting.write_text(f'#!/bin/sh\ntee -a "{log}" | exec "{SYMBOLIZE}" "$@"\n')
    counting.chmod(0o755)
    gdb_read = _frames(_record(tmp_path, "leak_threads", read_debug=True,
                               symbolizer="/nonexistent"))
    runs = []
    for off in ("", "", "1"):
        os.environ["MEMDUMP_NO_CACHE"] = off  # the test's own XDG_CACHE_HOME (conftest.py)
        try:
            (tmp_path / f"run{len(runs)}").mkdir()
            dump = _record(tmp_path / f"run{len(runs)}", "leak_threads", read_debug=False,
                           symbolizer=str(counting))
        finally:
            del os.environ["MEMDUMP_NO_CACHE"]
        runs.append((_frames(dump), log.read_text().split() if log.exists() else []))
    asked = runs[0][1]
    assert len(asked) >= 2 and len(_libc(gdb_read)) >= 2
    assert [r[0] for r in runs] == [gdb_read] * 3
    assert [len(r[1]) for r in runs] == [len(asked), len(asked), 2 * len(asked)]
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "dbgkit" / "symbols"
    libc = {build_id(module) for module, _ in _libc(gdb_read)}
    assert {f"{ident}-counting-symbolize-C.json" for ident in libc} <= {
        p.name for p in cache.iterdir()}


_READ = "python print(sorted(o.owner.filename for o in gdb.objfiles() if o.owner))"


def test_one_liner_defers_the_debug_files(tmp_path: Path) -> None:
    """GDB's one-liner reads no separate debug file for a program that just ends, the frames the
    same as GDB's, and the user's `debug-file-directory` as it was after the run."""
    gdb_read = _frames(_record(tmp_path, "leak_strdup", read_debug=True, symbolizer="/nonexistent"))
    dump, out = _gdb(tmp_path, "leak_strdup", read_debug=True, symbolizer=str(SYMBOLIZE),
                     after=("show debug-file-directory", _READ))
    assert _frames(dump) == gdb_read
    lines = out.splitlines()
    assert lines[-2:] == ['The directory where separate debug symbols are searched for is '
                          '"/usr/lib/debug".', "[]"], out


def test_stop_reads_the_debug_files(tmp_path: Path) -> None:
    """A stop inside glibc (abort's SIGABRT) during the recording: the debug files read at the
    stop, the frame printed again with its source line, `bt` as without memdump."""
    _, plain = _gdb(tmp_path, "crash_abort", read_debug=True, symbolizer=str(SYMBOLIZE),
                    after=("bt 1", _READ), record=False)
    _, out = _gdb(tmp_path, "crash_abort", read_debug=True, symbolizer=str(SYMBOLIZE),
                  after=("bt 1", "show debug-file-directory", _READ))
    frame = next(line for line in plain.splitlines() if line.startswith("#0  "))
    assert " at " in frame, plain
    lines = out.splitlines()
    assert lines.count(frame) == 2, out  # `frame` at the stop, then `bt 1`
    shown = lines.index('The directory where separate debug symbols are searched for is '
                        '"/usr/lib/debug".')
    read = next(line for line in plain.splitlines() if line.startswith("['"))
    assert lines[shown + 1] == read == ("['/lib/x86_64-linux-gnu/libc.so.6', "
                                        "'/lib64/ld-linux-x86-64.so.2']"), (out, plain)


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


def test_prompt_after_the_end_reads_the_debug_files(tmp_path: Path) -> None:
    """Not in batch mode: at the prompt after the program ended, GDB has the debug files that
    a run without memdump reads (commands from a pipe: GDB still shows its prompt)."""
    dump = tmp_path / "prompt.memdump"
    proc = subprocess.run(
        ["gdb", "-nx", "-q", "-ex", f"source {ROOT / 'gdb_ext' / 'memdump.py'}",
         "-ex", f"memdump -o {dump}", "-ex", "run", str(program("leak_strdup"))],
        capture_output=True, text=True, timeout=GDB_TIMEOUT, input=_READ + "\n",
        env={**os.environ, "MEMDUMP_SYMBOLIZE": str(SYMBOLIZE)})
    assert dump.is_file(), proc.stdout + proc.stderr
    assert ("(gdb) ['/lib/x86_64-linux-gnu/libc.so.6', '/lib64/ld-linux-x86-64.so.2']"
            in proc.stdout.splitlines()), proc.stdout


def _libc_module() -> str:
    """The C library as the dynamic linker maps it, when its separate debug file is installed."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split(maxsplit=5)[-1]
        if "/libc.so" in path:
            ident = build_id(path) or ""
            if not (LIBC_DEBUG / ident[:2] / f"{ident[2:]}.debug").is_file():
                pytest.skip("no separate debug file for the C library")
            return os.path.realpath(path)
    pytest.skip("no C library mapped")


def test_inflated_debug_file_gives_libdws_answers() -> None:
    """memdump-symbolize inflates the debug file's compressed sections itself (libdeflate when
    installed, else zlib) and leaves out those it never reads (gdb_ext/symbolize/inflate.c): its
    answers are libdw's own, reading the file as it is, on addresses inside each of glibc's
    functions (a seeded random offset in each) and at their starts."""
    from memdump_analyzer.symbolize import sized_symbols

    libc = _libc_module()
    rng = random.Random(25)
    spans = sized_symbols(libc, "Tt", demangle=False)
    assert len(spans) > 1000, len(spans)
    addresses = [start + rng.randrange(end - start) for start, end, _ in spans]
    addresses += [start for start, _, _ in spans[::7]]
    text = "".join(f"{a:#x}\n" for a in addresses)

    def answers(inflater: str) -> str:
        proc = subprocess.run([str(SYMBOLIZE), "-a", "-f", "-i", "-C", f"--inflate={inflater}",
                               "-e", libc], capture_output=True, text=True, input=text, check=True)
        assert proc.stderr == ""
        return proc.stdout

    libdw = answers("libdw")
    assert libdw.count("\n0x") + 1 == len(addresses)
    assert libdw.count("./csu/../csu/libc-start.c:") > 0  # the debug file was read
    for inflater in ("zlib", "libdeflate", "auto"):
        assert answers(inflater) == libdw, inflater


def _symbolize(module: str, text: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SYMBOLIZE), "-a", "-f", "-i", "-C", *options, "-e", module],
                          capture_output=True, text=True, input=text, check=True)


@pytest.mark.parametrize("library", ["libc.so.6", "libm.so.6"])
def test_prefix_inflated_gives_libdws_answers(library: str) -> None:
    """A few addresses (a small program's frames in glibc) make memdump-symbolize inflate only
    the prefixes of .debug_info, .debug_abbrev and .debug_line their units need (prefix.c): its
    answers are libdw's own on seeded random sets of one to three addresses in the functions of
    glibc's C library and of its libm (libc6-dbg's files both), the sets whose units lie in the
    first half of .debug_info inflated in part, the others whole."""
    from memdump_analyzer.symbolize import sized_symbols

    module = os.path.join(os.path.dirname(_libc_module()), library)
    ident = build_id(module) if os.path.isfile(module) else None
    if ident is None or not (LIBC_DEBUG / ident[:2] / f"{ident[2:]}.debug").is_file():
        pytest.skip(f"no separate debug file for {library}")
    rng = random.Random(2505)
    spans = sized_symbols(module, "Tt", demangle=False)
    ways = {"whole": 0, "prefix": 0}
    for _ in range(30):
        addresses = [start + rng.randrange(end - start)
                     for start, end, _ in rng.sample(spans, rng.randint(1, 3))]
        text = "".join(f"{a:#x}\n" for a in addresses)
        libdw = _symbolize(module, text, "--inflate=libdw").stdout
        assert libdw.count("\n0x") + 1 == len(addresses)
        for inflater in ("zlib", "auto"):
            proc = _symbolize(module, text, f"--inflate={inflater}", "--verbose")
            assert proc.stdout == libdw, (inflater, text)
            ways["whole" if proc.stderr.endswith(": inflated whole\n") else "prefix"] += 1
    assert ways["prefix"] >= 10 and ways["whole"] >= 10, ways


def _aranges_units(debug_file: str) -> list[tuple[int, list[tuple[int, int]]]]:
    """The units .debug_aranges names (binutils' readelf), each with its address ranges."""
    text = subprocess.run(["readelf", "--debug-dump=aranges", debug_file], capture_output=True,
                          text=True, check=True).stdout
    units: list[tuple[int, list[tuple[int, int]]]] = []
    for line in text.splitlines():
        words = line.split()
        if line.strip().startswith("Offset into .debug_info:"):
            units.append((int(words[-1], 16), []))
        elif len(words) == 2 and units and all(c in "0123456789abcdef" for c in "".join(words)):
            units[-1][1].append((int(words[0], 16), int(words[1], 16)))
    return units


@pytest.mark.skipif(shutil.which("readelf") is None, reason="no readelf")
def test_prefix_ends_with_the_unit_asked() -> None:
    """For glibc's `__libc_start_main` (libc-start.c, whose unit holds the two frames below every
    program's main), .debug_info is inflated up to the end of its unit: the start of the next
    unit .debug_aranges names."""
    from memdump_analyzer.symbolize import sized_symbols

    libc = _libc_module()
    start = next(s for s, _, name in sized_symbols(libc, "Tt", demangle=False)
                 if name.startswith("__libc_start_main@"))
    ident = build_id(libc)
    assert ident is not None
    debug_file = str(LIBC_DEBUG / ident[:2] / f"{ident[2:]}.debug")
    units = _aranges_units(debug_file)
    unit = next(u for u, ranges in units if any(a <= start < a + n for a, n in ranges))
    following = min(u for u, _ in units if u > unit)
    proc = _symbolize(libc, f"{start:#x}\n", "--verbose")
    first = proc.stderr.splitlines()[0]
    if first.endswith(": inflated whole"):
        pytest.skip("this glibc's libc-start unit lies past the first half of .debug_info")
    assert first.startswith(f"memdump-symbolize: {debug_file}: inflated the first "
                            f"{following} bytes of .debug_info, "), first
    assert proc.stdout == _symbolize(libc, f"{start:#x}\n", "--inflate=libdw").stdout


@pytest.mark.skipif(shutil.which("strace") is None, reason="no strace")
def test_inflated_copy_is_what_libdw_reads(tmp_path: Path) -> None:
    """The copy is made (a memfd) and read, not libdw's own inflating of the file: one memfd,
    created after the debug file is opened; with `--inflate=libdw`, none."""
    libc = _libc_module()
    from memdump_analyzer.symbolize import sized_symbols

    first = sized_symbols(libc, "Tt", demangle=False)[0][0]
    for inflater, memfds in (("zlib", 1), ("libdw", 0)):
        log = tmp_path / f"{inflater}.strace"
        subprocess.run(["strace", "-o", str(log), "-e", "trace=memfd_create", str(SYMBOLIZE),
                        "-a", "-f", "-i", f"--inflate={inflater}", "-e", libc],
                       capture_output=True, text=True, input=f"{first:#x}\n", check=True)
        calls = [line for line in log.read_text().splitlines() if "memfd_create(" in line]
        assert len(calls) == memfds, calls
        assert all('"memdump-symbolize"' in c for c in calls), calls


def test_symbolize_bad_inflater() -> None:
    """An unknown `--inflate`: one line naming it, exit 2."""
    proc = subprocess.run([str(SYMBOLIZE), "--inflate=gzip", "-e", "/bin/true"],
                          capture_output=True, text=True, input="")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (
        "memdump-symbolize: unknown inflater (--inflate=auto|libdeflate|zlib|libdw)")
