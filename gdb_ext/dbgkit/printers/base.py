"""What the printers share: a base class that never lets an error out into GDB's output, and
readers of the libstdc++ and glibc members the targets' types are made of (std::atomic,
std::vector, std::deque, std::optional, std::mutex)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gdb

from ..core.containers import deque_size, mutex_state

#: what reading a value out of a process can raise: unreadable memory, a missing member (another
#: library version), a number out of range (garbage in an object being constructed)
READ_ERRORS = (gdb.error, ArithmeticError, ValueError, LookupError)


class Corrupt(Exception):
    """A value's fields contradict each other; the text says how (`head 9 > capacity 8`)."""


class Printer:
    """Base of the printers: subclasses write summary() and, for children, items(); an error
    reading the value prints as a `<corrupt: ...>` or `<unreadable: ...>` marker, never a
    traceback."""

    hint: str | None = None

    def __init__(self, val: gdb.Value) -> None:
        self.val = val
        self.failed = False  # to_string printed a marker: the children would repeat it

    def summary(self) -> str:
        raise NotImplementedError

    def items(self) -> Iterator[tuple[str, Any]]:
        return iter(())

    def to_string(self) -> str:
        self.failed = True
        try:
            text = self.summary()
        except Corrupt as e:
            return f"<corrupt: {e}>"
        except READ_ERRORS as e:
            return f"<unreadable: {e}>"
        self.failed = False
        return text

    def children(self) -> Iterator[tuple[str, Any]]:
        if self.failed:
            return
        try:
            yield from self.items()
        except Corrupt as e:
            yield "<corrupt>", f"<corrupt: {e}>"
        except READ_ERRORS as e:
            yield "<unreadable>", f"<unreadable: {e}>"

    def display_hint(self) -> str | None:
        return self.hint


def type_name(val: gdb.Value) -> str:
    """The value's type as GDB names it, typedefs stripped (a template's full name)."""
    return str(val.type.strip_typedefs().unqualified())


def template_name(val: gdb.Value, alias: str) -> str:
    """ALIAS (a name without arguments) with the value's first template argument, as a user wrote
    it: `dbgkit::targets::SeqCstRing<int>` for an AtomicRing with SeqCst order."""
    try:
        arg = val.type.strip_typedefs().template_argument(0)
    except (gdb.error, RuntimeError):
        return type_name(val)
    return f"{alias}<{arg}>"


def atomic(val: gdb.Value) -> gdb.Value:
    """The value inside a std::atomic (libstdc++ keeps it in `_M_i`, in `_M_b._M_p` for a
    pointer, in `_M_base._M_i` for bool), or VAL itself when it is not one."""
    for path in (("_M_i",), ("_M_b", "_M_p"), ("_M_base", "_M_i")):
        inner = val
        try:
            for member in path:
                inner = inner[member]
            return inner
        except gdb.error:
            continue
    return val


def number(val: gdb.Value) -> int:
    """An integer member, through a std::atomic if it is one."""
    return int(atomic(val))


def vector_bounds(vec: gdb.Value) -> tuple[gdb.Value, int]:
    """A std::vector's first element pointer and its length; Corrupt if end is before start."""
    impl = vec["_M_impl"]
    start, finish = impl["_M_start"], impl["_M_finish"]
    length = int(finish - start)
    if length < 0:
        raise Corrupt(f"vector ends {-length} elements before it starts")
    return start, length


def deque_items(deq: gdb.Value) -> tuple[int, Iterator[gdb.Value]]:
    """A std::deque's length and its elements front to back (stl_deque.h: a map of node pointers,
    each node a buffer of the same number of elements)."""
    impl = deq["_M_impl"]
    start, finish = impl["_M_start"], impl["_M_finish"]
    buffer = int(start["_M_last"] - start["_M_first"])
    node_size = start["_M_node"].dereference().type.sizeof
    first_node, last_node = int(start["_M_node"]), int(finish["_M_node"])
    map_start = int(impl["_M_map"])
    if map_start == 0:
        raise Corrupt("deque with no map (not constructed)")
    if not map_start <= first_node < map_start + int(impl["_M_map_size"]) * node_size:
        raise Corrupt(f"deque's start node {first_node:#x} outside its map at {map_start:#x}")
    try:
        length = deque_size(buffer, first_node // node_size, last_node // node_size,
                            int(start["_M_cur"] - start["_M_first"]),
                            int(finish["_M_cur"] - finish["_M_first"]),
                            int(impl["_M_map_size"]) - (first_node - map_start) // node_size)
    except ValueError as e:
        raise Corrupt(f"deque with {e}") from None

    def walk() -> Iterator[gdb.Value]:
        node, cur, last = start["_M_node"], start["_M_cur"], start["_M_last"]
        for _ in range(length):
            if cur == last:
                node = node + 1
                cur = node.dereference()
                last = cur + buffer
            yield cur.dereference()
            cur = cur + 1

    return length, walk()


def optional_value(opt: gdb.Value) -> gdb.Value | None:
    """A std::optional's value, None when it is empty (libstdc++'s _Optional_payload)."""
    payload = opt["_M_payload"]
    if not bool(payload["_M_engaged"]):
        return None
    return payload["_M_payload"]["_M_value"]


def read_bytes(val: gdb.Value) -> bytes:
    """The bytes of VAL (an array member) in one read from the process."""
    return bytes(gdb.selected_inferior().read_memory(val.address, val.type.sizeof))


def std_mutex_state(mutex: gdb.Value) -> str:
    """A std::mutex (or pthread_mutex_t) in words: `unlocked`, `locked by LWP 1234`."""
    try:
        mutex = mutex["_M_mutex"]  # std::mutex's __mutex_base member
    except gdb.error:
        pass  # a pthread_mutex_t already
    data = mutex["__data"]
    return mutex_state(int(data["__lock"]), int(data["__owner"]))
