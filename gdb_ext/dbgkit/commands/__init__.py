"""One module per GDB command, named after it; base holds the framework they share."""

from __future__ import annotations

import importlib

FRAMEWORK = ("base",)


def command_modules() -> list[str]:
    """Names of the modules that each define one command (every module here but the framework)."""
    import pkgutil  # gdb_ext/memdump.py loads one command by name, without listing them

    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in FRAMEWORK)


def load(name: str) -> None:
    """Import the module of the command NAME (it registers the command) and create it in GDB;
    the other commands' modules are not imported."""
    from . import base

    importlib.import_module(f"{__name__}.{name}")
    base.install()


def load_all() -> None:
    """Import every command module (each registers its command) and create them in GDB."""
    from . import base

    for name in command_modules():
        importlib.import_module(f"{__name__}.{name}")
    base.install()
