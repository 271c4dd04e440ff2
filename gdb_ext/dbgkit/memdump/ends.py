"""How a recording ends while the process stays: `memdump stop` and `detach` scan it first, as
the exit does, so that the dump's live blocks carry their leak kinds (docs/memdump.md, "Leak
kinds"); and a `kill` from GDB is told from a detach.

GDB has no event before a detach: a `hook-detach` defined here ends the recording while the
process is stopped (the in-process recorder's calls in progress drained first, attach.py),
before it runs on its own; it ends the selected inferior's recording, which the registry
(registry.py) holds. GDB glue only; both backends' recordings (recording.py) use it, through
`Ending`, what it needs of one.
"""

from __future__ import annotations

import signal
from typing import Protocol

import gdb

from .. import output, settings
from .checks import CMD
from .status import State

__all__ = ["Ending", "before_detach", "define_detach_hook", "end_reason", "gone",
           "scan_before_end"]


class Ending(Protocol):
    """What ending a recording here reads and calls of it (a recording.Recording)."""

    inferior: gdb.Inferior
    #: the recorded process, 0 before it starts
    pid: int
    state: State
    #: set once the pointer scan ran (or could not); None before
    scan_status: str | None
    #: seconds the scan may take; 0 turns it off
    scan_time_limit: int

    def calls_in_progress(self) -> list[tuple[int, str]]: ...
    def scan_once(self, at_function_entry: bool) -> None: ...
    def before_detach(self) -> None: ...
    def finish(self, reason: str, detail: str = "-") -> None: ...


def scan_before_end(session: Ending, why: str) -> None:
    """The pointer scan of the stopped process SESSION records, written into its dump as the
    exit's is, before the recording ends (WHY: "stop", "detach"). None when the scan ran
    already (exit, a fatal signal), is turned off, or a thread is inside an allocator call: the
    heap is being changed then, and memdump says the kinds stay unknown."""
    if session.scan_status is not None or session.scan_time_limit == 0:
        return
    if not session.inferior.pid or session.inferior.pid != session.pid:
        return
    calls = session.calls_in_progress()
    if calls:
        busy = ", ".join(f"thread {tid} in {op}" for tid, op in calls)
        output.warn(CMD, f"no pointer scan at the {why}: {busy} (the heap is being changed); "
                         "the dump's leak kinds stay unknown")
        return
    try:
        session.scan_once(at_function_entry=False)
    except Exception as exc:  # noqa: BLE001 - the recording must end whatever the scan's trouble
        if settings.debug_enabled():
            raise
        output.warn(CMD, f"the pointer scan at the {why} failed: {exc!r}; the dump's leak kinds "
                         "stay unknown (set dbgkit debug on to raise it)")


# The registry is imported when the hook runs: it imports recording.py, which imports this.
_HOOK = """define hook-detach
python
from dbgkit.memdump import ends as _memdump_ends, registry as _memdump_registry
_memdump_ends.before_detach(_memdump_registry.RECORDINGS.active())
end
end"""

_hook_defined = False


def define_detach_hook() -> None:
    """Make `detach` end the selected inferior's recording first. Defined once per GDB, without
    asking (a hook-detach of the user's is replaced); call it where GDB runs a command, not from
    an event."""
    global _hook_defined
    if _hook_defined:
        return
    confirm = gdb.parameter("confirm")
    gdb.execute("set confirm off", to_string=True)
    try:
        gdb.execute(_HOOK, to_string=True)
    finally:
        gdb.execute(f"set confirm {'on' if confirm else 'off'}", to_string=True)
    _hook_defined = True


def before_detach(session: Ending | None) -> None:
    """`detach` is about to let the process go: end SESSION, its recording, scanned."""
    if session is None or session.state != State.RECORDING:
        return
    if not session.inferior.pid or session.inferior.pid != session.pid:
        return
    try:
        session.before_detach()
    except (OSError, gdb.error) as exc:
        output.warn(CMD, f"could not let the allocator calls in progress finish: {exc}")
    scan_before_end(session, "detach")
    session.finish("detach")


def end_reason(event: gdb.ExitedEvent, pid: int) -> tuple[str, str]:
    """The end record's REASON and DETAIL for GDB's exited event of process PID: its exit code,
    the signal that killed it, a `kill` of GDB's (SIGKILL; GDB reaped it), else a detach that
    the hook did not see (the process runs on)."""
    code = getattr(event, "exit_code", None)
    if code is not None:
        return "exit", str(code)
    sig = gdb.convenience_variable("_exitsignal")
    if sig is not None:
        return "killed", _signal_name(int(sig))
    return ("killed", "SIGKILL") if gone(pid) else ("detach", "-")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def gone(pid: int) -> bool:
    """Whether process PID is no more (a kill: GDB reaped it), where a detached one runs on."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2:][:1] in (b"Z", b"X")  # a zombie is gone too
