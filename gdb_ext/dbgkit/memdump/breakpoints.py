"""memdump's internal breakpoints: allocator entry points, _exit, and the return sites of calls in
progress, kept in a bounded LRU.

GDB glue only. install_hooks puts them where a module exports the allocator's functions. Each
stop() hands its event to the recorder and says whether the program stops; the recorder is
anything with the methods and attributes of `Recorder` (bpbackend.BreakpointBackend).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import gdb
from memdump_analyzer.dumpformat import (
    CUSTOM,
    CXX_ENTRY_POINTS,
    OPERATIONS,
    event_args,
    format_args,
)

from .. import output
from ..core.elf import ElfError, got_slot
from ..core.procmaps import ModuleMap
from .checks import CMD
from .tags import MARKS, MarkBreakpoint, Marker, module_api

__all__ = [
    "API_FUNCTIONS",
    "Pending",
    "EXIT_FUNCTIONS",
    "EntryBreakpoint",
    "ExitBreakpoint",
    "Recorder",
    "ReturnBreakpoint",
    "ReturnSites",
    "called_op",
    "format_call_args",
    "install_hooks",
]

# The process's last call: glibc's exit() runs the atexit handlers and static destructors, then
# _exit(); _Exit is the same function (an alias) in glibc 2.36, hooked too where it is not.
EXIT_FUNCTIONS = ("_exit", "_Exit")

#: memdump_api.h's functions -> the operation a call records: the in-process recorder's (exported
#: by libmemdump_recorder.so, which may be preloaded without recording) and the header's empty
#: hooks, which the macros call when the recorder is absent (defined in each module that uses
#: the header, in .dynsym, or in .symtab only for an executable without -rdynamic)
API_FUNCTIONS = {
    "memdump_api_alloc": "custom_alloc",
    "memdump_api_free": "custom_free",
    "memdump_api_alloc_hook": "custom_alloc",
    "memdump_api_free_hook": "custom_free",
}
_API_NAMES = frozenset(API_FUNCTIONS)
#: the allocator's entry points -> the operation a call records: the C library's by their own
#: names, libstdc++'s operators by their mangled names (format 2.1: every form of `operator new`
#: is `new`, ...)
_ALLOCATOR_OPS = {
    **{op: op for op in OPERATIONS if op not in CUSTOM and op not in CXX_ENTRY_POINTS.values()},
    **CXX_ENTRY_POINTS,
}
#: the C++ runtime's exception allocation: a throwing operator new that failed calls it (inline:
#: libstdc++ 12 does not call std::__throw_bad_alloc) before it throws std::bad_alloc, and never
#: returns. The recorder writes the new there (RESULT 0x0), as the in-process recorder does before
#: it throws (docs/recorder.md, "C++ operators"), and the exception's malloc is an outermost call
ALLOCATE_EXCEPTION = "__cxa_allocate_exception"
#: the pseudo-operation of its breakpoints
BAD_ALLOC = "bad_alloc"
#: the forms of operator new that throw std::bad_alloc (the others return NULL)
_THROWING_NEW = frozenset(name for name, op in CXX_ENTRY_POINTS.items()
                          if op in ("new", "new[]") and "nothrow" not in name)


class Recorder(Protocol):
    """What the breakpoints call on their stops."""

    #: winding up: the return that completes the last call in progress stops the program
    stop_when_idle: bool
    #: the calls in progress (thread id -> call)
    pending: dict

    def on_entry(self, bp: EntryBreakpoint) -> None: ...

    def on_return(self, bp: ReturnBreakpoint) -> None: ...

    def on_exit_call(self) -> None: ...

    def take_break(self) -> bool: ...


class EntryBreakpoint(gdb.Breakpoint):
    """Internal breakpoint on one allocator entry point."""

    def __init__(self, session: Recorder, address: int, op: str, throws: bool = False) -> None:
        super().__init__(f"*{address:#x}", gdb.BP_BREAKPOINT, internal=True)
        self.session = session
        self.address = address
        self.op = op
        #: a form of operator new that throws std::bad_alloc when it fails
        self.throws = throws
        #: the operations exported at this one address (glibc 2.36: aligned_alloc is memalign):
        #: each call is named by the one its caller called (called_op)
        self.aliases: frozenset[str] = frozenset()

    def stop(self) -> bool:
        self.session.on_entry(self)
        return self.session.take_break()  # memdump break


class ExitBreakpoint(gdb.Breakpoint):
    """Internal breakpoint on _exit: the last moment the process's memory can be scanned."""

    def __init__(self, session: Recorder, address: int) -> None:
        super().__init__(f"*{address:#x}", gdb.BP_BREAKPOINT, internal=True)
        self.session = session

    def stop(self) -> bool:
        self.session.on_exit_call()
        return False


class ReturnBreakpoint(gdb.Breakpoint):
    """Internal breakpoint on a return address where some thread's allocator call will come back."""

    def __init__(self, session: Recorder, address: int) -> None:
        super().__init__(f"*{address:#x}", gdb.BP_BREAKPOINT, internal=True)
        self.session = session
        self.address = address
        self.users = 0

    def stop(self) -> bool:
        self.session.on_return(self)
        # A recording being wound up stops the program once no allocator call is in progress.
        return self.session.take_break() or (self.session.stop_when_idle
                                             and not self.session.pending)


class ReturnSites:
    """A bounded LRU of return-address breakpoints.

    GDB's cost per stop grows with the number of breakpoints (~0.25 us each, measured), so return
    sites are not kept forever; creating one costs ~13 us. A site some thread is still due to
    return to is never evicted.
    """

    def __init__(self, session: Recorder, capacity: int) -> None:
        self._session = session
        self.capacity = max(capacity, 1)
        self._sites: dict[int, ReturnBreakpoint] = {}
        self.created = 0

    def acquire(self, address: int) -> None:
        bp = self._sites.pop(address, None)
        if bp is None:
            if len(self._sites) >= self.capacity:
                self._evict()
            bp = ReturnBreakpoint(self._session, address)
            self.created += 1
        bp.users += 1
        self._sites[address] = bp  # most recently used last

    def release(self, address: int) -> None:
        bp = self._sites.get(address)
        if bp is not None and bp.users > 0:
            bp.users -= 1

    def _evict(self) -> None:
        for address, bp in self._sites.items():
            if bp.users == 0:
                del self._sites[address]
                bp.delete()
                return

    def clear(self) -> None:
        for bp in self._sites.values():
            if bp.is_valid():
                bp.delete()
        self._sites.clear()

    def __len__(self) -> int:
        return len(self._sites)


def install_hooks(recorder: Recorder, modules: ModuleMap, scanned: set[tuple[str, int]],
                  hooks: dict[int, EntryBreakpoint], exit_hooks: dict[int, ExitBreakpoint],
                  ops: Iterable[str] = _ALLOCATOR_OPS, api: bool = True,
                  marks: dict[int, MarkBreakpoint] | None = None, marker: Marker | None = None,
                  flags: set[int] | None = None) -> None:
    """Break on every allocator entry point (of OPS, names of `_ALLOCATOR_OPS`), on
    memdump_api.h's functions, and on
    _exit, exported by a module of MODULES not in SCANNED yet (modules are keyed by path and
    start); HOOKS and EXIT_HOOKS get the new ones. API: break on memdump_api.h's functions
    too (not when the in-process recorder records them); MARKS gets the breakpoints of its tag
    and phase functions, which stop into MARKER, FLAGS the address of each module's
    memdump_api_enabled."""
    modules.refresh()
    for module in modules.modules():
        key = (module.path, module.start)
        if key in scanned or module.elf is None:
            continue
        scanned.add(key)
        try:
            symbols = module.elf.dynamic_symbols()
        except ElfError as exc:
            output.warn(CMD, f"cannot read the symbols of {module.path}: {exc}")
            continue
        for name in ops:
            value = symbols.get(name)
            if not value:
                continue
            address = module.bias + value
            if address not in hooks:
                hooks[address] = EntryBreakpoint(recorder, address, _ALLOCATOR_OPS[name],
                                                 name in _THROWING_NEW)
            elif hooks[address].op != _ALLOCATOR_OPS[name]:
                bp = hooks[address]
                bp.aliases = bp.aliases | {bp.op, _ALLOCATOR_OPS[name]}
        value = symbols.get(ALLOCATE_EXCEPTION) if ops else None
        if value and module.bias + value not in hooks:
            hooks[module.bias + value] = EntryBreakpoint(recorder, module.bias + value, BAD_ALLOC)
        found = {name: symbols[name] for name in _API_NAMES if symbols.get(name)} if api else {}
        if api and len(found) < len(_API_NAMES):
            try:
                found = {**module.elf.symtab_functions(_API_NAMES), **found}
            except (ElfError, OSError) as exc:
                output.warn(CMD, f"cannot read the symbol table of {module.path}: {exc}")
        for name, value in found.items():
            address = module.bias + value
            if value and address not in hooks:
                hooks[address] = EntryBreakpoint(recorder, address, API_FUNCTIONS[name])
        if flags is not None:
            flag, found_marks = module_api(module.elf, symbols)
            if flag:
                flags.add(module.bias + flag)
            if api and marks is not None and marker is not None:
                for name, value in found_marks.items():
                    if module.bias + value not in marks:
                        marks[module.bias + value] = MarkBreakpoint(marker, module.bias + value,
                                                                    MARKS[name])
        for name in EXIT_FUNCTIONS:
            value = symbols.get(name)
            if value and module.bias + value not in exit_hooks:
                address = module.bias + value
                exit_hooks[address] = ExitBreakpoint(recorder, address)


def internal_call(read: Callable[[int, int], bytes], modules: ModuleMap,
                  cache: dict[int, bool], ret: int, entry: int) -> bool:
    """Whether the call that returns to RET is the C library calling its own entry
    point ENTRY directly (glibc's tcache_thread_shutdown calls __libc_free, at free's address),
    not through its PLT as its other functions do (so that a replaced malloc gets them): the
    in-process recorder, which interposes the symbols, never sees such calls, and freeing a
    thread's cached chunks is no free of the program's. Cached per return address."""
    known = cache.get(ret)
    if known is None:
        known = False
        caller, callee = modules.find(ret), modules.find(entry)
        # the C library only: a program (or library) that defines its own malloc calls it
        # directly, and those are its allocations
        if caller is not None and callee is not None and caller.path == callee.path \
                and os.path.basename(caller.path).startswith("libc.so"):
            try:
                code = read(ret - 5, 5)
            except (OSError, gdb.MemoryError):
                code = b""
            known = (len(code) == 5 and code[0] == 0xE8
                     and (ret + int.from_bytes(code[1:], "little", signed=True))
                     & 0xFFFFFFFFFFFFFFFF == entry)
        cache[ret] = known
    return known


def called_op(read: Callable[[int, int], bytes], modules: ModuleMap, cache: dict[int, str],
              ret: int, bp: EntryBreakpoint) -> str:
    """The operation a call to BP's address that returns to RET asked for by name, among BP's
    aliases: the symbol of the GOT slot its caller called through (`call name@plt`, whose stub
    jumps through the slot, or `call *slot(%rip)`), as the in-process recorder, which
    interposes each name, knows it; BP's own operation when the call says nothing (a function
    pointer). Cached per return address."""
    known = cache.get(ret)
    if known is None:
        known = bp.op
        slot = got_slot(read, ret)
        module = modules.find(ret) if slot else None  # the caller's: the slot is in its GOT
        if module is not None and module.elf is not None:
            try:
                name = module.elf.got_symbols().get(slot - module.bias)
            except (ElfError, OSError):
                name = None
            if name is not None and _ALLOCATOR_OPS.get(name) in bp.aliases:
                known = _ALLOCATOR_OPS[name]
        cache[ret] = known
    return known


@dataclass
class Pending:
    """An allocator call of one thread between its entry and its return."""

    op: str
    sp: int
    ret: int
    stack: int
    args: tuple[int, ...]
    #: free (and delete) is written at its entry; it stays pending until it returns, so that its
    #: entry hit again (a signal delivered there: the handler returns to the breakpoint) is not a
    #: second free
    written: bool = False
    #: a form of operator new that throws std::bad_alloc when it fails
    throws: bool = False


def format_call_args(op: str, args: tuple[int, ...], rc: int) -> tuple[str, ...]:
    """An event's ARGS as docs/dump-format.md lists them for OP (pointers hex, sizes decimal)."""
    return format_args(op, event_args(op, args, rc))
