"""A fast x86-64 stack unwinder driven by .eh_frame CFI, with unwind rows cached per pc.

The hot path handles the rows compilers emit for ordinary code (CFA = rsp/rbp + offset, return
address and rbp saved at CFA-relative slots) with one dict lookup and one or two reads from a
stack chunk. Everything else (signal trampolines, DWARF expressions, register rules) goes through
a general slow path. Register numbers are the x86-64 psABI DWARF numbers (§3.6.2): 6 rbp, 7 rsp,
16 the return address (rip).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping

from . import cfi
from .cfi import (
    EXPRESSION,
    MASK64,
    OFFSET,
    REGISTER,
    SAME_VALUE,
    UNDEFINED,
    VAL_EXPRESSION,
    VAL_OFFSET,
    CfiError,
)
from .cfi_exec import evaluate, row_at
from .elf import ElfError
from .procmaps import Module, ModuleMap

__all__ = ["Unwinder", "STATUSES"]

RBP = 6
RSP = 7
RIP = 16

_U64_FROM = struct.Struct("<Q").unpack_from

# Why a walk stopped (Unwinder.last_status); the first two are normal ends.
STATUSES = {
    "outermost": "the return address is undefined (e.g. _start, a thread's clone3 frame)",
    "limit": "the frame limit was reached",
    "zero-pc": "a return address of 0 was read (treated as the end of the stack)",
    "no-module": "a pc lies in no executable mapping of a file",
    "no-elf": "the module holding a pc could not be read as ELF",
    "no-cfi": "no FDE covers a pc although its module has .eh_frame",
    "unsupported": "malformed CFI, an unsupported instruction or expression, or a register whose "
                   "value is unknown",
    "unreadable": "stack memory could not be read",
    "bad-cfa": "the CFA did not move towards the stack base (corrupt stack or wrong rule)",
}


class _Stop:
    """A cached row that ends the walk (outermost frame or a failure), with its status."""

    __slots__ = ("status", "ok")

    def __init__(self, status: str, ok: bool) -> None:
        self.status = status
        self.ok = ok


_OUTERMOST = _Stop("outermost", True)
_NO_MODULE = _Stop("no-module", False)
_NO_ELF = _Stop("no-elf", False)
_NO_FDE = _Stop("no-cfi", False)
_UNSUPPORTED = _Stop("unsupported", False)


class _FpRow:
    """Frame-pointer heuristic for modules without any CFI: CFA = rbp+16, ra at rbp+8, rbp at rbp.

    It is right only for code built with frame pointers, and wrong in prologues/epilogues, so a
    walk that used it is reported incomplete (False) and flagged in Unwinder.last_heuristic.
    """


_FP_ROW = _FpRow()


class _Unreadable(Exception):
    """Stack memory needed by a rule could not be read."""


class _SlowRow:
    """A row outside the fast form: evaluated by the general DWARF rules (DWARF 5 §6.4.1)."""

    __slots__ = ("cfa", "rules", "ra_reg", "signal", "bias")

    def __init__(self, row: cfi.Row, bias: int) -> None:
        self.cfa = row.cfa
        self.rules = list(row.registers.items())
        self.ra_reg = row.ra_reg
        self.signal = row.signal_frame
        self.bias = bias

    def apply(self, regs: Mapping[int, int], read_u64: Callable[[int], int]
              ) -> dict[int, int] | None:
        """The caller's registers (16 = its pc), or None when the return address is undefined."""
        c = self.cfa
        if c.expression is not None:
            cfa = evaluate(c.expression, regs, read_u64, bias=self.bias)
        else:
            base = regs.get(c.register)
            if base is None:
                raise cfi.UnknownRegister(c.register)
            cfa = (base + c.offset) & MASK64
        # Registers without a rule keep their value (GDB and libgcc treat "unspecified" as
        # same_value); the caller's rsp is the CFA by the psABI's definition of the CFA.
        new = dict(regs)
        new[RSP] = cfa
        have_ra = False
        for reg, rule in self.rules:
            kind = rule.kind
            if reg == self.ra_reg:
                have_ra = True
                if kind == UNDEFINED:
                    return None
            if kind == OFFSET:
                new[reg] = read_u64(cfa + rule.value)
            elif kind == VAL_OFFSET:
                new[reg] = (cfa + rule.value) & MASK64
            elif kind == REGISTER:
                if rule.value not in regs:
                    raise cfi.UnknownRegister(rule.value)
                new[reg] = regs[rule.value]
            elif kind == EXPRESSION:
                addr = evaluate(rule.expression, regs, read_u64, push=cfa, bias=self.bias)
                new[reg] = read_u64(addr)
            elif kind == VAL_EXPRESSION:
                new[reg] = evaluate(rule.expression, regs, read_u64, push=cfa, bias=self.bias)
            elif kind == UNDEFINED:
                new.pop(reg, None)
            # SAME_VALUE: keep the value copied above.
        if not have_ra:
            raise CfiError("the row has no rule for the return address")
        new[RIP] = new[self.ra_reg]
        return new


def _compile(row: cfi.Row, bias: int) -> object:
    """Turn a CFI row into the cached form: a fast tuple, a _SlowRow or a _Stop."""
    ra = row.registers.get(row.ra_reg)
    if ra is None:
        return _UNSUPPORTED
    if ra.kind == UNDEFINED:
        # DWARF 5 §6.4.4: an undefined return address marks the outermost frame.
        return _OUTERMOST
    cfa = row.cfa
    if (not row.signal_frame and cfa.expression is None and cfa.register in (RBP, RSP)
            and ra.kind == OFFSET and row.ra_reg == RIP and RSP not in row.registers):
        fp_rule = row.registers.get(RBP)
        if fp_rule is None or fp_rule.kind == SAME_VALUE:
            return (cfa.register, cfa.offset, ra.value, None)
        if fp_rule.kind == OFFSET:
            return (cfa.register, cfa.offset, ra.value, fp_rule.value)
    return _SlowRow(row, bias)


class _Reader:
    """Stack reads for the slow path, sharing the walk's current chunk."""

    __slots__ = ("fetch", "base", "buf")

    def __init__(self, fetch: Callable[[int], tuple[int, bytes] | None], base: int, buf: bytes
                 ) -> None:
        self.fetch = fetch
        self.base = base
        self.buf = buf

    def read_u64(self, addr: int) -> int:
        off = addr - self.base
        if off < 0 or off + 8 > len(self.buf):
            chunk = self.fetch(addr)
            if chunk is None:
                raise _Unreadable(addr)
            self.base, self.buf = chunk
            off = addr - self.base
        return _U64_FROM(self.buf, off)[0]


class Unwinder:
    """Walks a stopped thread's stack from (pc, sp, fp) using the modules' .eh_frame CFI.

    Rows are cached per runtime pc. They are dropped automatically when a ModuleMap refresh
    changed the module list (dlopen/dlclose seen); call clear_cache() after an exec or when
    replacing mappings without a refresh. Stack memory is read in chunks of chunk_size bytes,
    never cached across walks (the stack changes between stops).
    """

    def __init__(self, read_memory: Callable[[int, int], bytes], modules: ModuleMap,
                 chunk_size: int = 8192) -> None:
        self._read = read_memory
        self._modules = modules
        self._chunk_size = chunk_size
        # Two caches: the row for a pc used as is (innermost frame, frame interrupted by a
        # signal) and for a pc that is a return address (looked up at pc-1, see _compute).
        self._exact: dict[int, object] = {}
        self._caller: dict[int, object] = {}
        self._modules_version = modules.version
        self.last_status = ""
        self.last_heuristic = False

    def clear_cache(self) -> None:
        """Forget every cached row (call after the module map changed)."""
        self._exact.clear()
        self._caller.clear()

    # -- memory ---------------------------------------------------------------------------------

    def _fetch(self, addr: int) -> tuple[int, bytes] | None:
        """Read a chunk of stack holding [addr, addr+8): (start address, bytes) or None.

        The chunk starts a little below addr so that reads of nearby lower slots (saved rbp below
        the return address, signal context fields) do not need another read; if that fails (guard
        page, end of mapping, a reader that rejects partial reads) smaller reads are tried.
        """
        aligned = addr & ~7
        need = addr + 8
        size = self._chunk_size
        attempts = ((aligned - 256, size), (aligned, size), (aligned, 4096 - (aligned & 4095)))
        for start, length in attempts:
            if start < 0:
                continue
            try:
                data = self._read(start, length)
            except (OSError, ValueError, OverflowError):
                continue
            if start + len(data) >= need:
                return start, bytes(data)
        return None

    # -- rows -----------------------------------------------------------------------------------

    def _row_for(self, pc: int, exact: bool) -> object:
        mod = self._modules.find(pc)
        if mod is None:
            return _NO_MODULE  # not cached: a later refresh of the module map may find it
        row = self._compute(mod, pc, exact)
        (self._exact if exact else self._caller)[pc] = row
        return row

    @staticmethod
    def _compute(mod: Module, pc: int, exact: bool) -> object:
        elf = mod.elf
        if elf is None:
            return _NO_ELF
        link = pc - mod.bias
        try:
            if not elf.has_cfi:
                return _FP_ROW
            fde = elf.eh_frame_lookup(link)
            at = link
            if not exact and (fde is None or not fde.signal_frame):
                # A return address may lie past the end of its caller (call to a noreturn
                # function as the last instruction): look up pc-1, as GDB and libgcc do. Signal
                # trampolines ('S') are entered at the pushed address itself (LSB §10.6.1.1.1).
                at = link - 1
                if fde is None or not fde.pc_begin <= at < fde.pc_end:
                    fde = elf.eh_frame_lookup(at)
            if fde is None:
                return _NO_FDE
            return _compile(row_at(fde, at), mod.bias)
        except (CfiError, ElfError):
            return _UNSUPPORTED

    # -- the walk -------------------------------------------------------------------------------

    def backtrace(self, pc: int, sp: int, fp: int, limit: int, *,
                  regs: Mapping[int, int] | None = None) -> tuple[list[int], bool]:
        """Return addresses of the callers of the function executing at pc, innermost first
        (result[0] is where the current function will return), at most `limit`; the bool is True
        when the walk ended normally (outermost frame: return address undefined, e.g. _start or a
        thread's clone3 frame; or limit reached) and False when it stopped on something it could
        not unwind (no CFI for a pc, an unsupported expression rule, unreadable memory) so the
        caller can fall back to GDB's own unwinder for this event.

        regs optionally gives the innermost frame's other registers by DWARF number (see
        ptrace.Regs.dwarf()); they are only needed when the innermost row uses them. The reason
        the walk ended is left in self.last_status (see STATUSES); a walk that used the
        frame-pointer heuristic returns False and sets self.last_heuristic.
        """
        out: list[int] = []
        append = out.append
        self.last_heuristic = False
        if self._modules.version != self._modules_version:
            self._modules_version = self._modules.version
            self.clear_cache()
        if limit <= 0:
            self.last_status = "limit"
            return out, True
        exact_rows = self._exact
        caller_rows = self._caller
        rows = exact_rows
        unpack = _U64_FROM
        fetch = self._fetch
        base = 0
        buf = b""
        blim = -1  # last offset in buf where 8 bytes can be read
        others: Mapping[int, int] | None = regs  # registers beyond pc/sp/fp, when known
        heuristic = False
        status = "limit"
        ok = True
        count = 0
        while True:
            row = rows.get(pc)
            if row is None:
                row = self._row_for(pc, rows is exact_rows)
            if row.__class__ is tuple:
                cfa_reg, cfa_off, ra_off, fp_off = row  # type: ignore[misc]
                cfa = (sp if cfa_reg == RSP else fp) + cfa_off
                if cfa <= sp:
                    status, ok = "bad-cfa", False
                    break
                if fp_off is not None:
                    a = cfa + fp_off - base
                    if a < 0 or a > blim:
                        chunk = fetch(cfa + fp_off)
                        if chunk is None:
                            status, ok = "unreadable", False
                            break
                        base, buf = chunk
                        blim = len(buf) - 8
                        a = cfa + fp_off - base
                    fp = unpack(buf, a)[0]
                a = cfa + ra_off - base
                if a < 0 or a > blim:
                    chunk = fetch(cfa + ra_off)
                    if chunk is None:
                        status, ok = "unreadable", False
                        break
                    base, buf = chunk
                    blim = len(buf) - 8
                    a = cfa + ra_off - base
                pc = unpack(buf, a)[0]
                sp = cfa
                others = None
                rows = caller_rows
            elif row.__class__ is _SlowRow:
                cur = dict(others) if others else {}
                cur[RSP] = sp
                cur[RBP] = fp
                cur[RIP] = pc
                reader = _Reader(fetch, base, buf)
                try:
                    new = row.apply(cur, reader.read_u64)  # type: ignore[attr-defined]
                except _Unreadable:
                    status, ok = "unreadable", False
                    break
                except CfiError:
                    status, ok = "unsupported", False
                    break
                base, buf = reader.base, reader.buf
                blim = len(buf) - 8
                if new is None:
                    status = "outermost"
                    break
                new_sp = new[RSP]
                # A signal frame may switch stacks (sigaltstack), so only ordinary frames must
                # move the stack pointer towards the stack base.
                if new_sp <= sp and not row.signal:  # type: ignore[attr-defined]
                    status, ok = "bad-cfa", False
                    break
                sp = new_sp
                pc = new[RIP]
                fp = new.get(RBP, 0)  # an undefined rbp makes a later rbp-based CFA fail
                others = new
                # The frame a signal interrupted was stopped at pc itself, not after a call.
                rows = exact_rows if row.signal else caller_rows  # type: ignore[attr-defined]
            elif row is _FP_ROW:
                cfa = fp + 16
                if cfa <= sp:
                    status, ok = "bad-cfa", False
                    break
                chunk = None
                a = fp - base
                if a < 0 or a + 8 > blim:
                    chunk = fetch(fp)
                    if chunk is None:
                        status, ok = "unreadable", False
                        break
                    base, buf = chunk
                    blim = len(buf) - 8
                    a = fp - base
                pc = unpack(buf, a + 8)[0]
                fp = unpack(buf, a)[0]
                sp = cfa
                heuristic = True
                others = None
                rows = caller_rows
            else:
                status = row.status  # type: ignore[attr-defined]
                ok = row.ok  # type: ignore[attr-defined]
                break
            if pc == 0:
                status = "zero-pc"
                break
            append(pc)
            count += 1
            if count >= limit:
                break
        self.last_status = status
        self.last_heuristic = heuristic
        return out, ok and not heuristic
