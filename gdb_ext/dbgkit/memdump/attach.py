"""The in-process recorder on a running process (`gdb -p PID`, `memdump`; docs/recorder.md).

GDB loads libmemdump_recorder.so into the process by calling dlopen in it (an inferior function
call), at a safe point: no thread inside the allocator, the loader or the recorder (their locks
are free), found by looking at every thread's frames and, when one is inside, by running the
process to an allocator entry or to the return from the call it is in. Other threads stay stopped
during the call (scheduler-locking). The recorder's constructor asks GDB for its settings
(ConfigureBreakpoint, as at a launch); `attach` in the control block makes it redirect the
modules' GOT entries to its hooks (gdb_ext/recorder/got.c). A process the recorder is already
loaded into (an earlier recording, disabled since) is configured again by
memdump_recorder_reattach(). The heap is walked right before (Process.heap_at_load): what the
load and the dynamic linker allocate later is not recorded, and not from before the recording.

Before GDB detaches, the recording ends (ends.py's `hook-detach`, which calls drain() here):
the recorder is disabled, never unloaded, and the process goes on.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable
from dataclasses import dataclass

import gdb

from .. import output
from ..core.procmaps import Module, ModuleMap
from ..core.recorder import DRAINING, FAILURES, LIBRARY, RECORDING, Control, in_flight
from ..inferior_call import call
from .checks import CMD

__all__ = ["OneThreadCall", "drain", "load"]

RTLD_NOW = 2
#: functions a thread must not be inside when the recorder is loaded (their locks)
UNSAFE = frozenset({
    "malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "cfree", "__libc_malloc", "__libc_free", "__libc_calloc",
    "__libc_realloc", "__libc_memalign", "__libc_valloc", "__libc_pvalloc", "malloc_trim",
    "malloc_stats", "malloc_info", "mallinfo", "mallinfo2", "dlopen", "dlclose", "dlsym", "dlvsym",
    "dlmopen", "dladdr", "dladdr1", "dlinfo", "__libc_dlopen_mode", "__libc_dlclose",
    "__libc_dlsym", "dl_iterate_phdr", "fork", "_Fork", "__libc_fork", "vfork", "pthread_create",
    "pthread_exit", "__cxa_thread_atexit_impl",
})
#: the C++ operators (dump format 2.1), as GDB names their frames (demangled, or mangled): a thread
#: inside one when the GOT is redirected would have its inner malloc or free recorded as the
#: operation, and the operator's counterpart reported as a mismatch
UNSAFE_PREFIXES = ("operator new", "operator delete", "_Znwm", "_Znam", "_ZdlPv", "_ZdaPv")
ENTRIES = ("malloc", "free", "calloc", "realloc")
#: safe-point attempts (each runs the process until an allocator entry or a return)
ATTEMPTS = 50


class AttachError(Exception):
    """The recorder cannot be loaded: the one-line reason."""


def _basename(module: Module) -> str:
    return os.path.basename(module.path)


def _symbols(module: Module) -> dict[str, int]:
    try:
        return module.elf.dynamic_symbols() if module.elf is not None else {}
    except Exception:  # noqa: BLE001 - an unreadable module offers nothing
        return {}


def _find(modules: list[Module], prefix: str, name: str) -> int | None:
    for module in modules:
        if _basename(module).startswith(prefix):
            value = _symbols(module).get(name)
            if value:
                return module.bias + value
    return None


def _unsafe_threads(inferior: gdb.Inferior, ranges: list[tuple[int, int]],
                    entries: set[int]) -> list[int]:
    """Return addresses that take each thread out of an unsafe function (0: none known); empty
    when every thread is at a safe point. A thread standing on an allocator's first instruction
    (an entry breakpoint) is not inside it."""
    returns: list[int] = []
    for thread in inferior.threads():
        if not thread.is_valid() or thread.is_exited():
            continue
        thread.switch()
        try:
            frame = gdb.newest_frame()
        except gdb.error:
            continue
        outermost = None
        depth = 0
        while frame is not None and depth < 64:
            pc = frame.pc()
            name = frame.name() or ""
            inside = (name in UNSAFE or name.startswith(UNSAFE_PREFIXES)
                      or any(lo <= pc < hi for lo, hi in ranges))
            if inside and not (depth == 0 and pc in entries):
                outermost = frame
            try:
                frame = frame.older()
            except gdb.error:
                break
            depth += 1
        if outermost is not None:
            try:
                caller = outermost.older()
                returns.append(caller.pc() if caller is not None else 0)
            except gdb.error:
                returns.append(0)
    return returns


@dataclass
class Process:
    """The stopped process load() and drain() work on, as the in-process recording gives it."""

    inferior: gdb.Inferior
    modules: ModuleMap
    read: Callable[[int, int], bytes]
    #: the recorder's control block, once it asked for its settings (None before)
    control: Callable[[], Control | None]
    #: (set by load()) the addresses of the heap's blocks in use right before the load
    heap_at_load: array | None = None


def _safe_point(inferior: gdb.Inferior, modules: list[Module]) -> None:
    """Run the process until no thread is inside the allocator, the loader or the recorder."""
    ranges = [(m.start, m.end) for m in modules
              if _basename(m).startswith(("ld-linux", "ld64.so")) or _basename(m) == LIBRARY]
    entries = set()
    for prefix in ("libc.so", LIBRARY):
        for name in ENTRIES:
            address = _find(modules, prefix, name)
            if address:
                entries.add(address)
    for _ in range(ATTEMPTS):
        returns = _unsafe_threads(inferior, ranges, entries)
        if not returns:
            return
        _continue_to(entries | set(returns))
        if not inferior.pid:
            raise AttachError("the process exited")
    raise AttachError("no safe point found: a thread stays inside the allocator or the loader")


def _stop_at(address: int) -> gdb.Breakpoint:
    """An internal breakpoint that stops the process without a word."""
    bp = gdb.Breakpoint(f"*{address:#x}", internal=True)
    bp.silent = True
    return bp


def _continue_to(addresses: set[int]) -> None:
    """Run the process until it reaches one of ADDRESSES (0s ignored), silently."""
    stops = [_stop_at(a) for a in sorted(addresses) if a]
    try:
        gdb.execute("continue", to_string=True)
    finally:
        for bp in stops:
            if bp.is_valid():
                bp.delete()


class OneThreadCall:
    """scheduler-locking on (only the calling thread runs) and unwindonsignal on, for a call
    into the program (the recorder's load, its heap check)."""

    def __enter__(self) -> None:
        self.saved = (gdb.parameter("scheduler-locking"), gdb.parameter("unwindonsignal"))
        gdb.execute("set scheduler-locking on", to_string=True)
        gdb.execute("set unwindonsignal on", to_string=True)

    def __exit__(self, *exc: object) -> None:
        gdb.execute(f"set scheduler-locking {self.saved[0]}", to_string=True)
        gdb.execute(f"set unwindonsignal {'on' if self.saved[1] else 'off'}", to_string=True)


def _dlopen(modules: list[Module], library: str) -> None:
    address = _find(modules, "libc.so", "dlopen") or _find(modules, "libdl.so", "dlopen")
    if address is None:
        raise AttachError("the process has no dlopen (libdl is not loaded)")
    if call(address, [RTLD_NOW], text=library.encode()) != 0:
        return
    reason = "dlopen failed"
    error = _find(modules, "libc.so", "dlerror") or _find(modules, "libdl.so", "dlerror")
    if error is not None:
        try:
            message = call(error)
            if message:
                reason = gdb.parse_and_eval(f"(const char *) {message:#x}").string(
                    errors="replace")
        except gdb.error:
            pass
    raise AttachError(f"cannot load the in-process recorder into the process: {reason}")


def load(process: Process, library: str) -> tuple[int, int]:
    """Load (or configure again) the recorder in the stopped PROCESS and have it redirect the
    allocator calls: returns (GOT slots, modules) redirected. Raises AttachError."""
    process.modules.refresh()
    modules = process.modules.modules()
    loaded = [m for m in modules if _basename(m) == LIBRARY]
    for module in modules:
        name = _basename(module)
        if name != LIBRARY and not name.startswith(("libc.so", "ld-linux", "ld64.so")) \
                and _symbols(module).get("malloc"):
            raise AttachError(f"{module.path} brings its own malloc (its calls to it cannot be "
                              "redirected)")
    if not loaded and not os.access(library, os.R_OK):
        raise AttachError(f"cannot read the in-process recorder {library}")
    inferior = process.inferior
    selected = gdb.selected_thread()
    try:
        _safe_point(inferior, modules)
        # glibc's heap walker, only when attaching (not imported by every recording: 10 ms)
        from .heapsource import in_use  # noqa: PLC0415

        process.heap_at_load = in_use(inferior)
        with OneThreadCall():
            if loaded:
                reattach = _find(loaded, LIBRARY, "memdump_recorder_reattach")
                if reattach is None:
                    raise AttachError(f"the {LIBRARY} loaded in the process is an older one")
                call(reattach)
            else:
                _dlopen(modules, library)
    except gdb.error as exc:
        raise AttachError(f"cannot load the in-process recorder into the process: {exc}") from None
    finally:
        if selected is not None and selected.is_valid() and inferior.pid:
            selected.switch()
    loaded_control = process.control()
    if loaded_control is None:
        raise AttachError("the in-process recorder was loaded but did not ask for its settings")
    control = loaded_control.load()
    if control.state != RECORDING:
        why = FAILURES.get(control.failure, f"failure {control.failure}")
        raise AttachError(f"the in-process recorder did not start: {why}")
    return control.patched, control.patched_modules


def drain(process: Process) -> None:
    """Before a detach: let the allocator calls in progress finish and be recorded (the recorder
    takes no new one: DRAINING), running the process to their returns."""
    inferior = process.inferior
    control = process.control()
    if control is None:
        return
    block = control.load()
    if block.state != RECORDING:
        return
    control.set(state=DRAINING)
    told = False
    for _ in range(ATTEMPTS):
        calls = in_flight(process.read, block.slots, block.slot_count)
        returns = {call.pcs[0] for call in calls if call.pcs}
        if not calls or any(not call.pcs for call in calls):
            return  # done, or a call whose return is unknown (depth 0): not waited for
        if not told:
            told = True
            output.info(CMD, f"letting the {len(calls)} allocator call"
                             f"{'s'[:len(calls) != 1]} in progress finish before the detach")
        _continue_to(returns)
        if not inferior.pid:
            return
        block = control.load()
