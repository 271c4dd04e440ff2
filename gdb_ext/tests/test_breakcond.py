"""core.breakcond: memdump break's condition as both recorders test it."""

from __future__ import annotations

import re
import struct
from pathlib import Path

from dbgkit.core import breakcond
from dbgkit.core.breakcond import ON, BreakCondition, last_event, tag_hash
from dbgkit.core.recorder import OPS

REPO = Path(__file__).resolve().parents[2]


def test_the_struct_has_control_hs_layout() -> None:
    text = (REPO / "gdb_ext" / "recorder" / "control.h").read_text()
    body = re.search(r"struct mdr_break \{(.*?)\};", text, re.S).group(1)
    words = 0
    for line in body.splitlines():
        line = re.sub(r"/\*.*", "", line).strip()
        if not line or line.startswith("*"):
            continue
        m = re.search(r"\[(.*?)\]", line)
        words += {"2 * MDR_BREAK_RANGES": 2 * breakcond.RANGES,
                  "MDR_BREAK_PCS": breakcond.PCS}[m.group(1)] if m else 1
    assert words == breakcond.FIELDS == len(BreakCondition(frozenset()).words()) // 8


def test_size_tag_and_count() -> None:
    c = BreakCondition(frozenset(ON["alloc"]), size_min=100, size_max=100, tag="physics",
                       count=2)
    assert not c.matches("malloc", (100,), 1, "audio", ())
    assert not c.matches("malloc", (99,), 2, "physics", ())
    assert not c.matches("free", (0x10,), 3, "physics", ())
    assert not c.matches("calloc", (10, 10), 4, "physics", ())  # the first match
    assert c.matches("realloc", (0x10, 100), 5, "physics", ())  # the second
    assert not c.matches("malloc", (100,), 6, "physics", ())    # the third
    assert c.hits == 3


def test_releases_ignore_the_size_and_functions_need_a_frame_inside() -> None:
    c = BreakCondition(frozenset(ON["free"]), function="main", ranges=[(0x1000, 0x1100)])
    assert not c.matches("free", (0x10,), 1, None, (0x2000, 0x3000))
    assert c.matches("delete", (0x10,), 2, None, (0x2000, 0x10FF))
    assert not c.matches("malloc", (8,), 3, None, (0x1000,))


def test_a_function_not_found_matches_nothing_in_the_recorder() -> None:
    words = struct.unpack("<93Q", BreakCondition(frozenset({"malloc"}), function="gone").words())
    assert words[7:10] == (1, 1, 1)  # one empty range: no pc is in it


def test_words_and_last_event() -> None:
    c = BreakCondition(frozenset({"malloc", "free"}), size_min=8, size_max=64, seq=7,
                       tag="ai", count=3, frames=(("/bin/app", 0x1000), ("/bin/app", 0x2000)),
                       pcs=(0x401000, 0x402000))
    w = struct.unpack("<93Q", c.words())
    assert w[0] == 1 << OPS.index("malloc") | 1 << OPS.index("free")
    assert w[1:7] == (8, 64, 7, tag_hash("ai"), 3, 0)
    assert w[24:27] == (2, 0x401000, 0x402000)
    raw = bytearray(c.words())
    struct.pack_into("<4Q", raw, 89 * 8, 12, OPS.index("free"), 0, 0x5000)
    assert last_event(bytes(raw)) == (12, "free", 0, 0x5000)


def test_tag_hash_is_fnv1a_of_at_most_255_bytes() -> None:
    assert tag_hash("") == 0xCBF29CE484222325
    assert tag_hash("a") == 0xAF63DC4C8601EC8C
    assert tag_hash("x" * 300) == tag_hash("x" * 255)
