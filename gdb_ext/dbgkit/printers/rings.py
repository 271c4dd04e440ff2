"""Printers of targets/spsc_ring's rings: size, capacity, head, tail, the values oldest first."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gdb

from ..core.containers import RingState, ring_state
from .base import Printer, number, std_mutex_state, template_name, type_name, vector_bounds

NS = "dbgkit::targets::"

#: the aliases spsc_ring.hpp declares for AtomicRing's (Order, Indices) pairs
ALIASES = {
    ("SeqCst", "AdjacentIndices"): "SeqCstRing",
    ("AcquireRelease", "SeparateIndices"): "AcqRelRing",
}


class RingPrinter(Printer):
    """Base of the two rings: subclasses say where head, tail and the slots are."""

    hint = "array"

    def indices(self) -> tuple[gdb.Value, gdb.Value]:
        raise NotImplementedError

    def name(self) -> str:
        raise NotImplementedError

    def state(self) -> tuple[RingState, gdb.Value]:
        head, tail = self.indices()
        start, slots = vector_bounds(self.val["slots_"])
        return ring_state(number(head), number(tail), slots), start

    def extra(self) -> str:
        """What follows the indices (the lock's state)."""
        return ""

    def summary(self) -> str:
        state, _ = self.state()
        text = f"capacity {state.capacity}, head {state.head}, tail {state.tail}{self.extra()}"
        if state.problem is not None:  # the values shown would be guesses: none are
            return f"{self.name()} of {text} <corrupt: {state.problem}>"
        return f"{self.name()} of size {state.size}, {text}"

    def items(self) -> Iterator[tuple[str, Any]]:
        state, start = self.state()
        for n, slot in enumerate(state.indices()):
            yield f"[{n}]", (start + slot).dereference()


class LockedRingPrinter(RingPrinter):
    """dbgkit::targets::LockedRing<T>: the mutex ring."""

    def indices(self) -> tuple[gdb.Value, gdb.Value]:
        return self.val["head_"], self.val["tail_"]

    def name(self) -> str:
        return type_name(self.val)

    def extra(self) -> str:
        return f", {std_mutex_state(self.val['mutex_'])}"


class AtomicRingPrinter(RingPrinter):
    """dbgkit::targets::detail::AtomicRing<T, Order, Indices>: SeqCstRing and AcqRelRing."""

    def indices(self) -> tuple[gdb.Value, gdb.Value]:
        idx = self.val["idx_"]
        return idx["head"], idx["tail"]

    def name(self) -> str:
        vtype = self.val.type.strip_typedefs()
        try:
            order, layout = (str(vtype.template_argument(i)).rsplit("::", 1)[-1] for i in (1, 2))
        except (gdb.error, RuntimeError):
            return type_name(self.val)
        alias = ALIASES.get((order, layout))
        return template_name(self.val, NS + alias) if alias else type_name(self.val)


def add_printers(collection: Any) -> None:
    collection.add_printer("LockedRing", f"^{NS}LockedRing<.*>$", LockedRingPrinter)
    collection.add_printer("AtomicRing", f"^{NS}detail::AtomicRing<.*>$", AtomicRingPrinter)
