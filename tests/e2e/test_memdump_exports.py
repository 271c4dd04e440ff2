"""The exports of real recordings (docs/exports.md), read back by the real readers: `go tool
pprof` sees the report's leaks to the byte and inlined frames as lines of one location; `ms_print`
shows the report's peak; valgrind's massif, run on the same program, finds the same peak and the
same heap tree."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from memdump_e2e import REPO, analyze, analyze_raw, marker, program, record

sys.path.insert(0, str(REPO / "analyzer" / "tests"))
from exports_testlib import ms_print, ms_print_peak, pprof  # noqa: E402

pytestmark = pytest.mark.one_recorder
VALGRIND_TIMEOUT = 300


def export(dump: Path, fmt: str, out: Path) -> Path:
    proc = analyze_raw(dump, "--format", fmt, "-o", str(out))
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    return out


def test_pprof_of_inlined_allocations(tmp_path: Path, dump: Path) -> None:
    record("inline_frames_gcc_O2", dump=dump)
    report = analyze(dump)
    leaked = report.data["summary"]["leaked"]["bytes"]
    assert leaked == 160
    out = export(dump, "pprof", tmp_path / "inline.pb.gz")
    assert f"Showing nodes accounting for {leaked}B, 100% of {leaked}B total" in pprof(out, "-top")
    raw = pprof(out, "-raw")
    session = marker("inline_frames.cpp", "session")
    reserve = marker("inline_frames.cpp", "reserve")
    call = marker("inline_frames.cpp", "open_session", "CALL")
    # the `new` inlined into run(): one location, two lines, innermost first
    assert re.search(rf"^\s+\d+: 0x[0-9a-f]+ M=1 open_session \S+/{session} s=0\n"
                     rf"\s+run\(int\) \S+/{call} s=0$", raw, re.M), raw
    # the vector's allocation, inlined five levels deep, ends in the same two
    assert re.search(rf"std::vector::reserve .*\n\s+open_session \S+/{reserve} s=0\n"
                     rf"\s+run\(int\) \S+/{call} s=0$", raw, re.M), raw
    samples = raw.split("Samples:\n", 1)[1].split("Locations", 1)[0]
    assert re.search(r"^\s+1\s+32\s+1\s+32: \d+ \d+ $", samples, re.M), samples
    assert re.search(r"^\s+1\s+128\s+1\s+128: \d+ \d+ $", samples, re.M), samples
    mapping = re.search(r"^1: 0x[0-9a-f]+/0x[0-9a-f]+/0x0 (\S+) ([0-9a-f]{40}) ", raw, re.M)
    assert mapping is not None, raw
    assert mapping.group(1) == str(program("inline_frames_gcc_O2"))
    notes = subprocess.run(["readelf", "-n", mapping.group(1)], capture_output=True, text=True,
                           check=True).stdout
    assert f"Build ID: {mapping.group(2)}" in notes


def _peak_tree(text: str) -> list[str]:
    """The peak snapshot's heap tree, addresses left out (valgrind's are its own), and the
    bytes of the below-threshold line (massif counts places whose blocks were all freed)."""
    tree = text.split("heap_tree=peak\n", 1)[1].split("#-----------", 1)[0]
    tree = re.sub(r"0x[0-9A-F]+: ", "", tree)
    return re.sub(r" in \d+ places?, (all )?below", " in N places below", tree).splitlines()


def test_massif_peak_and_tree_are_valgrind_massifs(tmp_path: Path, dump: Path) -> None:
    record("leak_realloc", dump=dump)
    ours = export(dump, "massif", tmp_path / "ours.massif")
    ref = tmp_path / "valgrind.massif"
    subprocess.run(["valgrind", "--tool=massif", "--time-unit=B", f"--massif-out-file={ref}",
                    str(program("leak_realloc"))], capture_output=True, check=False,
                   timeout=VALGRIND_TIMEOUT)
    peak = analyze(dump).data["summary"]["peak"]["bytes"]
    assert peak == 4080  # 4000 + 50 + 30: leak_realloc.c's grown, from-null and gone
    assert ms_print_peak(ms_print(ours))[1] == ms_print_peak(ms_print(ref))[1] == peak
    assert _peak_tree(ours.read_text()) == _peak_tree(ref.read_text()) == [
        "n3: 4080 (heap allocation functions) malloc/new/new[], --alloc-fns, etc.",
        f" n0: 4000 main ({marker('leak_realloc.c', 'grown')})",
        f" n0: 50 main ({marker('leak_realloc.c', 'from-null')})",
        " n0: 30 in N places below massif's threshold (1.00%)",
    ]


def test_html_of_a_tagged_recording(tmp_path: Path, dump: Path) -> None:
    """tags_phases, recorded: the timeline's tag columns at the peak are the program's blocks
    (physics 3 x 1,001, collision 1,002, audio 2 x 2,001), and the page's heap map colours each
    of its blocks by its tag, the legend naming the four."""
    record("tags_phases", dump=dump)
    proc = analyze_raw(dump, "timeline", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    series = json.loads(proc.stdout)
    peak = next(i for i, p in enumerate(series["points"]) if p["seq"] == series["peak_seq"])
    at_peak = {t["tag"]: t["series"][peak][1] for t in series["tags"]}
    assert {k: v for k, v in at_peak.items() if k != "(untagged)"} == {
        "physics": 3003, "collision": 1002, "audio": 4002}
    assert sum(at_peak.values()) == series["peak_bytes"]
    # the leak report's replay warns of the `p SEQ phase` records (replay.py): not this page's
    proc = analyze_raw(dump, "--format", "html", "-o", str(tmp_path / "tags.html"))
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "tags.html").read_text()
    legend = page.split("<h2>Heap map</h2>", 1)[1].split("<h3>", 1)[0]
    colours = dict((name, colour) for colour, name in re.findall(
        r'<span class="sw" style="background:([^"]+)"></span>([^<]+)</span>', legend))
    assert set(colours) == {"(untagged)", "physics", "collision", "audio",
                            "free (between live blocks)"}
    peak_map = page.split("<h3>At the peak", 1)[1].split("</svg>", 1)[0]
    blocks = {(int(size.replace(",", "")), tag) for size, tag in re.findall(
        r"\n0x[0-9a-f]+, ([\d,]+) bytes, ([^\n<]+)", peak_map)}
    assert {(1001, "physics"), (1002, "collision"), (2001, "audio"), (11, "(untagged)"),
            (12, "(untagged)")} <= blocks
    # a cell all in one physics block has physics's colour
    cells = re.findall(r'fill="([^"]+)" data-lo="[^"]+"><title>[^\n]*: (\d+) of \2 bytes used\n'
                       r"0x[0-9a-f]+, 1,001 bytes, physics</title>", peak_map)
    assert cells and {fill for fill, _ in cells} == {colours["physics"]}
