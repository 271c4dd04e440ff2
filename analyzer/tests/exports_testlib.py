"""Helpers of the exports' tests: the real readers (go tool pprof, ms_print) and golden files.

Golden files change only with MEMDUMP_UPDATE_GOLDEN=1; a missing one is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zlib
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
    """`go tool pprof OPTIONS PROFILE`'s output (it must succeed), in the words of the pprof of
    Debian 12's go 1.19: `-raw` lists a line as `FUNCTION FILE:LINE s=START`, without the
    `:COLUMN` newer pprofs add (profile.proto's Line.column, which memdump does not write)."""
    # HOME stays: go 1.25+ builds `go tool pprof` on first use and caches it under it
    env = {**os.environ, "PPROF_TMPDIR": str(profile.parent)}
    proc = subprocess.run([go(), "tool", "pprof", *options, str(profile)], capture_output=True,
                          text=True, timeout=READER_TIMEOUT, check=False, env=env,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return re.sub(r"(:\d+):0 s=(\d+)", r"\1 s=\2", proc.stdout) if "-raw" in options \
        else proc.stdout


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


def chromium(url: str, tmp: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """Headless Debian chromium on URL (a file:// page), with its console on stderr."""
    program = shutil.which("chromium")
    if program is None:
        pytest.fail("chromium is not installed (scripts/setup.sh installs it)", pytrace=False)
    profile = tmp / "chromium-profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [program, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
         "--enable-logging=stderr", "--v=0", "--no-first-run", *options, url],
        capture_output=True, text=True, timeout=READER_TIMEOUT, check=False,
        stdin=subprocess.DEVNULL, env={**os.environ, "HOME": str(tmp)})


def console_messages(stderr: str) -> list[str]:
    """The page's console messages (and uncaught errors) in chromium's log."""
    return re.findall(r":CONSOLE(?:[:(]\d+\)?)?\] (.*)", stderr)


def page_screenshot(page: Path, tmp: Path, height: int) -> tuple[int, int, list[bytes]]:
    """`png_pixels` of an HTML page's screenshot in headless chromium, 1100 pixels wide and
    `height` high; the page logged its "ready" and nothing else (no error)."""
    shot = tmp / "shot.png"
    proc = chromium(page.as_uri(), tmp, f"--window-size=1100,{height}", f"--screenshot={shot}")
    assert proc.returncode == 0 and shot.is_file(), proc.stderr
    messages = console_messages(proc.stderr)
    assert len(messages) == 1 and messages[0].startswith('"memdump report ready", source: '), \
        messages
    return png_pixels(shot)


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG (what chromium's
    --screenshot writes), decoded with the standard library."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, header = 8, b"", b""
    while at < len(data):
        size = int.from_bytes(data[at:at + 4], "big")
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + size]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        at += 12 + size
    width, height = int.from_bytes(header[0:4], "big"), int.from_bytes(header[4:8], "big")
    depth, colour, interlace = header[8], header[9], header[12]
    assert (depth, interlace) == (8, 0) and colour in (2, 6), header
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line) if bpp == 3 else bytes(v for j, v in enumerate(line) if j % 4 != 3))
        prev = line
    return width, height, rows


def colour_count(rows: list[bytes], hex_colour: str) -> int:
    """How many pixels have exactly this colour (`#rrggbb`)."""
    rgb = bytes.fromhex(hex_colour[1:])
    return sum(sum(1 for x in range(0, len(row), 3) if row[x:x + 3] == rgb) for row in rows)
