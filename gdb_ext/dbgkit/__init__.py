"""dbgkit: the toolkit's GDB commands and pretty printers. Importing has no side effects; `load()`
registers them."""

from __future__ import annotations

_loaded = False


def load() -> None:
    """Register settings, every command and the printers with GDB once; later calls do nothing."""
    global _loaded
    if _loaded:
        return
    from . import commands, printers, settings

    settings.register()
    commands.load_all()
    printers.load()
    _loaded = True
