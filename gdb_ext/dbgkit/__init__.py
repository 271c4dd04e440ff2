"""dbgkit: the toolkit's GDB commands. Importing has no side effects; `load()` registers them."""

from __future__ import annotations

_loaded = False


def load() -> None:
    """Register settings and commands with GDB once; later calls do nothing."""
    global _loaded
    if _loaded:
        return
    from . import settings
    from .commands import memdump

    settings.register()
    memdump.register()
    _loaded = True
