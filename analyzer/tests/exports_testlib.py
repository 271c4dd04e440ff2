"""Helpers of the exports' tests: the real readers (go tool pprof, ms_print) and golden files.

Golden files change only with MEMDUMP_UPDATE_GOLDEN=1; a missing one is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, REPO

READER_TIMEOUT = 120


def go() -> str:
    """`go` on PATH, or where Debian's golang-go and the upstream tarball put it."""
    for candidate in (shutil.which("go"), "/usr/lib/go/bin/go", "/usr/local/go/bin/go"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("go is not installed (scripts/setup.sh installs golang-go)", pytrace=False)


def pprof(profile: Path, *options: str) -> str:
    """`go tool pprof OPTIONS PROFILE`'s output (it must succeed)."""
    env = {**os.environ, "PPROF_TMPDIR": str(profile.parent), "HOME": str(profile.parent)}
    proc = subprocess.run([go(), "tool", "pprof", *options, str(profile)], capture_output=True,
                          text=True, timeout=READER_TIMEOUT, check=False, env=env,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def ms_print(path: Path) -> str:
    if shutil.which("ms_print") is None:
        pytest.fail("ms_print is missing (valgrind: scripts/setup.sh installs it)", pytrace=False)
    proc = subprocess.run(["ms_print", str(path)], capture_output=True, text=True,
                          timeout=READER_TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def ms_print_peak(text: str) -> tuple[int, int]:
    """(peak snapshot's number, its useful heap bytes) from ms_print's output."""
    m = re.search(r"Detailed snapshots: \[([^\]]*)\]", text)
    assert m is not None, text
    peak = [int(s.split()[0]) for s in m.group(1).split(", ") if "(peak)" in s]
    assert len(peak) == 1, m.group(0)
    row = re.search(rf"^\s+{peak[0]}\s+[\d,]+\s+[\d,]+\s+([\d,]+)\s", text, re.M)
    assert row is not None, text
    return peak[0], int(row.group(1).replace(",", ""))


def golden(name: str, actual: str) -> None:
    """Compare with fixtures/NAME (rewritten with MEMDUMP_UPDATE_GOLDEN=1)."""
    path = FIXTURES / name
    if os.environ.get("MEMDUMP_UPDATE_GOLDEN") == "1":
        path.write_text(actual)
    assert path.is_file(), f"golden file {path} is missing (MEMDUMP_UPDATE_GOLDEN=1 writes it)"
    assert actual == path.read_text()


def doc_block(marker: str) -> str:
    """The first fenced block after `marker` in docs/exports.md."""
    doc = (REPO / "docs" / "exports.md").read_text()
    assert marker in doc, marker
    m = re.search(r"```[a-z]*\n(.*?)```", doc.split(marker, 1)[1], re.S)
    assert m is not None
    return m.group(1)
