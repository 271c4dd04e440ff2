"""The views (docs/views.md): goldens of each view on the worked example, its figures checked one
by one, `--base`, the options, the errors, and a randomised test tying the views' pass to the
replay's figures (peak, live blocks, allocations)."""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, REPO, Dump, F, main_at, run_cli
from memdump_analyzer import analyze
from memdump_analyzer.passapi import lifetime_masks
from memdump_analyzer.views import VIEWS, Options, load
from memdump_analyzer.views.lifetimes import quantiles
from memdump_analyzer.views.sizes import buckets
from memdump_analyzer.views.stream import bucket

EXAMPLE = FIXTURES / "views.memdump"
GOLDEN = FIXTURES / "views"
#: set to 1 to rewrite the goldens from the analyser's output (then review the diff)
UPDATE = os.environ.get("MEMDUMP_UPDATE_GOLDEN") == "1"
DOC = (REPO / "docs" / "views.md").read_text()


def _doc_block(marker: str, lang: str = "") -> str:
    """The first fenced block after `marker` in docs/views.md."""
    section = DOC.split(marker, 1)[1]
    m = re.search(rf"```{lang}\n(.*?)```", section, re.S)
    assert m is not None, marker
    return m.group(1)


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_golden(view: str, fmt: str) -> None:
    more = ("--format", "json", "--max-frames", "1") if fmt == "json" else ()
    result = run_cli(view, *more, "views.memdump", cwd=FIXTURES)
    assert (result.returncode, result.stderr) == (0, "")
    golden = GOLDEN / f"{view}.{'txt' if fmt == 'text' else 'json'}"
    if UPDATE:
        golden.write_text(result.stdout)
    assert golden.exists(), f"{golden} is missing (MEMDUMP_UPDATE_GOLDEN=1 writes it)"
    assert result.stdout == golden.read_text()


def test_the_worked_example_is_the_fixture() -> None:
    assert _doc_block("The worked example's dump") == EXAMPLE.read_text()


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_the_docs_show_each_golden(view: str) -> None:
    assert _doc_block(f"`memdump-analyze {view} views.memdump`:") == (
        GOLDEN / f"{view}.txt").read_text()
    assert _doc_block(f"`memdump-analyze {view} --format json --max-frames 1 views.memdump`:",
                      "json") == (
        GOLDEN / f"{view}.json").read_text()


def _groups(path: str | Path) -> dict[str, object]:
    """The example's groups by innermost function:line."""
    side, warnings = load(str(path))
    assert warnings == []
    return {f"{g.stack[0].function}:{g.stack[0].line}": g.stats for g in side.groups.values()}


def test_the_examples_figures() -> None:
    side, _ = load(str(EXAMPLE))
    p = side.profile
    assert (p.peak_bytes, p.peak_blocks, p.peak_seq, p.peak_ms) == (4424, 4, 10, 5)
    assert (p.allocations, p.allocated_bytes, p.live_bytes, p.live_blocks) == (9, 4680, 4176, 2)
    assert (p.temporary, p.temporary_bytes) == (4, 344)
    assert (p.clocked, p.last_seq, p.last_ms, p.peak_rss, p.peak_rss_ms) == (
        True, 16, 20, 3145728, 12)
    g = _groups(EXAMPLE)
    parse, grow, order, cat = (g["parse_line:20"], g["add_item:30"], g["handle_order:40"],
                               g["load_catalog:14"])
    assert (parse.peak_bytes, parse.peak_blocks, grow.peak_bytes, order.peak_bytes) == (
        64, 1, 64, 200)
    assert (parse.allocations, parse.allocated_bytes, grow.allocations,
            grow.allocated_bytes) == (3, 192, 3, 112)
    assert (parse.temporary, grow.temporary, grow.temporary_bytes, order.temporary) == (
        2, 1, 16, 1)
    assert (quantiles(grow.lifetimes), quantiles(grow.lifetimes_ms)) == (
        {"min": 1, "median": 3, "max": 5}, {"min": 0, "median": 0, "max": 15})
    assert (cat.frees, cat.live_blocks, cat.lifetimes, cat.lifetimes_ms) == (0, 1, {4: 1}, {8: 1})
    assert buckets(p.sizes) == {5: [1, 16], 6: [1, 32], 7: [5, 336], 8: [1, 200],
                                13: [1, 4096]}


def test_bucket_and_quantiles() -> None:
    assert [bucket(n) for n in (0, 1, 63, 64, 100, 1000, 1_000_000)] == [
        0, 1, 63, 64, 100, 992, 999424]
    masks = lifetime_masks()  # the pass's inlined `bucket`
    assert all(v & masks[v >> 6] == bucket(v) for v in [*range(5000), *range(4190000, 4194304)])
    assert quantiles({}) is None
    assert quantiles({5: 1}) == {"min": 5, "median": 5, "max": 5}
    assert quantiles({1: 2, 9: 2}) == {"min": 1, "median": 1, "max": 9}
    assert quantiles({1: 1, 4: 1, 9: 1}) == {"min": 1, "median": 4, "max": 9}


def _base(tmp_path: Path) -> str:
    """A run of the example's program before a change: parse_line allocated 32 bytes, once, and
    add_item nothing; the worker did not exist."""
    d = Dump(header="MEMDUMP 2.2")
    cat = [F("load_catalog", "/src/shop.c", 12), F("main", "/src/shop.c", 60)]
    parse = [F("parse_line", "/src/shop.c", 20), F("main", "/src/shop.c", 61)]
    d.malloc("0x1000", 4096, cat)
    d.malloc("0x2000", 32, parse)
    d.free("0x2000", [F("parse_line", "/src/shop.c", 22), F("main", "/src/shop.c", 61)])
    d.end()
    return d.write(tmp_path, "base.memdump")


def test_base_subtracts_by_stack(tmp_path: Path) -> None:
    base = _base(tmp_path)
    result = run_cli("peak", "--base", base, "--format", "json", str(EXAMPLE))
    assert (result.returncode, result.stderr) == (0, "")
    doc = json.loads(result.stdout)
    rows = [(r["stack"][0]["function"], r["stack"][0]["line"], r["bytes"], r["blocks"])
            for r in doc["stacks"]]
    # load_catalog's 4,096 bytes were live at both peaks: no difference, no row
    assert rows == [("handle_order", 40, 200, 1), ("add_item", 30, 64, 1),
                    ("parse_line", 20, 32, 0)]
    assert doc["peak"]["base"] == {"peak_bytes": 4128, "peak_blocks": 2, "seq": 2, "ms": None}
    assert doc["base"] == base
    hot = json.loads(run_cli("hotspots", "--base", base, "--format", "json", "--sort", "calls",
                             str(EXAMPLE)).stdout)
    assert [(r["stack"][0]["function"], r["allocations"], r["bytes"]) for r in hot["by_calls"]] == [
        ("add_item", 3, 112), ("parse_line", 2, 160), ("handle_order", 1, 200),
        ("load_catalog", 1, 80)]
    assert "by_bytes" not in hot
    text = run_cli("temporary", "--base", base, str(EXAMPLE)).stdout
    assert "\n+1 temporary allocation, +16 bytes, at\n    at add_item (shop.c:30)\n" in text
    assert "\n+1 temporary allocation, +96 bytes, at\n    at parse_line (shop.c:20)\n" in text


def test_a_stack_only_the_base_has_comes_negative(tmp_path: Path) -> None:
    base = _base(tmp_path)
    result = run_cli("hotspots", "--base", str(EXAMPLE), "--sort", "bytes", base)
    assert result.returncode == 0
    assert "\n-1 allocation, -200 bytes, at\n    at handle_order (shop.c:40)\n" in result.stdout


def test_timeline_base_shows_both_series(tmp_path: Path) -> None:
    doc = json.loads(run_cli("timeline", "--base", _base(tmp_path), "--format", "json",
                             str(EXAMPLE)).stdout)
    assert (doc["peak_bytes_delta"], doc["base"]["peak_bytes"], len(doc["base"]["points"])) == (
        296, 4128, 4)


def test_top_and_points() -> None:
    doc = json.loads(run_cli("lifetimes", "--top", "2", "--format", "json", "views.memdump",
                             cwd=FIXTURES).stdout)
    assert (len(doc["stacks"]), doc["more_stacks"]) == (2, 3)
    doc = json.loads(run_cli("timeline", "--points", "3", "--format", "json", "views.memdump",
                             cwd=FIXTURES).stdout)
    # one span: its lowest and highest points, then the end
    assert [(p["seq"], p["heap_bytes"]) for p in doc["points"]] == [
        (1, 4096), (10, 4424), (16, 4176)]
    doc = json.loads(run_cli("timeline", "--top", "2", "--format", "json", "views.memdump",
                             cwd=FIXTURES).stdout)
    assert [(p["seq"], p["heap_bytes"]) for p in doc["points"]] == [(9, 4392), (10, 4424)]
    assert doc["more_points"] == 14
    doc = json.loads(run_cli("sizes", "--top", "1", "--format", "json", "views.memdump",
                             cwd=FIXTURES).stdout)
    assert doc["buckets"] == [{"min": 64, "max": 127, "blocks": 5, "bytes": 336}]


@pytest.mark.parametrize(("args", "message"), [
    (["peak", "nope.memdump"], "memdump-analyze: nope.memdump: no such file\n"),
    (["peak", "--top", "x", "views.memdump"], "argument --top: 'x' is not a number\n"),
    (["timeline", "--points", "1", "views.memdump"],
     "argument --points: must be at least 2, not 1\n"),
    (["sizes", "--base", "nope.memdump", "views.memdump"],
     "memdump-analyze: nope.memdump: no such file\n"),
])
def test_bad_input_is_one_line(args: list[str], message: str) -> None:
    result = run_cli(*args, cwd=FIXTURES)
    assert result.returncode == 2
    assert result.stderr.endswith(message)
    assert "Traceback" not in result.stderr


def test_a_malformed_event_is_named_as_the_leak_report_names_it(tmp_path: Path) -> None:
    d = Dump(header="MEMDUMP 2.2", short=True)
    d.malloc("0x10", 8, main_at(3))
    d.raw("t 100")
    d.raw("+ 1 0x20 eight")
    path = d.write(tmp_path)
    report = run_cli(path)
    view = run_cli("hotspots", path)
    assert view.returncode == report.returncode == 2
    assert view.stderr == report.stderr
    assert view.stderr.startswith(f"memdump-analyze: {path}:")


def test_exec_drops_the_live_blocks(tmp_path: Path) -> None:
    d = Dump(header="MEMDUMP 2.2")
    d.malloc("0x10", 100, main_at(3))
    d.p("exec", "/bin/true")
    d.malloc("0x20", 10, main_at(4))
    d.end()
    side, _ = load(d.write(tmp_path))
    g = _groups(d.write(tmp_path))
    assert (side.profile.live_bytes, side.profile.peak_bytes, side.profile.peak_seq) == (10, 100, 1)
    assert (g["main:3"].frees, g["main:3"].live_blocks, g["main:3"].lifetimes) == (0, 0, {1: 1})


# -- a randomised reference: the views' pass against the replay and a naive recount ------------


def _random_dump(rng: random.Random, short: bool) -> tuple[Dump, dict[str, object]]:
    """A random run of 3 threads and 5 stacks, with the naive figures it must give."""
    d = Dump(header="MEMDUMP 2.2", short=short)
    stacks = [main_at(10 + i) for i in range(5)]
    live: dict[int, tuple[int, int]] = {}  # addr -> (size, stack)
    last: dict[int, int | None] = {}  # thread -> its last operation's block, if an allocation
    per_stack = [0] * 5
    cur = peak = 0
    at_peak: list[int] = [0] * 5
    temporary = [0] * 5
    for _ in range(rng.randint(1, 300)):
        tid = rng.choice((100, 101, 102))
        r = rng.random()
        if live and r < 0.45:
            addr = rng.choice(sorted(live))
            size, s = live.pop(addr)
            if last.get(tid) == addr:
                temporary[s] += 1
            d.free(f"{addr:#x}", stacks[rng.randrange(5)], tid)
            cur -= size
            per_stack[s] -= size
            last[tid] = None
            continue
        if r < 0.5:
            # free(NULL), or a double or invalid free (an error of the leak report's): an
            # operation of the thread that releases nothing
            addr = 0 if r < 0.48 else 0x1000 + 0x100 * rng.randrange(40)
            if addr in live:
                continue
            d.free(f"{addr:#x}", stacks[0], tid)
            last[tid] = None
            continue
        s = rng.randrange(5)
        size = rng.randint(0, 50)
        addr = 0x1000 + 0x100 * rng.randrange(40)
        if addr in live:
            continue
        if live and r < 0.6:  # a realloc moving a live block
            old = rng.choice(sorted(live))
            osize, os_ = live.pop(old)
            if last.get(tid) == old:
                temporary[os_] += 1
            d.e("realloc", f"{addr:#x}", f"{old:#x}", size, stack=stacks[s], tid=tid)
            cur -= osize
            per_stack[os_] -= osize
        else:
            d.malloc(f"{addr:#x}", size, stacks[s], tid)
        live[addr] = (size, s)
        last[tid] = addr
        cur += size
        per_stack[s] += size
        if cur > peak:
            peak = cur
            at_peak = list(per_stack)
    d.end()
    return d, {"peak": peak, "at_peak": at_peak, "temporary": temporary, "live": cur}


@pytest.mark.parametrize("seed", range(40))
def test_random_runs_agree_with_the_replay_and_a_naive_recount(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    d, want = _random_dump(rng, short=seed % 2 == 0)
    path = d.write(tmp_path)
    side, _ = load(path, points=4)
    p = side.profile
    a = analyze(path)
    assert (p.peak_bytes, p.live_bytes, p.live_blocks) == (
        a.peak_bytes, a.leaked_bytes + a.runtime_bytes, a.leaked_blocks + a.runtime_blocks)
    assert (p.peak_bytes, p.live_bytes) == (want["peak"], want["live"])
    g = _groups(path)
    for i in range(5):
        stats = g.get(f"main:{10 + i}")
        assert (stats.peak_bytes if stats else 0) == want["at_peak"][i]  # type: ignore[index]
        assert (stats.temporary if stats else 0) == want["temporary"][i]  # type: ignore[index]
    assert len(p.timeline) <= 4
    if p.peak_seq is not None:
        assert (p.peak_seq, p.peak_bytes) in [(pt[0], pt[1]) for pt in p.timeline]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_a_view_computing_only_its_parts_says_the_same(tmp_path: Path, view: str,
                                                       seed: int) -> None:
    d, _ = _random_dump(random.Random(seed), short=seed % 2 == 1)
    path = d.write(tmp_path)
    options = Options(top=None)
    full = VIEWS[view].build(load(path)[0], None, options)
    own = VIEWS[view].build(load(path, compute=VIEWS[view].NEEDS)[0], None, options)
    assert own == full


# -- the timeline's fragmentation and tags (series.py) -------------------------------------------

TAGS = FIXTURES / "tags.memdump"


def test_the_tags_series_adds_up_to_the_heap_at_each_point() -> None:
    """tags.memdump: untagged 400 at event 2, two `physics` blocks of 64 (one freed at event 5),
    128 `audio` bytes, the 400 freed (event 8: the trough) and 200 allocated in `level 2`."""
    p = load(str(TAGS))[0].profile
    assert p.tag_names == ["(untagged)", "physics", "audio"]
    assert [(pt[0], pt[1]) for pt in p.timeline] == [
        (2, 400), (3, 464), (4, 528), (5, 464), (6, 592), (8, 192), (9, 392), (10, 392)]
    assert p.timeline_tags == [(400, 0, 0), (400, 64, 0), (400, 128, 0), (400, 64, 0),
                               (400, 64, 128), (0, 64, 128), (200, 64, 128), (200, 64, 128)]


def test_a_free_phase_falls_through_its_spans(tmp_path: Path) -> None:
    """200 blocks of 100 bytes allocated, then all freed (jq's end): each span of 64 events
    gives its highest and its lowest point, so the heap falls span by span to 0, where it was
    one line from the peak at event 200 to the end (the spans closed only at allocations)."""
    d = Dump(header="MEMDUMP 2.1")
    for i in range(200):
        d.malloc(f"0x{0x10010 + 0x70 * i:x}", 100, main_at(10))
    for i in range(200):
        d.free(f"0x{0x10010 + 0x70 * i:x}", main_at(11))
    d.end()
    p = load(d.write(tmp_path), points=20)[0].profile
    assert [(pt[0], pt[1]) for pt in p.timeline] == [
        (1, 100), (63, 6300), (64, 6400), (127, 12700), (128, 12800), (191, 19100),
        (200, 20000), (255, 14500), (256, 14400), (319, 8100), (320, 8000), (383, 1700),
        (384, 1600), (400, 0), (401, 0)]


@pytest.mark.parametrize(("recorder", "said"), [
    ("in-process", "RSS is the whole process's, memdump's in-process recorder included (its "
                   "window of the dump, its tables)"),
    ("breakpoints", "RSS is the whole process's; the breakpoint recorder adds nothing to it"),
    (None, "RSS is the whole process's, memdump's in-process recorder included if it recorded"),
])
def test_the_rss_says_whose_memory_it_is(tmp_path: Path, recorder: str | None,
                                         said: str) -> None:
    """The RSS of the clock samples is the process's: with the in-process recorder, the
    recorder's window of the dump and its tables are in it (2M malloc/free pairs: 16.8 MB of
    RSS for 1.3 MB run natively), which the text and the JSON say."""
    d = Dump(header="MEMDUMP 2.2")
    if recorder is not None:
        d.lines.append(f"i recorder {recorder}")
    d.lines.append("c 0 4096000")
    d.malloc("0x10010", 100, main_at(10))
    d.lines.append("c 30 8192000")
    d.end()
    path = d.write(tmp_path)
    assert f"peak RSS: 8,192,000 bytes at 30 ms; {said}\n" in run_cli("timeline", path).stdout
    doc = json.loads(run_cli("timeline", "--format", "json", path).stdout)
    assert doc["rss_note"] == said


def test_the_fragmentation_is_the_heap_maps_over_all_regions() -> None:
    """heapmap.memdump: the 2nd and 4th of the small blocks freed leave two holes of 32 bytes
    (events 9 and 10); the mmapped block is a region with no free byte, and 200,016 of the
    heap's 200,464 bytes: the 32 free bytes outside the largest run are 0.016% of the heap."""
    p = load(str(FIXTURES / "heapmap.memdump"))[0].profile
    assert p.frag == [(1, 0, 0, 32), (2, 0, 0, 64), (3, 0, 0, 176), (4, 0, 0, 208),
                      (5, 0, 0, 416), (6, 0, 0, 448), (7, 0, 0, 200464), (8, 0, 0, 200464),
                      (9, 32, 32, 200464), (10, 64, 32, 200464), (11, 64, 32, 200464)]
    doc = json.loads(run_cli("timeline", "--format", "json", "heapmap.memdump",
                             cwd=FIXTURES).stdout)
    assert doc["end_fragmentation"] == 0.00016
    assert [(pt["seq"], pt["fragmentation"]) for pt in doc["points"]] == [
        (1, 0.0), (2, 0.0), (3, 0.0), (4, 0.0), (5, 0.0), (6, 0.0), (7, 0.0), (9, 0.0),
        (10, 0.00016), (11, 0.00016)]


def test_the_fragmentation_is_weighted_by_the_heap(tmp_path: Path) -> None:
    """100 blocks of 1,000 bytes side by side (chunks of 1,008), the 11th and 12th freed (a run
    of 2,016) and the 31st, 51st, 71st (1,008 each): 1 - largest / free would say 60%; 3,024
    free bytes outside the largest run of a 100,800-byte heap are 3%."""
    d = Dump(header="MEMDUMP 2.1")
    for i in range(100):
        d.malloc(f"0x{0x10010 + 1008 * i:x}", 1000, main_at(10))
    for i in (10, 11, 30, 50, 70):
        d.free(f"0x{0x10010 + 1008 * i:x}", main_at(11))
    d.end()
    path = d.write(tmp_path)
    p = load(path)[0].profile
    assert p.frag[-1] == (p.last_seq, 5040, 2016, 100800)
    text = run_cli("timeline", path).stdout
    assert ("fragmentation at the end: 3.00% of the heap (free 5,040 bytes outside the largest "
            "run of 2,016 bytes, in a heap of 100,800 bytes); ") in text
    heap_map = run_cli("--heap-map", path).stdout
    assert "free 5,040 B in 4 runs, largest 2,016 B, fragmentation 3.00%" in heap_map


def test_the_timeline_of_a_tagged_dump_is_documented() -> None:
    """The goldens of `timeline` on tags.memdump, shown in docs/tags.md."""
    tags_doc = (REPO / "docs" / "tags.md").read_text()
    for fmt, name in (("text", "timeline-tags.txt"), ("json", "timeline-tags.json")):
        result = run_cli("timeline", "--format", fmt, "tags.memdump", cwd=FIXTURES)
        assert (result.returncode, result.stderr) == (0, "")
        golden = GOLDEN / name
        if UPDATE:
            golden.write_text(result.stdout)
        assert result.stdout == golden.read_text()
        assert f"```{'json' if fmt == 'json' else ''}\n{result.stdout}```" in tags_doc


def _heapmap_whole(path: str, seq: int) -> tuple[int, int, int]:
    from memdump_analyzer.heapmap import heap_map
    m = heap_map(path, str(seq))
    return m.free, m.largest_free, m.used + m.free


@pytest.mark.parametrize("seed", range(4))
def test_random_series_agree_with_the_heap_map_and_add_up(tmp_path: Path, seed: int) -> None:
    """Random tagged dumps, two threads, blocks in two regions: every fragmentation sample is
    the heap map's over all regions at that event, and the tags add up to the heap."""
    rng = random.Random(seed)
    d = Dump(header="MEMDUMP 2.2", short=seed % 2 == 0)
    names = ["physics", "audio", "ai"]
    stacks = {100: [], 101: []}
    live: list[str] = []
    used: set[int] = set()
    tag_of: dict[str, tuple[str, int]] = {}
    truth: dict[int, dict[str, int]] = {}  # after each event: each tag's live bytes
    now: dict[str, int] = {}
    for _ in range(300):
        tid = rng.choice((100, 101))
        r = rng.random()
        if r < 0.08:
            name = rng.choice(names)
            d.lines.append(f"g {tid} {d.string(name)}")
            stacks[tid].append(name)
        elif r < 0.14 and stacks[tid]:
            d.lines.append(f"u {tid}")
            stacks[tid].pop()
        elif r < 0.6 or not live:
            base = rng.choice((0x555555559000, 0x7FFFF0000000))
            addr = base + 16 + 16 * rng.randrange(4000)
            if any(abs(addr - u) < 512 for u in used):
                continue
            used.add(addr)
            live.append(f"0x{addr:x}")
            size = rng.randrange(1, 480)
            tag = stacks[tid][-1] if stacks[tid] else "(untagged)"
            tag_of[live[-1]] = (tag, size)
            now[tag] = now.get(tag, 0) + size
            truth[d.malloc(live[-1], size, main_at(10 + rng.randrange(3)), tid=tid)] = dict(now)
        else:
            ptr = live.pop(rng.randrange(len(live)))
            used.discard(int(ptr, 16))
            tag, size = tag_of.pop(ptr)
            now[tag] -= size
            truth[d.free(ptr, main_at(20), tid=tid)] = dict(now)
    d.end()
    path = d.write(tmp_path)
    p = load(path)[0].profile
    assert p.frag and p.frag[-1][0] == p.last_seq
    for seq, free, largest, heap in p.frag[:: max(1, len(p.frag) // 12)] + p.frag[-1:]:
        assert (free, largest, heap) == _heapmap_whole(path, seq), seq
    for points in (200, 7):  # 7: the spans merge many times
        q = load(path, points=points)[0].profile
        for (seq, heap, _, _), tags in zip(q.timeline, q.timeline_tags, strict=True):
            assert sum(tags) == heap, seq
            assert {n: b for n, b in zip(q.tag_names, tags, strict=True) if b} == {
                n: b for n, b in truth[max(k for k in truth if k <= seq)].items() if b}, seq
    series = json.loads(run_cli("--by-tag", "--format", "json", path).stdout)["tags"]
    for row in series:
        i = p.tag_names.index(row["tag"])
        assert row["series"] == [[pt[0], t[i]] for pt, t in zip(p.timeline, p.timeline_tags,
                                                                 strict=True)]


@pytest.mark.parametrize("seed", range(20))
def test_stacks_trimmed_per_node_agree_with_trim_stack(seed: int) -> None:
    """The views trim each stack node from its parent's (common.trimmed_nodes): on random stack
    trees of allocator frames, `main`s, inlined frames and others, each node's stack is
    what `rules.trim_stack` makes of its whole stack (kept whole when all allocator frames,
    cut below the outermost `main`, a `main` among the allocator frames not counted)."""
    from types import SimpleNamespace

    from memdump_analyzer.dumpdefs import Frame
    from memdump_analyzer.rules import trim_stack
    from memdump_analyzer.views.common import trimmed_nodes

    rng = random.Random(seed)
    names = ["malloc", "operator new(unsigned long)", "main", "main()", "f", "g", None,
             "__libc_start_main", "realloc"]
    frames = {i: Frame(i, "a.out", i, rng.choice(names), None, None) for i in range(1, 12)}
    inlined = {i: [Frame(i, "a.out", i, rng.choice(names), None, None)
                   for _ in range(rng.randint(1, 2))] for i in rng.sample(range(1, 12), 4)}
    nodes: dict[int, tuple[int, int]] = {0: (0, 0)}
    for ident in range(1, 400):
        nodes[ident] = (rng.choice([0, *range(max(1, ident - 30), ident)]), rng.randint(1, 11))
    reader = SimpleNamespace(nodes=nodes, frames=frames, inlined_into=inlined)
    trimmed = trimmed_nodes(reader)  # type: ignore[arg-type]
    order = list(nodes)
    rng.shuffle(order)  # nodes asked for before or after their parents
    for ident in order:
        whole: list[Frame] = []
        node = ident
        while node:
            node, frame = nodes[node]
            whole += [frames[frame], *inlined.get(frame, ())]
        assert trimmed(ident) == trim_stack(whole), ident


def test_a_stacks_row_is_unpacked_in_its_fields_order() -> None:
    """views/stream._finish unpacks a stack's row (passapi's CUR ... NODE) whole."""
    from memdump_analyzer.views.stream import ROW_ORDER

    assert ROW_ORDER == tuple(range(14))
