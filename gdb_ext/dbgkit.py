"""Source this file in GDB to get every dbgkit command: `gdb -ex 'source gdb_ext/dbgkit.py' ...`.

It only puts the toolkit's packages on sys.path and loads them, each command's module imported at
the command's first use; loading twice, or after gdb_ext/memdump.py, is harmless and changes no
GDB setting.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
for _path in (_here, os.path.join(os.path.dirname(_here), "analyzer")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

# The package gdb_ext/dbgkit/ shadows this file of the same name: a directory package comes
# before a module in the same sys.path entry (the import system's FileFinder order).
import dbgkit  # noqa: E402

dbgkit.load()
