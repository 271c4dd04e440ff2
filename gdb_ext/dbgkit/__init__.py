"""dbgkit: the toolkit's GDB commands. Importing has no side effects; `load()` registers them."""

from __future__ import annotations

_loaded = False


def load() -> None:
    """Register settings and every command with GDB once; later calls do nothing."""
    global _loaded
    if _loaded:
        return
    from . import commands, settings

    settings.register()
    commands.load_all()
    _loaded = True
