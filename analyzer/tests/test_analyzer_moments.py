"""The moments of the one pass (passapi's `wanted_moments`): libmemdump_core.so's (moments.c) are
heappass.py's loop's (`MomentsReference`), on generated dumps with tags, threads, execs, blocks
returned again while live and the C library's own frees: for each set of the views' parts (the
blocks' tags then kept by the timeline's series, or by moments.c's own table), at random events
(before the first, after the last, past it, several at one event) and of every kind; on
corrupted dumps both give the same `PATH:LINE: message`. The exports and the heap map at known
events take theirs in the library's pass."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from analyzer_testlib import LIBC, F, main_at
from analyzer_testlib import Dump as WrittenDump
from gendump import Dump, check_generated, corrupt
from memdump_analyzer import analyze, heappass, native
from memdump_analyzer.dumpfile import DumpError
from memdump_analyzer.exports import export
from memdump_analyzer.exports.collapsed import METRICS
from memdump_analyzer.heapmap import HeapMapError, HeapMapOutput, heap_maps
from memdump_analyzer.passapi import (
    AT_PEAK,
    END,
    MOMENT_BLOCKS,
    MOMENT_BY_NODE,
    MOMENT_TOTALS,
    Accumulator,
    Figures,
    Moment,
)
from memdump_analyzer.views.series import FragSamples, Timeline

MARKED = [F("tcache_thread_shutdown", module=LIBC, pc=0x7FFFF7E60000), *main_at(40)]
PARTS = [frozenset(), frozenset({"timeline"}), frozenset({"temporary", "lifetimes", "sizes"}),
         frozenset({"timeline", "lifetimes"})]


class _Moments(Accumulator):
    """Takes the moments `wanted` and keeps them by index (in heappass.py's views' loop, whose
    semantics the library's pass keeps: a release from a marked stack, realloc or delete too,
    does nothing; the lean loop skips only a marked `free`, as the replay does)."""

    stacks = True

    def __init__(self, wanted: list[tuple[int, int]], parts: frozenset[str]) -> None:
        self.wanted = wanted
        self.parts = parts
        if "timeline" in parts:
            self.series = (Timeline(8), FragSamples(8))
        self.taken: dict[int, Moment] = {}
        self.finished_after: list[int] = []

    def wanted_moments(self) -> list[tuple[int, int]]:
        return self.wanted

    def take(self, index: int, moment: Moment) -> None:
        assert index not in self.taken
        self.taken[index] = moment

    def finish(self, figures: Figures) -> None:
        self.finished_after = sorted(self.taken)


def _last_seq(path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setenv("MEMDUMP_NATIVE", "0")
    return heappass.run_path(str(path), [_Moments([], frozenset())]).last_seq


def _outcome(path: Path, wanted: list[tuple[int, int]], parts: frozenset[str],
             monkeypatch: pytest.MonkeyPatch, engine: str) -> Any:
    monkeypatch.setenv("MEMDUMP_NATIVE", "1" if engine == "c" else "0")
    acc = _Moments(wanted, parts)
    try:
        figures = heappass.run_path(str(path), [acc])
    except DumpError as e:
        return str(e)
    assert acc.finished_after == sorted(acc.taken)  # all taken before `finish`
    return {"taken": {i: vars(m) for i, m in acc.taken.items()},
            "allocated": figures.allocated, "dropped": figures.dropped}


def _wanted(rng: random.Random, last: int) -> list[tuple[int, int]]:
    seqs = [0, last, last + 1, END, END, AT_PEAK, AT_PEAK] + [rng.randint(0, last + 2)
                                                        for _ in range(12)]
    seqs += seqs[:3]  # several at one event
    rng.shuffle(seqs)
    return [(seq, rng.choice((MOMENT_TOTALS, MOMENT_BY_NODE, MOMENT_BLOCKS))) for seq in seqs]


@pytest.mark.parametrize("seed", range(80))
def test_generated(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = PARTS[seed % len(PARTS)]
    seen: dict[str, Any] = {}

    def both(path: Path) -> Any:
        if "wanted" not in seen:
            seen["wanted"] = _wanted(random.Random(seed), _last_seq(path, monkeypatch))
        py = _outcome(path, seen["wanted"], parts, monkeypatch, "python")
        c = _outcome(path, seen["wanted"], parts, monkeypatch, "c")
        assert c == py
        return py

    check_generated(seed, tmp_path / "gen.memdump", both)


def test_generated_moments_have_everything(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated dumps reach what the test is for: tagged and untagged blocks at a moment,
    bytes dropped while live, several stacks live at once, a moment past the last event, blocks
    at the peak that the end has not (released since, kept by the pass)."""
    seen = dict.fromkeys(("tagged", "untagged", "dropped", "stacks", "past", "peak"), 0)
    for seed in range(80):
        rng = random.Random(seed)
        path = tmp_path / "gen.memdump"
        path.write_bytes(Dump(rng).build(rng.choice([5, 60, 400])))
        wanted = _wanted(random.Random(seed), _last_seq(path, monkeypatch))
        got = _outcome(path, wanted, PARTS[seed % len(PARTS)], monkeypatch, "c")
        assert native.last_fallback is None
        seen["past"] += len(got["taken"]) < len(wanted)
        seen["dropped"] += got["dropped"] > 0
        at_end = [set(m["blocks"]) for i, m in got["taken"].items()
                  if wanted[i] == (END, MOMENT_BLOCKS)]
        for i, m in got["taken"].items():
            if wanted[i] == (AT_PEAK, MOMENT_BLOCKS) and at_end:
                seen["peak"] += bool(set(m["blocks"]) - at_end[0])
            seen["tagged"] += any(b[3] is not None for b in m["blocks"] or ())
            seen["untagged"] += any(b[3] is None for b in m["blocks"] or ())
            seen["stacks"] += len(m["by_node"] or ()) > 1
    assert all(seen.values()), seen


def test_a_moment_before_the_first_event_and_at_the_end(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """SEQ 0 is the empty heap; END is the heap after the last event, its SEQ that event's;
    a SEQ past the last is not taken; the blocks come by address with their threads' tags."""
    path = tmp_path / "d.memdump"
    path.write_bytes(Dump(random.Random(3)).build(60))
    last = _last_seq(path, monkeypatch)
    wanted = [(END, MOMENT_BLOCKS), (0, MOMENT_BLOCKS), (last + 1, MOMENT_TOTALS)]
    for engine in ("python", "c"):
        got = _outcome(path, wanted, frozenset(), monkeypatch, engine)["taken"]
        assert sorted(got) == [0, 1]
        assert got[1] == {"seq": 0, "cur": 0, "allocated": 0, "dropped": 0, "by_node": None,
                          "blocks": []}
        end = got[0]
        assert end["seq"] == last
        assert end["blocks"] == sorted(end["blocks"])
        assert sum(b[1] for b in end["blocks"]) == end["cur"]


def test_the_heap_map_at_known_events_is_the_librarys(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The heap map at SEQs and at the end (the HTML page's) asks for no event: the library's
    pass; at the peak or a phase, heappass.py's loop with the events, unless the peak is the
    pass's moment (`AT_PEAK`) or a first pass found the phases' SEQs (`when`: the phase's is
    the record's before its own)."""
    assert not HeapMapOutput(["12", "end"]).events
    assert HeapMapOutput(["12", "end"]).wanted_moments() == [(12, MOMENT_BLOCKS),
                                                             (END, MOMENT_BLOCKS)]
    for moments in (["peak"], ["phase:x", "end"]):
        out = HeapMapOutput(moments)
        assert out.events and out.wanted_moments() is None
    out = HeapMapOutput(["phase:x", "end", "peak", "7"], when={0: 41, 2: 9})
    assert not out.events
    assert out.wanted_moments() == [(41, MOMENT_BLOCKS), (END, MOMENT_BLOCKS),
                                    (9, MOMENT_BLOCKS), (7, MOMENT_BLOCKS)]
    out = HeapMapOutput(["end", "peak"], when={1: AT_PEAK})
    assert not out.events
    assert out.wanted_moments() == [(END, MOMENT_BLOCKS), (AT_PEAK, MOMENT_BLOCKS)]


def _maps(path: Path, moments: list[str], monkeypatch: pytest.MonkeyPatch,
          engine: str) -> Any:
    monkeypatch.setenv("MEMDUMP_NATIVE", "1" if engine == "c" else "0")
    try:
        return heap_maps(str(path), moments)
    except (DumpError, HeapMapError) as e:
        return str(e)


@pytest.mark.parametrize("seed", range(40))
def test_the_heap_map_at_the_peak_and_phases_in_two_passes(seed: int, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           ) -> None:
    """With the library, the heap map at phases is two passes (the first finds their SEQs, the
    second takes them as known moments), at the peak alone one (the pass's `AT_PEAK` moment):
    the same maps, errors included (a phase or an event not in the dump), as heappass.py's one
    pass with its undo log, on
    generated dumps (phases `load` twice, `run`, `-`; execs; blocks replaced while live), whole
    and corrupted."""
    rng = random.Random(seed)
    moments = rng.sample(["peak", "phase:load", "phase:run", "phase:-", "end",
                          str(rng.randint(0, 300))], k=rng.randint(1, 4))
    text = Dump(rng).build(rng.choice([5, 60, 400]))
    path = tmp_path / "gen.memdump"
    for data in (text, corrupt(rng, text)):
        path.write_bytes(data)
        py = _maps(path, moments, monkeypatch, "python")
        assert _maps(path, moments, monkeypatch, "c") == py


def test_two_passes_reach_the_peak_and_phases(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated dumps of the test above give maps at the peak and at each phase, and a
    phase they do not have is said as heappass.py says it."""
    got = dict.fromkeys(("peak", "phase:load", "phase:run", "phase:-"), 0)
    for seed in range(40):
        rng = random.Random(seed)
        path = tmp_path / "gen.memdump"
        path.write_bytes(Dump(rng).build(rng.choice([60, 400])))
        for at in got:
            maps = _maps(path, [at], monkeypatch, "c")
            got[at] += not isinstance(maps, str) and bool(maps[0].blocks)
    assert all(got.values()), got
    maps = _maps(path, ["phase:nowhere"], monkeypatch, "c")
    assert maps == _maps(path, ["phase:nowhere"], monkeypatch, "python")
    assert maps.startswith(f"no phase 'nowhere' in {path} (its phases: ")


@pytest.mark.parametrize("seed", range(10))
def test_exports_byte_for_byte_on_generated_dumps(seed: int, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """massif, pprof, collapsed (each metric) and the HTML page are the same from either pass
    on generated dumps, whose stacks often show alike (one function and line at several
    addresses, allocator frames trimmed): the library's moments and its groups of nodes
    (nativegroups.py) against heappass.py's loop and each node's stack trimmed and keyed."""
    rng = random.Random(seed)
    path = tmp_path / "gen.memdump"
    path.write_bytes(Dump(rng).build(rng.choice([60, 400])))
    outs = []
    for engine in ("0", "1"):
        monkeypatch.setenv("MEMDUMP_NATIVE", engine)
        analysis = analyze(str(path))
        got: list[Any] = []
        for name, metric in [("massif", "leaked-bytes"), ("pprof", "leaked-bytes"),
                             ("html", "leaked-bytes"), *(("collapsed", m) for m in METRICS)]:
            got.append(export(name, analysis, metric=metric, symbolize=False))
        outs.append(got)
    assert outs[0] == outs[1]
    assert native.last_fallback is None


@pytest.mark.parametrize("engine", ["python", "c"])
def test_a_realloc_and_a_delete_from_a_marked_stack_release_their_blocks(
        engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a `free` from a marked stack (the C library's own) does nothing, as in the replay:
    the views' pass, either loop, and the exports' moments find the leak report's heap."""
    d = WrittenDump()
    a = d.stack([F("make", file="/src/app.c", line=3), *main_at(9)])
    d.malloc("0x1000", 100, a)                               # 1
    d.e("new", "0x3000", 30, stack=a)                        # 2: the peak, 130 bytes
    d.e("realloc", "0x2000", "0x1000", 50, stack=MARKED)     # 3: 0x1000 released
    d.e("delete", "-", "0x3000", stack=MARKED)               # 4: released
    d.free("0x1000", stack=MARKED)                           # 5: nothing (not live anyway)
    d.malloc("0x4000", 10, a)                                # 6
    d.end()
    path = d.write(tmp_path)
    analysis = analyze(path, symbolize=False)
    assert (analysis.peak_bytes, analysis.peak_seq) == (130, 2)
    got = _outcome(Path(path), [(END, MOMENT_BLOCKS)], frozenset({"lifetimes"}), monkeypatch,
                   engine)
    assert got["taken"][0]["cur"] == 60
    assert [b[:2] for b in got["taken"][0]["blocks"]] == [(0x2000, 50), (0x4000, 10)]
    monkeypatch.setenv("MEMDUMP_NATIVE", "1" if engine == "c" else "0")
    acc = _Moments([], frozenset())
    figures = heappass.run_path(path, [acc])
    assert (figures.peak, figures.peak_seq, figures.cur) == (130, 2, 60)
