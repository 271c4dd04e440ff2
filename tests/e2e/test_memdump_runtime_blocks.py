"""The C/C++ runtime's own blocks stay apart wherever the analyser counts live blocks, and its
frames are named as the compiler named their files.

no_leak's stdout buffer (glibc's `_IO_file_doallocate`) is live at exit: the leak report files it
as the runtime's; so must `--by-tag` (not a tag's leak) and `--phases` (listed under the one
phase, the whole run, as the runtime's), and its file is `./libio/filedoalloc.c`, not GDB's
`./libio/./libio/filedoalloc.c`. leak_threads recorded one frame deep (`set memdump depth 1`):
the two live threads' DTV blocks (`allocate_dtv`, the loader's) stay the runtime's though the
stack says nothing more.
"""

from __future__ import annotations

import json
from pathlib import Path

from memdump_e2e import analyze, analyze_raw, expect_leaks, marker, record


def test_stdout_buffer_is_the_runtimes_in_every_view(dump: Path) -> None:
    record("no_leak", dump=dump)
    report = analyze(dump)
    assert report.leaked == (0, 0)
    [buffer] = [g for g in report.groups("runtime")
                if g["stack"][0]["function"] == "_IO_file_doallocate"]
    assert buffer["stack"][0]["file"] == "./libio/filedoalloc.c"
    assert buffer["blocks"] == 1
    tags = json.loads(analyze_raw(dump, "--by-tag", "--format", "json").stdout)["tags"]
    assert [(t["tag"], t["leaked"]["blocks"]) for t in tags] == [("(untagged)", 0)]
    assert tags[0]["runtime"] == {"bytes": report.runtime[0], "blocks": report.runtime[1]}
    phases = json.loads(analyze_raw(dump, "--phases", "--format", "json").stdout)["phases"]
    assert [p["phase"] for p in phases] == ["(the whole run)"]
    live = [(g["bytes"], g["blocks"], g["runtime"], g["freed_in"]) for g in phases[0]["groups"]]
    assert (buffer["bytes"], 1, True, {"never": 1}) in live
    assert all(runtime for _, _, runtime, _ in live)
    assert phases[0]["outlived"] == {"bytes": report.runtime[0], "blocks": report.runtime[1]}


def test_a_threads_dtv_is_the_runtimes_one_frame_deep(dump: Path) -> None:
    record("leak_threads", dump=dump, before=["set memdump depth 1"])
    report = analyze(dump)
    expect_leaks(report, {marker("leak_threads.c", "thread-a"): (555, 5),
                          marker("leak_threads.c", "thread-b"): (666, 3)})
    dtv = [g for g in report.groups("runtime") if g["stack"][0]["function"] == "allocate_dtv"]
    assert [(g["bytes"], g["blocks"]) for g in dtv] == [(544, 2)], report.dumps()
    assert len(dtv[0]["stack"]) == 1
