"""The exports (`--format pprof|collapsed|massif`, docs/exports.md): golden outputs of a handmade
dump, read back by the real readers (`go tool pprof`, `ms_print`), and `--base`."""

from __future__ import annotations

import gzip
import os
import pty
import re
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from analyzer_testlib import ANALYZER, FIXTURES, LIBC, Dump, F, main_at, run_cli
from exports_testlib import doc_block, golden, ms_print, ms_print_peak, pprof
from memdump_analyzer import analyze
from memdump_analyzer.buildid import build_id, recorded_build_id
from memdump_analyzer.exports.pprof import _varint

EXAMPLE = FIXTURES / "exports.memdump"
#: the build id of libc.so.6 where docs/exports.md's example was made
DOC_LIBC_ID = "93ac61ec5a8eb1396f9fbd350e3169a558528a40"


def cli_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ANALYZER)}


def export(tmp_path: Path, fmt: str, *options: str, dump: Path = EXAMPLE) -> Path:
    out = tmp_path / f"out.{fmt}"
    result = run_cli("--format", fmt, "-o", str(out), *options, dump.name, cwd=dump.parent)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    return out


def test_the_worked_example_dump_is_the_fixture() -> None:
    assert doc_block("The dump, `analyzer/tests/fixtures/exports.memdump`:") == EXAMPLE.read_text()


# -- collapsed -------------------------------------------------------------------------------------


def test_collapsed_worked_example_is_the_fixture_and_the_output(tmp_path: Path) -> None:
    text = export(tmp_path, "collapsed").read_text()
    assert doc_block("memdump-analyze --format collapsed exports.memdump") == text
    golden("exports.collapsed", text)


@pytest.mark.parametrize(("metric", "expected"), [
    ("leaked-blocks", "main;load 1\nstart_thread;work 1\n"),
    ("alloc-bytes", "main;grow_buf 64\nmain;load 128\nmain;puts;_IO_file_doallocate 1024\n"
                    "start_thread;work 40\n"),
    ("alloc-count", "main;grow_buf 2\nmain;load 2\nmain;puts;_IO_file_doallocate 1\n"
                    "start_thread;work 1\n"),
    ("peak-bytes", "main;grow_buf 48\nmain;load 128\nmain;puts;_IO_file_doallocate 1024\n"),
])
def test_collapsed_metrics(tmp_path: Path, metric: str, expected: str) -> None:
    assert export(tmp_path, "collapsed", "--metric", metric).read_text() == expected


def test_collapsed_totals_are_the_analysers() -> None:
    a = analyze(str(EXAMPLE))
    for metric, total in (("leaked-bytes", a.leaked_bytes), ("leaked-blocks", a.leaked_blocks),
                          ("alloc-bytes", a.allocated_bytes), ("alloc-count", a.allocations),
                          ("peak-bytes", a.peak_bytes)):
        out = run_cli("--format", "collapsed", "--metric", metric, str(EXAMPLE)).stdout
        assert sum(int(line.rsplit(" ", 1)[1]) for line in out.splitlines()) == total, metric


def test_collapsed_names_cannot_break_a_line(tmp_path: Path) -> None:
    d = Dump(header="MEMDUMP 2.1")
    d.malloc("0x1000", 8, [F("operator;weird\nname", "/src/a.c", 3), *main_at(9)])
    d.end()
    out = export(tmp_path, "collapsed", dump=Path(d.write(tmp_path))).read_text()
    assert out == "main;operator:weird name 8\n"


# -- massif ----------------------------------------------------------------------------------------


def test_massif_worked_example_is_the_fixture_and_ms_print_reads_its_peak(tmp_path: Path) -> None:
    out = export(tmp_path, "massif")
    text = out.read_text()
    assert doc_block("memdump-analyze --format massif exports.memdump") == text
    golden("exports.massif", text)
    printed = ms_print(out)
    assert ms_print_peak(printed) == (5, analyze(str(EXAMPLE)).peak_bytes) == (5, 1200)
    assert "Detailed snapshots: [5 (peak), 9]" in printed
    # the peak's tree as ms_print draws it: 1,024 + 128 + 48 bytes under the root
    assert "->85.33% (1,024B) 0x7FFFF7E4B1D4: _IO_file_doallocate (in /lib/x86_64-linux-gnu/" \
           "libc.so.6)" in printed
    assert "->04.00% (48B) 0x555555555203: grow_buf (cache.c:14)" in printed


def test_massif_lines_stay_lines(tmp_path: Path) -> None:
    """A newline in a path or a function name cannot make a line of its own."""
    d = Dump(header="MEMDUMP 2.1")
    d.malloc("0x1000", 8, [F("odd\nname", "/src/a.c", 3), *main_at(9)])
    d.end()
    path = Path(d.write(tmp_path, "two\nlines.memdump"))
    text = export(tmp_path, "massif", dump=path).read_text()
    assert text.splitlines()[0] == ("desc: memdump-analyze --format massif two lines.memdump "
                                    "(1 heap event)")
    assert " n1: 8 0x555555555030: odd name (a.c:3)" in text.splitlines()
    assert ms_print_peak(ms_print(tmp_path / "out.massif")) == (1, 8)


def test_massif_threshold_and_snapshot_count(tmp_path: Path) -> None:
    """Many events: about 100 regular snapshots plus the peak; a tree's children under 1% of
    the heap fold into massif's `in N places` line."""
    d = Dump(header="MEMDUMP 2.1")
    big = [F("big", "/src/a.c", 5), *main_at(20)]
    d.malloc("0x100000", 100_000, big)
    for i in range(300):
        d.malloc(f"0x{0x200000 + 0x100 * i:x}", 10, [F(f"small{i % 3}", "/src/a.c", 10 + i % 3),
                                                     *main_at(21)])
    for i in range(300):
        d.free(f"0x{0x200000 + 0x100 * i:x}", main_at(22))
    d.end()
    out = export(tmp_path, "massif", dump=Path(d.write(tmp_path)))
    text = out.read_text()
    snapshots = re.findall(r"^snapshot=(\d+)$", text, re.M)
    # time 0, every 6th of the 602 sequenced records, the peak (event 301) and the last
    assert len(snapshots) == 1 + 100 + 1 + 1
    assert text.count("heap_tree=peak") == 1
    peak_tree = text.split("heap_tree=peak\n", 1)[1].split("#", 1)[0]
    assert peak_tree == (
        "n2: 103000 (heap allocation functions) malloc/new/new[], --alloc-fns, etc.\n"
        " n1: 100000 0x555555555030: big (a.c:5)\n"
        "  n0: 100000 0x555555555020: main (app.c:20)\n"
        " n0: 3000 in 3 places, all below massif's threshold (1.00%)\n")
    assert ms_print_peak(ms_print(out))[1] == 103000


def test_massif_matches_a_real_massif_file_line_for_line(tmp_path: Path) -> None:
    """The same kinds of lines, in the same order, as valgrind's massif writes (a real
    `massif.out` of a small program is the reference: header, snapshot records, trees)."""
    src = tmp_path / "m.c"
    src.write_text("#include <stdlib.h>\nint main(void) { void *a = malloc(100); "
                   "void *b = malloc(200); free(a); return b == 0; }\n")
    exe = tmp_path / "m"
    subprocess.run(["cc", "-g", "-O0", "-o", str(exe), str(src)], check=True)
    ref = tmp_path / "massif.out"
    subprocess.run(["valgrind", "--tool=massif", "--time-unit=B", "--detailed-freq=1",
                    f"--massif-out-file={ref}", str(exe)], check=True, capture_output=True)
    ours = export(tmp_path, "massif")

    def shape(text: str) -> list[str]:
        kinds = []
        for line in text.splitlines():
            m = re.match(r"(desc|cmd|time_unit):|#-+$|(\w+)=|( *)n\d+: \d+ ", line)
            assert m is not None, line
            kinds.append(m.group(1) or m.group(2) or ("#" if line.startswith("#") else "node"))
        return kinds

    ref_shape, our_shape = shape(ref.read_text()), shape(ours.read_text())
    record = ["#", "snapshot", "#", "time", "mem_heap_B", "mem_heap_extra_B", "mem_stacks_B",
              "heap_tree"]
    for s in (ref_shape, our_shape):
        assert s[:3] == ["desc", "cmd", "time_unit"]
        assert s[3:11] == record
    assert "time_unit: B" in ref.read_text() and "time_unit: B" in ours.read_text()


# -- pprof -----------------------------------------------------------------------------------------


def test_varint_and_negative_int64() -> None:
    assert _varint(0) == b"\x00"
    assert _varint(300) == b"\xac\x02"
    assert _varint(-1) == b"\xff" * 9 + b"\x01"


def test_pprof_worked_example_read_back_by_go_tool_pprof(tmp_path: Path) -> None:
    out = export(tmp_path, "pprof")
    # the first field: sample_type {type: string 1, unit: string 2}
    packed = out.read_bytes()
    assert gzip.decompress(packed)[:6] == b"\x0a\x04\x08\x01\x10\x02"
    # gzip at level 6 (Go's default), no name, no time: the same dump, the same bytes
    assert packed == gzip.compress(gzip.decompress(packed), compresslevel=6, mtime=0)
    assert packed[3:9] == b"\x00" * 6  # FLG, MTIME, XFL (neither level 9's 2 nor level 1's 4)
    libc_id = recorded_build_id(LIBC, "2026-11-23T10:00:00Z")
    assert libc_id is not None and re.fullmatch(r"[0-9a-f]{40}", libc_id)
    raw = pprof(out, "-raw").replace(libc_id, DOC_LIBC_ID)
    assert doc_block("go tool pprof -raw exports.pb.gz") == raw
    golden("exports.pprof-raw.txt", raw)


def test_pprof_totals_are_the_analysers_to_the_byte(tmp_path: Path) -> None:
    out = export(tmp_path, "pprof")
    a = analyze(str(EXAMPLE))
    top = pprof(out, "-top")
    assert f"Showing nodes accounting for {a.leaked_bytes}B, 100% of {a.leaked_bytes}B total" \
        in top
    assert re.search(r"^\s+64B 61\.54% 61\.54%\s+64B 61\.54%  load$", top, re.M)
    alloc = pprof(out, "-top", "-sample_index=alloc_space")
    assert f"accounting for {a.allocated_bytes}B, 100% of {a.allocated_bytes}B total" in alloc
    assert re.search(r"^\s+64B\s+5\.10%\s+96\.82%\s+64B\s+5\.10%  grow_buf \(inline\)$", alloc,
                     re.M)
    objects = pprof(out, "-top", "-sample_index=inuse_objects")
    assert f"accounting for {a.leaked_blocks}, 100% of {a.leaked_blocks} total" in objects
    traces = pprof(out, "-traces")
    assert "       40B   work\n             start_thread\n" in traces


def test_build_id_is_readelf_s() -> None:
    notes = subprocess.run(["readelf", "-n", sys.executable], capture_output=True, text=True,
                           check=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", notes)
    assert m is not None
    assert build_id(sys.executable) == m.group(1)
    assert build_id(str(EXAMPLE)) is None
    assert recorded_build_id(sys.executable, None) is None
    assert recorded_build_id(sys.executable, "2000-01-01T00:00:00Z") is None  # newer: not it
    assert recorded_build_id(sys.executable, "2999-01-01T00:00:00Z") == m.group(1)


def test_a_module_built_in_the_recordings_first_second_is_the_one_that_ran(
        tmp_path: Path) -> None:
    """The dump's start is whole seconds: a module changed within that second (`cc && memdump.sh`)
    is taken as the build that ran, as faultinsn takes it; one changed a second later is not."""
    module = tmp_path / "python"
    shutil.copyfile(sys.executable, module)
    start = "2026-11-23T10:00:00Z"
    began = datetime.fromisoformat("2026-11-23T10:00:00+00:00").timestamp()
    os.utime(module, (began + 0.75, began + 0.75))
    assert recorded_build_id(str(module), start) == build_id(sys.executable)
    os.utime(module, (began + 1, began + 1))
    assert recorded_build_id(str(module), start) is None
    assert recorded_build_id(str(module), "not a time") is None


# -- --base ----------------------------------------------------------------------------------------


def _two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """BASE leaks 100 bytes at a.c:5 and 30 at b.c:7; NEW 250 at a.c:5 (other addresses, as
    under ASLR) and 8 at c.c:9."""
    base = Dump(header="MEMDUMP 2.1")
    base.malloc("0x1000", 100, [F("grow", "/src/a.c", 5), *main_at(20)])
    base.malloc("0x2000", 30, [F("keep", "/src/b.c", 7), *main_at(21)])
    base.end()
    new = Dump(header="MEMDUMP 2.1")
    new.malloc("0x8000", 8, [F("extra", "/src/c.c", 9, pc=0x7000), *main_at(22)])
    new.malloc("0x9000", 250, [F("grow", "/src/a.c", 5, pc=0x6000),
                               F("main", "/src/app.c", 20, pc=0x6100),
                               F("__libc_start_call_main", module=LIBC, pc=0x7FFFF7DF018A)])
    new.end()
    return Path(base.write(tmp_path, "base.memdump")), Path(new.write(tmp_path, "new.memdump"))


def test_base_collapsed_is_flamegraph_s_differential_input(tmp_path: Path) -> None:
    base, new = _two_runs(tmp_path)
    out = export(tmp_path, "collapsed", "--base", str(base), dump=new).read_text()
    assert out == "main;extra 0 8\nmain;grow 100 250\nmain;keep 30 0\n"


def test_base_pprof_is_the_difference(tmp_path: Path) -> None:
    base, new = _two_runs(tmp_path)
    out = export(tmp_path, "pprof", "--base", str(base), dump=new)
    top = pprof(out, "-top")
    # +150 + 8 - 30; pprof's total of a difference is the sum of the magnitudes, as with -base
    assert "Showing nodes accounting for 128B, 68.09% of 188B total" in top
    assert re.search(r"^\s+150B\s.*  grow$", top, re.M)
    assert re.search(r"^\s+-30B\s.*  keep$", top, re.M)
    assert re.search(r"^\s+8B\s.*  extra$", top, re.M)


def test_base_massif_is_what_grew_and_ms_print_reads_it(tmp_path: Path) -> None:
    """NEW's snapshots against BASE's at the same share of their events: after the first event
    `extra`'s 8 bytes (BASE's `grow` 100 is no growth of NEW's), after the second `grow`'s
    +150 and `extra`'s 8 (`keep` shrank: left out), the largest, marked the peak."""
    base, new = _two_runs(tmp_path)
    out = export(tmp_path, "massif", "--base", str(base), dump=new)
    text = out.read_text()
    assert text.splitlines()[0] == (
        f"desc: memdump-analyze --format massif --base {base} new.memdump: the bytes by stack "
        "the new run had more of than the base at the same share of each run's events; the "
        "stacks that shrank are left out")
    assert re.findall(r"mem_heap_B=(\d+)", text) == ["0", "8", "158", "158"]
    assert ("heap_tree=peak\n"
            "n2: 158 (heap allocation functions) malloc/new/new[], --alloc-fns, etc.\n"
            " n1: 150 0x6000: grow (a.c:5)\n  n0: 150 0x6100: main (app.c:20)\n"
            " n1: 8 0x7000: extra (c.c:9)\n") in text
    assert "keep" not in text
    assert doc_block("the peak snapshot is") in text
    assert ms_print_peak(ms_print(out)) == (2, 158)


def test_base_errors_are_one_line(tmp_path: Path) -> None:
    base, new = _two_runs(tmp_path)
    r = run_cli("--base", str(base), str(new))
    assert (r.returncode, r.stderr) == (2, "memdump-analyze: error: --base needs --format pprof, "
                                        "collapsed, massif, html (the leak report's difference "
                                        "is `memdump-analyze diff BASE NEW`)\n")
    for fmt in ("pprof", "massif", "html"):
        r = run_cli("--format", fmt, "-o", str(tmp_path / "x"), "--base",
                    str(tmp_path / "missing.memdump"), str(new))
        assert r.returncode == 2
        assert r.stderr.count("\n") == 1 and "missing.memdump" in r.stderr and "Traceback" \
            not in r.stderr


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    r = run_cli("--format", "pprof", "--metric", "alloc-bytes", str(EXAMPLE))
    assert (r.returncode, r.stdout, r.stderr) == (
        2, "", "memdump-analyze: error: --metric is an option of --format collapsed, not pprof\n")
    r = run_cli("--format", "massif", str(tmp_path / "none.memdump"))
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith(f"memdump-analyze: {tmp_path / 'none.memdump'}: ")
    assert r.stderr.count("\n") == 1


def test_pprof_is_not_written_to_a_terminal(tmp_path: Path) -> None:
    """Binary data on a terminal: refused with one line; through a pipe it is written."""
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "memdump_analyzer", "--format", "pprof",
                               str(EXAMPLE)], stdout=secondary, stderr=subprocess.PIPE,
                              text=True, env=cli_env(), check=False, timeout=60)
    finally:
        os.close(secondary)
        os.close(primary)
    assert (proc.returncode, proc.stderr) == (
        2, "memdump-analyze: error: --format pprof writes binary data: give -o FILE, or redirect "
           "the output\n")
    piped = subprocess.run([sys.executable, "-m", "memdump_analyzer", "--format", "pprof",
                            str(EXAMPLE)], capture_output=True, env=cli_env(), check=False,
                           timeout=60)
    assert piped.returncode == 0 and gzip.decompress(piped.stdout)[:2] == b"\x0a\x04"


def test_one_table_of_formats():
    """`--format`'s choices, its help and the exports' renderers come from one table
    (formats.FORMATS): every export of the analysis has a renderer and nothing else has one;
    heaptrack's file is the dump's events transcoded (heaptrackfile.py)."""
    from memdump_analyzer import cli
    from memdump_analyzer.exports import RENDERERS
    from memdump_analyzer.formats import EXPORTS, FORMATS, TRANSCODED

    assert tuple(RENDERERS) == EXPORTS == ("pprof", "collapsed", "massif", "html")
    assert TRANSCODED == ("heaptrack",)
    assert tuple(FORMATS) == ("text", "json", "sarif", "valgrind", "valgrind-xml", *EXPORTS,
                              *TRANSCODED)
    action = next(a for a in cli.build_parser()._actions if "--format" in a.option_strings)
    assert tuple(action.choices) == tuple(FORMATS)
    assert action.help.startswith("report format (text); sarif: SARIF 2.1.0 for code scanning, "
                                  "one result per leak group --show-leak-kinds lists; valgrind: "
                                  "valgrind memcheck's text output (docs/valgrind-compat.md); "
                                  "valgrind-xml: valgrind memcheck's XML, protocol 4; the exports "
                                  "(docs/exports.md): pprof: gzip-compressed profile.proto for "
                                  "`go tool pprof`; collapsed: ")
