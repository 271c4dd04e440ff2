"""The signals memdump treats as the end of the program: the fatal ones (the dump notes them), and
those whose default action kills a program that does not catch them (the scan runs at their stop).
"""

from __future__ import annotations

import gdb

from ..core import procfs

__all__ = ["FATAL_SIGNALS", "dies_of"]

# Signals after which the program cannot go on by itself; the dump notes them before the end record.
FATAL_SIGNALS = frozenset({"SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT", "SIGSYS", "SIGTRAP"})
# The other signals whose default action ends the process (signal(7): Term and Core); the real-time
# signals, which GDB names SIG34 to SIG64, too.
_TERMINATING = frozenset({"SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGPIPE",
                          "SIGALRM", "SIGTERM", "SIGSTKFLT", "SIGXCPU", "SIGXFSZ", "SIGVTALRM",
                          "SIGPROF", "SIGIO", "SIGPOLL", "SIGPWR", "SIGLOST"})


def dies_of(pid: int, signame: str) -> bool:
    """Whether the signal the program stopped with kills it when GDB lets it go on: a signal
    whose default action ends the process, that GDB passes to it, and that the program neither
    catches nor ignores (valgrind reports the leaks of a program killed by SIGTERM too)."""
    if signame not in _TERMINATING and not (
        signame.startswith("SIG") and signame[3:].isdigit() and 34 <= int(signame[3:]) <= 64
    ):
        return False
    try:  # "SIGTERM  Yes  Yes  Yes  Terminated": stop, print, pass to program
        rows = gdb.execute(f"info signals {signame}", to_string=True).splitlines()
    except gdb.error:
        return False
    row = next((r.split() for r in rows if r.split()[:1] == [signame]), None)
    if row is None or len(row) < 4 or row[3] != "Yes":
        return False
    return not procfs.caught(pid, signame)
