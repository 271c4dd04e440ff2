"""Aggregation: the live blocks of a finished replay grouped by trimmed stack and leak kind, the
stacks resolved, the figures gathered into an `Analysis`."""

from __future__ import annotations

from .dumpfile import DumpReader, Frame
from .dumpformat import KINDS
from .images import images_of
from .model import Analysis, ErrorReport, Group, HeapError
from .replay import Replay
from .rules import classify_stack, trim_stack

__all__ = ["build_analysis"]


class _Stacks:
    """Trimmed frames and kind of each stack node, computed once per node."""

    def __init__(self, reader: DumpReader) -> None:
        self.reader = reader
        self.cache: dict[int, tuple[Frame, ...]] = {}

    def trimmed(self, node: int) -> tuple[Frame, ...]:
        frames = self.cache.get(node)
        if frames is None:
            frames = trim_stack(self.reader.stack(node))
            self.cache[node] = frames
        return frames


def build_analysis(reader: DumpReader, r: Replay, addresses: bool = False) -> Analysis:
    """Group the live blocks and resolve the stacks of a finished replay. `addresses`: each group
    keeps its blocks' addresses and sizes."""
    stacks = _Stacks(reader)
    scanned = reader.scan is not None and reader.scan.status == "ok"
    kinds = reader.kinds
    owned = _owned(r.live, kinds, reader.leaders) if scanned else {}
    # live blocks by stack node and leak kind, in allocation order:
    # -> [bytes, blocks, rank, indirect bytes, indirect blocks]
    by_node: dict[tuple[int, str | None], list[int]] = {}
    blocks_of: dict[tuple[int, str | None], list[tuple[int, int]]] = {}
    for p, (size, node) in r.live.items():
        key = (node, (kinds[p][0] if p in kinds else "unknown") if scanned else None)
        if addresses:
            blocks_of.setdefault(key, []).append((int(p, 16), size))
        agg = by_node.get(key)
        if agg is None:
            agg = by_node[key] = [size, 1, len(by_node), 0, 0]
        else:
            agg[0] += size
            agg[1] += 1
        if p in owned:
            agg[3] += owned[p][0]
            agg[4] += owned[p][1]
    # then by trimmed stack (tuple of PCs) and kind
    by_stack: dict[tuple[tuple[int, ...], str | None], Group] = {}
    for (node, leak_kind), (nbytes, blocks, rank, ibytes, iblocks) in by_node.items():
        frames = stacks.trimmed(abs(node))
        key = (tuple(f.pc for f in frames), leak_kind)
        group = by_stack.get(key)
        if addresses:
            held = blocks_of[(node, leak_kind)]
            if group is not None:
                group.addresses += held
        else:
            held = []
        if group is None:
            by_stack[key] = Group(classify_stack(frames), nbytes, blocks, frames, rank, leak_kind,
                                  ibytes, iblocks, held,
                                  tuple(stacks.reader.stack(abs(node))), abs(node))
        else:
            group.bytes += nbytes
            group.blocks += blocks
            group.indirect_bytes += ibytes
            group.indirect_blocks += iblocks
    if owned:
        _leads(r.live, kinds, reader.leaders, by_stack, stacks)
    # largest first, by direct and indirect bytes as valgrind's loss records
    groups = sorted(by_stack.values(), key=lambda g: (-g.total_bytes, -g.blocks, g.order))
    leaked = [g for g in groups if g.kind == "leak"]
    leak_kinds = None
    if scanned:
        leak_kinds = {k: [0, 0] for k in (*KINDS, "unknown")}
        for g in leaked:
            leak_kinds[g.leak_kind or "unknown"][0] += g.bytes
            leak_kinds[g.leak_kind or "unknown"][1] += g.blocks
    runtime = [g for g in groups if g.kind == "runtime"]
    errors = [_error_report(e, stacks) for e in r.errors]
    pid_text = reader.info.get("pid", "")
    return Analysis(
        path=reader.path,
        info=dict(reader.info),
        version=reader.version,
        program=reader.info.get("program"),
        pid=int(pid_text) if pid_text.isdigit() else None,
        attached=reader.info.get("attached") == "1",
        complete=r.end is not None,
        truncated=reader.truncated,
        end=r.end,
        last_seq=r.last_seq,
        events=r.events,
        calls=dict(r.calls),
        allocations=r.allocations,
        frees=r.frees,
        allocated_bytes=r.allocated_bytes,
        peak_bytes=r.peak_bytes,
        peak_blocks=r.peak_blocks,
        peak_seq=r.peak_seq,
        peak_stack=stacks.trimmed(r.peak_node) if r.peak_node is not None else (),
        leaked_bytes=sum(g.bytes for g in leaked),
        leaked_blocks=sum(g.blocks for g in leaked),
        runtime_bytes=sum(g.bytes for g in runtime),
        runtime_blocks=sum(g.blocks for g in runtime),
        groups=groups,
        errors=errors,
        error_count=r.error_count,
        untracked_frees=r.untracked_frees,
        runtime_internal_frees=r.runtime_internal_frees,
        reused_live=r.reused_live,
        execs=list(r.execs),
        signals=list(r.signals),
        scan=reader.scan,
        custom=_custom(r),
        leak_kinds=leak_kinds,
        unknown_tags=dict(reader.unknown_tags),
        unknown_process_events=dict(r.unknown_process_events),
        free_calls=dict(r.free_calls),
        delete_frees=r.delete_frees,
        images=images_of(reader.info, reader.image_info, r.execs,
                         r.end.seq - 1 if r.end is not None else r.last_seq),
        older=list(reader.older),
    )


def _owned(
    live: dict[bytes, tuple[int, int]],
    kinds: dict[bytes, tuple[str, str | None]],
    leaders: dict[bytes, bytes],
) -> dict[bytes, list[int]]:
    """Definitely lost block -> [bytes, blocks] of the live indirectly lost blocks it leads.

    A leader that is not a live definitely lost block (freed after the scan, or a dump that
    does not say) owns nothing: its blocks then count in no group's indirect figures."""
    owned: dict[bytes, list[int]] = {}
    for p, leader in leaders.items():
        block = live.get(p)
        if block is None or leader not in live or kinds.get(leader, ("",))[0] != "definite":
            continue
        agg = owned.setdefault(leader, [0, 0])
        agg[0] += block[0]
        agg[1] += 1
    return owned


def _leads(
    live: dict[bytes, tuple[int, int]],
    kinds: dict[bytes, tuple[str, str | None]],
    leaders: dict[bytes, bytes],
    by_stack: dict[tuple[tuple[int, ...], str | None], Group],
    stacks: _Stacks,
) -> None:
    """Fill each definitely lost group's `leads`: the indirectly lost groups its blocks lead
    (`_owned`'s blocks, by group)."""
    led: dict[tuple[int, int], list] = {}  # type: ignore[type-arg]  # (owner, led) ids

    def group_of(p: bytes) -> Group:
        node = abs(live[p][1])
        return by_stack[(tuple(f.pc for f in stacks.trimmed(node)), kinds[p][0])]

    for p, leader in leaders.items():
        block = live.get(p)
        if block is None or leader not in live or kinds.get(leader, ("",))[0] != "definite" \
                or p not in kinds:
            continue
        owner, group = group_of(leader), group_of(p)
        agg = led.get((id(owner), id(group)))
        if agg is None:
            agg = led[(id(owner), id(group))] = [owner, group, 0, 0]
        agg[2] += block[0]
        agg[3] += 1
    for owner, group, nbytes, blocks in led.values():
        owner.leads.append((group, nbytes, blocks))


def _error_report(e: HeapError, stacks: _Stacks) -> ErrorReport:
    return ErrorReport(
        kind=e.kind,
        seq=e.seq,
        tid=e.tid,
        op=e.op,
        pointer=e.pointer,
        stack=stacks.trimmed(e.node),
        freed_seq=e.freed_seq,
        freed_stack=stacks.trimmed(e.freed_node) if e.freed_node is not None else None,
        alloc_op=e.alloc_op,
        alloc_seq=e.alloc_seq,
        alloc_size=e.alloc_size,
        alloc_stack=stacks.trimmed(e.alloc_node) if e.alloc_node is not None else None,
    )


def _custom(r: Replay) -> dict[str, int] | None:
    """The custom blocks' figures (docs/report-format.md, "Replay"), when the dump has any."""
    if not r.calls.get("custom_alloc") and not r.calls.get("custom_free"):
        return None
    return {"allocations": r.custom_allocations, "frees": r.custom_frees,
            "superblocks": r.superblocks, "superblock_bytes": r.superblock_bytes}
