"""native: libmemdump_core.so's replay gives the Replay replay.py's `_Replayer` gives, and leaves
the reader in the same state, on every dump of the fixtures and on generated dumps (threads, every
heap operation and realloc's edge cases, the C++ families and their mismatches, custom blocks,
double and invalid frees, attached recordings, exec, marked runtime frees, clock samples, tags,
NUL padding, partial records, a cut final line) and on corrupted ones, where both give the same
`PATH:LINE: message` (the library leaves such a dump to Python)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from analyzer_testlib import FIXTURES, LIBC, LIBSTDCXX, REPO
from memdump_analyzer import native
from memdump_analyzer.dumpfile import DumpError, DumpReader
from memdump_analyzer.replay import replay
from memdump_analyzer.rules import RUNTIME_FREE_FUNCTIONS


@pytest.fixture(autouse=True)
def _library_built() -> None:
    """A build without the library must fail here, not fall back to Python silently."""
    assert native.library() is not None, (
        f"{native.library_path()} missing or not loadable: run `make build` "
        "(and set MEMDUMP_BUILD_DIR for another build directory)")


def _outcome(path: Path, monkeypatch: pytest.MonkeyPatch, engine: str) -> Any:
    """What replaying `path` gives: the Replay (its live blocks in order), the reader's state;
    or the error's text."""
    monkeypatch.setenv("MEMDUMP_NATIVE", "1" if engine == "c" else "0")
    with DumpReader(str(path), mark_functions=RUNTIME_FREE_FUNCTIONS) as reader:
        try:
            r = replay(reader)
        except DumpError as e:
            return str(e)
        state = {k: list(v.items()) if isinstance(v, Mapping) else v
                 for k, v in vars(reader).items() if k != "_file"}
        state["partial"] = (reader.partial_records, reader.partial_line())
        return r, list(r.live.items()), state


def both(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The outcome, after checking that both replays give it."""
    py = _outcome(path, monkeypatch, "python")
    c = _outcome(path, monkeypatch, "c")
    assert c == py
    return py


FIXTURE_DUMPS = sorted(FIXTURES.rglob("*.memdump"))


@pytest.mark.parametrize("path", FIXTURE_DUMPS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixtures(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = both(path, monkeypatch)
    assert not isinstance(outcome, str)
    assert native.last_fallback is None  # the library replayed it all


# -- generated dumps ------------------------------------------------------------------------------

_MODULES = {1: "/src/app", 2: LIBC, 3: LIBSTDCXX}
_FUNCTIONS = {4: "main", 5: "work", 6: "tcache_thread_shutdown", 7: "__libc_free", 8: "grow"}
_FILE = 9
#: addresses of every width from 1 to 16 hex digits (the library reads 8 digits at a time)
_POOL = [0x1000 + 0x20 * k for k in range(40)] + [0x1, 0xf, 0xabcdef0, 0x12345678, 0x123456789,
                                                  0x7fffabcdef01, 0x555555a34720,
                                                  0xfedcba9876543210, 0xffffffffffffffff]


class _Dump:
    """A random dump that a recorder could have written (or not, with `corrupt`)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines: list[bytes] = []
        self.seq = 0
        self.frames = 0
        self.nodes = 0
        self.unsymbolized: list[int] = []
        self.live: dict[int, str] = {}  # address -> family
        self.custom: set[int] = set()
        self.tid: int | None = None
        self.millis = 0
        self.tags: dict[int, int] = {}

    def add(self, line: str) -> None:
        self.lines.append(line.encode() + b"\n")

    def frame(self) -> None:
        rng = self.rng
        self.frames += 1
        module = rng.choice(list(_MODULES))
        function = rng.choice([0, 0, *_FUNCTIONS])
        self.add(f"f {self.frames} {0x400000 + self.frames:#x} {module} {self.frames * 16:#x} "
                 f"{function} {_FILE if function else 0} {rng.randrange(100) if function else 0}")
        if function == 0:
            self.unsymbolized.append(self.frames)
        elif rng.random() < 0.2:
            self.add(f"fi {self.frames} {rng.choice(list(_FUNCTIONS))} {_FILE} 7")

    def node(self) -> None:
        if not self.frames:
            self.frame()
        self.nodes += 1
        parent = self.rng.randrange(self.nodes)
        self.add(f"n {self.nodes} {parent} {self.rng.randint(1, self.frames)}")

    def stack(self) -> int:
        if not self.nodes or self.rng.random() < 0.1:
            self.node()
        return self.rng.randint(0, self.nodes)

    def pointer(self) -> int:
        rng = self.rng
        if self.live and rng.random() < 0.75:
            return rng.choice(list(self.live))
        return 0 if rng.random() < 0.2 else rng.choice(_POOL)

    def result(self) -> int:
        return 0 if self.rng.random() < 0.1 else self.rng.choice(_POOL)

    def event(self) -> None:
        rng = self.rng
        op = rng.choice(["malloc", "malloc", "free", "free", "new", "delete", "new[]",
                         "delete[]", "calloc", "realloc", "realloc", "reallocarray",
                         "posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc",
                         "custom_alloc", "custom_free"])
        node = self.stack()
        size = rng.choice([0, 1, 8, 24, 100, 4096, 12345678, 123456789, 1234567890123])
        res = self.result()
        short = {"malloc": "+", "free": "-", "new": "+n", "new[]": "+a", "delete": "-n",
                 "delete[]": "-a"}.get(op)
        if short is not None and self.tid is not None and rng.random() < 0.7:
            self.seq += 1
            if short[0] == "+":
                self.add(f"{short} {node} {res:#x} {size}")
            else:
                self.add(f"{short} {node} {self.pointer():#x}")
            self._model(op, res, size)
            return
        tid = rng.choice([11, 12, 13])
        if op in ("free", "delete", "delete[]"):
            result, args = "-", [f"{self.pointer():#x}"]
        elif op == "custom_free":
            ptr = rng.choice([*self.custom, 0, *_POOL[:4]]) if self.custom else rng.choice(_POOL)
            result, args = "-", [f"{ptr:#x}"]
            self.custom.discard(ptr)
        elif op in ("realloc", "reallocarray"):
            ptr = self.pointer() if rng.random() < 0.8 else rng.choice(_POOL)
            result = f"{res:#x}"
            args = [f"{ptr:#x}", str(size)] if op == "realloc" else [f"{ptr:#x}", "2", str(size)]
        elif op == "calloc":
            result, args = f"{res:#x}", [str(rng.randint(0, 3)), str(size)]
        elif op == "posix_memalign":
            result, args = f"{res:#x}", ["16", str(size), rng.choice(["0", "0", "12"])]
        elif op in ("aligned_alloc", "memalign"):
            result, args = f"{res:#x}", ["64", str(size)]
        else:
            result, args = f"{res:#x}", [str(size)]
            if op == "custom_alloc" and res:
                self.custom.add(res)
        self.seq += 1
        self.add(f"e {self.seq} {tid} {op} {node} {result} {' '.join(args)}")
        self._model(op, res, size)

    def _model(self, op: str, res: int, size: int) -> None:
        """Roughly what the event did, so that later frees mostly find live blocks."""
        if op in ("malloc", "calloc", "realloc", "valloc", "pvalloc", "aligned_alloc",
                  "memalign", "posix_memalign", "new", "new[]") and res:
            self.live[res] = op
        elif op in ("free", "delete", "delete[]") and self.live and self.rng.random() < 0.8:
            self.live.pop(self.rng.choice(list(self.live)))

    def other(self) -> None:
        rng = self.rng
        what = rng.randrange(10)
        if what == 0:
            self.tid = rng.choice([11, 12, 13])
            self.add(f"t {self.tid}")
        elif what == 1 and self.unsymbolized:
            ident = self.unsymbolized.pop(0)
            self.add(f"fs {ident} {rng.choice(list(_FUNCTIONS))} {_FILE} 3")
            if rng.random() < 0.3:
                self.add(f"fi {ident} 5 {_FILE} 4")
        elif what == 2:
            self.millis += rng.randrange(5)
            self.add(f"c {self.millis} {rng.randrange(1 << 20)}")
        elif what == 3:
            self.add("# a comment")
        elif what == 4:
            tid = rng.choice([11, 12])
            if self.tags.get(tid):
                self.tags[tid] -= 1
                self.add(f"u {tid}")
            else:
                self.tags[tid] = self.tags.get(tid, 0) + 1
                self.add(f"g {tid} 5")
        elif what == 5 and rng.random() < 0.2:
            self.seq += 1
            detail = rng.choice(["exec /bin/true", "signal SIGSEGV", "phase load", "odd x"])
            self.add(f"p {self.seq} {detail}")
            if detail.startswith("exec"):
                self.live.clear()
                self.custom.clear()
        elif what == 6:
            self.node()
        else:
            self.frame()

    def build(self, events: int) -> bytes:
        rng = self.rng
        self.add("MEMDUMP 2.4")
        self.add("i program /src/app")
        self.add(f"i attached {int(rng.random() < 0.3)}")
        for ident, text in {**_MODULES, **_FUNCTIONS, _FILE: "app.c"}.items():
            self.add(f"s {ident} {text}")
        for _ in range(events):
            if rng.random() < 0.25:
                self.other()
            else:
                self.event()
        if rng.random() < 0.7:
            self.seq += 1
            self.add(f"end {self.seq} exit 0")
        return self.pad(b"".join(self.lines))

    def pad(self, text: bytes) -> bytes:
        """NUL padding before some records (a partial record before some), a line of padding
        alone, a cut final line (format 1.3)."""
        rng = self.rng
        if rng.random() < 0.5:
            return text
        lines = text.splitlines(keepends=True)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(1, len(lines))
            pad = b"\0" * rng.randint(1, 9)
            if rng.random() < 0.2:
                lines.insert(i, pad + b"\n")
            else:
                lines[i] = rng.choice([b"", b"+ 1 0x1", b"e 4 1"]) + pad + lines[i]
        if rng.random() < 0.3:
            lines.append(b"+ 1 0x10 8")  # cut: no newline
        if rng.random() < 0.3:
            lines.append(b"\0" * 100)
        return b"".join(lines)


_GARBAGE = [b"zz", b"0X10", b"007", b"-1", b"", b"0x", b"99999999999", b"+n", b"\t", b"0x0"]


def _corrupt(rng: random.Random, text: bytes) -> bytes:
    """One field of one line replaced, or dropped."""
    lines = text.split(b"\n")
    i = rng.randrange(1, len(lines) - 1)
    fields = lines[i].split(b" ")
    j = rng.randrange(len(fields))
    if rng.random() < 0.2 and len(fields) > 1:
        del fields[j]
    else:
        fields[j] = rng.choice(_GARBAGE)
    lines[i] = b" ".join(fields)
    return b"\n".join(lines)


@pytest.mark.parametrize("seed", range(150))
def test_generated(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    text = _Dump(rng).build(rng.choice([5, 60, 400]))
    path = tmp_path / "gen.memdump"
    path.write_bytes(text)
    outcome = both(path, monkeypatch)
    assert not isinstance(outcome, str)
    assert native.last_fallback is None  # the library replayed it, not Python
    path.write_bytes(_corrupt(rng, text))
    both(path, monkeypatch)


def test_generated_dumps_have_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated dumps reach what the test is for: errors of every kind, marked runtime
    frees, untracked frees, custom blocks, execs, C++ families, reused live blocks."""
    seen: dict[str, int] = {}
    for seed in range(150):
        rng = random.Random(seed)
        path = tmp_path / "gen.memdump"
        path.write_bytes(_Dump(rng).build(rng.choice([5, 60, 400])))
        r = _outcome(path, monkeypatch, "c")[0]
        for e in r.errors:
            seen[e.kind] = seen.get(e.kind, 0) + 1
        for name in ("runtime_internal_frees", "untracked_frees", "custom_allocations",
                     "custom_frees", "reused_live", "delete_frees", "superblocks"):
            seen[name] = seen.get(name, 0) + getattr(r, name)
        seen["execs"] = seen.get("execs", 0) + len(r.execs)
    assert {k for k, n in seen.items() if n} == {
        "invalid-free", "double-free", "invalid-realloc", "mismatched-free",
        "runtime_internal_frees", "untracked_frees", "custom_allocations", "custom_frees",
        "reused_live", "delete_frees", "superblocks", "execs"}


def test_unusual_spelling_is_left_to_python(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A pointer the library does not read as written (pointers are compared as written): the
    dump is replayed by Python from the start, the reader reset first."""
    path = tmp_path / "odd.memdump"
    text = (b"MEMDUMP 2.4\ns 1 /src/app\nf 1 0x10 1 0x10 0 0 0\nn 1 0 1\nt 5\n"
            b"+ 1 0x10 8\n+ 1 0x0020 16\n- 1 0x10\n")
    path.write_bytes(text)
    r, live, _ = both(path, monkeypatch)
    assert live == [(b"0x0020", (16, 1))]
    assert str(native.last_fallback) == f"offset {text.index(b'+ 1 0x0020')}"


def test_long_lines_and_long_runs_of_definitions(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A record longer than the library's 4 MiB buffer, and runs of more lines for the reader
    than the library hands over at once (512), among events."""
    head = b"MEMDUMP 2.4\ns 1 /src/app\nf 1 0x10 1 0x10 0 0 0\nn 1 0 1\nt 5\n"
    strings = b"".join(b"s %d string%d\n" % (i, i) for i in range(2, 1500))
    text = (head + b"+ 1 0x10 8\n" + strings + b"s 1500 " + b"x" * (5 << 20) + b"\n"
            + b"+ 1 0x20 16\n- 1 0x10\n" + b"# end\n" * 600 + b"e 4 7 malloc 1 0x30 4\n")
    path = tmp_path / "long.memdump"
    path.write_bytes(text)
    r, live, state = both(path, monkeypatch)
    assert native.last_fallback is None
    assert live == [(b"0x20", (16, 1)), (b"0x30", (4, 1))]
    assert (r.events, len(dict(state)["strings"][1499][1]), dict(state)["_other"]) == (
        4, 5 << 20, 4 + 1499 + 600)


def test_padding_across_the_buffers_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of NUL bytes that the library reads in two pieces (its buffer holds 4 MiB), and a
    partial record before it: one run, the record after it read."""
    head = b"MEMDUMP 2.4\ns 1 /src/app\nf 1 0x10 1 0x10 0 0 0\nn 1 0 1\nt 5\n+ 1 0x10 8\n"
    filler = b"# " + b"x" * 97 + b"\n"
    body = head + filler * ((4 << 20) // len(filler))
    body += b"+ 1 0x2" + b"\0" * (4 << 20) + b"+ 1 0x20 16\n- 1 0x10\n"
    path = tmp_path / "padded.memdump"
    path.write_bytes(body)
    r, live, state = both(path, monkeypatch)
    assert native.last_fallback is None
    assert live == [(b"0x20", (16, 1))]
    assert dict(state)["partial"] == (1, 7 + (4 << 20) // len(filler))


def test_python_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMDUMP_NATIVE", "0")
    assert not native.enabled()
    monkeypatch.setenv("MEMDUMP_NATIVE", "1")
    assert native.enabled()


def test_pip_install_builds_the_library(tmp_path: Path) -> None:
    """`pip install .` (offline) puts the library next to the package, where native.py finds it
    first, and the installed analyser replays with it."""
    # from a copy: setuptools writes build/ and *.egg-info next to pyproject.toml
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "setup.py"):
        shutil.copy(REPO / name, src / name)
    for package in ("memdump_analyzer", "native"):
        shutil.copytree(REPO / "analyzer" / package, src / "analyzer" / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", str(src), "--no-build-isolation",
                    "--no-index", "--no-deps", "--target", str(site), "-q"],
                   check=True, capture_output=True, timeout=300)
    library = site / "memdump_analyzer" / "libmemdump_core.so"
    assert library.is_file()
    probe = ("import memdump_analyzer.native as n, memdump_analyzer.replay as r, sys;"
             "from memdump_analyzer.dumpfile import DumpReader;"
             "reader = DumpReader(sys.argv[1]);"
             "print(n.library_path(), r.replay(reader).events, n.last_fallback)")
    env = {**os.environ, "PYTHONPATH": str(site), "MEMDUMP_BUILD_DIR": str(tmp_path / "none")}
    out = subprocess.run([sys.executable, "-P", "-c", probe, str(FIXTURES / "example.memdump")],
                         check=True, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.stdout.split() == [str(library), "5", "None"]
