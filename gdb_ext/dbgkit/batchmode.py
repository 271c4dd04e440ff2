"""Whether GDB runs in batch mode (`gdb -batch`), which GDB 13's Python API does not tell.

GDB keeps it in a C variable (`batch_flag`) that no setting or Python function exposes, so it is
read from GDB's own command line, /proc/self/cmdline (Python runs inside the GDB process), parsed
as GDB 13's main.c parses it: getopt_long_only with every option long, one or two dashes, unique
prefixes accepted, `=VALUE` or the next word as an option's value, parsing that stops at `--` and
right after `--args`, and GNU getopt's permutation (options may follow the program's name) unless
POSIXLY_CORRECT is set. No GDB import: tested without GDB (gdb_ext/tests/test_batchmode.py).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

# GDB 13's long_options (gdb/main.c): name -> whether it takes a value.
_OPTIONS: dict[str, bool] = {
    **dict.fromkeys((
        "tui", "readnow", "readnever", "r", "quiet", "q", "silent", "nh", "nx", "n",
        "batch-silent", "batch", "fullname", "f", "help", "version", "configuration", "nw",
        "nowindows", "w", "windows", "statistics", "write", "args", "return-child-result",
    ), False),
    **dict.fromkeys((
        "annotate", "se", "symbols", "s", "exec", "e", "core", "c", "pid", "p", "command",
        "eval-command", "x", "ex", "init-command", "init-eval-command", "ix", "iex",
        "early-init-command", "early-init-eval-command", "eix", "eiex", "ui", "interpreter", "i",
        "directory", "d", "data-directory", "D", "cd", "tty", "baud", "b", "l",
    ), True),
}

# Options that mean batch mode; `batch` and `batch-silent` share no prefix GDB would accept
# (`-batc` is ambiguous between them, and GDB refuses to start).
_BATCH = frozenset({"batch", "batch-silent"})

# Prefixes that name one and the same option in getopt's eyes (same value, same flag).
_SAME = (
    frozenset({"quiet", "silent"}),
    frozenset({"nw", "nowindows"}),
    frozenset({"w", "windows"}),
    frozenset({"ui", "interpreter"}),
)


def _lookup(name: str) -> str | None:
    """The option NAME stands for (exact, or a unique prefix), None when unknown or ambiguous."""
    if name in _OPTIONS:
        return name
    matches = {option for option in _OPTIONS if option.startswith(name)}
    if len(matches) == 1 or any(matches <= same for same in _SAME):
        return min(matches) if matches else None
    return None


def is_batch(argv: Sequence[str], posixly_correct: bool = False) -> bool:
    """Whether GDB started with ARGV (argv[0] first) runs in batch mode."""
    i = 1
    while i < len(argv):
        word = argv[i]
        i += 1
        if word == "--":
            break
        if not word.startswith("-") or word == "-":
            if posixly_correct:
                break
            continue  # the program, a core or a pid: getopt moves it after the options
        name, eq, _ = word.lstrip("-").partition("=")
        option = _lookup(name)
        if option is None:
            continue  # GDB refuses to start on it: never seen from here
        if option in _BATCH:
            return True
        if option == "args":
            break
        if _OPTIONS[option] and not eq:
            i += 1  # its value is the next word
    return False


@functools.cache
def batch_mode() -> bool:
    """Whether this GDB runs in batch mode (-batch, --batch, -batch-silent, ...)."""
    try:
        with open("/proc/self/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return False
    argv = [w.decode("utf-8", "surrogateescape") for w in raw.split(b"\0")[:-1]]
    return is_batch(argv, posixly_correct="POSIXLY_CORRECT" in os.environ)
