"""dumpformat.apply(): the recorder's live blocks are exactly what the analyser's replay of the dump
leaves, inlined fast path and slow path alike."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "gdb_ext"))
sys.path.insert(0, str(ROOT / "analyzer"))

from dbgkit.core.dumpwriter import DumpWriter, FrameInfo  # noqa: E402
from memdump_analyzer.dumpfile import DumpReader  # noqa: E402
from memdump_analyzer.dumpformat import NO_RESULT, apply, event_args, format_args  # noqa: E402
from memdump_analyzer.replay import replay  # noqa: E402


def _events(rng: random.Random, n: int) -> list[tuple[str, tuple[int, int, int], int, int]]:
    """Random allocator calls (op, args, result, rc), with failures, reallocs to 0 and frees of
    pointers that are not live."""
    live: list[int] = []
    nxt = 0x1000
    out = []
    for _ in range(n):
        op = rng.choice(["malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign",
                         "aligned_alloc", "memalign", "valloc", "pvalloc", "new", "new[]",
                         "delete", "delete[]"])
        nxt += 0x40
        result = 0 if rng.random() < 0.1 else nxt
        size = rng.choice([0, 1, 24, 100])
        old = rng.choice(live) if live and rng.random() < 0.8 else rng.choice([0, 0x9999990])
        rc = 0
        if op in NO_RESULT:  # free, delete, delete[] (mismatches included: they release too)
            args, result = (old, 0, 0), 0
        elif op in ("realloc", "reallocarray"):
            args = (old, size, 3) if op == "reallocarray" else (old, size, 0)
            if size == 0 and old:
                result = 0  # glibc frees and returns NULL
        elif op == "calloc":
            args = (3, size, 0)
        elif op == "posix_memalign":
            rc = 0 if result else 12
            args = (0x7000, 64, size)
        elif op in ("aligned_alloc", "memalign"):
            args = (64, size, 0)
        else:
            args = (size, 0, 0)
        out.append((op, args, result, rc))
        model: dict[int, int] = dict.fromkeys(live, 0)
        apply(model, op, result, event_args(op, args, rc))
        live = list(model)
    return out


def test_apply_matches_the_replay(tmp_path: Path) -> None:
    rng = random.Random(7)
    for trial in range(20):
        events = _events(rng, 300)
        path = tmp_path / f"t{trial}.memdump"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        writer = DumpWriter(fd, lambda pc: FrameInfo("/a", pc))
        stack = writer.stack((0x1234,))
        live: dict[int, int] = {}
        for op, args, result, rc in events:
            dump_args = event_args(op, args, rc)
            apply(live, op, result, dump_args)
            writer.event(1, op, stack, None if op in NO_RESULT else result,
                         format_args(op, dump_args))
        writer.end("exit", "0")
        os.close(fd)
        with DumpReader(str(path)) as reader:
            r = replay(reader)
        assert {int(p, 16): size for p, (size, _) in r.live.items()} == live
