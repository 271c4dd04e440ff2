"""heaptrack's tools on memdump's recordings (`--format heaptrack`, docs/exports.md): on C++
programs recorded once by memdump and once by heaptrack, heaptrack_print says the same of both
files, but for what the two recordings measure differently (run time, RSS, module paths)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from memdump_e2e import REPO, program

if shutil.which("heaptrack") is None or shutil.which("heaptrack_print") is None:
    pytest.fail("heaptrack is missing: scripts/setup.sh installs it", pytrace=False)

#: the lines of heaptrack_print's summary both recordings agree on
SUMMARY = ("calls to allocation functions:", "temporary memory allocations:",
           "peak heap memory consumption:", "total memory leaked:")


def _printed(path: Path) -> str:
    return subprocess.run(["heaptrack_print", str(path)], capture_output=True, text=True,
                          timeout=120, check=True).stdout


def _summary(text: str) -> list[str]:
    """The summary lines, without the rates (per second of each recording's run time)."""
    return [re.sub(r" \(\d+/s\)$", "", line) for line in text.splitlines()
            if line.startswith(SUMMARY)]


def _sites(text: str) -> list[tuple[int, str]]:
    """MOST CALLS TO ALLOCATION FUNCTIONS: (calls, file:line) of each site with a source line
    (libstdc++'s pool, without symbols, is named by an address), sorted. The functions' names
    may be spelled differently (docs/exports.md, "heaptrack")."""
    section = text.split("MOST CALLS TO ALLOCATION FUNCTIONS", 1)[1].split("\n\n\n", 1)[0]
    return sorted((int(calls), line) for calls, line in re.findall(
        r"^(\d+) calls to allocation functions with .* from\n\S.*\n  at (\S+)\n", section,
        re.M))


@pytest.mark.parametrize("name", ["leak_new", "pool_leak_cpp", "no_leak_cpp"])
def test_heaptrack_print_says_the_same_of_both_recordings(tmp_path: Path, name: str) -> None:
    prog = program(name)
    subprocess.run([str(REPO / "scripts" / "memdump.sh"), "-o", str(tmp_path / "run.memdump"),
                    str(prog)], capture_output=True, timeout=300, check=True, cwd=tmp_path)
    subprocess.run([str(REPO / "scripts" / "memdump-analyze"), "--format", "heaptrack", "-o",
                    str(tmp_path / "ours.gz"), str(tmp_path / "run.memdump")], check=True,
                   timeout=300)
    subprocess.run(["heaptrack", "-o", str(tmp_path / "theirs"), str(prog)], cwd=tmp_path,
                   capture_output=True, timeout=300, check=True)
    ours = _printed(tmp_path / "ours.gz")
    (theirs_file,) = tmp_path.glob("theirs.*")
    theirs = _printed(theirs_file)
    assert _summary(ours) == _summary(theirs) and len(_summary(ours)) == 4, ours + theirs
    assert _sites(ours) == _sites(theirs) and _sites(ours), ours + theirs
