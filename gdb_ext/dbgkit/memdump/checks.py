"""What memdump refuses before it records, and how it says so (in batch mode GDB then exits 1);
how an error inside one of its event handlers is said (once, as a warning).

GDB glue only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import gdb

from .. import output, settings
from ..batchmode import batch_mode
from ..commands.base import quit_batch
from ..core.elf import ElfError, ElfFile

__all__ = ["CMD", "NOT_RECORDED", "cannot_record", "check_program", "guarded"]

CMD = "memdump"
#: what memdump says when GDB exits for a recording that could not start (batch mode)
NOT_RECORDED = f"{CMD}: nothing is recorded: GDB exits with status 1 (batch mode)"


def cannot_record(message: str, raised: bool = False) -> None:
    """MESSAGE says why memdump cannot record; RAISED: a command raises it next (GDB prints it).

    In batch mode (gdb -batch) GDB then exits with status 1 before the program runs (a process
    GDB attached to is detached, one it started is killed): going on would run the program
    unrecorded and exit 0, which a script or a CI job takes for success. Interactively it stays
    an error message and GDB goes on."""
    if not raised and not batch_mode():
        gdb.write(f"{message}\n", gdb.STDERR)
    quit_batch(message, NOT_RECORDED)


def check_program(path: str) -> None:
    """Refuse, before running it, a program whose allocator cannot be hooked."""
    try:
        elf = ElfFile.open(path)
    except ElfError as exc:
        raise gdb.GdbError(f"{CMD}: {path}: {exc}") from None
    except OSError as exc:
        raise gdb.GdbError(f"{CMD}: cannot read {path}: {exc.strerror}") from None
    if not elf.is_dynamic:
        raise gdb.GdbError(
            f"{CMD}: {path} is statically linked: its allocator has no dynamic symbols to hook "
            "(link it dynamically to record it)"
        )
    if elf.machine != "x86_64":
        raise gdb.GdbError(f"{CMD}: {path} is {elf.machine}; memdump records x86-64 programs only")


def guarded(counts: Counter[str], what: str, fn: Callable[..., Any], *args: Any) -> None:
    """Run WHAT, an event handler; an unexpected error becomes one warning instead of a
    traceback (COUNTS' `internal-errors` counts them; `set dbgkit debug on` raises them)."""
    try:
        fn(*args)
    except gdb.GdbError as exc:
        output.warn(CMD, str(exc))
    except Exception as exc:  # noqa: BLE001 - never let a handler's bug reach GDB as a traceback
        counts["internal-errors"] += 1
        if counts["internal-errors"] == 1:
            output.warn(CMD, f"internal error in {what}: {exc!r} "
                             "(set dbgkit debug on to raise it)")
        if settings.debug_enabled():
            raise
