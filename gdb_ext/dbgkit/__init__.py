"""dbgkit: the toolkit's GDB commands and pretty printers. Importing has no side effects; `load()`
registers them."""

from __future__ import annotations

_loaded = False


def load(command: str | None = None) -> None:
    """Register the settings and every command and the printers with GDB once (later calls do
    nothing); with COMMAND, the settings and that one command alone (gdb_ext/memdump.py: the
    other commands and the printers are not loaded). A command's module, and what it imports,
    is imported at the command's first use, not here (commands/__init__.py)."""
    global _loaded
    if _loaded:
        return
    from . import commands, settings

    settings.register()
    if command is not None:
        commands.load(command)
        return
    from . import printers

    commands.load_all()
    printers.load()
    _loaded = True
