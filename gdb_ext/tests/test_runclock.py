"""RunClock: running time counts from each continue to the next stop, and the clock listens to
GDB's cont events only while the program is stopped."""

from __future__ import annotations

from collections.abc import Callable

from dbgkit.core.runclock import RunClock


class Registry:
    """Stands for gdb.events.cont."""

    def __init__(self) -> None:
        self.handlers: list[Callable[[object], None]] = []

    def connect(self, handler: Callable[[object], None]) -> None:
        self.handlers.append(handler)

    def disconnect(self, handler: Callable[[object], None]) -> None:
        self.handlers.remove(handler)

    def fire(self) -> None:
        for handler in list(self.handlers):
            handler(object())


def test_running_time_leaves_out_the_stops() -> None:
    now = [100.0]
    cont = Registry()
    clock = RunClock(cont, now=lambda: now[0])
    assert clock.seconds() == 0.0
    clock.running(100.0)  # GDB starts the program
    now[0] = 103.0
    assert clock.seconds() == 3.0
    clock.stopped()
    assert len(cont.handlers) == 1
    clock.stopped()  # a second stop event before any continue: one listener still
    assert len(cont.handlers) == 1
    now[0] = 110.0  # 7 s at the prompt
    assert clock.seconds() == 3.0
    cont.fire()
    assert cont.handlers == []  # the hot path never reaches the clock
    now[0] = 111.5
    assert clock.seconds() == 4.5
    clock.close()
    now[0] = 120.0
    assert clock.seconds() == 4.5 and cont.handlers == []


def test_attached_starts_stopped() -> None:
    now = [5.0]
    cont = Registry()
    clock = RunClock(cont, now=lambda: now[0])
    clock.stopped()  # attached: at the prompt until the first continue
    now[0] = 9.0
    cont.fire()
    now[0] = 10.0
    assert clock.seconds() == 1.0
    clock.close()
    assert cont.handlers == []
