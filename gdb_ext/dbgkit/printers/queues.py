"""Printers of targets/mpmc_queue's queues and producer_consumer's run: length, state, items."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gdb

from .base import Corrupt, Printer, deque_items, number, optional_value, std_mutex_state, type_name

NS = "dbgkit::targets::"

#: FineQueue's walk stops here (each node is a read from the process): a longer list is shown as
#: "at least" this many
MAX_NODES = 1 << 17


def _open(closed: gdb.Value | int) -> str:
    return "closed" if bool(closed) else "open"


class CoarseQueuePrinter(Printer):
    """dbgkit::targets::CoarseQueue<T>: one mutex, a std::queue and a condition variable."""

    hint = "array"

    def summary(self) -> str:
        length, _ = deque_items(self.val["items_"]["c"])
        return (f"{type_name(self.val)} of length {length}, {_open(self.val['closed_'])}, "
                f"{std_mutex_state(self.val['mutex_'])}")

    def items(self) -> Iterator[tuple[str, Any]]:
        _, values = deque_items(self.val["items_"]["c"])
        for n, value in enumerate(values):
            yield f"[{n}]", value


class FineQueuePrinter(Printer):
    """dbgkit::targets::FineQueue<T>: the two-lock Michael & Scott list after its dummy node."""

    hint = "array"

    def _walk(self) -> Iterator[gdb.Value]:
        """The nodes after the dummy, up to tail_ (at most MAX_NODES); Corrupt when the list
        ends or loops before tail_."""
        tail = int(self.val["tail_"])
        node = self.val["head_"]
        if int(node) == 0:
            raise Corrupt("no dummy node (head_ is null)")
        seen = {int(node)}
        while int(node) != tail and len(seen) <= MAX_NODES:
            nxt = number(node.dereference()["next"])
            if nxt == 0:
                raise Corrupt(f"list ends after {len(seen) - 1} nodes, before tail_ {tail:#x}")
            if nxt in seen:
                raise Corrupt(f"list loops back to node {nxt:#x}")
            seen.add(nxt)
            node = gdb.Value(nxt).cast(node.type)
            yield node

    def summary(self) -> str:
        count = sum(1 for _ in self._walk())
        length = f"at least {count}" if count == MAX_NODES else str(count)
        return (f"{type_name(self.val)} of length {length}, {_open(number(self.val['closed_']))}, "
                f"{number(self.val['waiters_'])} waiting, head lock "
                f"{std_mutex_state(self.val['head_mutex_'])}, tail lock "
                f"{std_mutex_state(self.val['tail_mutex_'])}")

    def items(self) -> Iterator[tuple[str, Any]]:
        for n, node in enumerate(self._walk()):
            value = optional_value(node.dereference()["value"])
            yield f"[{n}]", "<empty>" if value is None else value


class PcRunPrinter(Printer):
    """dbgkit::targets::detail::PcRun: a producer-consumer run's variant, counts and queue."""

    hint = "array"

    def summary(self) -> str:
        config = self.val["config_"]
        length, _ = deque_items(self.val["queue_"])
        variant = str(self.val["variant_"]).rsplit("::", 1)[-1]
        done = "done" if bool(number(self.val["done_"])) else "running"
        return (f"{variant} run of {int(config['threads'])} threads, {done}: produced "
                f"{int(self.val['produced_'])} of {int(config['items'])}, consumed "
                f"{number(self.val['consumed_'])}, queue of length {length}, "
                f"{std_mutex_state(self.val['mutex_'])}")

    def items(self) -> Iterator[tuple[str, Any]]:
        _, values = deque_items(self.val["queue_"])
        for n, value in enumerate(values):
            yield f"[{n}]", value


def add_printers(collection: Any) -> None:
    collection.add_printer("CoarseQueue", f"^{NS}CoarseQueue<.*>$", CoarseQueuePrinter)
    collection.add_printer("FineQueue", f"^{NS}FineQueue<.*>$", FineQueuePrinter)
    collection.add_printer("PcRun", f"^{NS}detail::PcRun$", PcRunPrinter)
