"""All user-facing output of the GDB commands: colour only on a terminal and never with NO_COLOR."""

from __future__ import annotations

import sys

import gdb
from memdump_analyzer.colour import colour_wanted

_RESET = "\x1b[0m"
_STYLES = {"error": "\x1b[31;1m", "warn": "\x1b[33m", "note": "\x1b[36m", "bold": "\x1b[1m"}


def colour_enabled() -> bool:
    """Colour when the analyser's policy allows it on GDB's stdout and GDB styling is on."""
    try:
        if not colour_wanted(sys.stdout.isatty()):
            return False
        return bool(gdb.parameter("style enabled"))
    except (RuntimeError, ValueError, OSError):
        return False


def style(text: str, kind: str) -> str:
    if not colour_enabled():
        return text
    return _STYLES.get(kind, "") + text + _RESET


def info(command: str, text: str) -> None:
    """A one-line message from a command, e.g. `memdump: recording process 42 to app.42.memdump`."""
    gdb.write(f"{style(command + ':', 'note')} {text}\n")


def warn(command: str, text: str) -> None:
    gdb.write(f"{style(command + ': warning:', 'warn')} {text}\n", gdb.STDERR)


def progress(command: str, text: str) -> None:
    """Progress of long work goes to stderr so it never mixes with a command's result."""
    gdb.write(f"{command}: {text}\n", gdb.STDERR)


def block(text: str) -> None:
    gdb.write(text if text.endswith("\n") else text + "\n")
