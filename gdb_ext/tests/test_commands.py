"""The command framework under a real GDB: loading, registry, preconditions, debug setting."""

from __future__ import annotations

import subprocess
from pathlib import Path

# GDB settings a loader must leave as they were (STYLE.md: loading never changes them).
WATCHED = ("pagination", "confirm", "print pretty", "print elements", "height", "width",
           "style enabled", "python print-stack", "breakpoint pending", "auto-load safe-path")


def _gdb(gdb_path: str, commands: list[str]) -> subprocess.CompletedProcess[str]:
    argv = [gdb_path, "-nx", "-batch"]
    for command in commands:
        argv += ["-ex", command]
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)


def test_loading_twice_by_either_file_is_harmless(gdb_path: str, gdb_ext_dir: Path) -> None:
    dbgkit, memdump = gdb_ext_dir / "dbgkit.py", gdb_ext_dir / "memdump.py"
    shows = [f"show {name}" for name in WATCHED]
    proc = _gdb(gdb_path, [*shows, "echo ---\\n",
                           f"source {dbgkit}", f"source {memdump}",
                           f"source {dbgkit}", f"source {memdump}",
                           *shows, "echo ---\\n", "help memdump"])
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    before, after, helped = proc.stdout.split("---\n")
    assert before == after
    assert helped.count("usage: memdump") == 1, helped
    assert helped.startswith("memdump: record every heap operation")

