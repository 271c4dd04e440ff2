"""Printers of glibc's pthread_mutex_t and pthread_rwlock_t (owner, kind, waiters, readers), for
where GDB has none (glibc's own nptl printers ship in Debian's libc6-dev, and only for values
of libc.so.6's objfile's types). The words are decoded by core.locks.glibc, as `deadlocks` does."""

from __future__ import annotations

import os
import re
from typing import Any

import gdb

from ..core.locks import glibc as gl

# the structure each printer decodes, and the field under the union that holds it
_DATA = "__data"


def _layout(val: gdb.Value, kind: str) -> gl.Layout:
    """Field offsets from the value's own type when it describes them, else glibc 2.36's table."""
    try:
        outer = val.type.strip_typedefs()
        inner = outer[_DATA].type.strip_typedefs()
        base = outer[_DATA].bitpos // 8
        offsets = {n: base + inner[n].bitpos // 8 for n in gl.FIELDS[kind]}
    except (KeyError, gdb.error, TypeError):
        return gl.TABLE_236
    return gl.Layout("debug info", {**gl.TABLE_236.offsets, kind: offsets},
                     {**gl.TABLE_236.sizes, kind: outer.sizeof})


def _bytes(val: gdb.Value) -> bytes:
    """The value's bytes, whether or not it lives in the inferior's memory."""
    size = val.type.strip_typedefs().sizeof
    array = val.cast(gdb.lookup_type("unsigned char").array(size - 1))
    return bytes(int(array[i]) for i in range(size))


_BY_LWP = re.compile(r"(by LWP (\d+))")


def _whose(tid: int) -> str:
    """Where owner TID is, when it is not a thread of the live process the value is read in:
    ` of another process` (a thread of that id exists: a process-shared lock held elsewhere) or
    ` (no such thread)`; "" otherwise, or when no process is live (a core file)."""
    try:
        inferior = gdb.selected_inferior()
        if not inferior.pid or any(t.ptid[1] == tid for t in inferior.threads()):
            return ""
    except gdb.error:
        return ""
    return " of another process" if os.path.exists(f"/proc/{tid}") else " (no such thread)"


class _LockPrinter:
    """A glibc lock's value as `TYPE: word, word` or `TYPE <corrupt: why>`."""

    TYPE = ""
    KIND = ""
    DECODE: Any = None

    def __init__(self, val: gdb.Value) -> None:
        self.val = val

    def to_string(self) -> str:
        state = type(self).DECODE(_bytes(self.val), _layout(self.val, self.KIND))
        problem = state.problem()
        if problem is not None:
            return f"{self.TYPE} <corrupt: {problem}>"
        text = ", ".join(self.words(state))
        return f"{self.TYPE}: " + _BY_LWP.sub(lambda m: m.group(1) + _whose(int(m.group(2))),
                                              text, count=1)

    def words(self, state: Any) -> list[str]:
        raise NotImplementedError


class MutexPrinter(_LockPrinter):
    """pthread_mutex_t: `locked by LWP N` or `unlocked`, its kind, waiters, recursion count."""

    TYPE, KIND, DECODE = "pthread_mutex_t", "mutex", gl.decode_mutex

    def words(self, m: gl.MutexState) -> list[str]:
        words = [f"locked by LWP {m.owner & gl.FUTEX_TID_MASK}" if m.locked else "unlocked",
                 m.kind]
        if m.locked and m.count > 1:
            words.append(f"count {m.count}")
        if m.owner_died:
            words.append("owner died")
        if m.owner == -1:
            words.append("not recoverable")
        if m.waiters:
            words.append("waiters")
        return words


class RwlockPrinter(_LockPrinter):
    """pthread_rwlock_t: its readers (a count: glibc keeps no list), its writer, its preference."""

    TYPE, KIND, DECODE = "pthread_rwlock_t", "rwlock", gl.decode_rwlock

    def words(self, r: gl.RwlockState) -> list[str]:
        return gl.rwlock_words(r)


def add_printers(collection: Any) -> None:
    """Add the glibc lock printers to the toolkit's printer collection."""
    collection.add_printer("pthread_mutex_t", r"^pthread_mutex_t$", MutexPrinter)
    collection.add_printer("pthread_rwlock_t", r"^pthread_rwlock_t$", RwlockPrinter)
