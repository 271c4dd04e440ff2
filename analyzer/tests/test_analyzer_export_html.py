"""`--format html` (docs/exports.md, "html"): one self-contained page, loaded in headless
chromium: no console error, the frame labels and the zoom run, and the screenshot shows the
charts (heap and RSS, fragmentation, tags), the heap map and the flame graphs in their colours;
the heap map's colouring (which block got which colour, the legend) on handmade dumps."""

from __future__ import annotations

import re
from pathlib import Path

from analyzer_testlib import FIXTURES, Dump, F, main_at, run_cli
from exports_testlib import chromium, colour_count, console_messages, page_screenshot
from memdump_analyzer.exports.charts import (
    BASE_LINE,
    FRAG_LINE,
    OTHER,
    RSS_LINE,
    TAG_COLOURS,
    by_ms,
    rss_line,
)
from memdump_analyzer.exports.flame import GROW, PALETTE, SHRINK
from memdump_analyzer.exports.html import CHART_FILL, CHART_LINE
from memdump_analyzer.exports.mapsvg import STACK_COLOURS
from test_analyzer_exports import _two_runs

EXAMPLE = FIXTURES / "exports.memdump"
READY = '"memdump report ready", source: '


def page(tmp_path: Path, dump: Path = EXAMPLE) -> Path:
    out = tmp_path / "report.html"
    result = run_cli("--format", "html", "-o", str(out), str(dump))
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    return out


def test_the_page_fetches_nothing(tmp_path: Path) -> None:
    text = page(tmp_path).read_text()
    assert re.search(r"\b(src|href)=|url\((?!#)|@import|https?:|<link|<iframe", text) is None
    assert text.count("<script>") == 1 and text.count("<style>") == 1


def test_the_page_loads_without_a_console_error_and_labels_its_frames(tmp_path: Path) -> None:
    out = page(tmp_path)
    proc = chromium(out.as_uri(), tmp_path, "--dump-dom")
    assert proc.returncode == 0, proc.stderr
    messages = console_messages(proc.stderr)
    assert len(messages) == 1 and messages[0].startswith(READY), messages
    dom = proc.stdout
    # the script named the frames that fit: all, main, start_thread, load, work in the leaks'
    labels = re.findall(r'<svg id="leaks".*?</svg>', dom, re.S)[0]
    assert re.findall(r"<text[^>]*>([^<]+)</text>", labels) == [
        "all", "main", "start_thread", "load", "work"]
    assert "104 bytes in 2 blocks" in dom and "1,200 bytes in 4 blocks at event 5" in dom


def test_a_zoomed_address_zooms_into_the_frame(tmp_path: Path) -> None:
    """#zoom-leaks-1 is main: it and its callee take the whole width, start_thread's side is
    hidden, `all` below it is faded."""
    out = page(tmp_path)
    proc = chromium(out.as_uri() + "#zoom-leaks-1", tmp_path, "--dump-dom")
    assert len(console_messages(proc.stderr)) == 1, proc.stderr
    leaks = re.findall(r'<svg id="leaks".*?</svg>', proc.stdout, re.S)[0]
    frames = {m.group(2): m.group(0) for m in re.finditer(
        r'<g class="f( faded)?" data-i="\d+"[^>]*data-n="([^"]+)".*?</g>', leaks, re.S)}
    assert set(frames) == {"all", "main", "start_thread", "load", "work"}
    for name in ("main", "load", "all"):
        assert 'width="1000.00"' in frames[name], frames[name]
    assert "faded" in frames["all"] and "faded" not in frames["main"]
    for name in ("start_thread", "work"):
        assert 'style="display: none;"' in frames[name], frames[name]


def _game(tmp_path: Path) -> Path:
    """A tagged, clocked dump: 40 blocks under `physics`, `audio` and no tag in turn, every
    other one freed, a clock sample every 10 events with the RSS growing (kept near the heap's
    bytes, so that both lines show)."""
    d = Dump(header="MEMDUMP 2.2")
    names = [d.string("physics"), d.string("audio")]
    for i in range(40):
        if i % 10 == 0:
            d.lines.append(f"c {i * 3} {6000 + 100 * i}")
        if i % 3 < 2:
            d.lines.append(f"g 100 {names[i % 3]}")
        d.malloc(f"0x{0x10000 + 0x100 * i:x}", 100 + 4 * i,
                 [F(f"f{i % 4}", "/src/a.c", 5 + i % 4), *main_at(20)])
        if i % 3 < 2:
            d.lines.append("u 100")
    for i in range(0, 40, 2):
        d.free(f"0x{0x10000 + 0x100 * i:x}", main_at(21))
    d.lines.append("c 200 9000")
    d.end()
    return Path(d.write(tmp_path))


def test_the_screenshot_shows_the_charts_the_heap_map_and_the_flame_graphs(
        tmp_path: Path) -> None:
    width, height, rows = page_screenshot(page(tmp_path, _game(tmp_path)), tmp_path, 2600)
    assert (width, height) == (1100, 2600)
    # the heap's area and line, the RSS line, the fragmentation's line
    assert colour_count(rows, CHART_FILL) > 30_000
    for line in (CHART_LINE, RSS_LINE, FRAG_LINE):
        assert colour_count(rows, line) > 800, line
    # the tags, stacked and in the heap map: untagged grey, physics and audio
    for colour in (OTHER, TAG_COLOURS[0], TAG_COLOURS[1]):
        assert colour_count(rows, colour) > 20_000, colour
    flame = sum(colour_count(rows, c) for c in PALETTE)
    assert flame > 20_000


def _cells(html: str, title: str) -> list[str]:
    """The fills of the heap map's cells under the heading that starts with `title`."""
    part = html.split(f"<h3>{title}", 1)[1].split("</svg>", 1)[0]
    return re.findall(r'<rect class="cell"[^>]*fill="([^"]+)"', part)


def _legend(html: str) -> list[tuple[str, str]]:
    part = html.split("<h2>Heap map</h2>", 1)[1].split("<h3>", 1)[0]
    return re.findall(r'<span class="sw" style="background:([^"]+)"></span>([^<]+)</span>', part)


def test_the_heap_map_colours_blocks_by_stack(tmp_path: Path) -> None:
    """Three stacks: f_a's block and f_b's, f_c's freed after the peak (a 48-byte hole), f_a's
    second block after it. Cells of 16 bytes: f_a has the most bytes (its colour first), then
    f_b, then f_c; the hole is hatched."""
    d = Dump(header="MEMDUMP 2.1")
    a, b, c = ([F(f, "/src/a.c", line), *main_at(20)] for f, line in (
        ("f_a", 5), ("f_b", 6), ("f_c", 7)))
    d.malloc("0x10010", 40, a)
    d.malloc("0x10040", 24, b)
    d.malloc("0x10060", 40, c)
    d.free("0x10060", main_at(21))
    d.malloc("0x10090", 40, a)
    d.end()
    html = page(tmp_path, Path(d.write(tmp_path))).read_text()
    first, second, third = TAG_COLOURS[:3]
    assert _cells(html, "At the peak (event 3)") == [first] * 3 + [second] * 2 + [third] * 3
    assert _cells(html, "At the end (event 6)") == (
        [first] * 3 + [second] * 2 + ["url(#hatch)"] * 3 + [first] * 3)
    assert _legend(html) == [(first, "f_a (a.c:5)"), (second, "f_b (a.c:6)"),
                             (third, "f_c (a.c:7)"), ("#ffffff", "free (between live blocks)")]
    assert ("<title>0x10080-0x10090: 16 of 16 bytes used\n0x10090, 40 bytes, f_a (a.c:5)"
            "</title>") in html
    assert "fragmentation 0.00%, largest free run 0 of 0 free bytes" in html
    assert "At the end (event 6): fragmentation 0.00%, largest free run 48 of 48 free" in html


def test_the_heap_map_greys_the_stacks_past_the_coloured_ones(tmp_path: Path) -> None:
    d = Dump(header="MEMDUMP 2.1")
    for i in range(STACK_COLOURS + 2):  # the largest first: stack i has 400 - 16 i bytes
        d.malloc(f"0x{0x10010 + 0x200 * i:x}", 400 - 16 * i,
                 [F(f"s{i}", "/src/a.c", 10 + i), *main_at(20)])
    d.end()
    html = page(tmp_path, Path(d.write(tmp_path))).read_text()
    legend = _legend(html)
    assert legend == [(TAG_COLOURS[i], f"s{i} (a.c:{10 + i})") for i in range(STACK_COLOURS)] \
        + [(OTHER, "2 other stacks"), ("#ffffff", "free (between live blocks)")]


def test_stacks_that_share_their_innermost_frame_are_named_where_they_differ(
        tmp_path: Path) -> None:
    """Four stacks through one allocation wrapper (jq's `jv_mem_alloc` six times in six
    colours): each is named by the first frame where it differs from all the others, the
    deepest of its first differences (wrap's two callers differ one frame further out)."""
    x = F("xalloc", "/src/x.c", 9)
    stacks = [[x, F("parse", "/src/p.c", 40)], [x, F("load", "/src/l.c", 12)],
              [x, F("wrap", "/src/w.c", 5), F("parse", "/src/p.c", 41)],
              [x, F("wrap", "/src/w.c", 5), F("load", "/src/l.c", 13)]]
    d = Dump(header="MEMDUMP 2.1")
    for i, frames in enumerate(stacks):
        d.malloc(f"0x{0x10010 + 0x200 * i:x}", 400 - 100 * i, [*frames, *main_at(20)])
    d.end()
    html = page(tmp_path, Path(d.write(tmp_path))).read_text()
    assert _legend(html) == [
        (TAG_COLOURS[0], "xalloc (x.c:9) via parse (p.c:40)"),
        (TAG_COLOURS[1], "xalloc (x.c:9) via load (l.c:12)"),
        (TAG_COLOURS[2], "xalloc (x.c:9) via parse (p.c:41)"),
        (TAG_COLOURS[3], "xalloc (x.c:9) via load (l.c:13)"),
        ("#ffffff", "free (between live blocks)")]


def test_the_heap_map_colours_blocks_by_tag(tmp_path: Path) -> None:
    """`physics` at 0x10010, `audio` at 0x10040, one untagged block at 0x10070: the tags'
    colours are the chart's, the untagged grey."""
    d = Dump(header="MEMDUMP 2.2")
    physics, audio = d.string("physics"), d.string("audio")
    d.lines.append(f"g 100 {physics}")
    d.malloc("0x10010", 40, main_at(10))
    d.lines += ["u 100", f"g 100 {audio}"]
    d.malloc("0x10040", 40, main_at(11))
    d.lines.append("u 100")
    d.malloc("0x10070", 40, main_at(12))
    d.end()
    html = page(tmp_path, Path(d.write(tmp_path))).read_text()
    assert _cells(html, "At the end") == [TAG_COLOURS[0]] * 3 + [TAG_COLOURS[1]] * 3 + \
        [OTHER] * 3
    # as many bytes each: by name
    assert _legend(html) == [(OTHER, "(untagged)"), (TAG_COLOURS[1], "audio"),
                             (TAG_COLOURS[0], "physics"), ("#ffffff", "free (between live blocks)")]
    assert "<title>0x10000-0x10010: 16 of 16 bytes used\n0x10010, 40 bytes, physics" in html


def test_the_charts_are_the_timelines_series(tmp_path: Path) -> None:
    """views.memdump has clock samples: x in ms, the heap and the RSS on charts of their own
    (each its own axis: 4 KiB of heap beside 3 MiB of RSS was a line at the bottom), the RSS
    said to hold the in-process recorder's memory, each point's exact figures in its title;
    the fragmentation below."""
    html = page(tmp_path, FIXTURES / "views.memdump").read_text()
    charts = html.split("<h2>Memory over time</h2>", 1)[1].split("<h2>", 1)[0]
    svgs = re.findall(r"<svg.*?</svg>", charts, re.S)
    assert [re.findall(r'<polyline[^>]*stroke="([^"]+)"', svg) for svg in svgs] == [
        [CHART_LINE], [RSS_LINE], [FRAG_LINE]]
    # each chart's top label is its own series' highest value
    assert [re.findall(r'<text x="66"[^>]*>([^<]+)</text>', svg)[-1] for svg in svgs[:2]] == [
        "4.3 KiB", "3.0 MiB"]
    assert ("<h3>Resident set (RSS)</h3>\n<p class=\"note\">RSS is the whole process&#x27;s, "
            "memdump&#x27;s in-process recorder included (its window of the dump, its "
            "tables).</p>") in charts
    titles = re.findall(r'<circle class="pt"[^>]*><title>([^<]+)</title>', charts)
    assert len(titles) == 48  # the timeline's 16 points, on the heap's, the RSS's, frag's
    assert "event 10, 5 ms: heap 4,424 bytes, RSS 2,097,152 bytes, fragmentation 0.00%" in titles
    assert "event 3, 0 ms: heap 4,096 bytes, RSS 1,048,576 bytes, fragmentation 0.00%" in titles
    assert "RSS 3,145,728 bytes" in titles
    assert "milliseconds since the recording began" in charts
    assert "Live bytes by tag" not in charts  # no tags


#: run in chromium after the page: every chart label's box against its chart's viewBox
_CLIP_CHECK = """<script>
window.addEventListener("load", () => {
  const bad = [];
  for (const svg of document.querySelectorAll("svg.chart")) {
    const v = svg.viewBox.baseVal;
    for (const t of svg.querySelectorAll("text")) {
      const b = t.getBBox();
      if (b.x < v.x || b.x + b.width > v.x + v.width || b.y < v.y
          || b.y + b.height > v.y + v.height) bad.push(t.textContent);
    }
  }
  console.log("clipped labels: " + JSON.stringify(bad));
});
</script>
"""


def test_no_axis_label_is_clipped(tmp_path: Path) -> None:
    """A run of 3,900,000 ms and a heap of MiBs: every tick label of every chart lies inside
    its chart, as chromium lays it out (the last one, centred on the axis's end, was cut:
    "3,900,00")."""
    d = Dump(header="MEMDUMP 2.2")
    for i in range(40):
        d.lines.append(f"c {i * 100_000} {(900 + 40 * i) << 20}")
        d.malloc(f"0x{0x7F0000000010 + (1 << 21) * i:x}", (1 << 20) + 4096 * i, main_at(10))
    d.end()
    out = page(tmp_path, Path(d.write(tmp_path)))
    text = out.read_text()
    assert ">3,900,000</text>" in text
    out.write_text(text.replace("</body>", _CLIP_CHECK + "</body>"))
    proc = chromium(out.as_uri(), tmp_path, "--dump-dom")
    assert proc.returncode == 0, proc.stderr
    said = [m for m in console_messages(proc.stderr) if m.startswith('"clipped labels:')]
    assert said and said[0].startswith('"clipped labels: []"'), said


def test_the_errors_and_the_leak_kinds_are_listed(tmp_path: Path) -> None:
    """mixed.memdump: a double free at event 6, leaks still reachable and definitely lost."""
    text = page(tmp_path, FIXTURES / "mixed.memdump").read_text()
    errors = text.split("<h2>Heap errors</h2>", 1)[1]
    assert re.search(r"<tr><td>double-free</td><td class=\"n\">6</td><td>free</td>"
                     r"<td>0x5555555592a0</td><td><div class=\"stack\">at main \(app.cc:24\)"
                     r"</div></td></tr>", errors), errors
    leaks = text.split("<h2>Leaks</h2>", 1)[1].split("<h2>", 1)[0]
    kinds = re.findall(r"<tr><td>([a-z ]+)</td><td class=\"n\">([\d,]+)</td>", leaks)
    assert kinds == [("still reachable", "24"), ("definitely lost", "6")]


# -- --base ----------------------------------------------------------------------------------------


def _base_page(tmp_path: Path) -> str:
    """test_analyzer_exports' two runs: BASE leaks 100 bytes at grow (a.c:5) and 30 at keep
    (b.c:7); NEW 250 at grow and 8 at extra (c.c:9)."""
    base, new = _two_runs(tmp_path)
    out = tmp_path / "diff.html"
    result = run_cli("--format", "html", "--base", str(base), "-o", str(out), str(new))
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    return out.read_text()


def test_the_base_page_shows_both_runs_and_the_difference(tmp_path: Path) -> None:
    html = _base_page(tmp_path)
    assert ('<tr><td>peak heap bytes</td><td class="n">130</td><td class="n">258</td>'
            '<td class="n">+128</td></tr>') in html
    assert ('<tr><td>leaked blocks</td><td class="n">2</td><td class="n">2</td>'
            '<td class="n">+0</td></tr>') in html
    leaks = html.split("<h2>Leaks new or grown since the base</h2>", 1)[1].split("<h2>", 1)[0]
    assert re.findall(r'<tr><td>(new|grew)</td><td>leaked</td><td class="n">(\d+)</td>'
                      r'<td class="n">(\d+)</td><td class="n">(\d)</td><td class="n">(\d)</td>'
                      r'<td><div class="stack">at (\w+)', leaks) == [
        ("new", "0", "8", "0", "1", "extra"), ("grew", "100", "250", "1", "1", "grow")]
    graph = re.findall(r'<svg id="leaks".*?</svg>', html, re.S)[0]
    frames = {n: (t, f) for n, t, f in re.findall(
        r'<title>(\w+): ([^<]+)</title><rect[^>]*fill="([^"]+)"', graph)}
    assert frames == {"all": ("+128 bytes leaked (188 changed)", GROW),
                      "main": ("+128 bytes leaked (188 changed)", GROW),
                      "grow": ("+150 bytes leaked (150 changed)", GROW),
                      "extra": ("+8 bytes leaked (8 changed)", GROW),
                      "keep": ("-30 bytes leaked (30 changed)", SHRINK)}
    chart = html.split("<h2>Memory over time</h2>", 1)[1].split("<h2>", 1)[0]
    assert re.findall(r'<polyline[^>]*stroke="([^"]+)"', chart) == [CHART_LINE, BASE_LINE]
    assert "Peak heap: base 130 bytes, new 258 (+128)." in chart


def test_chromium_loads_the_base_page(tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    out.write_text(_base_page(tmp_path))
    _, _, rows = page_screenshot(out, tmp_path, 1400)
    assert colour_count(rows, GROW) > 20_000  # both graphs: grew
    assert colour_count(rows, SHRINK) > 2_000  # keep shrank
    for line in (CHART_LINE, BASE_LINE):
        assert colour_count(rows, line) > 800, line


def test_a_run_of_a_few_ms_is_drawn_over_events_and_an_unknown_rss_is_no_point() -> None:
    """Clock samples at 0 ms for all but the last point: x is events; an RSS of 0 (before the
    first sample) is left out of the RSS line, and one known RSS makes no line."""
    def body(ms: list[int], rss: list[int]) -> dict[str, object]:
        return {"clocked": True, "points": [{"seq": i + 1, "ms": m, "rss_bytes": r}
                                            for i, (m, r) in enumerate(zip(ms, rss,
                                                                           strict=True))]}
    few = body([0, 0, 0, 4], [0, 0, 8192, 8192])
    assert not by_ms(few)
    (line,) = rss_line(few, [1, 2, 3, 4], "RSS", RSS_LINE)
    assert (list(line.xs or ()), list(line.values)) == ([3, 4], [8192, 8192])
    assert rss_line(body([0, 0, 0, 4], [0, 0, 0, 8192]), [1, 2, 3, 4], "RSS", RSS_LINE) == []
    assert by_ms(body([0, 3, 5], [1, 1, 1]))
    # 4 moments for 20 points (a run of 37 ms of 200 points, in small): events
    assert not by_ms(body([0] * 8 + [5] * 6 + [17] * 5 + [37], [1] * 20))
    assert by_ms(body([0] * 8 + [5] * 6 + [17] * 4 + [30, 37], [1] * 20))


def test_only_the_largest_regions_are_drawn(tmp_path: Path) -> None:
    """20 blocks 2 MiB apart are 20 regions: the 16 largest are drawn, the note says so."""
    d = Dump(header="MEMDUMP 2.1")
    for i in range(20):
        d.malloc(f"0x{0x10000010 + (2 << 20) * i:x}", 100 + 16 * i, main_at(10))
    d.end()
    html = page(tmp_path, Path(d.write(tmp_path))).read_text()
    end = html.split("<h3>At the end", 1)[1]
    drawn = re.findall(r'<text x="0" y="\d+">0x([0-9a-f]+)-', end.split("</svg>", 1)[0])
    assert drawn == [f"{0x10000000 + (2 << 20) * i:x}" for i in range(4, 20)]
    assert "4 smaller regions are not drawn: the summary below lists them." in end
