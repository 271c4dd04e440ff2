"""The name of a lock at an address, as the program's source would write it: a global or static
variable (`lock_a`, `ring[1].guard`), or a member of an object a frame works on
(`this->accounts_`), or a frame's local; with the C/C++ type of that object."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

import gdb

from ..core.locks import glibc as gl

# The lock's own type where debug info says nothing better.
_GLIBC_TYPES = {"mutex": "pthread_mutex_t", "rwlock": "pthread_rwlock_t",
                "cond": "pthread_cond_t", "sem": "sem_t", "futex": ""}
_SYMBOL = re.compile(r"^(.*?)(?: \+ (\d+))? in section (\S+)")


def unnamed_frame(pc: int) -> str:
    """A frame GDB has no function for (a stripped module): its address, in which file."""
    space = gdb.current_progspace()
    module = (space.solib_name(pc) or space.filename) if space is not None else None
    return f"{pc:#x} in {os.path.basename(module)}" if module else f"{pc:#x}"


def member_path(gtype: gdb.Type, offset: int, size: int) -> tuple[str, str] | None:
    """(".member[2].x", type) of the outermost sub-object of GTYPE that starts at OFFSET and
    is SIZE bytes long; None when there is none."""
    t = gtype.strip_typedefs()
    if offset == 0 and t.sizeof == size:
        return "", str(gtype)
    if t.code == gdb.TYPE_CODE_ARRAY:
        elem = t.target()
        esize = elem.strip_typedefs().sizeof
        if esize <= 0:
            return None
        inner = member_path(elem, offset % esize, size)
        return None if inner is None else (f"[{offset // esize}]{inner[0]}", inner[1])
    if t.code not in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION):
        return None
    for f in t.fields():
        if not hasattr(f, "bitpos") or f.bitpos is None or f.type is None:
            continue
        start = f.bitpos // 8
        if start <= offset < start + f.type.strip_typedefs().sizeof:
            inner = member_path(f.type, offset - start, size)
            if inner is not None:
                prefix = "" if f.is_base_class or not f.name else f".{f.name}"
                return f"{prefix}{inner[0]}", inner[1]
    return None


def _global(address: int, size: int) -> tuple[str, str] | None:
    try:
        text = gdb.execute(f"info symbol {address:#x}", to_string=True)
    except gdb.error:
        return None
    m = _SYMBOL.match(text)
    if not m or m.group(3) not in (".bss", ".data", ".tbss", ".tdata"):
        return None
    name, offset = m.group(1), int(m.group(2) or 0)
    try:
        symbol = gdb.lookup_global_symbol(name) or gdb.lookup_static_symbol(name)
    except gdb.error:
        symbol = None
    if symbol is None:
        return (name if not offset else f"{name}+{offset}"), ""
    path = member_path(symbol.type, offset, size)
    return (f"{name}{path[0]}", path[1]) if path else (f"{name}+{offset}", "")


def _frame_symbols(frame: gdb.Frame) -> Iterable[Any]:
    try:
        block = frame.block()
    except RuntimeError:
        return
    while block is not None:
        for symbol in block:
            if symbol.is_argument or symbol.is_variable:
                yield symbol
        if block.function is not None:
            return
        block = block.superblock


def _in_frames(address: int, size: int, frames: Iterable[Any]) -> tuple[str, str] | None:
    """`this->member` or `local.member` of the first frame of the program's own code (not a
    library's header under /usr/) whose object holds ADDRESS."""
    for f in frames:
        sal = f.frame.find_sal()
        if sal.symtab is None or sal.symtab.fullname().startswith("/usr/"):
            continue
        for symbol in _frame_symbols(f.frame):
            try:
                value = symbol.value(f.frame)
                if symbol.name == "this" and value.type.code == gdb.TYPE_CODE_PTR:
                    base, gtype, label = int(value), value.type.target(), "this->"
                elif value.address is not None:
                    base, gtype, label = int(value.address), value.type, symbol.name
                else:
                    continue
                span = gtype.strip_typedefs().sizeof
            except (gdb.error, RuntimeError, ValueError):
                continue
            if base <= address < base + span:
                path = member_path(gtype, address - base, size)
                if path is not None and (path[0] or label != "this->"):
                    name = label + path[0].lstrip(".") if label == "this->" else label + path[0]
                    return name, path[1]
    return None


def name_locks(locks: Iterable[gl.LockInfo], threads: Iterable[tuple[gdb.InferiorThread,
               Sequence[Any]]], layout: gl.Layout) -> None:
    """Set the name and type of every lock: a global or static first, then a variable of the
    frames of each thread (selected in turn: a frame's values are read in its own thread)."""
    unnamed = []
    for lock in locks:
        found = _global(lock.address, layout.sizes.get(lock.kind, 4))
        if found is None:
            unnamed.append(lock)
        else:
            lock.name, lock.type_name = found
    for thread, frames in threads:
        if not unnamed:
            break
        thread.switch()
        for lock in list(unnamed):
            found = _in_frames(lock.address, layout.sizes.get(lock.kind, 4), frames)
            if found:
                lock.name, lock.type_name = found
                unnamed.remove(lock)
    for lock in locks:
        lock.type_name = _plain_type(lock.type_name) or _GLIBC_TYPES[lock.kind]


def _plain_type(type_name: str) -> str:
    """The type as a user writes it: `std::mutex`, not `std::mutex` with cv-qualifiers."""
    return re.sub(r"^((const|volatile|class|struct|union) )+", "", type_name)
