"""`--format html` (docs/exports.md, "html"): one self-contained page, loaded in headless
chromium: no console error, the frame labels and the zoom run, and the screenshot shows the chart
and the flame graphs in their colours."""

from __future__ import annotations

import re
from pathlib import Path

from analyzer_testlib import FIXTURES, Dump, F, main_at, run_cli
from exports_testlib import chromium, colour_count, console_messages, png_pixels
from memdump_analyzer.exports.flame import PALETTE
from memdump_analyzer.exports.html import CHART_FILL, CHART_LINE

EXAMPLE = FIXTURES / "exports.memdump"
READY = '"memdump report ready", source: '


def page(tmp_path: Path, dump: Path = EXAMPLE) -> Path:
    out = tmp_path / "report.html"
    result = run_cli("--format", "html", "-o", str(out), str(dump))
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    return out


def test_the_page_fetches_nothing(tmp_path: Path) -> None:
    text = page(tmp_path).read_text()
    assert re.search(r"\b(src|href)=|url\(|@import|https?:|<link|<iframe", text) is None
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


def test_the_screenshot_shows_the_chart_and_the_flame_graphs(tmp_path: Path) -> None:
    d = Dump(header="MEMDUMP 2.1")
    for i in range(40):
        d.malloc(f"0x{0x10000 + 0x100 * i:x}", 100 + i, [F(f"f{i % 4}", "/src/a.c", 5 + i % 4),
                                                          *main_at(20)])
    for i in range(0, 40, 2):
        d.free(f"0x{0x10000 + 0x100 * i:x}", main_at(21))
    d.end()
    out = page(tmp_path, Path(d.write(tmp_path)))
    shot = tmp_path / "shot.png"
    proc = chromium(out.as_uri(), tmp_path, "--window-size=1100,1300", f"--screenshot={shot}")
    assert proc.returncode == 0 and shot.is_file(), proc.stderr
    assert len(console_messages(proc.stderr)) == 1, proc.stderr
    width, height, rows = png_pixels(shot)
    assert (width, height) == (1100, 1300)
    # the chart's area, then the flame graphs: each function keeps one palette colour
    assert colour_count(rows, CHART_FILL) > 50_000
    assert colour_count(rows, CHART_LINE) > 500
    flame = sum(colour_count(rows, c) for c in PALETTE)
    assert flame > 20_000


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
