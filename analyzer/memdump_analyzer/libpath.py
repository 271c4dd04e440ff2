"""Where the analyser's C library, libmemdump_core.so (analyzer/native/), is found, and whether it
may be used: the replay (native.py) and the compact encoding (compact.py) load it by these rules."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["LIB_NAME", "enabled", "library_path"]

LIB_NAME = "libmemdump_core.so"


def enabled() -> bool:
    """Whether the analyser may use the library (MEMDUMP_NATIVE=0: never)."""
    return os.environ.get("MEMDUMP_NATIVE", "1") != "0"


def library_path() -> Path:
    """Where the library is looked for (the first rule that applies; it may not exist)."""
    explicit = os.environ.get("MEMDUMP_CORE_LIB")
    if explicit:
        return Path(explicit)
    beside = Path(__file__).resolve().parent / LIB_NAME
    if beside.exists():
        return beside
    build = os.environ.get("MEMDUMP_BUILD_DIR")
    if build:
        return Path(build) / "analyzer" / "native" / LIB_NAME
    # analyzer/memdump_analyzer/libpath.py -> the checkout, or an installed tree's P/share/dbgkit,
    # whose built files are in P/lib/dbgkit (docs/install.md)
    root = Path(__file__).resolve().parents[2]
    if root.name == "dbgkit" and root.parent.name == "share":
        return root.parent.parent / "lib" / "dbgkit" / LIB_NAME
    return root / "build" / "analyzer" / "native" / LIB_NAME
