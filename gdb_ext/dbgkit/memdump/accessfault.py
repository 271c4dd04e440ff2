"""Guard pages from GDB (docs/heap-errors.md): the SPEC memdump writes into the in-process
recorder's control block (`memdump --guard SPEC`, `set memdump guard SPEC`), checked here as
the recorder's guard.c parses it, so that a bad one is refused before the program runs; and, when
an access faults on a guarded block, the report at the stop, in the thread that made it, as
valgrind words it: the access (read or write, its size from the faulting instruction), the block
and where it was allocated and freed (its events in the dump written so far)."""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable
from typing import Protocol

import gdb

from .. import output, settings
from ..batchmode import batch_mode
from ..core.recorder import (
    GUARD_FIELDS,
    GUARD_MAX,
    GUARD_OFFSET,
    LET_THROUGH_OFFSET,
    PATH_MAX,
    PATH_OFFSET,
    Control,
)
from ..inferior_call import call
from .checks import CMD

__all__ = ["at_fault", "check_spec", "check_spec_setting", "resume",
           "write_spec"]

_SIZES = re.compile(r"(\d{1,18})-(\d{1,18})")
# `N%`: N with at most 4 decimals, 0.0001 to 100 (guard.c's parse_share: parts per million)
_SHARE = re.compile(r"(\d{1,18})(?:\.(\d{1,4}))?%")
_TERMS = "all, N%, MIN-MAX, under, over, align16, tag:NAME or fn:NAME"


def check_spec(spec: str) -> str:
    """SPEC as given, or gdb.GdbError naming its first bad term (guard.c's words)."""
    def bad(term: str, why: str) -> gdb.GdbError:
        return gdb.GdbError(f"{CMD}: --guard {spec}: '{term}': {why}")

    if not spec:
        raise gdb.GdbError(f"{CMD}: --guard needs a SPEC, not an empty one (help memdump)")
    if len(spec.encode()) >= GUARD_MAX:
        raise gdb.GdbError(f"{CMD}: --guard: the SPEC is longer than {GUARD_MAX - 1} bytes")
    seen: dict[str, str] = {}
    for term in spec.split(","):
        if not term:
            raise gdb.GdbError(f"{CMD}: --guard {spec}: an empty term")
        sizes = _SIZES.fullmatch(term)
        if term.startswith("fn:"):
            kind, what = "fn", "a second function"
            if len(term) == 3 or "@" in term:
                raise bad(term, "fn:NAME needs a function's name")
        elif term == "all" or term.endswith("%"):
            kind, what = "share", "a second share (all or N%)"
            share = _SHARE.fullmatch(term)
            if term != "all" and not (share is not None and int(share[1]) <= 100 and 1 <= int(
                    share[1]) * 10000 + int((share[2] or "").ljust(4, "0")) <= 1_000_000):
                raise bad(term, "a share is 0.0001% to 100%, at most 4 decimals")
        elif sizes is not None:
            kind, what = "size", "a second size range"
            if int(sizes[1]) > int(sizes[2]):
                raise bad(term, "MIN is larger than MAX")
        elif term in ("under", "over"):
            kind, what = "side", "a second side (under or over)"
        elif term.startswith("tag:") and len(term) > 4:
            kind, what = "tag", "a second tag"
        elif term == "align16":
            continue
        else:
            raise gdb.GdbError(f"{CMD}: --guard {spec}: '{term}' is not {_TERMS}")
        if kind in seen:
            raise bad(term, what)
        seen[kind] = term
    return spec


def check_spec_setting() -> str:
    """`set memdump guard`'s SPEC, checked ("" when it is empty)."""
    spec = str(settings.get("guard") or "")
    return check_spec(spec) if spec else ""


def _with_code(term: str) -> str:
    """`fn:NAME` as `fn:NAME@LO-HI`, NAME's code as GDB finds it (a static function too), for
    the recorder (guardrun.c); any other term as it is."""
    if not term.startswith("fn:"):
        return term
    name = term[3:]
    symbol = gdb.lookup_global_symbol(name) or gdb.lookup_static_symbol(name)
    if symbol is None or symbol.addr_class != gdb.SYMBOL_LOC_BLOCK:
        return term
    block = symbol.value().address and gdb.block_for_pc(int(symbol.value().address))
    while block is not None and block.function is None:
        block = block.superblock
    return f"{term}@{block.start:x}-{block.end:x}" if block is not None else term


def write_spec(control: Control, spec: str) -> None:
    """SPEC into the control block's `guard` (the recorder reads it when it starts recording);
    an empty SPEC leaves it empty (MEMDUMP_GUARD, when set, then chooses)."""
    data = ",".join(_with_code(term) for term in spec.split(",")).encode() if spec else b""
    if len(data) >= GUARD_MAX:
        data = spec.encode()  # the recorder then finds an exported function by itself
    if data:
        control.write_raw(GUARD_OFFSET, data + b"\0")
    # in batch mode the program goes on after each report, the access let through once (also
    # for a SPEC from MEMDUMP_GUARD: scripts/memdump.sh)
    control.write_raw(LET_THROUGH_OFFSET, struct.pack("<Q", int(batch_mode())))


# -- the faulting access -------------------------------------------------------------------------

class _Recording(Protocol):
    path: str | None
    read: Callable[[int, int], bytes] | None


class Faulted(Protocol):
    """What a fault's report reads of the in-process backend (inprocess.InProcessBackend)."""

    rec: _Recording
    control: Control | None

    def _load(self) -> Control | None: ...

    def _resolve_frames(self) -> None: ...


def _guard_words(session: Faulted) -> dict[str, int] | None:
    read, control = session.rec.read, session.control
    if read is None or control is None:
        return None
    try:
        raw = read(control.address + PATH_OFFSET + PATH_MAX, 8 * len(GUARD_FIELDS))
    except OSError:
        return None
    return dict(zip(GUARD_FIELDS, struct.unpack(f"<{len(GUARD_FIELDS)}Q", raw), strict=False))


def _where(frames: list, exact: bool = False, depth: int = 12) -> list[str]:  # noqa: ANN001
    """valgrind's lines of a stack: its first frame's pc EXACT (the faulting instruction), else
    every pc a return address (the line of the call before it)."""
    out = []
    for n, f in enumerate(frames[:depth]):
        pc = f.pc if n == 0 and exact else f.pc - 1
        sal = gdb.find_pc_line(pc)
        block = gdb.current_progspace().block_for_pc(pc)
        while block is not None and block.function is None:  # a lexical block: its function's
            block = block.superblock
        name = block.function.print_name if block is not None and block.function else "???"
        at = f" ({os.path.basename(sal.symtab.filename)}:{sal.line})" if sal.symtab else ""
        out.append(f"   {'at' if n == 0 else 'by'} 0x{f.pc:x}: {name}{at}")
    return out


def _size(fl: list[bytes]) -> int:
    """The bytes an allocation's `e` record asked for (calloc: NMEMB * SIZE; posix_memalign:
    SIZE before its RC; the others: the last field)."""
    if fl[3] == b"calloc":
        return int(fl[6]) * int(fl[7])
    return int(fl[7]) if fl[3] == b"posix_memalign" else int(fl[-1])


def _block_events(path: str, end: int, lo: int, hi: int, addr: int) -> tuple | None:
    """The block of the pool slot around ADDR (the last made in [LO, HI)) from the dump's first
    END bytes: (block, size, alloc frames, free frames or None)."""
    # only at a guarded block's fault: not imported for every recording (GDB's start-up)
    import shutil  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    from memdump_analyzer.dumpfile import DumpReader  # noqa: PLC0415

    work = tempfile.mkdtemp(prefix="memdump-fault-")
    try:
        copy = os.path.join(work, "prefix.memdump")
        with open(path, "rb") as src, open(copy, "wb") as dst:
            os.fchmod(dst.fileno(), 0o600)
            dst.write(src.read(end))
        best = None
        with DumpReader(copy) as reader:
            blocks: dict[int, list] = {}
            for fl in reader.records():
                if fl[0] != b"e" or len(fl) < 7:
                    continue
                if fl[5] != b"-":
                    at = int(fl[5], 16)
                    if lo <= at < hi:
                        blocks[at] = [_size(fl), reader.stack(int(fl[4])), None]
                if fl[6:7] and fl[6].startswith(b"0x") and (fl[5] == b"-" or fl[3] in (
                        b"realloc", b"reallocarray")):
                    old = blocks.get(int(fl[6], 16))
                    if old is not None:
                        old[2] = reader.stack(int(fl[4]))
            for at, (size, made, freed) in blocks.items():
                dist = 0 if at <= addr < at + size else min(abs(addr - at), abs(addr - at - size))
                if best is None or dist < best[0]:
                    best = (dist, at, size, made, freed)
        return best[1:] if best is not None else None
    except (OSError, ValueError):
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def at_fault(session: Faulted, event: gdb.StopEvent) -> bool:
    """A SIGSEGV or SIGBUS stop on an address of the guarded pool: memdump's report of it (True);
    False for any other stop. The program stays stopped at the instruction."""
    if not isinstance(event, gdb.SignalEvent) or event.stop_signal not in ("SIGSEGV", "SIGBUS"):
        return False
    control = session._load()
    words = _guard_words(session) if control is not None else None
    if not words or not words["guard_pool"]:
        return False
    try:
        info = gdb.parse_and_eval("$_siginfo")
        addr = int(info["_sifields"]["_sigfault"]["si_addr"])
        code = int(info["si_code"])
    except gdb.error:
        return False
    pool, size = words["guard_pool"], words["guard_pool_size"]
    if code <= 0 or not pool <= addr < pool + size:
        return False
    frame = gdb.newest_frame()
    pc = frame.pc()
    asm = frame.architecture().disassemble(pc)[0]["asm"]
    from memdump_analyzer.faultinsn import (  # noqa: PLC0415 - at a fault only
        access_text,
        describe_access,
    )
    access, width = describe_access(asm)
    page = 4096
    stride = words["guard_slot_bytes"] + page
    index = max(addr - pool - page, 0) // stride
    lo = pool + page + max(index - 1, 0) * stride
    found = _block_events(session.rec.path or "", control.end, lo, lo + 3 * stride, addr)
    tid = gdb.selected_thread().ptid[1]
    lines = [f"{access_text(access, width)} at 0x{addr:x} in thread {tid}"]
    stack: list = []
    f: gdb.Frame | None = frame
    while f is not None and len(stack) < 12:
        stack.append(type("F", (), {"pc": f.pc()})())
        f = f.older()
    lines += _where(stack, exact=True)
    if found is None:
        lines.append(f" Address 0x{addr:x} is in the guard pool, its block unknown")
    else:
        block, bsize, made, freed = found
        if block <= addr < block + bsize:
            rel = f"{addr - block} bytes inside"
        elif addr >= block + bsize:
            rel = f"{addr - block - bsize} bytes after"
        else:
            rel = f"{block - addr} bytes before"
        if freed is not None:
            lines.append(f" Address 0x{addr:x} is {rel} a block of size {bsize} free'd")
            lines += _where(freed)
            lines.append(" Block was alloc'd")
        else:
            lines.append(f" Address 0x{addr:x} is {rel} a block of size {bsize} alloc'd")
        lines += _where(made)
    for line in lines:
        output.info(CMD, line)
    session._resolve_frames()  # its stacks' symbols, while GDB has them
    if not batch_mode():
        return False  # the program stays here; going on, it dies of the signal
    _LET_THROUGH.append((gdb.selected_thread(), pc + frame.architecture().disassemble(pc)[0][
        "length"], addr & ~(page - 1)))
    return True


# -- the access let through once (batch) -----------------------------------------------------

#: (thread, the address after the faulting instruction, the page) of each fault reported in
#: batch mode: the recorder's handler makes the page accessible and returns; once the thread is
#: past the instruction, GDB makes the page inaccessible again
_LET_THROUGH: list[tuple[gdb.InferiorThread, int, int]] = []
PROT_NONE = 0


def resume() -> None:
    """`continue`, for the batch loop (scripts/memdump.sh): a fault reported here goes to the
    recorder's handler, which writes its `ae` record and lets the access through; the thread
    stops after the instruction, where its page is protected again, and the program goes on."""
    while _LET_THROUGH and gdb.selected_inferior().pid:
        thread, after, page = _LET_THROUGH.pop(0)
        if not thread.is_valid():
            continue
        bp = gdb.Breakpoint(f"*{after:#x}", internal=True, temporary=False)
        bp.silent = True
        bp.thread = thread.global_num
        try:
            gdb.execute("continue", to_string=True)
            if gdb.selected_inferior().pid and bp.hit_count:
                thread.switch()
                _protect(page)
        finally:
            if bp.is_valid():
                bp.delete()
        if not gdb.selected_inferior().pid or not bp_stopped(thread, after):
            return  # another stop came first: the batch loop sees it
    if gdb.selected_inferior().pid:
        gdb.execute("continue")


def bp_stopped(thread: gdb.InferiorThread, after: int) -> bool:
    return thread.is_valid() and gdb.selected_thread() == thread and int(
        gdb.parse_and_eval("$pc")) == after


def _protect(page: int) -> None:
    address = int(gdb.parse_and_eval("(long)&mprotect"))
    saved = gdb.parameter("scheduler-locking")
    gdb.execute("set scheduler-locking on", to_string=True)
    try:
        call(address, [page, 4096, PROT_NONE])
    finally:
        gdb.execute(f"set scheduler-locking {saved}", to_string=True)
