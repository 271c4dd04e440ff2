"""The symbol cache (symcache.py): the symboliser's answers kept per module build, the same
answers as without it, the symboliser run on the addresses the cache does not hold only, and a
stale, corrupt or foreign file ignored."""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from memdump_analyzer import symcache
from memdump_analyzer.buildid import build_id
from memdump_analyzer.symbolize import addr2line

SOURCE = """\
#include <stdio.h>
#include <stdlib.h>

static inline __attribute__((always_inline)) int twice(int x) { return 2 * x; }
__attribute__((noinline)) int f1(int x) { return twice(x) + 1; }
__attribute__((noinline)) int f2(int x) { return f1(x) * 3; }
__attribute__((noinline)) void *f3(size_t n) { return malloc(n + (size_t)f2((int)n)); }

int main(int argc, char **argv)
{
    (void)argv;
    printf("%p\\n", f3((size_t)argc));
    return 0;
}
"""
ANALYZER = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    path = shutil.which(name)
    assert path is not None, f"{name} is needed (binutils / gcc)"
    return path


def _program(tmp_path: Path, *flags: str) -> Path:
    (tmp_path / "prog.c").write_text(SOURCE)
    binary = tmp_path / "prog"
    subprocess.run([_tool("gcc"), "-g", "-O2", *flags, "-o", str(binary), str(tmp_path / "prog.c")],
                   check=True)
    return binary


def _counting_addr2line(tmp_path: Path) -> tuple[str, Path]:
    """binutils' addr2line behind a script that logs every address it is asked (its name ends
    in addr2line: told the object format as addr2line is)."""
    log = tmp_path / "asked.log"
    script = tmp_path / "counting-addr2line"
    script.write_text(f'#!/bin/sh\ntee -a "{log}" | exec "{_tool("addr2line")}" "$@"\n')
    script.chmod(0o755)
    return str(script), log


def _asked(log: Path) -> list[int]:
    return [int(line, 16) for line in log.read_text().split()] if log.exists() else []


def _offsets(binary: Path) -> list[int]:
    """Every fourth address of the program's .text (nm: its functions' spans)."""
    out = subprocess.run([_tool("nm"), "-S", "--defined-only", str(binary)], check=True,
                         capture_output=True, text=True).stdout
    spans = [(int(p[0], 16), int(p[1], 16)) for p in (line.split() for line in out.splitlines())
             if len(p) == 4 and p[2] in "Tt"]
    return sorted({a for start, size in spans for a in range(start, start + size, 4)})


def _files(cache: Path) -> list[Path]:
    where = cache / "dbgkit" / "symbols"
    return sorted(where.iterdir()) if where.exists() else []


def test_cached_answers_are_the_symbolisers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            ) -> None:
    """Randomised: the addresses asked in random runs, answered from the cache where it holds
    them, equal one run without the cache; the symboliser is asked each address once."""
    binary = _program(tmp_path)
    program, log = _counting_addr2line(tmp_path)
    offsets = _offsets(binary)
    assert len(offsets) > 20
    monkeypatch.setenv(symcache.ENV_OFF, "1")
    expected = addr2line(program, str(binary), offsets)
    assert sum(1 for chain in expected.values() if chain and chain[0][1]) > 10
    assert _asked(log) == offsets
    log.unlink()
    monkeypatch.delenv(symcache.ENV_OFF)
    cache = Path(os.environ["XDG_CACHE_HOME"])
    assert _files(cache) == []
    rng = random.Random(25)
    seen: set[int] = set()
    for _ in range(8):
        asked = sorted(rng.sample(offsets, rng.randint(1, len(offsets) // 3)))
        before = len(_asked(log))
        got = addr2line(program, str(binary), asked)
        assert got == {o: expected[o] for o in asked}
        assert list(got) == asked
        assert _asked(log)[before:] == [o for o in asked if o not in seen]
        seen.update(asked)
    got = addr2line(program, str(binary), offsets)
    assert got == expected
    assert sorted(_asked(log)) == offsets  # each address once over all the runs
    assert addr2line(program, str(binary), offsets) == expected
    assert sorted(_asked(log)) == offsets  # every address from the cache: no run at all
    assert len(_asked(log)) == len(offsets)
    # the demangled and the linkage names are two files
    addr2line(program, str(binary), offsets[:3], demangle=False)
    names = [p.name for p in _files(cache)]
    ident = build_id(str(binary))
    assert names == [f"{ident}-counting-addr2line-C.json", f"{ident}-counting-addr2line.json"]


def test_files_and_directories_are_private(tmp_path: Path) -> None:
    binary = _program(tmp_path)
    program, _ = _counting_addr2line(tmp_path)
    addr2line(program, str(binary), _offsets(binary)[:5])
    cache = Path(os.environ["XDG_CACHE_HOME"])
    for path in (cache / "dbgkit", cache / "dbgkit" / "symbols"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    [file] = _files(cache)
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert json.loads(file.read_text())["key"]["format"] == symcache.FORMAT


def test_off_and_without_a_build_id_nothing_is_kept(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Path(os.environ["XDG_CACHE_HOME"])
    program, log = _counting_addr2line(tmp_path)
    plain = _program(tmp_path, "-Wl,--build-id=none")
    assert build_id(str(plain)) is None
    offsets = _offsets(plain)[:5]
    addr2line(program, str(plain), offsets)
    addr2line(program, str(plain), offsets)
    assert _asked(log) == offsets * 2 and not (cache / "dbgkit").exists()
    binary = _program(tmp_path)
    monkeypatch.setenv(symcache.ENV_OFF, "1")
    addr2line(program, str(binary), offsets)
    assert not (cache / "dbgkit").exists()


def test_a_stale_file_is_replaced(tmp_path: Path) -> None:
    """Another symboliser version (its modification time), or a stripped copy of the module
    (same build id): the file's key differs, the answers are the symboliser's again."""
    binary = _program(tmp_path)
    program, log = _counting_addr2line(tmp_path)
    offsets = _offsets(binary)[:6]
    first = addr2line(program, str(binary), offsets)
    os.utime(program, ns=(0, 1_000_000_000))
    assert addr2line(program, str(binary), offsets) == first
    assert _asked(log) == offsets * 2
    stripped = tmp_path / "stripped"
    subprocess.run([_tool("strip"), "-o", str(stripped), str(binary)], check=True)
    assert build_id(str(stripped)) == build_id(str(binary))
    assert addr2line(program, str(stripped), offsets) != first
    assert _asked(log) == offsets * 3
    [file] = _files(Path(os.environ["XDG_CACHE_HOME"]))
    assert json.loads(file.read_text())["key"]["module_size"] == stripped.stat().st_size


CHILD = """\
import sys
from memdump_analyzer.symbolize import addr2line
offsets = [int(a, 16) for a in sys.argv[3:]]
print(sorted(addr2line(sys.argv[1], sys.argv[2], offsets).items()))
"""


@pytest.mark.parametrize(("content", "why"), [
    (b"\x00\xff garbage", "not a symbol cache file"),
    (b'{"key": {}, "frames": {}}', None),  # a foreign key: replaced without a word
    (b"[1, 2]", "not a symbol cache file"),
    ("KEY", "not a symbol cache file"),  # the right key, malformed answers
    ("INSIDE", "not a symbol cache file"),  # the right key, a malformed nm verdict
])
def test_a_corrupt_file_is_one_warning(tmp_path: Path, content: bytes | str,
                                       why: str | None) -> None:
    """The answers are the symboliser's, standard error one line at most (no traceback), and
    the file is a good one again."""
    binary = _program(tmp_path)
    program, log = _counting_addr2line(tmp_path)
    offsets = _offsets(binary)[:4]
    argv = [sys.executable, "-c", CHILD, program, str(binary), *(f"{o:x}" for o in offsets)]
    env = {**os.environ, "PYTHONPATH": str(ANALYZER)}
    good = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
    assert good.stderr == ""
    [file] = _files(Path(os.environ["XDG_CACHE_HOME"]))
    if content in ("KEY", "INSIDE"):
        doc = json.loads(file.read_text())
        if content == "KEY":
            doc["frames"] = {"10": [["f", 3, None]]}
        else:
            doc["inside"] = {"10": 1}
        content = json.dumps(doc).encode()
    assert isinstance(content, bytes)
    file.write_bytes(content)
    run = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
    assert run.stdout == good.stdout
    expected = (f"dbgkit: warning: {file}: {why}: symbolised without the cache\n"
                if why else "")
    assert run.stderr == expected
    assert _asked(log) == offsets * 2
    again = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
    assert (again.stdout, again.stderr, _asked(log)) == (good.stdout, "", offsets * 2)


def test_the_directory_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_DIR_BYTES, the least recently used files go (a hit counts as a use)."""
    program, _ = _counting_addr2line(tmp_path)
    binaries = []
    for i in range(3):  # three builds: three build ids
        (tmp_path / str(i)).mkdir()
        binaries.append(_program(tmp_path / str(i), f"-DVARIANT={i}", f"-O{i}"))
    assert len({build_id(str(b)) for b in binaries}) == 3
    offsets = [0x100000, 0x100004]  # outside every function: files of one size
    cache = Path(os.environ["XDG_CACHE_HOME"])
    for i, binary in enumerate(binaries[:2]):
        addr2line(program, str(binary), offsets)
        [file] = [p for p in _files(cache) if p.name.startswith(str(build_id(str(binary))))]
        os.utime(file, ns=(i * 10**9, i * 10**9))  # binaries[0]'s the older
    addr2line(program, str(binaries[0]), offsets)  # a hit: binaries[0]'s is the newest now
    sizes = sum(p.stat().st_size for p in _files(cache))
    monkeypatch.setattr(symcache, "MAX_DIR_BYTES", sizes + 10)
    addr2line(program, str(binaries[2]), offsets)
    kept = {p.name.split("-")[0] for p in _files(cache)}
    assert kept == {build_id(str(binaries[0])), build_id(str(binaries[2]))}


def test_a_missing_home_is_never_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon's HOME (`/nonexistent`) without XDG_CACHE_HOME: no cache, and no home made for
    one; a home that exists gets its `.cache`."""
    home = tmp_path / "nonexistent"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(home))
    assert symcache.directory() is None
    program, log = _counting_addr2line(tmp_path)
    binary = _program(tmp_path)
    offsets = _offsets(binary)[:3]
    addr2line(program, str(binary), offsets)
    assert _asked(log) == offsets and not home.exists()
    home.mkdir()
    assert symcache.directory() == str(home / ".cache" / "dbgkit" / "symbols")
    addr2line(program, str(binary), offsets)
    assert len(_files(home / ".cache")) == 1
