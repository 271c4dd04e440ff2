"""nativepass: the views' pass in libmemdump_core.so (figures.c, series.c) gives the `Figures`
heappass.py's loop gives (every stack's figures in order, its lifetimes, the stacks that freed its
blocks in order, the sizes, the peak, the temporary allocations, the live blocks, the clock, the
timeline's spans with each tag's bytes and the fragmentation samples, with few points so that they
merge), for every set of parts, on the fixtures and on generated dumps; on corrupted ones both give
the same `PATH:LINE: message`; and the views' outputs stay byte for byte the Python loop's."""

from __future__ import annotations

import random
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from analyzer_testlib import FIXTURES
from gendump import Dump, check_generated
from memdump_analyzer import heappass, native, nativepass
from memdump_analyzer.dumpfile import DumpError
from memdump_analyzer.passapi import Accumulator, Figures
from memdump_analyzer.views import VIEWS, Options, load
from memdump_analyzer.views.series import FragSamples, Timeline
from memdump_analyzer.views.stream import ProfileOutput

ALL = nativepass.NATIVE_PARTS
#: every subset of the parts the library computes
SUBSETS = [frozenset(c) for n in range(len(ALL) + 1) for c in combinations(sorted(ALL), n)]


@pytest.fixture(autouse=True)
def _library_built() -> None:
    """A build without the library must fail here, not fall back to Python silently."""
    lib = native.library()
    assert lib is not None and nativepass.typed_library(lib) is not None, (
        f"{native.library_path()} missing, old or not loadable: run `make build`")


class _Figures(Accumulator):
    """Keeps the pass's `Figures`."""

    stacks = True

    def __init__(self, parts: frozenset[str], points: int = 3) -> None:
        self.parts = parts
        self.figures: Figures | None = None
        if "timeline" in parts:
            self.series = (Timeline(points), FragSamples(points))

    def finish(self, figures: Figures) -> None:
        self.figures = figures


def _plain(f: Figures) -> dict[str, Any]:
    """Everything in `f`, comparable: histograms as dicts, the stacks that freed a stack's
    blocks in the order they first did, the live blocks by the node of their stack."""
    stacks = [(key, row[:9], row[9], row[10], list(row[11].items()), row[12:])
              for key, row in f.stacks.items()]
    live = {ptr: (b[0], b[1][13], b[2], b[3]) for ptr, b in f.live.items()}
    scalars = {k: v for k, v in vars(f).items()
               if k not in ("reader", "stacks", "live", "timeline", "frag", "tag_rows")}
    series = [vars(f.timeline), vars(f.frag)] if f.timeline is not None else []
    return {"stacks": stacks, "live": live, "live_n": len(f.live), "series": series,
            "tag_rows": list(f.tag_rows.items()), **scalars}


def _outcome(path: Path, parts: frozenset[str], monkeypatch: pytest.MonkeyPatch,
             engine: str, points: int = 3) -> Any:
    monkeypatch.setenv("MEMDUMP_NATIVE", "1" if engine == "c" else "0")
    acc = _Figures(parts, points)
    try:
        heappass.run_path(str(path), [acc])
    except DumpError as e:
        return str(e)
    assert acc.figures is not None
    return _plain(acc.figures)


def both(path: Path, parts: frozenset[str], monkeypatch: pytest.MonkeyPatch,
         points: int = 3) -> Any:
    """The outcome, after checking that both passes give it."""
    py = _outcome(path, parts, monkeypatch, "python", points)
    c = _outcome(path, parts, monkeypatch, "c", points)
    assert c == py
    return py


FIXTURE_DUMPS = sorted(FIXTURES.rglob("*.memdump"))


@pytest.mark.parametrize("path", FIXTURE_DUMPS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixtures(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = both(path, ALL, monkeypatch)
    if not isinstance(outcome, str):
        assert native.last_fallback is None  # the library passed over it all


@pytest.mark.parametrize("seed", range(150))
def test_generated(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = SUBSETS[seed % len(SUBSETS)]
    points = (1, 3, 8, 200)[seed % 4]
    check_generated(seed, tmp_path / "gen.memdump",
                    lambda path: both(path, parts, monkeypatch, points))


def test_generated_dumps_have_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated dumps reach what the test is for: temporary allocations, lifetimes in ms,
    blocks freed by several stacks, stacks with more lifetimes than figures.c keeps beside the
    stack (three) and than the first size of its table of the others (eight slots, half full),
    blocks dropped (exec, or returned again while live), a peak, blocks live at the end, tags,
    merged spans, halved samples."""
    seen = dict.fromkeys(("temporary", "ms", "freed_by_2", "lifetimes_8", "gone", "peak", "live",
                          "tags", "merged", "halved"), 0)
    for seed in range(150):
        rng = random.Random(seed)
        path = tmp_path / "gen.memdump"
        path.write_bytes(Dump(rng).build(rng.choice([5, 60, 400])))
        f = _outcome(path, ALL, monkeypatch, "c")
        seen["temporary"] += f["temporary"]
        seen["peak"] += f["peak"] > 0
        seen["live"] += f["live_n"]
        seen["tags"] += len(f["tag_list"]) > 2  # two tags or more, and the untagged
        timeline, frag = f["series"]
        seen["merged"] += timeline["width"] > 1
        seen["halved"] += frag["width"] > 1
        for _, _, lifetimes, ms, freed_by, rest in f["stacks"]:
            seen["lifetimes_8"] += len(lifetimes) >= 8
            seen["ms"] += len(ms)
            seen["freed_by_2"] += len(freed_by) > 1
            seen["gone"] += rest[0]
    assert all(seen.values()), seen


def test_events_and_moments_stay_python(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The library calls no accumulator per event nor at moments chosen as the pass goes
    (`first_moment`): those passes are heappass.py's (moments declared before the pass are the
    library's too: test_analyzer_moments.py)."""
    path = tmp_path / "gen.memdump"
    path.write_bytes(Dump(random.Random(7)).build(400))
    monkeypatch.setenv("MEMDUMP_NATIVE", "1")
    called = []
    monkeypatch.setattr(nativepass, "figures", lambda *a: called.append(a))
    events = _Figures(ALL)
    events.events = True
    moments = _Figures(ALL)
    moments.first_moment = lambda: 5  # type: ignore[method-assign]
    for acc in (events, moments):
        heappass.run_path(str(path), [ProfileOutput(ALL), acc])
    assert called == []
    heappass.run_path(str(path), [ProfileOutput(ALL)])
    assert len(called) == 1


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_views_byte_for_byte(view: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each view's text and JSON on the fixtures with clocks, threads and frees: the same from
    either pass."""
    outs = []
    for engine in ("0", "1"):
        monkeypatch.setenv("MEMDUMP_NATIVE", engine)
        got = []
        for path in FIXTURE_DUMPS:
            try:
                side, warnings = load(str(path), compute=VIEWS[view].NEEDS)
            except DumpError as e:
                got.append(str(e))
                continue
            got.append((VIEWS[view].build(side, None, Options()), warnings))
        outs.append(got)
    assert outs[0] == outs[1]


@pytest.mark.parametrize("seed", range(12))
def test_views_byte_for_byte_on_generated_dumps(seed: int, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Each view, whole and with --top 1 and 3, the same from either pass on generated dumps,
    whose stacks often show alike (one function and line at several addresses, allocator
    frames trimmed): the groups made in C (groups.c) or in Python, their figures read as
    columns or from the groups, the first N chosen with their ties."""
    def views(path: Path) -> list[Any]:
        outs = []
        for engine in ("0", "1"):
            monkeypatch.setenv("MEMDUMP_NATIVE", engine)
            got: list[Any] = []
            for view in sorted(VIEWS):
                try:
                    side, warnings = load(str(path), compute=VIEWS[view].NEEDS, symbols=False)
                except DumpError as e:
                    got.append(str(e))
                    continue
                got += [(VIEWS[view].build(side, None, Options(top=top)), warnings)
                        for top in (None, 1, 3)]
            outs.append(got)
        assert outs[0] == outs[1]
        return outs[1]

    check_generated(seed, tmp_path / "gen.memdump", views)


@pytest.mark.parametrize("seed", range(4))
def test_fragmentation_of_blocks_spread_over_the_address_space(
        seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fragmentation samples (series.c sorts the live blocks by address, 11 bits a pass on
    the bits that differ) are Python's when the blocks are thousands, near each other and far
    apart (addresses differing in their low, middle and high bits)."""
    rng = random.Random(seed)
    lines = ["MEMDUMP 2.4", "i program /x", "s 1 /x", "f 1 0x401000 1 0x1000 0 0 0", "n 1 0 1",
             "t 5"]
    live: list[int] = []
    bases = [0x5555_5555_0000, 0x7F00_0000_0000, 0x1000, 0x5555_8000_0000]
    for _ in range(6000):
        if live and rng.random() < 0.4:
            lines.append(f"- 1 {live.pop(rng.randrange(len(live))):#x}")
            continue
        addr = rng.choice(bases) + 16 * rng.randrange(1 << rng.choice([4, 12, 20, 28]))
        if addr not in live:
            live.append(addr)
            lines.append(f"+ 1 {addr:#x} {rng.choice([8, 24, 100, 4000])}")
    lines.append(f"end {len(lines) - 5} exit 0")
    path = tmp_path / "spread.memdump"
    path.write_text("".join(f"{line}\n" for line in lines))
    outcome = both(path, frozenset(("timeline",)), monkeypatch, 8)
    assert not isinstance(outcome, str), outcome
    samples = outcome["series"][1]["samples"]
    assert len(samples) > 4 and any(s[1] for s in samples)


def test_unknown_tags_line_counts_every_line(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The views' warning about an unknown tag names its line, as the leak report's does, from
    either pass: the `t` and `c` lines before it count (the Python pass used to skip them)."""
    path = tmp_path / "tags.memdump"
    lines = ["MEMDUMP 2.4", "i program /x", "s 1 /x", "f 1 0x401000 1 0x1000 0 0 0", "n 1 0 1",
             "t 5", "+ 1 0x1000 8", "t 6", "c 3 100", "zz 1 2", "- 1 0x1000", "end 3 exit 0"]
    path.write_text("".join(f"{line}\n" for line in lines))
    warning = ("skipped records with unknown tag 'zz' (first at line 10): the dump was written by "
               "a newer memdump")
    for engine in ("0", "1"):
        monkeypatch.setenv("MEMDUMP_NATIVE", engine)
        _, warnings = load(str(path), compute=frozenset(), symbols=False)
        assert warnings == [warning], engine
