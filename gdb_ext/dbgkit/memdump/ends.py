"""How a recording ends while the process stays: `memdump stop` and `detach` scan it first, as
the exit does, so that the dump's live blocks carry their leak kinds (docs/memdump.md, "Leak
kinds"); and a `kill` from GDB is told from a detach.

GDB has no event before a detach: a `hook-detach` defined here ends the recording while the
process is stopped (the in-process recorder's calls in progress drained first, attach.py),
before it runs on its own. GDB glue only; both backends' recordings (recording.py) use it.
"""

from __future__ import annotations

import signal
from typing import Any

import gdb

from .. import output, settings
from .checks import CMD

__all__ = ["before_detach", "define_detach_hook", "end_reason", "gone", "scan_before_end"]


def scan_before_end(session: Any, why: str) -> None:  # noqa: ANN401 - a recording.Recording
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


_HOOK = """define hook-detach
python
from dbgkit.memdump import ends as _memdump_ends
_memdump_ends.before_detach()
end
end"""

_hook_defined = False
#: the recording the hook ends (the last one armed)
_session: Any = None


def define_detach_hook(session: Any) -> None:  # noqa: ANN401 - a recording.Recording
    """Make `detach` end SESSION's recording first. Defined once per GDB, without asking (a
    hook-detach of the user's is replaced); call it where GDB runs a command, not from an event."""
    global _hook_defined, _session
    _session = session
    if _hook_defined:
        return
    confirm = gdb.parameter("confirm")
    gdb.execute("set confirm off", to_string=True)
    try:
        gdb.execute(_HOOK, to_string=True)
    finally:
        gdb.execute(f"set confirm {'on' if confirm else 'off'}", to_string=True)
    _hook_defined = True


def before_detach() -> None:
    """`detach` is about to let the process go: end the recording of it, scanned."""
    session = _session
    if session is None or session.state.value != "recording":
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
