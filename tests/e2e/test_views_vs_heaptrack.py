"""heaptrack is the reference of the views' definitions: on one small C program, memdump's
`temporary`, `hotspots` and `peak` views must give heaptrack_print's figures for the program's
own allocation sites (heaptrack also counts what its own libstdc++ allocates at start-up, so the
whole run's totals differ; the sites compare)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from memdump_e2e import analyze_raw, gdb_argv, run_gdb

TIMEOUT = 300

if shutil.which("heaptrack") is None or shutil.which("heaptrack_print") is None:
    pytest.fail("heaptrack is missing: scripts/setup.sh installs it", pytrace=False)

SOURCE = """\
#include <stdlib.h>
#include <string.h>
static void *keep[10];
__attribute__((noinline)) static void temporaries(int n) {
    for (int i = 0; i < n; i++) {
        char *p = malloc(64 + i);  // TEMP
        memset(p, i, 64);
        free(p);
    }
}
__attribute__((noinline)) static void grow(void) {
    char *p = NULL;
    for (int i = 1; i <= 5; i++) {
        p = realloc(p, 1000 * i);  // GROW
        memset(p, i, 1000 * i);
        void *q = malloc(8);  // BETWEEN
        free(q);
    }
    free(p);
}
__attribute__((noinline)) static void resize(void) {
    for (int i = 0; i < 3; i++) {
        char *s = malloc(10);  // SMALL
        s = realloc(s, 20000);  // RESIZE
        memset(s, i, 20000);
        free(s);
    }
}
__attribute__((noinline)) static void peak(void) {
    for (int i = 0; i < 10; i++)
        keep[i] = malloc(100000 + i);  // PEAK
    for (int i = 0; i < 10; i++)
        free(keep[i]);
}
int main(void) {
    temporaries(100);
    grow();
    resize();
    peak();
    return 0;
}
"""

#: heaptrack_print's sizes: 1000-based units with two decimals (`1000.45K`, `64B`)
_UNITS = {"B": 1, "K": 10**3, "M": 10**6, "G": 10**9}


def _site(name: str) -> int:
    return next(i for i, line in enumerate(SOURCE.splitlines(), 1) if f"// {name}" in line)


def _heaptrack_size(nbytes: int) -> str:
    """A size as heaptrack_print writes it."""
    if nbytes < 1000:
        return f"{nbytes}B"
    for unit in ("K", "M", "G"):
        value = nbytes / _UNITS[unit]
        if value < 1000 or unit == "G":
            return f"{value:.2f}{unit}"
    raise AssertionError(nbytes)


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^([A-Z][A-Z ]+)$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def _by_site(section: str, pattern: str, line: int) -> tuple[str, ...]:
    """The figures of the entry of `section` whose innermost frame is at prog.c:LINE."""
    m = re.search(pattern + r" from\n\S+\n  at \S*prog\.c:" + str(line) + "\n", section)
    assert m, section
    return m.groups()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    tmp = tmp_path_factory.mktemp("heaptrack")
    (tmp / "prog.c").write_text(SOURCE)
    subprocess.run(["cc", "-O0", "-g", "-o", str(tmp / "prog"), str(tmp / "prog.c")], check=True)
    subprocess.run(["heaptrack", "-o", str(tmp / "trace"), str(tmp / "prog")], cwd=tmp,
                   capture_output=True, check=True, timeout=TIMEOUT)
    trace = next(tmp.glob("trace.*"))
    printed = subprocess.run(["heaptrack_print", "-f", str(trace)], capture_output=True,
                             text=True, check=True, timeout=TIMEOUT).stdout
    dump = tmp / "prog.memdump"
    run_gdb(gdb_argv([f"memdump -o {dump}", "run"], [tmp / "prog"]), dump)
    return _sections(printed), dump


def _view(dump: Path, *args: str) -> dict:  # type: ignore[type-arg]
    proc = analyze_raw(dump, *args, "--format", "json", "--top", "0")
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    return json.loads(proc.stdout)


def _row(rows: list[dict], line: int) -> dict:  # type: ignore[type-arg]
    found = [r for r in rows if r["stack"][0]["line"] == line
             and r["stack"][0]["file"].endswith("prog.c")]
    assert len(found) == 1, rows
    return found[0]


def test_temporary_allocations_as_heaptrack(recorded: tuple[dict[str, str], Path]) -> None:
    sections, dump = recorded
    mine = _view(dump, "temporary")["stacks"]
    section = sections["MOST TEMPORARY ALLOCATIONS"]
    figures = {}
    for name in ("TEMP", "BETWEEN", "SMALL", "RESIZE"):
        theirs = _by_site(section, r"(\d+) temporary allocations of (\d+) allocations in total "
                          r"\([\d.]+%\)", _site(name))
        row = _row(mine, _site(name))
        assert (str(row["temporary"]), str(row["allocations"])) == theirs, name
        figures[name] = row["temporary"]
    # a realloc releasing the block the thread allocated last makes it temporary, in both
    assert figures == {"TEMP": 100, "BETWEEN": 5, "SMALL": 3, "RESIZE": 3}
    # grow's reallocs have an allocation in between: not temporary, for neither
    assert f"prog.c:{_site('GROW')}\n" not in section
    assert not [r for r in mine if r["stack"][0]["line"] == _site("GROW")]


def test_calls_and_peak_as_heaptrack(recorded: tuple[dict[str, str], Path]) -> None:
    sections, dump = recorded
    calls = {_row(_view(dump, "hotspots", "--sort", "calls")["by_calls"], _site(n))[
        "allocations"] for n in ("TEMP",)}
    theirs = _by_site(sections["MOST CALLS TO ALLOCATION FUNCTIONS"],
                      r"(\d+) calls to allocation functions with \S+ peak consumption",
                      _site("TEMP"))
    assert {int(theirs[0])} == calls == {100}
    peak = _row(_view(dump, "peak")["stacks"], _site("PEAK"))
    consumed, over = _by_site(sections["PEAK MEMORY CONSUMERS"],
                              r"(\S+) peak memory consumed over (\d+) calls", _site("PEAK"))
    assert (consumed, int(over)) == (_heaptrack_size(peak["bytes"]), peak["blocks"])
    assert peak["bytes"] == sum(100000 + i for i in range(10))
