"""The breakpoint design's call stacks: walked at an allocator's entry by memdump's own DWARF CFI
unwinder (dbgkit.core.unwind, over the process memory read with pread(2)), or by GDB's where
that one cannot (no unwind information, a bad CFA), and interned into the dump.

GDB glue only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..core import ptrace
from ..core.dumpwriter import DumpWriter
from ..core.procmaps import ModuleMap
from .symbols import gdb_backtrace

if TYPE_CHECKING:
    from ..core.unwind import Unwinder

__all__ = ["StackWalker"]

# Unwinder outcomes where GDB's own unwinder may know better (its DWARF reader, prologue analysis).
_ASK_GDB = frozenset({"unsupported", "bad-cfa", "no-elf"})


class StackWalker:
    """Walks a thread's stack from an allocator's entry into WRITER's stacks: DEPTH frames at
    most, UNWINDER `auto` (memdump's, GDB's for what it cannot walk) or `gdb`; READ and MODULES
    are the process's memory and modules; COUNTS gets `partial-stacks` and `gdb-unwinds`."""

    def __init__(self, writer: DumpWriter, read: Callable[[int, int], bytes], modules: ModuleMap,
                 depth: int, unwinder: str, counts: Counter[str]) -> None:
        self.writer = writer
        self.read = read
        self.modules = modules
        self.depth = depth
        self.mode = unwinder
        self.counts = counts
        self._unwinder: Unwinder | None = None

    def forget(self) -> None:
        """The modules changed (a load, an exec): the unwinder is made again, without its cached
        rows, at the next stack."""
        self._unwinder = None

    def walk(self, pc: int, regs: ptrace.Regs) -> int:
        """The stack from PC with REGS, interned: its number in the dump (0: none recorded)."""
        depth = self.depth
        if depth == 0:
            return 0
        if self.mode == "auto":
            if self._unwinder is None:  # the breakpoint design's alone (its imports too)
                from ..core.unwind import Unwinder  # noqa: PLC0415
                self._unwinder = Unwinder(self.read, self.modules)
            pcs, complete = self._unwinder.backtrace(pc, regs.rsp, regs.rbp, depth)
            if complete or self._unwinder.last_status not in _ASK_GDB:
                # A walk that ran out of CFI (ld.so's hand-written _dl_start_user), memory or
                # mapped code is right as far as it goes; GDB's heuristics beyond it make up frames.
                if not complete:
                    self.counts["partial-stacks"] += 1
                return self.writer.stack(tuple(pcs))
            self.counts["gdb-unwinds"] += 1
        return self.writer.stack(gdb_backtrace(depth))
