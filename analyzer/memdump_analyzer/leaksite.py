"""Where group N of a dump's leak report was allocated, for `memdump break --leak N --from DUMP`
to stop the next run at that call (GDB's side makes the break condition of it).

The group is LEAK N of the dump's default text report (`memdump-analyze DUMP`). Its first block
in allocation order stands for it: the stack it was allocated at (each frame's module and
offset, which a new run maps to its own addresses) and which allocation from that stack it was
(the k-th: the last allocation of that block's address from that stack, since the block lived to
the end). A run that makes the same allocations in the same order stops at that very call.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import analyze
from .dumpfile import DumpError, DumpReader
from .dumpformat import NO_RESULT, OPERATIONS
from .leaktext import numbered_leaks

__all__ = ["LeakSite", "LeakSiteError", "leak_site"]

#: the operations that make a block (each but the releases)
_ALLOCATIONS = frozenset(op.encode() for op in OPERATIONS if op not in NO_RESULT)


class LeakSiteError(Exception):
    """The dump cannot be read, or has no group N: the message says which."""


@dataclass(frozen=True)
class LeakSite:
    """Group N's first block: its allocation stack (module, offset) innermost first, one frame
    per pc (inlined calls share their caller's), and which allocation from that stack made it
    (1: the first; 0: none of the dump's events made it)."""

    frames: tuple[tuple[str, int], ...]
    occurrence: int
    size: int
    title: str


def leak_site(path: str, number: int) -> LeakSite:
    """LEAK NUMBER of `memdump-analyze PATH`'s text report: where its first block was allocated."""
    try:
        analysis = analyze(path, addresses=True)
    except DumpError as exc:
        raise LeakSiteError(str(exc)) from None
    except OSError as exc:
        raise LeakSiteError(f"cannot read {path}: {exc.strerror}") from None
    shown = numbered_leaks(analysis)
    if not 1 <= number <= len(shown):
        raise LeakSiteError(f"{path} has {len(shown)} leak group{'s' * (len(shown) != 1)} "
                            f"(memdump-analyze {path} lists them), not {number}")
    group = shown[number - 1]
    address, size = group.addresses[0]
    pcs: list[int] = []
    frames: list[tuple[str, int]] = []
    for frame in group.raw:  # inlined levels share their pc: one frame each
        if pcs and pcs[-1] == frame.pc:
            continue
        pcs.append(frame.pc)
        frames.append((frame.module or "", frame.offset))
    target = tuple(pcs)
    occurrence = _occurrence(path, target, address)
    return LeakSite(tuple(frames), occurrence, size,
                    f"LEAK {number}: {group.bytes:,} bytes in {group.blocks:,} blocks")


def _occurrence(path: str, target: tuple[int, ...], address: int) -> int:
    """Which allocation from stack TARGET (pcs) made the live block at ADDRESS: the last one."""
    wanted = f"{address:#x}".encode()
    pcs_of: dict[bytes, tuple[int, ...]] = {}
    count = found = 0
    with DumpReader(path) as reader:
        for fl in reader.records():
            if fl[0] != b"e" or fl[3] not in _ALLOCATIONS:
                continue
            node = fl[4]
            pcs = pcs_of.get(node)
            if pcs is None:
                pcs = _pcs(reader, abs(reader.node_ids[node]))
                pcs_of[node] = pcs
            if pcs == target:
                count += 1
                if fl[5] == wanted:
                    found = count
    return found


def _pcs(reader: DumpReader, node: int) -> tuple[int, ...]:
    out: list[int] = []
    for frame in reader.stack(node):
        if not out or out[-1] != frame.pc:
            out.append(frame.pc)
    return tuple(out)
