"""How the in-process recorder gets into a program GDB starts: its library put in front of
LD_PRELOAD in GDB's environment for the inferior (`set environment`), and the user's value put
back as soon as the program started, so that a later `run` without memdump loads nothing.

GDB glue only.
"""

from __future__ import annotations

import gdb

__all__ = ["Preload"]

_PREFIX = "LD_PRELOAD = "


class Preload:
    """LIBRARY preloaded into the selected inferior's next run, then the environment restored."""

    def __init__(self, library: str) -> None:
        self.library = library
        self._saved: str | None = None
        self._set = False

    def set(self) -> None:
        """LIBRARY in front of the user's LD_PRELOAD (kept after it)."""
        shown = gdb.execute("show environment LD_PRELOAD", to_string=True).strip()
        self._saved = shown[len(_PREFIX):] if shown.startswith(_PREFIX) else None
        value = self.library if not self._saved else f"{self.library}:{self._saved}"
        gdb.execute(f"set environment LD_PRELOAD {value}", to_string=True)
        self._set = True

    def restore(self) -> None:
        """The user's GDB environment as it was: the next `run` without memdump loads nothing."""
        if not self._set:
            return
        self._set = False
        if self._saved is None:
            gdb.execute("unset environment LD_PRELOAD", to_string=True)
        else:
            gdb.execute(f"set environment LD_PRELOAD {self._saved}", to_string=True)
