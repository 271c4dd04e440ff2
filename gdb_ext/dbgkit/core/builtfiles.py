"""Where the toolkit's built files are: the recorder, the scan library and memdump-symbolize.

Two layouts (docs/install.md):

- a checkout: this package is `gdb_ext/dbgkit/` and CMake built into `build/` beside it
  (`build-demo/` for `make demo`), or into `$MEMDUMP_BUILD_DIR`; a file is at its place in the
  build tree, e.g. `build/gdb_ext/recorder/libmemdump_recorder.so`;
- an installed tree (`cmake --install build --prefix P`, or the Debian package with P = /usr):
  this package is `P/share/dbgkit/gdb/dbgkit/` and every built file is in `P/lib/dbgkit/`.

The installed tree is recognised by its own shape, so that it can be moved (a DESTDIR, another
prefix) and refers to no source tree. Each caller keeps its own environment variable naming one
file (MEMDUMP_RECORDER, MEMDUMP_SCAN_LIB, MEMDUMP_SYMBOLIZE), which wins over these rules.
"""

from __future__ import annotations

import os

__all__ = ["ANALYZE", "candidates", "installed_dir"]

# Paths are strings (os.path): `pathlib` costs GDB 9 ms of CPU to import (it brings `urllib.parse`
# and `ipaddress`), at every recording, for a few joins.

#: gdb_ext/dbgkit/core/builtfiles.py -> gdb_ext/ (a checkout) or P/share/dbgkit/gdb (installed)
_GDB_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def installed_dir(gdb_dir: str = _GDB_DIR) -> str | None:
    """P/lib/dbgkit when GDB_DIR is an installed tree's P/share/dbgkit/gdb, else None."""
    share = os.path.dirname(gdb_dir)
    prefix_share = os.path.dirname(share)
    if (os.path.basename(gdb_dir) != "gdb" or os.path.basename(share) != "dbgkit"
            or os.path.basename(prefix_share) != "share"):
        return None
    lib = os.path.join(os.path.dirname(prefix_share), "lib", "dbgkit")
    return lib if os.path.isdir(lib) else None


def candidates(build_subdir: str, name: str, gdb_dir: str = _GDB_DIR) -> list[str]:
    """Where built file NAME may be, in the order to try: `$MEMDUMP_BUILD_DIR/BUILD_SUBDIR/NAME`,
    then the installed tree's `lib/dbgkit/NAME`, then the checkout's build/ and build-demo/.
    BUILD_SUBDIR is the file's folder in a build tree (`gdb_ext/recorder`)."""
    found: list[str] = []
    build = os.environ.get("MEMDUMP_BUILD_DIR")
    if build:
        found.append(os.path.join(build, build_subdir, name))
    lib = installed_dir(gdb_dir)
    if lib is not None:
        found.append(os.path.join(lib, name))
    else:
        root = os.path.dirname(gdb_dir)
        found += [os.path.join(root, tree, build_subdir, name) for tree in ("build", "build-demo")]
    return found


#: how messages name the analyser's command: on the PATH when installed, else the checkout's
ANALYZE = "memdump-analyze" if installed_dir() is not None else "scripts/memdump-analyze"
