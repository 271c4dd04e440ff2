"""Random dumps that a recorder could have written, for the tests that hold the C library to the
Python reference (test_analyzer_native.py: the replay; test_analyzer_nativepass.py: the views'
pass): threads, every heap operation and realloc's edge cases, the C++ families, custom blocks,
double and invalid frees, attached recordings, exec, marked runtime frees, clock samples, tags,
phases, growth chains (allocate larger, free; realloc), NUL padding, partial records, a cut
final line; and `corrupt`, one field of one line spoiled."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from analyzer_testlib import LIBC, LIBSTDCXX
from memdump_analyzer import native
from memdump_analyzer.compactfile import compact_file

__all__ = ["Dump", "check_generated", "corrupt", "generated_pair"]

_MODULES = {1: "/src/app", 2: LIBC, 3: LIBSTDCXX}
_FUNCTIONS = {4: "main", 5: "work", 6: "tcache_thread_shutdown", 7: "__libc_free", 8: "grow"}
_FILE = 9
#: addresses of every width from 1 to 16 hex digits (the library reads 8 digits at a time)
_POOL = [0x1000 + 0x20 * k for k in range(40)] + [0x1, 0xf, 0xabcdef0, 0x12345678, 0x123456789,
                                                  0x7fffabcdef01, 0x555555a34720,
                                                  0xfedcba9876543210, 0xffffffffffffffff]


class Dump:
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
        tag = {"calloc": "+c", "realloc": "+r", "posix_memalign": "+p", "aligned_alloc": "+l",
               "memalign": "+m"}.get(op)  # (2.5) short, as the recorder writes them
        if tag is not None and self.tid is not None and rng.random() < 0.7:
            self.add(f"{tag} {node} {result} {' '.join(args)}")
        else:
            self.add(f"e {self.seq} {tid} {op} {node} {result} {' '.join(args)}")
        self._model(op, res, size)

    def _model(self, op: str, res: int, size: int) -> None:
        """Roughly what the event did, so that later frees mostly find live blocks."""
        if op in ("malloc", "calloc", "realloc", "valloc", "pvalloc", "aligned_alloc",
                  "memalign", "posix_memalign", "new", "new[]") and res:
            self.live[res] = op
        elif op in ("free", "delete", "delete[]") and self.live and self.rng.random() < 0.8:
            self.live.pop(self.rng.choice(list(self.live)))

    def _e(self, tid: int, op: str, node: int, result: str, args: list[str]) -> None:
        self.seq += 1
        self.add(f"e {self.seq} {tid} {op} {node} {result} {' '.join(args)}")

    def chain(self) -> None:
        """A container that grows: a block, then larger ones from the same stack, each made
        before the smaller one is freed or by a realloc; sometimes smaller, from another stack,
        or with another event between the two."""
        rng = self.rng
        node, tid, size = self.stack(), rng.choice([11, 12, 13]), rng.choice([8, 24, 100])
        ptr = rng.choice(_POOL)
        self._e(tid, "malloc", node, f"{ptr:#x}", [str(size)])
        for _ in range(rng.randint(1, 5)):
            new = rng.choice(_POOL)
            size = size * 2 if rng.random() < 0.85 else size // 2
            where = node if rng.random() < 0.85 else self.stack()
            if rng.random() < 0.3:
                self._e(tid, "realloc", where, f"{new:#x}", [f"{ptr:#x}", str(size)])
            else:
                self._e(tid, "malloc", where, f"{new:#x}", [str(size)])
                if rng.random() < 0.15:
                    self.event()
                self._e(tid, "free", self.stack(), "-", [f"{ptr:#x}"])
            self.live.pop(ptr, None)
            self.live[new] = "malloc"
            ptr = new

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
                self.add(f"g {tid} {rng.choice([4, 5, 8])}")
        elif what == 5 and rng.random() < 0.2:
            self.seq += 1
            detail = rng.choice(["exec /bin/true", "signal SIGSEGV", "phase load", "odd x",
                                 "phase run", "phase -", "phase load"])
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
        self.add("MEMDUMP 2.5")
        self.add("i program /src/app")
        self.add(f"i attached {int(rng.random() < 0.3)}")
        for ident, text in {**_MODULES, **_FUNCTIONS, _FILE: "app.c"}.items():
            self.add(f"s {ident} {text}")
        for _ in range(events):
            if rng.random() < 0.25:
                self.other()
            elif rng.random() < 0.06:
                self.chain()
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


_GARBAGE = [b"zz", b"0X10", b"007", b"-1", b"", b"0x", b"99999999999", b"+n", b"\t", b"0x0",
            b"+c", b"+r", b"+p", b"+m"]


def corrupt(rng: random.Random, text: bytes) -> bytes:
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


def check_generated(seed: int, path: Path, both: Callable[[Path], Any]) -> None:
    """Dump `seed` written to `path`: `both` (which checks that the C library and Python agree)
    reads it without an error and with no fallback to Python, then reads it corrupted."""
    rng = random.Random(seed)
    text = Dump(rng).build(rng.choice([5, 60, 400]))
    path.write_bytes(text)
    outcome = both(path)
    assert not isinstance(outcome, str)
    assert native.last_fallback is None  # the library read it, not Python
    path.write_bytes(corrupt(rng, text))
    both(path)


def generated_pair(seed: int, directory: Path) -> tuple[Path, Path]:
    """Dump `seed` of 400 events written to `directory` as text, and compacted beside it."""
    text, compact = directory / "gen.memdump", directory / "gen.mdz"
    text.write_bytes(Dump(random.Random(seed)).build(400))
    compact_file(str(text), str(compact))
    return text, compact
