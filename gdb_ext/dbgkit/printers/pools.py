"""Printers of targets/object_pool's pools: block size, blocks owned, free and out, the segments."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gdb

from ..core.containers import bitmap_free
from .base import Corrupt, Printer, number, std_mutex_state, type_name, vector_bounds

NS = "dbgkit::targets::"
SEGMENT_BLOCKS = 64  # detail::Segment::kBlocks

#: the segment walks stop here: a corrupt chain or tree could otherwise loop for ever
MAX_SEGMENTS = 1 << 16


def _check_segment(segment: gdb.Value) -> None:
    """Corrupt unless the segment has its storage (every constructed one has)."""
    if int(segment["storage_"]) == 0:
        raise Corrupt(f"segment at {int(segment.address):#x} has no storage (not constructed)")


def _counts(owned: int, out: int) -> str:
    return f"{owned} owned, {owned - out} free, {out} out"


class SegmentPrinter(Printer):
    """dbgkit::targets::detail::Segment: 64 blocks and the bitmap of the free ones."""

    def summary(self) -> str:
        _check_segment(self.val)
        bits = number(self.val["free_"])
        free = bitmap_free(bits)
        return (f"{SEGMENT_BLOCKS - free} of {SEGMENT_BLOCKS} blocks out, stride "
                f"{int(self.val['stride_'])}, storage {int(self.val['storage_']):#x}, free bitmap "
                f"{bits:#018x}")


class NewDeletePoolPrinter(Printer):
    """dbgkit::targets::NewDeletePool: no pool, a count of the blocks alive."""

    def summary(self) -> str:
        return (f"{type_name(self.val)} of {int(self.val['item_bytes_'])}-byte blocks, "
                f"{number(self.val['live_'])} out")


class MutexPoolPrinter(Printer):
    """dbgkit::targets::MutexPool: every block in all_, the free ones in free_, one mutex."""

    def summary(self) -> str:
        _, owned = vector_bounds(self.val["all_"])
        _, free = vector_bounds(self.val["free_"])
        if free > owned:
            raise Corrupt(f"{free} free blocks > {owned} owned")
        return (f"{type_name(self.val)} of {int(self.val['item_bytes_'])}-byte blocks: "
                f"{_counts(owned, owned - free)}, {std_mutex_state(self.val['mutex_'])}")


class SegmentPoolPrinter(Printer):
    """Base of the lock-free pools: subclasses walk their segments, named by position."""

    def segments(self) -> Iterator[tuple[str, gdb.Value]]:
        raise NotImplementedError

    def extra(self) -> str:
        return ""

    def walk(self) -> list[tuple[str, gdb.Value]]:
        found = []
        for name, segment in self.segments():
            if len(found) == MAX_SEGMENTS:
                raise Corrupt(f"more than {MAX_SEGMENTS} segments, not walked")
            _check_segment(segment)
            found.append((name, segment))
        return found

    def summary(self) -> str:
        found = self.walk()
        out = sum(SEGMENT_BLOCKS - bitmap_free(number(s["free_"])) for _, s in found)
        counter = number(self.val["segments_"])
        plural = "" if len(found) == 1 else "s"
        text = (f"{type_name(self.val)} of {int(self.val['item_bytes_'])}-byte blocks"
                f"{self.extra()}: {len(found)} segment{plural}, "
                f"{_counts(len(found) * SEGMENT_BLOCKS, out)}")
        if counter != len(found):  # a segment being published right now, or corruption
            text += f" (segments_ says {counter})"
        return text

    def items(self) -> Iterator[tuple[str, Any]]:
        yield from self.walk()


class SegmentLinearPoolPrinter(SegmentPoolPrinter):
    """dbgkit::targets::SegmentLinearPool: a chain of segments from root_."""

    def segments(self) -> Iterator[tuple[str, gdb.Value]]:
        node = self.val["root_"]
        seen = {int(node.address)}
        while True:
            yield f"[{len(seen) - 1}]", node["segment"]
            nxt = number(node["next"])
            if nxt == 0:
                return
            if nxt in seen:
                raise Corrupt(f"chain loops back to node {nxt:#x}")
            seen.add(nxt)
            node = gdb.Value(nxt).cast(self.val["root_"].type.pointer()).dereference()


class SegmentTreePoolPrinter(SegmentPoolPrinter):
    """dbgkit::targets::SegmentTreePool: a tree of segments named by path (root, root.3, ...)."""

    def extra(self) -> str:
        return f" ({str(self.val['choice_']).rsplit('::', 1)[-1]})"

    def segments(self) -> Iterator[tuple[str, gdb.Value]]:
        pointer = self.val["root_"].type.pointer()
        stack: list[tuple[str, gdb.Value]] = [("root", self.val["root_"])]
        seen: set[int] = set()
        while stack:
            path, node = stack.pop()
            address = int(node.address)
            if address in seen:
                raise Corrupt(f"node {address:#x} reached twice")
            seen.add(address)
            yield path, node["segment"]
            children = node["children"]
            low, high = children.type.range()
            for i in range(high, low - 1, -1):  # pushed backwards: popped in index order
                child = number(children[i])
                if child != 0:
                    stack.append((f"{path}.{i}", gdb.Value(child).cast(pointer).dereference()))


def add_printers(collection: Any) -> None:
    collection.add_printer("Segment", f"^{NS}detail::Segment$", SegmentPrinter)
    collection.add_printer("NewDeletePool", f"^{NS}NewDeletePool$", NewDeletePoolPrinter)
    collection.add_printer("MutexPool", f"^{NS}MutexPool$", MutexPoolPrinter)
    collection.add_printer("SegmentLinearPool", f"^{NS}SegmentLinearPool$",
                           SegmentLinearPoolPrinter)
    collection.add_printer("SegmentTreePool", f"^{NS}SegmentTreePool$", SegmentTreePoolPrinter)
