"""A randomised property test that ties the exports' pass (exports/profile.py) to the replay:
on dumps mixing every heap operation, failed calls, frees of unknown pointers, reused live
pointers, the C library's own frees, custom blocks, short records and an exec, the pass finds the
replay's allocations, allocated bytes and peak, and a peak snapshot of the replay's bytes."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from analyzer_testlib import LIBC, Dump, F, main_at
from memdump_analyzer import analyze
from memdump_analyzer.exports.profile import collect

STACKS = [[F(f"f{i}", "/src/p.c", 10 + i), *main_at(30 + i)] for i in range(5)]
#: glibc emptying a thread's cache: its frees are its own (rules.py, `runtime-free`)
MARKED = [F("tcache_thread_shutdown", module=LIBC, pc=0x7FFFF7E60000), *main_at(40)]


def _random_dump(rng: random.Random, short: bool) -> Dump:
    d = Dump(header="MEMDUMP 2.1", short=short)
    live: list[str] = []
    addr = iter(range(0x10000, 0x10000000, 0x40))

    def pick() -> str:
        if live and rng.random() < 0.8:
            return live.pop(rng.randrange(len(live)))
        return f"0x{rng.randrange(0x10000, 0x20000, 0x40):x}"  # unknown, or reused

    for _ in range(rng.randrange(20, 80)):
        stack = rng.choice(STACKS)
        tid = rng.choice((100, 101))
        roll = rng.random()
        size = rng.randrange(0, 300)
        if roll < 0.3:
            p = rng.choice((f"0x{next(addr):x}",) * 9 + ("0x0",))
            d.e(rng.choice(("malloc", "new", "new[]")), p, size, stack=stack, tid=tid)
            live.append(p) if p != "0x0" else None
        elif roll < 0.5:
            d.e(rng.choice(("free", "delete", "delete[]")), "-", pick(), stack=stack, tid=tid)
        elif roll < 0.6:
            p = f"0x{next(addr):x}"
            d.e("calloc", p, rng.randrange(1, 4), size, stack=stack, tid=tid)
            live.append(p)
        elif roll < 0.7:
            old, new = pick(), rng.choice((f"0x{next(addr):x}", "0x0"))
            d.e("realloc", new, rng.choice((old, "0x0")), rng.choice((size, 0)), stack=stack,
                tid=tid)
            live.append(new) if new != "0x0" else None
        elif roll < 0.75:
            p, rc = f"0x{next(addr):x}", rng.choice((0, 0, 12))
            d.e("posix_memalign", p if rc == 0 else "0x0", 64, size, rc, stack=stack, tid=tid)
            live.append(p) if rc == 0 else None
        elif roll < 0.8:
            d.e("free", "-", pick(), stack=MARKED, tid=tid)
        elif roll < 0.88:
            base = int(rng.choice(live), 16) if live else 0x10000
            d.e("custom_alloc", f"0x{base + 8:x}", 8, stack=stack, tid=tid)
        elif roll < 0.9:
            d.e("custom_free", "-", f"0x{rng.randrange(0x10000, 0x20000, 8):x}", stack=stack)
        elif roll < 0.92:
            d.p("exec", "/src/other")
            live.clear()
        else:  # a block whose free was not recorded comes back from malloc
            p = rng.choice(live) if live else f"0x{next(addr):x}"
            d.e("malloc", p, size, stack=stack, tid=tid)
            live.append(p)
    d.end()
    return d


@pytest.mark.parametrize("seed", range(60))
def test_the_pass_finds_the_replays_figures(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = _random_dump(rng, short=seed % 2 == 1).write(tmp_path)
    a = analyze(path, symbolize=False)
    profile = collect(a, symbolize=False, snapshots=7)
    rows = profile.stacks.values()
    assert sum(r.alloc_blocks for r in rows) == a.allocations
    assert sum(r.alloc_bytes for r in rows) == a.allocated_bytes
    assert sum(r.leaked_bytes for r in rows) == a.leaked_bytes
    assert sum(r.leaked_blocks for r in rows) == a.leaked_blocks
    peaks = [s for s in profile.snapshots if s.peak]
    if a.peak_seq is None:
        assert peaks == []
    else:
        assert [(s.seq, s.live_bytes) for s in peaks] == [(a.peak_seq, a.peak_bytes)]
        assert sum(r.peak_bytes for r in rows) == a.peak_bytes
        assert sum(r.peak_blocks for r in rows) == a.peak_blocks
    assert max(s.live_bytes for s in profile.snapshots) == a.peak_bytes
