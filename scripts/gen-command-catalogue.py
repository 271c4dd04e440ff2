#!/usr/bin/env python3
"""Write gdb_ext/dbgkit/commands/catalogue.py from the command modules, under GDB: each command's
name, GDB class and `help` text (what GDB shows before the command's module is imported)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = ROOT / "gdb_ext" / "dbgkit" / "commands" / "catalogue.py"

SCRIPT = f"""\
import sys
sys.path[:0] = [{str(ROOT / "gdb_ext")!r}, {str(ROOT / "analyzer")!r}]
import gdb
from dbgkit import commands
gdb.write(commands.catalogue_source())
"""


def main() -> int:
    script = "python " + "; ".join(SCRIPT.splitlines())
    proc = subprocess.run(["gdb", "-nx", "-batch", "-ex", script],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or proc.stderr:
        sys.exit(f"gen-command-catalogue: GDB failed: {proc.stderr.strip()}")
    CATALOGUE.write_text(proc.stdout)
    print(f"gen-command-catalogue: wrote {CATALOGUE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
