"""Where the analyser's C library, libmemdump_core.so (analyzer/native/), is found, and whether it
may be used: the replay (native.py) and the compact encoding (compact.py) load it by these rules.
Paths are strings (os.path): `pathlib` would cost every report 9 ms of CPU to import (it brings
`urllib.parse` and `ipaddress`), for three joins."""

from __future__ import annotations

import os

__all__ = ["LIB_NAME", "enabled", "library_path"]

LIB_NAME = "libmemdump_core.so"


def enabled() -> bool:
    """Whether the analyser may use the library (MEMDUMP_NATIVE=0: never)."""
    return os.environ.get("MEMDUMP_NATIVE", "1") != "0"


def library_path() -> str:
    """Where the library is looked for (the first rule that applies; it may not exist)."""
    explicit = os.environ.get("MEMDUMP_CORE_LIB")
    if explicit:
        return explicit
    here = os.path.dirname(os.path.realpath(__file__))
    beside = os.path.join(here, LIB_NAME)
    if os.path.exists(beside):
        return beside
    build = os.environ.get("MEMDUMP_BUILD_DIR")
    if build:
        return os.path.join(build, "analyzer", "native", LIB_NAME)
    # analyzer/memdump_analyzer/libpath.py -> the checkout, or an installed tree's P/share/dbgkit,
    # whose built files are in P/lib/dbgkit (docs/install.md)
    root = os.path.dirname(os.path.dirname(here))
    parent = os.path.dirname(root)
    if os.path.basename(root) == "dbgkit" and os.path.basename(parent) == "share":
        return os.path.join(os.path.dirname(parent), "lib", "dbgkit", LIB_NAME)
    return os.path.join(root, "build", "analyzer", "native", LIB_NAME)
