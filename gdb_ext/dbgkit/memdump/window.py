"""Record an attached process for a while, then detach: the batch flow of `scripts/memdump.sh -p`.

In batch mode GDB runs one command at a time, and `continue` returns only when the program stops.
A watcher thread waits for the end of the window (SECONDS, a byte on the stop pipe, or the pipe's
last writer going away) and has GDB's main loop (gdb.post_event) send the program one SIGINT, which
GDB intercepts (`handle SIGINT stop nopass`) and never passes on; a SIGINT that someone else sends
during the window is passed on. An allocator call in progress at that stop is let finish
(Recording.stop_when_idle), so that no operation is cut in half; a second request, or GIVE_UP_AFTER
seconds, stops without it. Then `detach` ends the recording (`end SEQ detach -`) and the program
goes on by itself. A program that exits during the window ends the recording as usual.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time

import gdb

from .. import output
from .checks import CMD
from .recording import Recording, State
from .registry import RECORDINGS

# Seconds the allocator calls in progress at the stop may take to return.
GIVE_UP_AFTER = 10.0


class _Window:
    def __init__(self, session: Recording, stop_path: str, seconds: float | None,
                 notify_fd: int | None) -> None:
        self.session = session
        self.inferior = session.inferior
        self.pid = session.pid
        self.seconds = seconds
        self.notify_fd = notify_fd
        self.stop_fd = os.open(stop_path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        self.done_r, self.done_w = os.pipe2(os.O_CLOEXEC)
        self.stopping = False  # the window is over: stop as soon as no call is in progress
        self.forced = False  # ... or at once
        self.outstanding = 0  # SIGINTs sent to the program and not seen stopping it yet
        self.done = False
        self.last_stop: object = None
        self.started = False
        self.thread = threading.Thread(target=self._watch, name="memdump-window", daemon=True)

    # -- the watcher thread: never touches GDB but through gdb.post_event ---------------------
    def _wait(self, deadline: float | None) -> bool:
        """Until DEADLINE: True when a stop was requested (or its pipe closed), False at the
        deadline or when the window is done."""
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            readable, _, _ = select.select([self.stop_fd, self.done_r], [], [], left)
            if self.done_r in readable:
                return False
            if self.stop_fd in readable:
                try:
                    os.read(self.stop_fd, 4096)
                except BlockingIOError:
                    continue
                return True
            if not readable:
                return False

    def _watch(self) -> None:
        deadline = None if self.seconds is None else time.monotonic() + self.seconds
        self._wait(deadline)
        if self.done:
            return
        gdb.post_event(lambda: self._interrupt(force=False))
        self._wait(time.monotonic() + GIVE_UP_AFTER)
        if not self.done:
            gdb.post_event(lambda: self._interrupt(force=True))

    # -- GDB's main thread -------------------------------------------------------------------
    def _interrupt(self, force: bool) -> None:
        """Posted by the watcher: stop the program, with one SIGINT in flight at most."""
        if self.done:
            return
        self.stopping = True
        self.forced = self.forced or force
        if self.outstanding == 0 and self.inferior.pid == self.pid:
            os.kill(self.pid, signal.SIGINT)
            self.outstanding += 1

    def _on_stop(self, event: object) -> None:
        self.last_stop = event

    def _notify(self, text: str) -> None:
        if self.notify_fd is None:
            output.info(CMD, text)
            return
        try:
            os.write(self.notify_fd, f"{CMD}: {text}\n".encode())
        except OSError:
            pass

    def step(self) -> int:
        """After a stop (or before the first `continue`): 0 to end the window, 1 to continue, 2 to
        resume with a SIGINT that was not ours (the program gets it as without GDB)."""
        event, self.last_stop = self.last_stop, None
        if not self.started:
            self.started = True
            return 1
        session = self.session
        if self.inferior.pid != self.pid:
            return 0  # it exited or was killed: memdump wrote the end record
        if isinstance(event, gdb.SignalEvent) and event.stop_signal == "SIGINT":
            if self.outstanding == 0:
                return 2
            self.outstanding -= 1
        if session.state != State.RECORDING:
            return 0
        if not self.stopping or self.outstanding:
            return 1
        if not session.pending or self.forced:
            return 0
        if not session.stop_when_idle:
            session.stop_when_idle = True
            calls = len(session.pending)
            self._notify(f"stopping once the {calls} allocator call{'s'[:calls != 1]} in "
                         f"progress return{'s'[:calls == 1]} (stop again, or wait "
                         f"{GIVE_UP_AFTER:.0f} s, to stop without)")
        return 1

    def finish(self) -> None:
        self.done = True
        os.write(self.done_w, b"x")
        self.thread.join()
        for fd in (self.stop_fd, self.done_r, self.done_w):
            os.close(fd)


_window: _Window | None = None


class _StepFunction(gdb.Function):
    """$_memdump_window(): 1 while the window goes on; $_memdump_window_signal then says whether
    to resume with `signal SIGINT` rather than `continue` (see _Window.step)."""

    def __init__(self) -> None:
        super().__init__("_memdump_window")

    def invoke(self) -> int:
        step = _window.step() if _window is not None else 0
        gdb.set_convenience_variable("_memdump_window_signal", int(step == 2))
        return int(step != 0)


def begin(stop_path: str, seconds: float | None = None, notify_fd: int | None = None,
          started: str | None = None) -> None:
    """Start the window on the attached process `memdump` is recording: until SECONDS pass (None:
    no limit) or a byte arrives on the pipe STOP_PATH. GDB's command file then runs

        while $_memdump_window()
          if $_memdump_window_signal
            signal SIGINT
          else
            continue
          end
        end
        python memdump_window.end()

    The loop is GDB's own because no Python may be running while `continue` waits: gdb.execute
    keeps the GIL, and the watcher thread would never run. STARTED, if given, is written to
    NOTIFY_FD once the window has begun."""
    global _window
    session = RECORDINGS.active()
    if session is None or session.state != State.RECORDING or not session.attached:
        raise gdb.GdbError(f"{CMD}: no recording of an attached process (gdb -p PID, memdump)")
    window = _Window(session, stop_path, seconds, notify_fd)
    gdb.events.stop.connect(window._on_stop)
    window.thread.start()
    _window = window
    if started and notify_fd is not None:
        try:
            os.write(notify_fd, started.encode() + b"\n")
        except OSError:
            pass


def end() -> None:
    """The window is over: stop the watcher and detach, unless the process is gone."""
    global _window
    window, _window = _window, None
    if window is None:
        return
    gdb.events.stop.disconnect(window._on_stop)
    window.finish()
    session = window.session
    if window.inferior.pid != window.pid:
        return
    if session.state == State.RECORDING and session.pending:
        calls = len(session.pending)
        output.warn(CMD, f"{calls} allocator call{'s'[:calls != 1]} still in progress at the "
                         "detach: not in the dump")
    gdb.execute("detach")


_StepFunction()
