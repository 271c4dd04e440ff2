"""The one pass (heappass.py): what an accumulator is given, and that a set of outputs reads the
dump once (the HTML page, --by-tag), with the leak report's live blocks."""

from __future__ import annotations

import json
from argparse import Namespace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from analyzer_testlib import FIXTURES, LIBC, Dump, F, main_at, run_cli
from memdump_analyzer import analyze, heappass
from memdump_analyzer.cli import main
from memdump_analyzer.dumpfile import DumpReader
from memdump_analyzer.dumpio import DumpFile
from memdump_analyzer.exports import export
from memdump_analyzer.growth import growth
from memdump_analyzer.rules import RUNTIME_FREE_FUNCTIONS
from memdump_analyzer.views import VIEWS
from memdump_analyzer.views.cli import run_view

EXPORTS = FIXTURES / "exports.memdump"
TAGS = FIXTURES / "tags.memdump"
MARKED = [F("tcache_thread_shutdown", module=LIBC, pc=0x7FFFF7E60000), *main_at(40)]


@pytest.fixture
def opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the dumps opened (every reader of a dump opens a `DumpFile`)."""
    opened: list[str] = []
    init = DumpFile.__init__

    def counting(self: DumpFile, path: str) -> None:
        opened.append(path)
        init(self, path)

    monkeypatch.setattr(DumpFile, "__init__", counting)
    return opened


def test_the_html_page_reads_the_dump_once_after_the_leak_report(opens: list[str]) -> None:
    analysis = analyze(str(EXPORTS), symbolize=False)
    assert opens == [str(EXPORTS)]  # the leak report's replay
    export("html", analysis, symbolize=False)
    assert opens == [str(EXPORTS)] * 2  # figures, series and heap maps: one pass


def test_the_html_page_against_a_base_reads_each_dump_once(opens: list[str]) -> None:
    new, base = analyze(str(EXPORTS), symbolize=False), analyze(str(TAGS), symbolize=False)
    del opens[:]
    export("html", new, base, symbolize=False)
    assert sorted(opens) == sorted([str(EXPORTS), str(TAGS)])


def test_the_command_line_html_and_by_tag_open_the_dump_once_each_for_their_figures(
        opens: list[str], tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    assert main(["--format", "html", "--no-symbolize", "-o", str(out), str(EXPORTS)]) == 0
    assert opens == [str(EXPORTS)]  # the leak report's replay runs the pass beside it
    del opens[:]
    assert main(["--by-tag", "-o", str(tmp_path / "tags.txt"), str(TAGS)]) == 0
    assert opens == [str(TAGS)]  # the figures and the series over time


class _Recorder(heappass.Accumulator):
    """Writes down what the pass calls."""

    events = True
    parts = frozenset(("temporary",))  # `release`'s `last`

    def __init__(self, moments: list[int]) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.moments = moments

    def alloc(self, seq: int, tid: bytes, ptr: bytes, size: int, node: int,
              resize: bool) -> None:
        self.calls.append(("alloc", seq, tid, ptr, size, node, resize))

    def release(self, seq: int, tid: bytes, ptr: bytes, size: int, node: int,
                made: bytes | None, last: bytes | None) -> None:
        self.calls.append(("release", seq, tid, ptr, size, node, made, last))

    def record(self, seq: int, rec: list[bytes]) -> None:
        self.calls.append(("record", seq, rec[0], rec[2]))

    def first_moment(self) -> int:
        return self.moments.pop(0)

    def moment(self, seq: int, live: dict, cur: int, allocated: int,  # type: ignore[type-arg]
               dropped: int) -> int:
        self.calls.append(("moment", seq, sorted(live), cur, allocated, dropped))
        return self.moments.pop(0) if self.moments else 0


@pytest.mark.parametrize("lean", [False, True])
@pytest.mark.parametrize("short", [False, True])
def test_an_accumulator_is_given_each_effect_once_with_the_replays_semantics(
        tmp_path: Path, short: bool, lean: bool) -> None:
    """In the views' loop (with a part) and in the lean one (leanpass.py) alike."""
    d = Dump(header="MEMDUMP 2.1", short=short)
    a, b = main_at(10), main_at(20)
    d.malloc("0x1000", 16, a)                         # 1
    d.malloc("0x2000", 32, b, tid=101)                # 2
    d.free("0x3000", b)                               # 3: not live: nothing
    d.e("realloc", "0x4000", "0x1000", 48, stack=b)   # 4: a release, then an allocation
    d.free("0x2000", MARKED)                          # 5: the C library's own: nothing
    d.e("custom_alloc", "0x5000", 64, stack=a)        # 6: not a heap block
    d.malloc("0x2000", 8, a)                          # 7: 0x2000 still live: replaced
    d.p("exec", "/src/other")                         # 8: every block dropped
    d.e("malloc", "0x0", 100, stack=a)                # 9: failed
    d.malloc("0x6000", 24, a, tid=102)                # 10
    d.end()                                           # 11
    acc = _Recorder([2, 7, 11])
    if lean:
        acc.parts = frozenset()
    with DumpReader(d.write(tmp_path), mark_functions=RUNTIME_FREE_FUNCTIONS) as reader:
        figures = heappass.run(reader, [acc])
        assert [reader.stack(node)[0].line for node in (2, 3)] == [10, 20]
    assert acc.calls == [
        ("alloc", 1, b"100", b"0x1000", 16, 2, False),
        ("alloc", 2, b"101", b"0x2000", 32, 3, False),
        ("moment", 2, [b"0x1000", b"0x2000"], 48, 48, 0),
        ("release", 4, b"100", b"0x1000", 16, 2, b"0x4000", None),  # 3 was tid 100's
        ("alloc", 4, b"100", b"0x4000", 48, 3, True),
        ("alloc", 7, b"100", b"0x2000", 8, 2, False),
        ("moment", 7, [b"0x2000", b"0x4000"], 56, 104, 32),
        ("record", 8, b"p", b"exec"),
        ("alloc", 10, b"102", b"0x6000", 24, 2, False),
        ("record", 11, b"end", b"exit"),
        ("moment", 11, [b"0x6000"], 24, 128, 32),
    ]
    assert (figures.last_seq, figures.cur, figures.peak, figures.peak_seq) == (11, 24, 80, 4)


@pytest.mark.parametrize("between", [False, True])
def test_a_regrowth_is_freed_by_the_threads_very_next_heap_operation(
        tmp_path: Path, between: bool) -> None:
    d = Dump(header="MEMDUMP 2.1", short=True)
    d.malloc("0x1000", 16, main_at(10))
    d.malloc("0x2000", 32, main_at(10))
    d.malloc("0x9000", 8, main_at(20), tid=101)  # another thread's: no matter
    if between:
        d.free("0x0", main_at(30))  # free(NULL): a heap operation of its own
    d.free("0x1000", main_at(40))
    sites = growth(d.write(tmp_path))
    assert [(s.containers, s.regrowths, s.copied_bytes) for s in sites] == (
        [] if between else [(1, 1, 16)])


def _leaky_dump(tmp_path: Path) -> str:
    """A block freed by the C library's own bookkeeping (which releases nothing: the leak
    report keeps it live), and a custom block (not a heap block)."""
    d = Dump(header="MEMDUMP 2.2")
    d.malloc("0x1000", 16, main_at(10))
    d.malloc("0x2000", 32, main_at(20))
    d.free("0x2000", MARKED)
    d.e("custom_alloc", "0x3000", 64, stack=main_at(30))
    d.end()
    return d.write(tmp_path)


def test_the_heap_map_and_the_tags_hold_the_leak_reports_live_blocks(tmp_path: Path) -> None:
    path = _leaky_dump(tmp_path)
    report = json.loads(run_cli("--format", "json", path).stdout)["summary"]
    # the heap's 48 bytes in 2 blocks allocated and live at the end (the custom block is leaked
    # too, apart from the heap's figures)
    assert (report["allocated_bytes"], report["allocations"], report["peak"]["bytes"],
            report["leaked"], report["custom"]["allocations"]) == (
        48, 2, 48, {"blocks": 3, "bytes": 48 + 64}, 1)
    heap = json.loads(run_cli("--heap-map", "--format", "json", path).stdout)
    assert [r["blocks"] for r in heap["regions"]] == [2]
    tags = json.loads(run_cli("--by-tag", "--format", "json", path).stdout)
    assert [(t["tag"], t["allocated"], t["leaked"]) for t in tags["tags"]] == [
        ("(untagged)", {"bytes": 48, "blocks": 2}, {"bytes": 48, "blocks": 2})]


class _Counter(heappass.Accumulator):
    """A view's own accumulator: the blocks each thread allocated."""

    events = True

    def __init__(self) -> None:
        self.by_thread: dict[bytes, int] = {}

    def alloc(self, seq: int, tid: bytes, ptr: bytes, size: int, node: int,
              resize: bool) -> None:
        self.by_thread[tid] = self.by_thread.get(tid, 0) + 1


def test_a_new_view_is_one_accumulator_and_its_rendering(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opens: list[str]) -> None:
    d = Dump(header="MEMDUMP 2.1", short=True)
    d.malloc("0x1000", 16, main_at(10))
    d.malloc("0x2000", 16, main_at(10), tid=101)
    d.malloc("0x3000", 16, main_at(10), tid=101)
    path = d.write(tmp_path)

    def build(side: Any, base: Any, options: Any) -> tuple[dict[str, Any], list[str]]:
        counts = side.accumulated.by_thread
        return ({"threads": {k.decode(): v for k, v in counts.items()},
                 "peak_bytes": side.profile.peak_bytes},
                [f"{k.decode()}: {v}" for k, v in counts.items()])

    monkeypatch.setitem(VIEWS, "threads", SimpleNamespace(
        NEEDS=frozenset(), accumulator=_Counter, build=build))
    args = Namespace(top=None, max_frames=None, no_symbolize=True, dump=path, base=None,
                     format="json")
    text, warnings = run_view("threads", args)
    assert (json.loads(text), warnings, opens) == (
        {"threads": {"100": 1, "101": 2}, "peak_bytes": 48}, [], [path])
