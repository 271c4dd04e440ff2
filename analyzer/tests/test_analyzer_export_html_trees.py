"""`--format html`'s views of heaptrack_gui (docs/exports.md, "html"): the stacks the page embeds,
exact; the top-down and bottom-up trees, the callers and callees of a function, sorting and the
keyboard, run in headless chromium; the live heap stacked by stack and the sizes' histogram."""

from __future__ import annotations

import json
import re
from pathlib import Path

from analyzer_testlib import FIXTURES, Dump, F, main_at, run_cli
from exports_testlib import (
    chromium,
    colour_count,
    console_messages,
    doc_block,
    page_screenshot,
)
from memdump_analyzer.exports.charts import OTHER, TAG_COLOURS
from memdump_analyzer.exports.htmltreejs import SHOWN
from memdump_analyzer.exports.htmltrees import TOP_STACKS
from test_analyzer_export_html import READY, page


def embedded(html: str) -> dict[str, object]:
    m = re.search(r'<script type="application/json" id="stack-data">(.*?)</script>', html, re.S)
    assert m is not None
    return json.loads(m.group(1))


def decoded(data: dict) -> list[tuple[tuple[str, ...], list[int]]]:  # type: ignore[type-arg]
    """Each embedded stack as (its functions, the outermost first; its four figures)."""
    nodes = data["nodes"]
    parent = [i - nodes[2 * i] for i in range(len(nodes) // 2)]
    out = []
    for node, *figures in data["stacks"]:
        names = []
        while node >= 0:
            names.append(data["functions"][nodes[2 * node + 1]])
            node = parent[node]
        out.append((tuple(reversed(names)), figures))
    return out


def _three_stacks(tmp_path: Path) -> Path:
    """f_a (a.c:5) allocates 100 bytes and frees them at once, twice (2 temporary allocations);
    f_a (a.c:6), the same functions, leaks 40; f_b called by helper allocates 200, freed after
    another allocation (not temporary); f_b called by other allocates 300 and 24, both leaked.
    The peak (540 bytes) is after event 7."""
    d = Dump(header="MEMDUMP 2.1")
    a = [F("f_a", "/src/a.c", 5), *main_at(20)]
    a2 = [F("f_a", "/src/a.c", 6), *main_at(20)]
    b = [F("f_b", "/src/b.c", 7), F("helper", "/src/b.c", 30), *main_at(21)]
    c = [F("f_b", "/src/b.c", 7), F("other", "/src/c.c", 40), *main_at(22)]
    # (block, its size and stack) or (block, None: freed)
    for ptr, size, stack in [(0x10000, 100, a), (0x10000, None, ()), (0x10000, 100, a),
                             (0x10000, None, ()), (0x20000, 40, a2), (0x30000, 200, b),
                             (0x40000, 300, c), (0x30000, None, ()), (0x50000, 24, c)]:
        if size is None:
            d.free(hex(ptr), main_at(30))
        else:
            d.malloc(hex(ptr), size, stack)
    d.end()
    return Path(d.write(tmp_path))


def test_the_page_embeds_each_stacks_figures_exactly(tmp_path: Path) -> None:
    """The stacks that name the same functions are one (f_a at a.c:5 and a.c:6): allocations,
    temporary allocations, bytes at the peak, bytes leaked; the most allocations first."""
    dump = _three_stacks(tmp_path)
    data = embedded(page(tmp_path, dump).read_text())
    assert data == {
        "columns": ["allocations", "temporary", "peak", "leaked"],
        "functions": ["main", "f_a", "other", "f_b", "helper"],
        # main (root), f_a under main, other under main, f_b under other, helper, f_b under it
        "nodes": [1, 0, 1, 1, 2, 2, 1, 3, 4, 4, 1, 3],
        "stacks": [[1, 3, 2, 40, 40], [3, 2, 0, 300, 324], [5, 1, 0, 200, 0]]}
    # docs/exports.md's example is this page's
    assert json.loads(doc_block("The trees are made in the browser from the stacks")) == data
    # the Python pass's, without the analyser's library, are the same
    python = tmp_path / "python.html"
    result = run_cli("--format", "html", "-o", str(python), str(dump),
                     env={"MEMDUMP_NATIVE": "0"})
    assert (result.returncode, result.stderr) == (0, "")
    assert embedded(python.read_text()) == data
    assert decoded(data) == [(("main", "f_a"), [3, 2, 40, 40]),
                             (("main", "other", "f_b"), [2, 0, 300, 324]),
                             (("main", "helper", "f_b"), [1, 0, 200, 0])]


def test_the_fixtures_stacks_are_the_exports_figures(tmp_path: Path) -> None:
    """exports.memdump: grow_buf's malloc of 16 bytes is freed by the realloc that follows it
    (temporary); puts' buffer is the runtime's (still reachable, not leaked); the totals are the
    summary's (6 allocations, 1,200 bytes at the peak, 104 leaked)."""
    html = page(tmp_path, FIXTURES / "exports.memdump").read_text()
    stacks = decoded(embedded(html))
    assert stacks == [(("main", "grow_buf"), [2, 1, 48, 0]), (("main", "load"), [2, 0, 128, 64]),
                      (("main", "puts", "_IO_file_doallocate"), [1, 0, 1024, 0]),
                      (("start_thread", "work"), [1, 0, 0, 40])]
    assert [sum(s[1][i] for s in stacks) for i in range(4)] == [6, 1, 1200, 104]
    assert "1,256 bytes in 6 blocks" in html and "104 bytes in 2 blocks" in html


def test_the_live_heap_is_stacked_by_its_top_stacks(tmp_path: Path) -> None:
    """A snapshot after every event: the stacks by their most live bytes (f_b via other's 324
    first), named apart where they share their innermost frame; each point's exact bytes."""
    html = page(tmp_path, _three_stacks(tmp_path)).read_text()
    part = html.split("<h2>Live heap by stack</h2>", 1)[1].split("<h2>", 1)[0]
    assert re.findall(r'<span class="sw" style="background:([^"]+)"></span>([^<]+)</span>',
                      part) == [(TAG_COLOURS[0], "f_b (b.c:7) via other (c.c:40)"),
                                (TAG_COLOURS[1], "f_b (b.c:7) via helper (b.c:30)"),
                                (TAG_COLOURS[2], "f_a (a.c:5)"), (TAG_COLOURS[3], "f_a (a.c:6)")]
    titles = re.findall(r'<circle class="pt"[^>]*><title>([^<]*)</title>', part)
    assert len(titles) == 11  # before the first event, and after each of the 10
    assert titles[7] == ("event 7: 540 bytes live\nf_b (b.c:7) via other (c.c:40): 300\n"
                         "f_b (b.c:7) via helper (b.c:30): 200\nf_a (a.c:6): 40")
    assert titles[1] == "event 1: 100 bytes live\nf_a (a.c:5): 100"
    assert titles[10] == "event 10: 364 bytes live\nf_b (b.c:7) via other (c.c:40): 324\n" \
        "f_a (a.c:6): 40"


def test_the_stacks_past_the_top_ones_are_summed_in_grey(tmp_path: Path) -> None:
    d = Dump(header="MEMDUMP 2.1")
    for i in range(TOP_STACKS + 2):  # stack i holds 1,000 - 10 i bytes
        d.malloc(f"0x{0x10000 + 0x1000 * i:x}", 1000 - 10 * i,
                 [F(f"s{i}", "/src/a.c", 10 + i), *main_at(20)])
    d.end()
    html = page(tmp_path, Path(d.write(tmp_path))).read_text()
    part = html.split("<h2>Live heap by stack</h2>", 1)[1].split("<h2>", 1)[0]
    keys = re.findall(r'<span class="sw" style="background:([^"]+)"></span>([^<]+)</span>', part)
    assert keys == [(TAG_COLOURS[i], f"s{i} (a.c:{10 + i})") for i in range(TOP_STACKS)] + [
        (OTHER, "other stacks")]
    last = re.findall(r'<circle class="pt"[^>]*><title>([^<]*)</title>', part)[-1]
    assert last.endswith("\nother stacks: 1,790")  # s10's 900 and s11's 890


def test_the_histogram_counts_each_power_of_two_of_sizes(tmp_path: Path) -> None:
    html = page(tmp_path, _three_stacks(tmp_path)).read_text()
    part = html.split("<h2>Allocation sizes</h2>", 1)[1].split("<h2>", 1)[0]
    assert "6 allocations by requested size" in part
    assert re.findall(r'<g class="bar"><title>([^<]*)</title>', part) == [
        "16 to 31 bytes: 1 block (16.67%), 24 bytes", "32 to 63 bytes: 1 block (16.67%), 40 bytes",
        "64 to 127 bytes: 2 blocks (33.33%), 200 bytes",
        "128 to 255 bytes: 1 block (16.67%), 200 bytes",
        "256 to 511 bytes: 1 block (16.67%), 300 bytes"]
    assert re.findall(r'text-anchor="middle">(\w+)</text></g>', part) == [
        "16", "32", "64", "128", "256"]


#: run in chromium after the page: the keyboard on the trees, a column sorted, a function picked
_DRIVE = """<script>
window.addEventListener("load", () => {
  const out = {};
  const rows = (id) => [...document.querySelectorAll("#" + id + " tbody tr")].map((tr) =>
    [tr.getAttribute("aria-level"), tr.getAttribute("aria-expanded") || "-",
     tr.cells[0].lastChild.textContent, ...[...tr.cells].slice(1).map((td) => td.textContent)]
    .join(" "));
  const key = (id, k) => document.querySelector("#" + id + " tbody tr[tabindex='0']")
    .dispatchEvent(new KeyboardEvent("keydown", {key: k, bubbles: true}));
  const at = () => document.activeElement.cells[0].lastChild.textContent;
  out.tabbable = [...document.querySelectorAll("table.tree")].map((t) =>
    t.querySelectorAll("tbody tr[tabindex='0']").length + "+" +
    t.querySelectorAll("th button").length);
  document.querySelector("#topdown tbody tr").focus();
  for (const k of ["ArrowDown", "ArrowRight", "ArrowRight", "ArrowDown", "Enter"])
    key("topdown", k);
  out.topdown = rows("topdown");
  out.focused = at();
  key("topdown", "ArrowLeft");
  key("topdown", "ArrowLeft");
  out.back = at();
  key("topdown", "ArrowLeft");
  out.closed = rows("topdown");
  document.querySelector("#bottomup th:nth-child(4) button").click();
  out.sortedByPeak = rows("bottomup");
  document.querySelector("#bottomup th:nth-child(4) button").click();
  out.ascending = rows("bottomup");
  document.querySelector("#bottomup tbody tr").focus();
  for (const k of ["ArrowDown", "ArrowRight", "ArrowDown", "ArrowRight"]) key("bottomup", k);
  out.bottomup = rows("bottomup");
  out.firstPicked = document.getElementById("callers-title").textContent;
  document.querySelector("#functions tbody tr").focus();
  for (const k of ["ArrowDown", "ArrowDown", "Enter"]) key("functions", k);
  out.callers = [document.getElementById("callers-title").textContent, ...rows("callers")];
  out.callees = [document.getElementById("callees-title").textContent, ...rows("callees")];
  document.querySelector("#callers tbody tr").focus();
  key("callers", "Enter");
  out.followed = document.getElementById("callees-title").textContent;
  out.picked = document.querySelector("#functions tr.picked").cells[0].lastChild.textContent;
  console.log("trees: " + JSON.stringify(out));
});
</script>
"""


def _driven(tmp_path: Path, out: Path) -> dict:  # type: ignore[type-arg]
    out.write_text(out.read_text().replace("</body>", _DRIVE + "</body>"))
    proc = chromium(out.as_uri(), tmp_path, "--dump-dom")
    assert proc.returncode == 0, proc.stderr
    messages = console_messages(proc.stderr)
    assert messages[0].startswith(READY), messages
    said = [m for m in messages if m.startswith('"trees: ')]
    assert len(messages) == 2 and said, messages
    return json.loads(said[0][len('"trees: '):].rsplit('", source: ', 1)[0])


def test_the_trees_run_with_the_keyboard_in_chromium(tmp_path: Path) -> None:
    out = _driven(tmp_path, page(tmp_path, _three_stacks(tmp_path)))
    # one row of each grid in the tab order, and its four column buttons; main has no callers
    assert out["tabbable"] == ["1+4", "1+4", "1+4", "0+4", "1+4"]
    # down to main, right opens it, right again to its first child, down to other, Enter opens
    assert out["topdown"] == [
        "1 true all 6 2 540 364", "2 true main 6 2 540 364", "3 - f_a 3 2 40 40",
        "3 true other 2 0 300 324", "4 - f_b 2 0 300 324", "3 false helper 1 0 200 0"]
    assert out["focused"] == "other"
    assert out["back"] == "main"  # left closed other, left again went to its parent
    assert out["closed"] == ["1 true all 6 2 540 364", "2 false main 6 2 540 364"]
    assert out["sortedByPeak"] == [
        "1 true all 6 2 540 364", "2 false f_b 3 0 500 324", "2 false f_a 3 2 40 40"]
    assert out["ascending"] == [
        "1 true all 6 2 540 364", "2 false f_a 3 2 40 40", "2 false f_b 3 0 500 324"]
    # bottom-up, by peak ascending: f_a opened, then its caller main (the stack's end)
    assert out["bottomup"] == [
        "1 true all 6 2 540 364", "2 true f_a 3 2 40 40", "3 - main 3 2 40 40",
        "2 false f_b 3 0 500 324"]
    assert out["firstPicked"] == "Callers of main"  # the most allocations, picked at first
    # main 6, f_a 3, f_b 3 (by name), other 2, helper 1: down twice is f_b
    assert out["callers"] == ["Callers of f_b", "1 - other 2 0 300 324",
                              "1 - helper 1 0 200 0"]
    assert out["callees"] == ["Callees of f_b", " - (none)"]
    assert out["followed"] == "Callees of other"  # Enter on a caller picks it
    assert out["picked"] == "other"


def test_a_row_with_many_children_shows_the_first_ones_then_the_rest_on_enter(
        tmp_path: Path) -> None:
    d = Dump(header="MEMDUMP 2.1")
    for i in range(SHOWN + 5):
        d.malloc(f"0x{0x10000 + 0x100 * i:x}", 10 + i, [F(f"g{i:02}", "/src/a.c", 10 + i),
                                                         *main_at(20)])
    d.end()
    out = page(tmp_path, Path(d.write(tmp_path)))
    out.write_text(out.read_text().replace("</body>", """<script>
window.addEventListener("load", () => {
  const tbody = document.querySelector("#topdown tbody");
  const key = (k) => tbody.querySelector("tr[tabindex='0']")
    .dispatchEvent(new KeyboardEvent("keydown", {key: k, bubbles: true}));
  document.querySelector("#topdown tbody tr").focus();
  key("ArrowDown"); key("Enter");  // main opened
  const before = [tbody.rows.length, tbody.rows[tbody.rows.length - 1].textContent];
  key("End"); key("Enter");  // the five more, the first of them focused
  console.log("more: " + JSON.stringify([...before, tbody.rows.length,
                                         document.activeElement.rowIndex]));
});
</script></body>"""))
    proc = chromium(out.as_uri(), tmp_path, "--dump-dom")
    said = [m for m in console_messages(proc.stderr) if m.startswith('"more: ')]
    assert said and said[0].startswith(
        f'"more: [{SHOWN + 3},"... 5 more (Enter shows them)",{SHOWN + 7},{SHOWN + 3}]"'), said


def test_the_screenshot_shows_the_trees_the_stacked_heap_and_the_histogram(
        tmp_path: Path) -> None:
    _, _, rows = page_screenshot(page(tmp_path, _three_stacks(tmp_path)), tmp_path, 4000)
    # the picked function's row (main's) in the functions
    assert colour_count(rows, "#fdf2d0") > 10_000
    # the stacked heap's four stacks; the histogram's bars in the first colour
    for colour in TAG_COLOURS[1:4]:
        assert colour_count(rows, colour) > 1_000, colour
    assert colour_count(rows, TAG_COLOURS[0]) > 60_000


def test_a_stack_that_could_not_be_read_and_a_name_with_markup(tmp_path: Path) -> None:
    """A block allocated at stack 0 (none read) counts in `all` alone (node -1); a function
    named like markup stays text: the JSON's `</` is escaped, the script writes names as text."""
    d = Dump(header="MEMDUMP 2.1")
    d.malloc("0x10000", 64)
    d.malloc("0x20000", 32, [F("x</script><b>y", "/src/a.c", 5), *main_at(20)])
    d.end()
    out = page(tmp_path, Path(d.write(tmp_path)))
    html = out.read_text()
    assert '"x<\\/script><b>y"' in html and "x</script>" not in html
    data = embedded(html)
    assert data["stacks"] == [[-1, 1, 0, 64, 64], [1, 1, 0, 32, 32]]
    assert decoded(data)[0] == ((), [1, 0, 64, 64])
    proc = chromium(out.as_uri(), tmp_path, "--dump-dom")
    assert len(console_messages(proc.stderr)) == 1, proc.stderr
    top = proc.stdout.split('id="topdown"', 1)[1].split("</table>", 1)[0]
    assert re.findall(r'<td class="n">([\d,]+)</td>', top)[:4] == ["2", "0", "96", "96"]
    assert "x&lt;/script&gt;&lt;b&gt;y" in proc.stdout.split('id="functions"', 1)[1]


def test_a_dump_without_allocations_has_empty_trees(tmp_path: Path) -> None:
    """No block: no chart by stack nor histogram (a note each), trees of `all` at zero, no
    function; chromium runs the script without an error."""
    d = Dump(header="MEMDUMP 2.1")
    d.end()
    out = page(tmp_path, Path(d.write(tmp_path)))
    html = out.read_text()
    assert embedded(html)["stacks"] == [] and embedded(html)["functions"] == []
    assert '<h2>Live heap by stack</h2>\n<p class="note">No block was live at a snapshot.</p>' \
        in html
    assert '<h2>Allocation sizes</h2>\n<p class="note">No allocations.</p>' in html
    proc = chromium(out.as_uri(), tmp_path, "--dump-dom")
    messages = console_messages(proc.stderr)
    assert len(messages) == 1 and messages[0].startswith(READY), messages
    top = proc.stdout.split('id="topdown"', 1)[1].split("</table>", 1)[0]
    assert re.findall(r'<td class="n">([\d,]+)</td>', top) == ["0", "0", "0", "0"]
    functions = proc.stdout.split('id="functions"', 1)[1].split("</table>", 1)[0]
    assert "(none)" in functions
