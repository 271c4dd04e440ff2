"""memdump_format.h, the C recorder's constants, is what scripts/gen-format-header.py writes from
dumpformat's tables today (a drift test), and its enum is the order GDB reads."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from analyzer_testlib import REPO
from memdump_analyzer import formatheader
from memdump_analyzer.dumpformat import FORMAT_LINE, OPERATIONS, SHORT_OPS
from memdump_analyzer.formatheader import GENERATOR, HEADER_PATH, c_header

HEADER = REPO / HEADER_PATH


def test_the_committed_header_is_the_generated_one() -> None:
    assert HEADER.read_text(encoding="utf-8") == c_header(), (
        f"{HEADER_PATH} differs from the format's tables: run {GENERATOR} and commit it")


def test_the_header_follows_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    text = c_header()
    line = FORMAT_LINE.replace("\n", "\\n")
    assert f'#define MEMDUMP_FORMAT_LINE "{line}"' in text
    enum = re.findall(r"MEMDUMP_OP_(\w+) = (\d+),", text)
    assert [name for name, _ in enum] == [op.replace("[]", "_array").upper() for op in OPERATIONS]
    assert [int(n) for _, n in enum] == list(range(len(OPERATIONS)))
    rows = re.findall(r'X\((\w+), "([^"]+)", (\d+), "([^"]*)", (\d+)\)', text)
    short = {op: tag for tag, op in SHORT_OPS.items()}
    assert [(name, int(n), tag, int(m)) for _, name, n, tag, m in rows] == [
        (op, len(op), short.get(op, ""), len(short.get(op, ""))) for op in OPERATIONS]
    assert '#define MEMDUMP_TAG_SHORT_NEW_ARRAY "+a"' in text
    assert "#define MEMDUMP_TAG_END \"end\"" in text
    monkeypatch.setattr(formatheader, "VERSION", (2, 8))  # a new version: a new header
    assert c_header() != text
    assert '"MEMDUMP 2.8\\n"' in c_header()


def test_the_generator_checks_the_committed_header() -> None:
    run = subprocess.run([sys.executable, str(REPO / GENERATOR), "--check"],
                         capture_output=True, text=True, check=False)
    assert (run.returncode, run.stderr) == (0, "")


def test_control_h_s_operations_are_the_format_s() -> None:
    """GDB reads enum mdr_op's numbers (core/recorder.py's OPS): control.h lists them in the
    format's order (its static asserts check the same at compile time)."""
    control = (REPO / "gdb_ext" / "recorder" / "control.h").read_text(encoding="utf-8")
    body = re.search(r"enum mdr_op \{(.*?)\};", control, re.S)
    assert body is not None
    names = re.findall(r"MDR_(\w+)", re.sub(r"/\*.*?\*/", "", body.group(1)))
    assert names == [op.replace("[]", "_array").upper() for op in OPERATIONS] + ["OP_COUNT"]
    assert "#include \"memdump_format.h\"" in control
    children = (REPO / "gdb_ext" / "recorder" / "children.c").read_text(encoding="utf-8")
    assert "MEMDUMP 2" not in children and "MEMDUMP_FORMAT_LINE" in children
