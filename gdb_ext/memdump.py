"""Source this file in GDB to get the `memdump` command: `gdb -ex 'source gdb_ext/memdump.py' ...`.

It only puts the toolkit's packages on sys.path and loads the settings and the memdump command,
not the other commands nor the printers (gdb_ext/dbgkit.py loads them all); the command's module
is imported at its first use. Loading twice, or before or after gdb_ext/dbgkit.py, is harmless.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
for _path in (_here, os.path.join(os.path.dirname(_here), "analyzer")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import dbgkit  # noqa: E402

dbgkit.load("memdump")
