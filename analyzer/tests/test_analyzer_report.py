"""Reports: the text and JSON renderings, the worked examples of docs/report-format.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

from analyzer_testlib import FIXTURES, LIBC, LIBSTDCXX, REPO, Dump, F, main_at, run_cli
from memdump_analyzer import analyze, dumps_json, render_json, render_text
from memdump_analyzer.report import REPORT_VERSION

FRAME_KEYS = {"function", "file", "line", "module", "pc", "offset", "inlined"}


def doc_block(marker: str, lang: str = "") -> str:
    """The first fenced block after `marker` in docs/report-format.md."""
    doc = (REPO / "docs" / "report-format.md").read_text()
    section = doc.split(marker, 1)[1]
    m = re.search(rf"```{lang}\n(.*?)```", section, re.S)
    assert m is not None
    return m.group(1)


def test_the_pages_title_names_the_reports_version() -> None:
    title = (REPO / "docs" / "report-format.md").read_text().splitlines()[0]
    assert title == f"# memdump reports, version {REPORT_VERSION}"


def test_json_worked_example_is_the_fixture_and_the_output() -> None:
    fixture = (FIXTURES / "example.report.json").read_text()
    assert doc_block("The report of the worked example", "json") == fixture
    result = run_cli("--format", "json", "example.memdump", cwd=FIXTURES)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == fixture


def test_text_worked_example_is_the_fixture_and_the_output() -> None:
    fixture = (FIXTURES / "mixed.report.txt").read_text()
    assert doc_block("`memdump-analyze mixed.memdump`:") == fixture
    result = run_cli("mixed.memdump", cwd=FIXTURES)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == fixture


def test_example_text_report() -> None:
    assert (
        run_cli("example.memdump", cwd=FIXTURES).stdout
        == (FIXTURES / "example.report.txt").read_text()
    )


def test_json_keys() -> None:
    report = json.loads(
        dumps_json(render_json(analyze(str(FIXTURES / "mixed.memdump")), show_runtime=True))
    )
    assert set(report) == {
        "format",
        "version",
        "dump",
        "program",
        "pid",
        "complete",
        "end",
        "summary",
        "leaks",
        "errors",
        "warnings",
        "not_shown",
        "symbolized_frames",
        "suppressed",
    }
    assert (report["format"], report["version"]) == ("memdump-report", "1.9")
    assert report["suppressed"] is None
    assert report["not_shown"] == {"groups": 0, "bytes": 0, "blocks": 0}
    assert report["end"] == {"reason": "exit", "detail": 0, "seq": 7}
    summary = report["summary"]
    assert set(summary) == {
        "leaked",
        "runtime",
        "allocations",
        "frees",
        "allocated_bytes",
        "peak",
        "errors",
        "events",
        "calls",
        "untracked_frees",
        "runtime_internal_frees",
        "leak_kinds",
        "scan",
        "free_calls",
    }
    assert summary["free_calls"] == {"released": 1, "null": 0, "runtime": 0, "errors": 1,
                                     "untracked": 0}
    assert summary["leak_kinds"] == {
        "definite": {"bytes": 6, "blocks": 1},
        "indirect": {"bytes": 0, "blocks": 0},
        "possible": {"bytes": 0, "blocks": 0},
        "reachable": {"bytes": 24, "blocks": 1},
        "unknown": {"bytes": 0, "blocks": 0},
    }
    assert summary["scan"] == {"status": "ok", "after_seq": 6, "root_bytes": 151552,
                               "block_bytes": 1054, "ms": 3}
    assert summary["leaked"] == {"bytes": 30, "blocks": 2}
    assert summary["runtime"] == {"bytes": 1024, "blocks": 1}
    assert set(summary["peak"]) == {"bytes", "blocks", "seq", "stack"}
    assert [g["kind"] for g in report["leaks"]] == ["leak", "leak", "runtime"]
    assert [g["leak_kind"] for g in report["leaks"]] == ["reachable", "definite", "reachable"]
    for group in report["leaks"]:
        assert set(group) == {"kind", "leak_kind", "bytes", "blocks", "direct_bytes",
                              "indirect_bytes", "indirect_blocks", "runtime_frames", "stack"}
        assert (group["direct_bytes"], group["indirect_bytes"], group["indirect_blocks"]) == (
            group["bytes"], 0, 0)
        for frame in group["stack"]:
            assert set(frame) == FRAME_KEYS
            assert re.fullmatch("0x[0-9a-f]+", frame["pc"])
            assert re.fullmatch("0x[0-9a-f]+", frame["offset"])
    [error] = report["errors"]
    assert set(error) == {"kind", "op", "seq", "tid", "pointer", "stack", "freed_at",
                          "allocated_at"}
    assert (error["kind"], error["pointer"], error["seq"]) == ("double-free", "0x5555555592a0", 6)
    assert error["freed_at"]["seq"] == 5
    assert error["stack"][0]["file"] == "/src/app.cc"  # full paths in JSON
    # without --show-runtime the runtime's groups are counted, not listed
    hidden = render_json(analyze(str(FIXTURES / "mixed.memdump")))
    assert [g["kind"] for g in hidden["leaks"]] == ["leak", "leak"]
    assert hidden["summary"]["runtime"] == {"bytes": 1024, "blocks": 1}


def test_dumps_json_sorts_keys_with_indent_2() -> None:
    assert dumps_json({"b": 1, "a": {"d": 2, "c": [3]}}) == (
        '{\n  "a": {\n    "c": [\n      3\n    ],\n    "d": 2\n  },\n  "b": 1\n}\n'
    )


def test_frame_rendering(tmp_path: Path) -> None:
    d = Dump()
    stack = [
        F(None, module="/src/libplugin.so", pc=0x7FFFF7A01234),  # no function
        F("puts_helper", module=LIBC, pc=0x7FFFF7E4A0E5),  # no line
        F("worker", "/very/long/path/to/worker.c", 77),
        F(None, None, 0, None, pc=0xDEAD),  # nothing known
        *main_at(5),
    ]
    d.malloc("0x10", 1, stack)
    d.end()
    text = render_text(analyze(d.write(tmp_path)))
    assert (
        "LEAK 1 of 1: 1 byte in 1 block\n"
        "    at 0x7ffff7a01234 (libplugin.so+0x1234)\n"
        "    by puts_helper (libc.so.6+0x4a0e5)\n"
        "    by worker (worker.c:77)\n"
        "    by 0xdead\n"
        "    by main (app.c:5)\n"
    ) in text


def test_max_frames_and_top(tmp_path: Path) -> None:
    d = Dump()
    for i in range(5):
        d.malloc(f"0x{i + 1:x}0", 100 - i, [F(f"f{i}", "/src/f.c", i + 1), *main_at(50)])
    d.end()
    a = analyze(d.write(tmp_path))
    text = render_text(a, max_frames=1, top=2)
    assert "LEAK 1 of 5: 100 bytes in 1 block\n    at f0 (f.c:1)\n    ... 1 more frame\n" in text
    assert "LEAK 2 of 5" in text and "LEAK 3 of 5" not in text
    assert "... and 3 more leak groups (291 bytes in 3 blocks) not shown (--top)" in text
    assert "leaked:      490 bytes in 5 blocks" in text
    report = render_json(a, max_frames=1, top=2)
    assert [len(g["stack"]) for g in report["leaks"]] == [1, 1]
    assert report["summary"]["leaked"] == {"bytes": 490, "blocks": 5}


def test_live_report_does_not_say_stopped_early(tmp_path: Path) -> None:
    d = Dump()
    d.malloc("0x10", 16, main_at(3))
    path = d.write(tmp_path)
    with open(path, "a") as f:
        f.write("e 2 100 mal")  # being written right now
    a = analyze(path)
    text = render_text(a, title="live blocks", live=True)
    assert text.startswith("live blocks for /src/app (pid 100)\n")
    assert "LIVE 1 of 1: 16 bytes in 1 block" in text
    assert "the program is still running (event 1)" in text
    assert "stopped early" not in text and "incomplete" not in text and "note:" not in text
    assert render_json(a, live=True)["warnings"] == []
    # the same dump read after the fact
    text = render_text(a)
    assert "LEAK 1 of 1" in text and "stopped early" in text


def test_summary_lines(tmp_path: Path) -> None:
    d = Dump(attached=True)
    d.malloc("0x10", 1500, main_at(3))
    d.malloc("0x20", 2500, main_at(4))
    d.free("0x20", main_at(5))
    d.free("0x999", main_at(6))  # untracked
    d.free("0x999", [F("tcache_thread_shutdown", module=LIBC), F("start_thread", module=LIBC)])
    d.p("signal", "SIGSEGV")
    d.end("killed", "SIGSEGV")
    text = render_text(analyze(d.write(tmp_path)))
    summary = text.split("SUMMARY\n", 1)[1]
    assert summary == (
        "    leaked:      1,500 bytes in 1 block\n"
        "    runtime:     0 bytes in 0 blocks\n"
        "    leak kinds:  unknown: no pointer scan (the program did not reach _exit while "
        "recorded)\n"
        "    calls:       malloc 2, free 3\n"
        "    allocations: 2 blocks\n"
        "    frees:       1 block (1 of the 3 free calls released blocks; 1 freed the C/C++ "
        "runtime's own memory, 1 freed a block from before the recording)\n"
        "    allocated:   4,000 bytes\n"
        "    peak:        4,000 bytes in 2 blocks at event 2, allocated at main (app.c:4)\n"
        "    errors:      0\n"
        "    untracked:   1 free of blocks from before recording\n"
        "    ignored:     1 free by the C library's thread cache\n"
        "    events:      5\n"
        "    recording:   the program was killed by SIGSEGV (event 7); "
        "fatal signal SIGSEGV at event 6\n"
    )
    assert "attached to the running program" in text


def test_endings(tmp_path: Path) -> None:
    expected = {
        ("exit", "3"): "the program exited with code 3 (event 1)",
        ("detach", "-"): "GDB detached from the program (event 1)",
        ("stop", "-"): "recording stopped by 'memdump stop' (event 1)",
        ("gdb-exit", "-"): "GDB quit while the program was running (event 1)",
        ("reboot", "now"): "ended: reboot now (event 1)",
    }
    for (reason, detail), sentence in expected.items():
        d = Dump()
        d.end(reason, detail)
        a = analyze(d.write(tmp_path))
        assert f"recording:   {sentence}\n" in render_text(a)
        end = render_json(a)["end"]
        assert end["reason"] == reason
        assert end["detail"] == (3 if reason == "exit" else None if detail == "-" else detail)


def test_no_leaks(tmp_path: Path) -> None:
    d = Dump()
    d.malloc("0x10", 16, main_at(3))
    d.free("0x10", main_at(4))
    d.end()
    text = render_text(analyze(d.write(tmp_path)))
    assert "\nNo leaks.\n" in text and "LEAK" not in text


def test_colour_only_when_asked(tmp_path: Path) -> None:
    a = analyze(str(FIXTURES / "mixed.memdump"))
    assert "\033[" not in render_text(a)
    coloured = render_text(a, color=True)
    assert "\033[1;31mLEAK 1 of 2: 24 bytes in 1 block, still reachable\033[0m" in coloured


def test_bytes_that_are_not_utf8_are_escaped(tmp_path: Path) -> None:
    d = Dump()
    d.malloc("0x10", 16, [F("caf\udce9", "/src/caf\udce9.c", 3), *main_at(9)])
    d.end()
    a = analyze(d.write(tmp_path))
    assert "    at caf\\xe9 (caf\\xe9.c:3)\n" in render_text(a)
    text = dumps_json(render_json(a))
    text.encode("utf-8")  # valid UTF-8
    assert json.loads(text)["leaks"][0]["stack"][0]["function"] == "caf\\xe9"


def _thread_stack(*user: F) -> list[F]:
    """A std::thread's stack as the demo's: the user's frames, std::thread's internals compiled
    into the program, libstdc++'s unnamed execute_native_thread_routine, glibc's thread start."""
    hdr = "/usr/include/c++/12/bits/std_thread.h"
    return [
        *user,
        F("std::__invoke_impl<void, void (*)(int), int>(std::__invoke_other, void (*&&)(int), "
          "int&&)", "/usr/include/c++/12/bits/invoke.h", 61),
        F("std::thread::_Invoker<std::tuple<void (*)(int), int> >::operator()()", hdr, 259),
        F("std::thread::_State_impl<std::thread::_Invoker<std::tuple<void (*)(int), int> > >"
          "::_M_run()", hdr, 210),
        F(None, module=LIBSTDCXX, pc=0x7FFFF7CD44A3),
        F("start_thread", "./nptl/pthread_create.c", 442, module=LIBC, pc=0x7FFFF7E4A0E5),
        F("clone3", "../sysdeps/unix/sysv/linux/x86_64/clone3.S", 81, module=LIBC,
          pc=0x7FFFF7ECC850),
    ]


def test_the_runtimes_outermost_frames_are_folded(tmp_path: Path) -> None:
    """Rule runtime-frame: the outermost run of the runtime's frames (modules of the runtime,
    std:: functions compiled into the program) is one line; runtime frames between the
    program's frames stay; a stack that is all runtime stays whole."""
    d = Dump()
    worker = F("demo::worker(int)", "/src/demo.cpp", 50)
    d.malloc("0x10", 257, _thread_stack(worker))
    cmp = F("by_price(void const*, void const*)", "/src/demo.cpp", 20)
    qsort = F("msort_with_tmp", "msort.c", 200, module=LIBC, pc=0x7FFFF7E10000)
    d.malloc("0x20", 16, [cmp, qsort, F("std::sort_orders()", "/src/demo.cpp", 30),
                          *main_at(40)])
    d.malloc("0x30", 8, [F("_IO_file_doallocate", module=LIBC, pc=0x7FFFF7E20000),
                         F("start_thread", module=LIBC, pc=0x7FFFF7E30000)])
    d.end()
    path = d.write(tmp_path)
    text = run_cli("--show-runtime", path).stdout
    assert (
        "LEAK 1 of 2: 257 bytes in 1 block\n"
        "    at demo::worker(int) (demo.cpp:50)\n"
        "    ... 6 frames of the C/C++ runtime (--show-runtime-frames)\n\n"
    ) in text
    assert (  # qsort's frame sits between the program's: shown; and main is outermost
        "LEAK 2 of 2: 16 bytes in 1 block\n"
        "    at by_price(void const*, void const*) (demo.cpp:20)\n"
        "    by msort_with_tmp (msort.c:200)\n"
        "    by std::sort_orders() (demo.cpp:30)\n"
        "    by main (app.c:40)\n\n"
    ) in text
    assert (
        "RUNTIME 1 of 1: 8 bytes in 1 block\n"
        "    at _IO_file_doallocate (libc.so.6+0x20000)\n"
        "    by start_thread (libc.so.6+0x30000)\n"
    ) in text
    shown = run_cli("--show-runtime-frames", path).stdout
    assert "of the C/C++ runtime" not in shown
    assert ("    at demo::worker(int) (demo.cpp:50)\n"
            "    by std::__invoke_impl<void, void (*)(int), int>(std::__invoke_other, "
            "void (*&&)(int), int&&) (invoke.h:61)\n") in shown
    assert "    by clone3 (clone3.S:81)\n\n" in shown
    # --max-frames counts the frames shown; the fold line follows
    cut = run_cli("--max-frames", "1", path).stdout
    assert ("    at by_price(void const*, void const*) (demo.cpp:20)\n"
            "    ... 3 more frames\n") in cut
    assert ("    at demo::worker(int) (demo.cpp:50)\n"
            "    ... 6 frames of the C/C++ runtime (--show-runtime-frames)\n") in cut
    # JSON keeps every frame and says how many the text folds
    report = json.loads(run_cli("--format", "json", "--show-runtime", path).stdout)
    assert [(len(g["stack"]), g["runtime_frames"]) for g in report["leaks"]] == [
        (7, 6), (4, 0), (2, 0)]
    help_text = " ".join(run_cli("--help").stdout.split())
    assert "--show-runtime-frames" in help_text


def test_start_and_the_c_library_above_a_tail_called_main_are_folded(tmp_path: Path) -> None:
    """A `main` that tail-calls (python3's `main` jumps to Py_BytesMain) is not on the stack, so
    the below-main rule cannot drop its callers: `_start`, the C runtime's entry point linked
    into the program, and the C library's frames under it are the runtime's outermost run."""
    d = Dump()
    d.malloc("0x10", 64, [
        F("list_resize", "Objects/listobject.c", 81),
        F("Py_BytesMain", "Modules/main.c", 734),
        F("__libc_start_call_main", "../sysdeps/nptl/libc_start_call_main.h", 58, module=LIBC,
          pc=0x7FFFF7E45000),
        F("__libc_start_main_impl", "../csu/libc-start.c", 360, module=LIBC, pc=0x7FFFF7E46000),
        F("_start", pc=0x555555555081),
    ])
    d.end()
    text = run_cli(d.write(tmp_path)).stdout
    assert ("LEAK 1 of 1: 64 bytes in 1 block\n"
            "    at list_resize (listobject.c:81)\n"
            "    by Py_BytesMain (main.c:734)\n"
            "    ... 3 frames of the C/C++ runtime (--show-runtime-frames)\n\n") in text
