"""Leak checks on the live process, at any stop: `memdump leaks` (the pointer scan now, as
valgrind's `monitor leak_check`), `memdump who-points-at ADDR [LEN]` and `memdump block-list N`.

GDB glue: the session gives the live blocks and the scan (Recording.scan_now); the report is the
analyser's, given this scan in place of the dump's (memdump_analyzer.LiveScan).
"""

from __future__ import annotations

import bisect
import re
from array import array
from dataclasses import dataclass, replace

import gdb
from memdump_analyzer import Analysis, LiveScan
from memdump_analyzer.diff import stack_key

from .. import output
from ..core import procfs, ptrace, reach
from .checks import CMD
from .recording import Recording, State

__all__ = ["Pointer", "compare", "live_scan", "older_than", "points_at", "snapshot"]


def live_scan(session: Recording) -> LiveScan | None:
    """The pointer scan of the stopped process, or None when the program is not running (the
    dump's own scan at exit, if any, is then the one reported). A thread inside an allocator
    call is changing the heap: no scan then, and memdump says why."""
    if session.state != State.RECORDING or not session.inferior.pid:
        return None
    if session.final_scan is not None:  # stopped at or after _exit (or a fatal signal): that scan
        status, result, millis = session.final_scan
        return _live(status, result, millis)
    if session.scan_time_limit == 0:
        return LiveScan("off")
    calls = session.calls_in_progress()
    if calls:
        busy = ", ".join(f"thread {tid} in {op}" for tid, op in calls)
        output.warn(CMD, f"no pointer scan at this stop: {busy} (the heap is being changed); "
                         "leak kinds unknown: finish the call, or stop elsewhere")
        return LiveScan("in-allocator")
    return _live(*session.scan_now(at_function_entry=False))


def _live(status: str, result: reach.ScanResult | None, millis: int) -> LiveScan:
    if result is None:
        return LiveScan(status, millis=millis)
    return LiveScan(status, result.root_bytes, result.block_bytes, millis, list(result.records()))


@dataclass(frozen=True)
class Snapshot:
    """What a `memdump leaks` found: (bytes, blocks) per group (its stack key: kind, functions and
    lines) and per leak kind."""

    groups: dict[tuple, tuple[int, int]]
    kinds: dict[str, tuple[int, int]]


def snapshot(analysis: Analysis) -> Snapshot:
    groups = {stack_key(g): (g.total_bytes, g.blocks) for g in analysis.leaks}
    kinds = {k: (v[0], v[1]) for k, v in (analysis.leak_kinds or {}).items()}
    return Snapshot(groups, kinds)


def compare(analysis: Analysis, previous: Snapshot | None, mode: str | None) -> None:
    """valgrind's `leak_check ... increased|changed`: keep in ANALYSIS the program's groups that
    grew (or changed) since PREVIOUS (all of them the first time), each with its (+N) deltas, and
    the leak kinds' deltas. MODE None: nothing is changed."""
    if mode is None:
        return
    before = previous if previous is not None else Snapshot({}, {})
    deltas: dict[int, tuple[int, int]] = {}
    kept = []
    for g in analysis.groups:
        if g.kind != "leak":
            kept.append(g)
            continue
        was = before.groups.get(stack_key(g), (0, 0))
        delta = (g.total_bytes - was[0], g.blocks - was[1])
        grew = delta[0] > 0 or delta[1] > 0
        if grew or (mode == "changed" and delta != (0, 0)):
            deltas[id(g)] = delta
            kept.append(g)
    analysis.groups = kept
    analysis.deltas = deltas
    if analysis.leak_kinds is not None:
        analysis.kind_deltas = {
            k: (v[0] - before.kinds.get(k, (0, 0))[0], v[1] - before.kinds.get(k, (0, 0))[1])
            for k, v in analysis.leak_kinds.items()}


def older_than(analysis: Analysis, ages: dict[int, float], seconds: float) -> None:
    """Keep in ANALYSIS the blocks allocated at least SECONDS ago (AGES: address -> seconds), as
    memleax lists leaks by age: each group keeps its old blocks (its indirect figures only when
    it keeps them all), the totals and the kinds' are theirs."""
    kept = []
    for g in analysis.groups:
        old = [(a, size) for a, size in g.addresses if ages.get(a, 0.0) >= seconds]
        if not old:
            continue
        if len(old) < len(g.addresses):
            g.indirect_bytes = g.indirect_blocks = 0
        g.addresses = old
        g.bytes, g.blocks = sum(size for _, size in old), len(old)
        kept.append(g)
    analysis.groups = kept
    leaks = analysis.leaks
    analysis.leaked_bytes = sum(g.bytes for g in leaks)
    analysis.leaked_blocks = sum(g.blocks for g in leaks)
    runtime = analysis.runtime
    analysis.runtime_bytes = sum(g.bytes for g in runtime)
    analysis.runtime_blocks = sum(g.blocks for g in runtime)
    if analysis.leak_kinds is not None:
        kinds = {k: [0, 0] for k in analysis.leak_kinds}
        for g in leaks:
            kind = kinds[g.leak_kind or "unknown"]
            kind[0] += g.bytes
            kind[1] += g.blocks
        analysis.leak_kinds = kinds


@dataclass(frozen=True)
class Pointer:
    """A word pointing into the block searched: where it is, what it points at, and what holds
    it (a root's name, or a live block: its address and size). `glibc`: the word is the C
    library's, the address of the chunk header after a live block (reach.next_header), not the
    program's pointer into that block; the pointer scan does not count it."""

    at: int
    target: int
    root: str | None = None
    block: int | None = None
    block_size: int = 0
    glibc: bool = False


def points_at(session: Recording, start: int, length: int) -> list[Pointer]:
    """Every root word and every live block's word holding an address in [START, START+LENGTH)
    (LENGTH 0 or 1: START itself), valgrind's `who_points_at`: the roots the scan would read
    (threads' stacks from their stack pointers, data segments, the registers) and the live
    blocks, in address order; those holding the address of glibc's chunk header after a live
    block marked `glibc`."""
    pid = session.pid
    lo, hi = start, start + max(length, 1)
    found: list[Pointer] = []
    threads = []
    for thread in session.inferior.threads():
        regs = ptrace.get_regs(thread.ptid[1])
        if regs is None:
            continue
        threads.append(reach.Thread(thread.ptid[1], regs.rsp, ()))
        for name in ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10",
                     "r11", "r12", "r13", "r14", "r15"):
            value = getattr(regs, name)
            if lo <= value < hi:
                found.append(Pointer(0, value, f"thread {thread.ptid[1]} register {name.upper()}"))
    live = session.live_blocks()
    mappings = procfs.read_maps(pid)
    own = session.recorder_memory()
    if own is not None:
        mappings = [m for m in mappings if m.end <= own[0] or m.start >= own[1]]
    memory = procfs.ProcessMemory(pid)
    try:
        known = [live[a] for a in sorted(live)] if session.attached else None
        roots, _ = reach.select_roots(mappings, live, threads, memory.read_some, known)
        stacks = {t.sp: t.tid for t in threads}
        for root in roots:
            owner = next((tid for sp, tid in stacks.items() if root.start <= sp < root.end), None)
            found += _search(memory, root.start, root.end, lo, hi,
                             root=root.what if owner is None else f"thread {owner}'s stack")
        found.sort(key=lambda p: p.at)
        starts = sorted(live)
        for addr in starts:
            size = live[addr]
            found += _search(memory, addr, addr + size, lo, hi, block=addr, block_size=size)
        headers = _next_headers(memory, live, starts, {p.target for p in found})
    finally:
        memory.close()
    return [replace(p, glibc=True) if p.target in headers else p for p in found]


def _next_headers(memory: procfs.ProcessMemory, live: dict[int, int], starts: list[int],
                  targets: set[int]) -> set[int]:
    """The TARGETS that are the address of glibc's chunk header after the live block they are
    in (the pointer scan's rule, reach.next_header)."""
    out = set()
    for target in targets:
        k = bisect.bisect_right(starts, target) - 1
        if k < 0 or target >= starts[k] + live[starts[k]]:
            continue
        try:
            word = memory.read_some(starts[k] - 8, 8)
        except OSError:
            continue
        if len(word) == 8 and reach.next_header(starts[k], live[starts[k]],
                                                int.from_bytes(word, "little")) == target:
            out.add(target)
    return out


def _search(memory: procfs.ProcessMemory, start: int, end: int, lo: int, hi: int,
            root: str | None = None, block: int | None = None, block_size: int = 0,
            ) -> list[Pointer]:
    """The aligned words of [START, END) whose value is in [LO, HI)."""
    out = []
    first = (start + 7) & ~7
    pos = first
    while pos + 8 <= end:
        size = min(end - pos, 1 << 20) & ~7
        try:
            data = memory.read_some(pos, size)
        except OSError:
            break
        if len(data) < 8:
            break
        words = array("Q", data[: len(data) & ~7])
        if any(lo <= w < hi for w in words):
            for i, w in enumerate(words):
                if lo <= w < hi:
                    out.append(Pointer(pos + 8 * i, w, root, block, block_size))
        pos += len(words) * 8
    return out


def describe(ptr: Pointer, start: int) -> str:
    """valgrind's lines for one pointer found: where it is (a register, a block, a thread's stack,
    a data symbol when the debug information knows one, else the mapping)."""
    if ptr.glibc:
        inside = f"points at the next chunk's header, {ptr.target - start:,} bytes inside"
    elif ptr.target == start:
        inside = "points at"
    else:
        inside = f"interior points at {ptr.target - start:,} bytes inside"
    if ptr.at == 0:
        return f"{ptr.root} {inside.replace('points', 'pointing')} {start:#x}"
    head = f"*{ptr.at:#x} {inside} {start:#x}"
    if ptr.block is not None:
        return (f"{head}\n  Address {ptr.at:#x} is {ptr.at - ptr.block:,} bytes inside a block of "
                f"size {ptr.block_size:,} at {ptr.block:#x}")
    if ptr.root is not None and ptr.root.endswith("'s stack"):
        return f"{head}\n  Address {ptr.at:#x} is on {ptr.root}"
    symbol = _data_symbol(ptr.at)
    if symbol is not None:
        return (f"{head}\n  Address {ptr.at:#x} is {symbol[1]:,} bytes inside data symbol "
                f"\"{symbol[0]}\"")
    return f"{head}\n  Address {ptr.at:#x} is in {ptr.root}"


_INFO_SYMBOL = re.compile(r"^(\S+)(?: \+ (\d+))? in section \S+")


def _data_symbol(addr: int) -> tuple[str, int] | None:
    """The data symbol holding ADDR and the offset in it (GDB's `info symbol`), or None."""
    try:
        text = gdb.execute(f"info symbol {addr:#x}", to_string=True).strip()
    except gdb.error:
        return None
    m = _INFO_SYMBOL.match(text)
    return None if m is None else (m.group(1), int(m.group(2) or 0))


def check_stopped(session: Recording) -> None:
    if session.state != State.RECORDING or not session.inferior.pid:
        raise gdb.GdbError(f"{CMD}: the program is not running")
