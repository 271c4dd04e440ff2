"""DumpWriter: the spec's worked example is what the writer produces; interning, escaping."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "gdb_ext"))

from dbgkit.core.dumpwriter import DumpWriter, FrameInfo, InlinedInto, escape  # noqa: E402
from dbgkit.core.heap.merge import attached_scan  # noqa: E402
from dbgkit.core.reach import ScanResult  # noqa: E402

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
OUTER = 0x7FFFF7DF018A
FRAMES = {
    OUTER: FrameInfo(LIBC, 0x2718A, "__libc_start_call_main",
                     "../sysdeps/nptl/libc_start_call_main.h", 58),
    0x55555555517E: FrameInfo("/src/leak", 0x117E, "main", "/src/leak.c", 6),
    0x55555555518C: FrameInfo("/src/leak", 0x118C, "new_node", "/src/leak.c", 3,
                              (InlinedInto("main", "/src/leak.c", 7),)),
    0x55555555519C: FrameInfo("/src/leak", 0x119C, "main", "/src/leak.c", 8),
    0x5555555551AE: FrameInfo("/src/leak", 0x11AE, "main", "/src/leak.c", 9),
    0x5555555551C0: FrameInfo("/src/leak", 0x11C0, "main", "/src/leak.c", 10),
    0x55555555521E: FrameInfo("/src/server", 0x121E, "main", "/src/server.cpp", 21),
}


def _spec_example() -> str:
    doc = (ROOT / "docs" / "dump-format.md").read_text()
    match = re.search(r"## Worked example.*?```\n(MEMDUMP.*?)```", doc, re.S)
    assert match, "docs/dump-format.md has no worked example"
    return match.group(1)


def _written(tmp_path: Path, body) -> str:  # noqa: ANN001
    path = tmp_path / "out.memdump"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    calls: list[int] = []

    def resolve(pc: int) -> FrameInfo:
        calls.append(pc)
        return FRAMES[pc]

    writer = DumpWriter(fd, resolve)
    body(writer)
    os.close(fd)
    assert len(calls) == len(set(calls)), "a program counter was resolved twice"
    return path.read_text()


def test_spec_worked_example_is_what_the_writer_writes(tmp_path: Path) -> None:
    def body(w: DumpWriter) -> None:
        for key, value in (("program", "/src/leak"), ("pid", 4242), ("arch", "x86_64"),
                           ("depth", 32), ("attached", 0), ("start", "2026-11-21T19:40:00Z"),
                           ("gdb", "13.1")):
            w.info(key, value)
        w.event(4242, "malloc", w.stack((0x55555555517E, OUTER)), 0x5555555592A0, ("16",))
        w.event(4242, "malloc", w.stack((0x55555555518C, OUTER)), 0x5555555592C0, ("16",))
        w.event(4242, "free", w.stack((0x55555555519C, OUTER)), None, ("0x5555555592a0",))
        w.event(4242, "malloc", w.stack((0x5555555551AE, OUTER)), 0x5555555592E0, ("40",))
        w.event(4242, "malloc", w.stack((0x5555555551C0, OUTER)), 0x555555559310, ("56",))
        # the list head leads its node's clique: the node's `r` record names it (format 1.2)
        result = ScanResult(
            kinds={0x5555555592C0: "definite", 0x5555555592E0: "definite",
                   0x555555559310: "indirect"},
            leaders={0x555555559310: 0x5555555592E0})
        w.scan("ok", 143360, 112, 2, result.records())
        w.end("exit", "0")

    assert _written(tmp_path, body) == _spec_example()


def test_stacks_are_interned_and_share_prefixes(tmp_path: Path) -> None:
    ids: list[int] = []

    def body(w: DumpWriter) -> None:
        ids.append(w.stack((0x55555555517E, OUTER)))
        ids.append(w.stack((0x55555555517E, OUTER)))
        ids.append(w.stack((0x55555555518C, OUTER)))
        ids.append(w.stack(()))
        w.flush()

    text = _written(tmp_path, body)
    assert ids == [2, 2, 3, 0]
    assert [line for line in text.splitlines() if line.startswith("n ")] == [
        "n 1 0 1", "n 2 1 2", "n 3 1 3"]
    assert sum(line.startswith("s ") for line in text.splitlines()) == 7


def test_sequence_numbers_cover_events_process_records_and_end(tmp_path: Path) -> None:
    def body(w: DumpWriter) -> None:
        w.event(1, "malloc", 0, 0x10, ("1",))
        w.process("signal", "SIGSEGV")
        w.end("gdb-exit")

    lines = _written(tmp_path, body).splitlines()
    assert lines[-3:] == ["e 1 1 malloc 0 0x10 1", "p 2 signal SIGSEGV", "end 3 gdb-exit -"]


def test_a_process_event_not_in_the_grammar_is_refused(tmp_path: Path) -> None:
    def body(w: DumpWriter) -> None:
        w.process("phase", "load")
        with pytest.raises(ValueError, match="unknown process event 'fork'"):
            w.process("fork", "123")
        w.end("gdb-exit")

    assert _written(tmp_path, body).splitlines()[-2:] == ["p 1 phase load", "end 2 gdb-exit -"]


@pytest.mark.parametrize(("raw", "escaped"), [
    ("plain", "plain"), ("a\\b", "a\\\\b"), ("two\nlines", "two\\nlines"), ("cr\r", "cr\\r")])
def test_escape(raw: str, escaped: str) -> None:
    assert escape(raw) == escaped


def test_inlined_frames_follow_their_frame_record(tmp_path: Path) -> None:
    """One `fi` record per function the code was inlined into, innermost first, right after the
    `f` record (with the strings they introduce) and before the node that uses the frame."""
    pc = 0x5555555551FC
    FRAMES[pc] = FrameInfo("/src/inl", 0x11FC, "std::vector<int>::reserve(unsigned long)",
                           "/usr/include/c++/12/bits/vector.tcc", 79, (
                               InlinedInto("open_session", "/src/inl.cpp", 14),
                               InlinedInto("run(int)", "/src/inl.cpp", 19),
                               InlinedInto("unknown", None, 0)))
    try:
        text = _written(tmp_path, lambda w: w.event(1, "malloc", w.stack((pc,)), 0x10, ("8",)))
    finally:
        del FRAMES[pc]
    assert text.splitlines()[1:] == [
        "s 1 /src/inl",
        "s 2 std::vector<int>::reserve(unsigned long)",
        "s 3 /usr/include/c++/12/bits/vector.tcc",
        "f 1 0x5555555551fc 1 0x11fc 2 3 79",
        "s 4 open_session",
        "s 5 /src/inl.cpp",
        "fi 1 4 5 14",
        "s 6 run(int)",
        "fi 1 6 5 19",
        "s 7 unknown",
        "fi 1 7 0 0",
        "n 1 0 1",
        "e 1 1 malloc 1 0x10 8",
    ]


def test_clock_samples_after_events_at_most_one_per_10_ms(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """sample_clock: one sample at once, then one after an event when 10 ms have passed, and one
    on demand (clock); MILLIS since the start, RSS from the callback."""
    now = [100.0]
    monkeypatch.setattr("dbgkit.core.dumpwriter.time.monotonic", lambda: now[0])
    rss = iter(range(4096, 1 << 20, 4096))

    def body(w: DumpWriter) -> None:
        w.sample_clock(99.5, lambda: next(rss))
        for step in (0.004, 0.004, 0.004, 0.0, 0.5):  # at 100.004, .008, .012, .012, .512
            now[0] += step
            w.event(7, "free", 0, None, ("0x10",))
        now[0] += 0.001
        w.clock()
        w.clock_record(3, 5)
        w.flush()

    lines = _written(tmp_path, body).splitlines()
    assert [line for line in lines if line[0] in "ce"] == [
        "c 500 4096",
        "e 1 7 free 0 - 0x10", "e 2 7 free 0 - 0x10",
        "e 3 7 free 0 - 0x10", "c 512 8192",
        "e 4 7 free 0 - 0x10",
        "e 5 7 free 0 - 0x10", "c 1012 12288",
        "c 1013 16384",
        "c 3 5",
    ]


def _attach_example(w: DumpWriter) -> None:
    """The late attach's worked example: one block recorded, five from before the recording
    found by the heap walk and scanned with it (merge.attached_scan), in `ob` records (2.7)."""
    for key, value in (("program", "/src/server"), ("pid", 5150), ("arch", "x86_64"),
                       ("depth", 32), ("attached", 1), ("start", "2026-11-28T21:30:00Z"),
                       ("gdb", "13.1")):
        w.info(key, value)
    w.event(5150, "malloc", w.stack((0x55555555521E, OUTER)), 0x55555556B2C0, ("64",))
    older = {0x55555556A2A0: 56, 0x55555556A2E0: 56, 0x55555556A320: 24, 0x55555556A340: 24,
             0x55555556A360: 40}
    labels = {0x55555556A2A0: ("Connection", "vtable"), 0x55555556A2E0: ("Connection", "vtable"),
              0x55555556A320: ("graph::Node", "vtable"), 0x55555556A340: ("graph::Node", "vtable"),
              0x55555556A360: ("char[]", "string")}
    scanned = ScanResult(
        kinds={0x55555556A2A0: "definite", 0x55555556A2E0: "definite",
               0x55555556A320: "definite", 0x55555556A340: "indirect",
               0x55555556A360: "reachable", 0x55555556B2C0: "definite"},
        leaders={0x55555556A340: 0x55555556A320}, root_bytes=151552, block_bytes=264)
    w.scan_outcome("ok", attached_scan(scanned, older, labels), 3)
    w.end("detach")


def test_late_attach_worked_example_is_what_the_writer_writes(tmp_path: Path) -> None:
    """docs/dump-format.md's "Recorded after a late attach" is the fixture attach.memdump, and
    what the writer writes from a scan of both sets: the recorded block's `r` record, the older
    blocks' `ob` records with their sizes, kinds and types."""
    fixture = ROOT / "analyzer" / "tests" / "fixtures" / "attach.memdump"
    assert _written(tmp_path, _attach_example) == fixture.read_text()


def test_older_block_types_are_escaped(tmp_path: Path) -> None:
    def body(w: DumpWriter) -> None:
        scanned = ScanResult(kinds={0x10: "possible"})
        w.scan_outcome("ok", attached_scan(scanned, {0x10: 24}, {0x10: ("a\\b\nc", "rtti")}), 0)

    assert _written(tmp_path, body).splitlines()[-1] == "ob 0x10 24 P rtti a\\\\b\\nc"
