"""Fidelity: memdump's first error on each heap-error class against valgrind's and an ASan build's,
measured in the same test (docs/heap-errors.md, "Fidelity: memdump, valgrind and ASan per class").

Each row of tests/fixtures/heap_errors.tsv (tests/programs/heap_errors.c, heap_errors_cpp.cpp: one
class a mode) is run under valgrind memcheck, as its ASan build, and under scripts/memdump.sh twice,
with guard pages on every block (`--guard all`; `all,under` for the underflow) and with red zones
(`--redzones`); each tool's first error is put in the same words: its kind, the access's size,
where it is against the block (offset, side, block size) and the line its stack names first in the
program (the marked ERROR line, the block's marked FREE, or the exit). memdump's must be
valgrind's where CLAIMS says it is (the access's size excepted: a fault does not tell it, and a
red zone sees the bytes changed, not the access); everywhere else the difference is the table's.
The table in docs/heap-errors.md is these rows: a test fails when a cell drifts from what was
measured (MEMDUMP_UPDATE_GOLDEN=1 rewrites the row).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from memdump_e2e import REPO, Site, marker, program
from test_heap_error_programs import (
    IDS,
    NONE,
    ROWS,
    Row,
    asan_answer,
    asan_program,
    valgrind_answer,
)

pytestmark = [pytest.mark.one_recorder,
              pytest.mark.skipif(shutil.which("valgrind") is None,
                                 reason="valgrind is missing (scripts/setup.sh installs it)")]
SCRIPT = REPO / "scripts" / "memdump.sh"
DOC = REPO / "docs" / "heap-errors.md"
BEGIN = "<!-- fidelity table: tests/e2e/test_heap_error_fidelity.py -->"
END = "<!-- end of the fidelity table -->"
TIMEOUT = 300

#: memdump's options per class for the guard-page column (the rest: `--guard all`)
GUARD_SPEC = {"new-array-underflow": "all,under"}
#: where memdump's first error is valgrind's (kind, place against the block, line), per column
CLAIMS = {
    "guard": {"past-end-write", "read-loop", "memcpy-overflow", "slack-overflow", "uaf-read",
              "uaf-write", "uaf-thread", "stale-reused", "new-array-underflow", "double-free",
              "interior-free", "delete-array-trivial", "neighbour-read", "clean"},
    "redzones": {"double-free", "delete-array-trivial", "neighbour-read", "clean"},
}

_VG_WHAT = re.compile(r"Invalid (read|write) of size (\d+)")
_VG_AUX = re.compile(r"(\d+) bytes (after|before|inside) a block of size (\d+) (alloc'd|free'd)")
_ASAN_AUX = re.compile(r"(\d+) bytes (to the right of|to the left of|inside of) (\d+)-byte region")
_ASAN_SIDE = {"to the right of": "after", "to the left of": "before", "inside of": "inside"}
_ASAN_KIND = {"double-free": "double free", "bad-free": "invalid free",
              "alloc-dealloc-mismatch": "mismatched free"}
_RZ_SIDE = {"heap-block-overrun": "after", "heap-block-underrun": "before",
            "write-after-free": "inside"}


@dataclass(frozen=True)
class First:
    """A tool's first error in the table's words."""

    kind: str   # "invalid write", "double free", "heap block overrun", ...
    size: str   # the access's size, "-" when the tool does not tell it
    place: str  # "OFFSET SIDE SIZE" against the block ("0 after 40"), "-" when not told
    line: str   # "ERROR", "FREE" (the block's marked lines), "exit", "line N" or "-"

    def cell(self) -> str:
        return f"{self.kind} ({self.size}), {self.place}, at {self.line}"

    def against(self, other: First) -> list[str]:
        """What differs from OTHER's (valgrind's) error: "kind", "place", "line"; the access's
        size is not compared (a fault does not tell it; a red zone sees the bytes changed, and
        its kind names the write), nor the place where memdump does not tell it (a free)."""
        kind = {"heap block overrun": "invalid write", "heap block underrun": "invalid write",
                "write after free": "invalid write"}.get(self.kind, self.kind)
        return [name for name, mine, theirs in (("kind", kind, other.kind),
                                                ("place", self.place, other.place),
                                                ("line", self.line, other.line))
                if mine != theirs and not (name == "place" and mine == NONE)]


def cell(first: First | None) -> str:
    return "none" if first is None else first.cell()


def _line(row: Row, site: Site | None) -> str:
    if site is None:
        return NONE
    for kind, name in (("ERROR", row.mode), ("FREE", row.free), ("FREE", row.mode)):
        try:
            if name != NONE and marker(row.source, name, kind) == site:
                return kind
        except AssertionError:
            continue
    return f"line {site.line}"


def valgrind_first(row: Row, tmp: Path) -> First | None:
    answer, _ = valgrind_answer(row, tmp)
    if answer is None:
        return None
    aux = _VG_AUX.fullmatch(answer.aux)
    place = NONE if aux is None else f"{aux.group(1)} {aux.group(2)} {aux.group(3)}"
    if (what := _VG_WHAT.fullmatch(answer.what)) is not None:
        kind, size = f"invalid {what.group(1)}", what.group(2)
    elif answer.kind == "MismatchedFree":
        kind, size = "mismatched free", NONE
    else:
        kind = "double free" if aux is not None and aux.group(4) == "free'd" else "invalid free"
        size = NONE
    return First(kind, size, place, _line(row, answer.error))


def asan_first(row: Row, tmp: Path) -> First | None:
    env = {**os.environ, "ASAN_OPTIONS": "halt_on_error=1:detect_leaks=1:symbolize=1"}
    proc = subprocess.run([str(asan_program(row.program)), row.mode], cwd=tmp,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False, env=env)
    answer = asan_answer(row, proc.stderr)
    if answer is None:
        return None
    aux = _ASAN_AUX.fullmatch(answer.aux)
    place = (NONE if aux is None
             else f"{aux.group(1)} {_ASAN_SIDE[aux.group(2)]} {aux.group(3)}")
    if answer.what != NONE:
        access, _, size = answer.what.partition(" of size ")
        kind = f"invalid {access.lower()}"
    else:
        kind, size = _ASAN_KIND[answer.kind], NONE
    return First(kind, size, place, _line(row, answer.error))


def memdump_first(row: Row, tmp: Path, *options: str) -> First | None:
    """memdump.sh's first error (its JSON report's `errors`), with OPTIONS."""
    report = tmp / "memdump.json"
    proc = subprocess.run([str(SCRIPT), *options, "--no-compact", "--json", str(report),
                           "-o", str(tmp / "m.memdump"), str(program(row.program)), row.mode],
                          cwd=tmp, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = json.loads(report.read_text())["errors"]
    if not errors:
        return None
    error = errors[0]
    kind = error["kind"].replace("-", " ")
    block = error.get("block")
    if block is not None:  # a guard page's fault
        place = f"{block['offset']} {block['relation']} {block['bytes']}"
    elif error["kind"] in _RZ_SIDE:  # a red zone found changed
        place = f"{error['offset']} {_RZ_SIDE[error['kind']]} {error['allocated_at']['bytes']}"
        if error["kind"] == "heap-block-underrun":  # valgrind names the access's first byte
            place = f"{error['offset'] + error['bytes']} before {error['allocated_at']['bytes']}"
    else:
        place = NONE
    source = row.source
    site = next((Site(os.path.basename(f["file"]), f["line"]) for f in error["stack"] or []
                 if f["file"] and os.path.basename(f["file"]) == source), None)
    found = "exit" if error.get("found") == "exit" and site is None else _line(row, site)
    return First(kind, NONE, place, found)


def table_row(row: Row, cells: list[str]) -> str:
    return f"| {row.program} {row.mode} | " + " | ".join(cells) + " |"


def _documented() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    body = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    return {" ".join(line.split(" | ")[0].lstrip("| ").split()): line
            for line in body.strip().splitlines()[2:]}


def _update(key: str, line: str) -> None:
    text = DOC.read_text(encoding="utf-8")
    old = _documented().get(key)
    head, rest = text.split(BEGIN + "\n", 1)
    if old is not None:
        rest = rest.replace(old + "\n", line + "\n", 1)
    else:
        rest = rest.replace(END, line + "\n" + END, 1)
    DOC.write_text(head + BEGIN + "\n" + rest, encoding="utf-8")


def agreement(row: Row, vg: First | None, guard: First | None, redzones: First | None) -> str:
    """Per memdump column, "same" as valgrind's or what differs; CLAIMS held."""
    said = []
    for column, first in (("guard", guard), ("redzones", redzones)):
        if first is None or vg is None:
            differs = [] if first is None and vg is None else ["found"]
            word = "missed" if vg else "a false positive"
        else:
            differs = first.against(vg)
            word = "differs in " + ", ".join(differs)
        said.append(f"{column}: {word if differs else 'same'}")
        if row.mode in CLAIMS[column]:
            assert not differs, (column, first, vg)
    return "; ".join(said)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_first_error_against_valgrind_and_asan(row: Row, tmp_path: Path) -> None:
    for name in ("vg", "asan", "guard", "rz"):
        (tmp_path / name).mkdir()
    vg = valgrind_first(row, tmp_path / "vg")
    asan = asan_first(row, tmp_path / "asan")
    guard = memdump_first(row, tmp_path / "guard", "--guard", GUARD_SPEC.get(row.mode, "all"))
    redzones = memdump_first(row, tmp_path / "rz", "--redzones")
    line = table_row(row, [cell(vg), cell(asan), cell(guard), cell(redzones),
                           agreement(row, vg, guard, redzones)])
    key = f"{row.program} {row.mode}"
    if os.environ.get("MEMDUMP_UPDATE_GOLDEN") == "1":
        _update(key, line)
    assert _documented().get(key) == line, "MEMDUMP_UPDATE_GOLDEN=1 rewrites the row"


def test_the_table_has_every_class_once() -> None:
    assert list(_documented()) == [f"{row.program} {row.mode}" for row in ROWS]
