"""`memdump leaks` after a late attach with a recording (gdb -p PID, memdump, continue, stop): the
recorded blocks by stack, the blocks allocated before the attach found by the heap walk, of unknown
origin, grouped by type, all scanned together (heapcmd.before_recording), on
tests/programs/heapwalk_attach.cpp; the kinds and blocks of both sets equal valgrind's leak check
of the same program run from the start."""

from __future__ import annotations

import functools
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

import pytest
from memdump_analyzer import DumpReader
from memdump_e2e import (
    GDB_TIMEOUT,
    REPO,
    Commanded,
    analyze,
    analyze_raw,
    build_dir,
    gdb_argv,
    marker,
)

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

SRC = "heapwalk_attach.cpp"
#: GDB's line once the process records
STARTED = ("memdump: in-process recorder: loaded", "recording with breakpoints",
           "memdump: recording process")


class Lines:
    """GDB's output lines, read by a thread so that waiting for one never blocks past its
    deadline (a readline on GDB's pipe would wait for ever if GDB said nothing)."""

    def __init__(self, stream: IO[str] | None) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, what: tuple[str, ...], seconds: float = GDB_TIMEOUT) -> None:
        deadline = time.monotonic() + seconds
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"GDB said none of {what} within {seconds} s:\n" + "".join(self.seen))
            if line is None:
                pytest.fail(f"GDB ended before {what}:\n" + "".join(self.seen))
            self.seen.append(line)
            if any(w in line for w in what):
                return

    def rest(self, seconds: float = GDB_TIMEOUT) -> str:
        self._thread.join(seconds)
        if self._thread.is_alive():
            pytest.fail(f"GDB's output did not end within {seconds} s:\n" + "".join(self.seen))
        while (line := self._queue.get_nowait()) is not None:
            self.seen.append(line)
        return "".join(self.seen)


def _wait_for_read(pid: int, seconds: float = GDB_TIMEOUT) -> None:
    """Until process PID waits in read(0, ...) for its next command: stopped as it writes its
    answer, its registers would still hold what `more` left in them (a stale copy of a lost
    block's address in r9, memset's), which valgrind's check inside `more` never sees."""
    deadline = time.monotonic() + seconds
    while Path(f"/proc/{pid}/syscall").read_text().split()[:2] != ["0", "0x0"]:
        if time.monotonic() > deadline:
            pytest.fail(f"process {pid} did not come back to read its stdin within {seconds} s")
        time.sleep(0.01)


def _record(dump: Path, commands: list[str], *, ask: tuple[str, str] = ("more", "ok"),
            ) -> tuple[Commanded, str]:
    """heapwalk_attach started, attached late: memdump, continue, ASK's command answered (its
    answer) while recorded, stopped by SIGINT; COMMANDS at that stop, then detach. (the program,
    GDB's output)"""
    prog = Commanded("heapwalk_attach")
    argv = gdb_argv([f"memdump -o {dump}", "continue", *commands, "detach"],
                    attach=prog.proc.pid)
    gdb = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        lines = Lines(gdb.stdout)
        lines.wait_for(STARTED)
        assert prog.ask(ask[0]) == ask[1]
        _wait_for_read(prog.proc.pid)
        os.kill(prog.proc.pid, signal.SIGINT)  # GDB stops it there (keeps the signal)
        gdb.wait(timeout=GDB_TIMEOUT)
        out = lines.rest()
    except BaseException:
        prog.kill()
        raise
    finally:
        if gdb.poll() is None:
            gdb.kill()
            gdb.wait()
    assert gdb.returncode == 0, out
    assert "Traceback" not in out, out
    return prog, out


#: valgrind's words for the kinds
_VALGRIND_KINDS = {"definitely lost": "definite", "indirectly lost": "indirect",
                   "possibly lost": "possible", "still reachable": "reachable"}
_LOSS = re.compile(r"^==\d+== ([\d,]+)(?: \(([\d,]+) direct, [\d,]+ indirect\))? bytes in "
                   r"([\d,]+) blocks are (definitely lost|indirectly lost|possibly lost|"
                   r"still reachable) in loss record")


def usable(request: int) -> int:
    """malloc_usable_size() of a block of REQUEST bytes from glibc's heap (x86-64)."""
    return max(32, (request + 8 + 15) & ~15) - 8


def _number(text: str) -> int:
    return int(text.replace(",", ""))


@functools.cache
def valgrind_sets() -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]]]:
    """valgrind's leak check of heapwalk_attach run from the start, after `more`: kind ->
    (bytes, blocks) of the blocks `more` allocated (its loss records whose stack passes through
    more(): requested bytes, as the recording counts them) and of the others (allocated before:
    usable bytes, as the heap walk counts them). Run once for the module's tests."""
    exe = build_dir() / "tests" / "programs" / "heapwalk_attach_valgrind"
    if not exe.exists() or shutil.which("valgrind") is None:
        pytest.skip("valgrind or its memcheck.h is not installed")
    run = subprocess.run(["valgrind", "--leak-check=full", "--show-leak-kinds=all", str(exe)],
                         input="more\nexit\n", capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    head = run.stderr.index("LEAK SUMMARY")  # the check at `more`'s end, not the one at exit
    records = re.split(r"\n==\d+== \n", run.stderr[:head])
    after = {k: (0, 0) for k in _VALGRIND_KINDS.values()}
    before = dict(after)
    for record in records:
        found = _LOSS.search(record.strip())
        if found is None:
            continue
        total, direct, blocks, words = found.groups()
        nbytes, count = _number(direct or total), _number(blocks)
        kind = _VALGRIND_KINDS[words]
        if "more()" in record:
            after[kind] = (after[kind][0] + nbytes, after[kind][1] + count)
        else:
            assert nbytes % count == 0, record  # one size a record here: its usable size
            before[kind] = (before[kind][0] + usable(nbytes // count) * count,
                            before[kind][1] + count)
    return after, before


def _json(out: str) -> dict:
    return json.JSONDecoder().raw_decode(out, out.index("\n{") + 1)[0]


def older_in_dump(dump: Path) -> dict[tuple[str, str, str], tuple[int, int]]:
    """The dump's `ob` records (2.7), the blocks from before the recording at its end's scan:
    (kind, type, how) -> (usable bytes, blocks)."""
    groups: dict[tuple[str, str, str], tuple[int, int]] = {}
    with DumpReader(str(dump)) as reader:
        list(reader.records())
        assert reader.unknown_tags == {}
        for b in reader.older:
            n, c = groups.get((b.kind, b.type, b.how), (0, 0))
            groups[b.kind, b.type, b.how] = (n + b.size, c + 1)
    return groups


def _kind_totals(groups: dict[tuple[str, str, str], tuple[int, int]]) -> dict[str, tuple[int, int]]:
    out = {k: (0, 0) for k in _VALGRIND_KINDS.values()}
    for (kind, _, _), (n, c) in groups.items():
        out[kind] = (out[kind][0] + n, out[kind][1] + c)
    return out


def test_late_attach_merged(tmp_path: Path, memdump_mode: str) -> None:
    """The recorded blocks keep their stacks and kinds, the older ones found by the walk are
    grouped by type, of unknown origin: both sets valgrind's, block for block, the scan having
    seen the new blocks an old one holds (reachable, indirectly lost)."""
    dump = tmp_path / "attach.memdump"
    prog, out = _record(dump, ["memdump leaks", "memdump leaks --json"])
    try:
        prog.send("exit")  # it ran on, untraced, and ends as it would have
        assert prog.proc.wait(timeout=GDB_TIMEOUT) == 0
    finally:
        prog.kill()
    after, before = valgrind_sets()
    doc = _json(out)
    assert doc["version"] == "1.9"
    recorded = {k: (v["bytes"], v["blocks"]) for k, v in doc["summary"]["leak_kinds"].items()}
    assert recorded == {**after, "unknown": (0, 0)}
    sites = {(g["stack"][0]["line"], g["leak_kind"]): (g["bytes"], g["blocks"])
             for g in doc["leaks"]}
    assert sites == {(marker(SRC, "reused").line, "definite"): (200, 1),
                     (marker(SRC, "new-connection").line, "definite"): (112, 2),
                     (marker(SRC, "latest").line, "reachable"): (64, 1),
                     (marker(SRC, "held").line, "indirect"): (48, 1)}
    # the dump's own scan, at the detach, scanned the older blocks too: the recorded blocks' kinds
    # are valgrind's, and the older blocks are the dump's `ob` records, as `memdump leaks` said
    report = analyze(dump)
    ended = report.summary["leak_kinds"]
    assert {k: (v["bytes"], v["blocks"]) for k, v in ended.items()} == {**after, "unknown": (0, 0)}
    old = doc["before_recording"]
    offline = report.data["before_recording"]  # the offline report's, from the `ob` records
    for key in ("source", "origin", "blocks", "bytes", "leaks", "reachable", "totals"):
        assert offline[key] == old[key], key
    in_dump = older_in_dump(dump)
    assert in_dump == {**{(g["kind"], g["type"], g["how"]): (g["bytes"], g["blocks"])
                          for g in old["leaks"]},
                       **{("reachable", g["type"], g["how"]): (g["bytes"], g["blocks"])
                          for g in old["reachable"]}}
    assert _kind_totals(in_dump) == before
    assert (old["origin"], old["source"], old["problems"]) == ("unknown", "process", [])
    totals = {k: tuple(v) for k, v in old["totals"].items()}
    origin = ", allocated before the recording began"
    program_leaks = [  # the program's own, numbered on from the 4 recorded groups
        f"280 bytes in 5 blocks of `Connection` (vtable), definitely lost{origin}",
        f"80 bytes in 2 blocks of `?` (unknown), definitely lost{origin}",  # the thread's
        f"24 bytes in 1 block of `graph::Node` (vtable), definitely lost{origin}",
        f"24 bytes in 1 block of `graph::Node` (vtable), indirectly lost{origin}"]
    text = out[out.index("allocated before the recording began (the heap walked"):]
    # with the in-process recorder too: the dynamic linker's blocks from loading it, in use since
    # its load and not recorded, are left out (docs/heapwalk.md)
    assert totals == before
    assert (old["blocks"], old["bytes"]) == (sum(n for _, n in before.values()),
                                           sum(b for b, _ in before.values()))
    assert text.splitlines()[:9] == [  # docs/heapwalk.md's example, "After a late attach"
        "allocated before the recording began (the heap walked: blocks of unknown origin, "
        "grouped by type)",
        "heap of the process: 16 blocks in use, 82,080 bytes; glibc's layout from its debug "
        "symbols",
        # the worker thread's DTV, which its TCB points into, as valgrind says
        f"LEAK 5: 296 bytes in 1 block of `?` (unknown), possibly lost{origin}",
        *(f"LEAK {n}: {line}" for n, line in enumerate(program_leaks, 6)),
        "reachable: 81,376 bytes in 6 blocks of `?` (unknown)",
        "totals: definitely lost 384 bytes in 8 blocks, indirectly lost 24 bytes in 1 block, "
        "possibly lost 296 bytes in 1 block, still reachable 81,376 bytes in 6 blocks"]
    # the offline text report says the same, in the same words (its second line is its own)
    printed = analyze_raw(dump, "--show-leak-kinds", "all")
    assert printed.returncode == 0, printed.stderr
    offline_text = printed.stdout[printed.stdout.index("allocated before the recording began ("):]
    assert offline_text.splitlines()[2:] == text.splitlines()[2:9]
    assert offline_text.splitlines()[1] == "blocks from before the recording: 16 blocks, 82,080 " \
        "bytes"


def test_memdump_sh_recording(tmp_path: Path, memdump_mode: str) -> None:
    """memdump.sh -p PID records a window of the running program; its end (the detach) scans the
    older blocks with the recorded ones: the dump's kinds are valgrind's, the program runs on."""
    dump = tmp_path / "window.memdump"
    prog = Commanded("heapwalk_attach")
    mode = ["--breakpoints"] if memdump_mode == "breakpoints" else []
    script = subprocess.Popen([str(REPO / "scripts" / "memdump.sh"), *mode, "-o", str(dump), "-p",
                               str(prog.proc.pid)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        Lines(script.stderr).wait_for((f"memdump.sh: recording process {prog.proc.pid}",))
        assert prog.ask("more") == "ok"
        _wait_for_read(prog.proc.pid)
        script.send_signal(signal.SIGINT)
        script.wait(timeout=GDB_TIMEOUT)
        assert script.returncode == 0
        assert prog.ask("hello") == "?"  # untraced, it answers on
        prog.send("exit")
        assert prog.proc.wait(timeout=GDB_TIMEOUT) == 0
    finally:
        prog.kill()
        if script.poll() is None:
            script.kill()
            script.wait()
    after, before = valgrind_sets()
    report = analyze(dump)
    kinds = report.summary["leak_kinds"]
    assert {k: (v["bytes"], v["blocks"]) for k, v in kinds.items()} == {**after, "unknown": (0, 0)}
    assert _kind_totals(older_in_dump(dump)) == before  # the older blocks, in the dump
    listed = {k: tuple(v) for k, v in report.data["before_recording"]["totals"].items()}
    assert listed == before  # and in its report


def test_late_attach_nothing_recorded_live(tmp_path: Path, memdump_mode: str) -> None:
    """Stopped before the program allocated anything recorded: no recorded block is live, and
    `memdump leaks` says so as the offline report of the same stop does (the blocks from before
    the recording follow the summary: they are live), then lists those blocks, their leaks
    numbered from 1, through the same report (text and JSON)."""
    dump = tmp_path / "idle.memdump"
    prog, out = _record(dump, ["memdump leaks", "memdump leaks --json"], ask=("hello", "?"))
    try:
        prog.send("exit")
        assert prog.proc.wait(timeout=GDB_TIMEOUT) == 0
    finally:
        prog.kill()
    text = out[out.index("memdump leaks: blocks live now"):out.index("\n{\n")].splitlines()
    printed = analyze_raw(dump, "--show-leak-kinds", "all")
    assert printed.returncode == 0, printed.stderr
    offline = printed.stdout.splitlines()
    follow = "among the blocks recorded (the blocks from before the recording follow the summary)."
    assert f"No live blocks {follow}" in text and "No live blocks of the program." not in text
    assert f"No leaks {follow}" in offline
    origin = ", allocated before the recording began"
    older = [  # the scratch block `more` would free is still there: 17 blocks
        f"LEAK 1: 296 bytes in 1 block of `?` (unknown), possibly lost{origin}",
        f"LEAK 2: 280 bytes in 5 blocks of `Connection` (vtable), definitely lost{origin}",
        f"LEAK 3: 80 bytes in 2 blocks of `?` (unknown), definitely lost{origin}",
        f"LEAK 4: 24 bytes in 1 block of `graph::Node` (vtable), definitely lost{origin}",
        f"LEAK 5: 24 bytes in 1 block of `graph::Node` (vtable), indirectly lost{origin}",
        "reachable: 81,576 bytes in 7 blocks of `?` (unknown)",
        "totals: definitely lost 384 bytes in 8 blocks, indirectly lost 24 bytes in 1 block, "
        "possibly lost 296 bytes in 1 block, still reachable 81,576 bytes in 7 blocks"]
    # both after their summary, in the same words; the first two lines are each one's own
    start = text.index("allocated before the recording began (the heap walked: blocks of "
                       "unknown origin, grouped by type)")
    assert text[start + 1:] == ["heap of the process: 17 blocks in use, 82,280 bytes; glibc's "
                                "layout from its debug symbols", *older]
    assert text.index("SUMMARY") < start
    start = offline.index("allocated before the recording began (the heap walked at the "
                          "recording's end: blocks of unknown origin, grouped by type)")
    assert offline[start + 1:] == ["blocks from before the recording: 17 blocks, 82,280 bytes",
                                   *older]
    doc, report = _json(out), analyze(dump)
    assert (doc["leaks"], report.data["leaks"]) == ([], [])
    old, ended = doc["before_recording"], report.data["before_recording"]
    assert {k: v for k, v in old.items() if k not in ("engine", "symbols")} == \
        {k: v for k, v in ended.items() if k not in ("engine", "symbols")}
    assert [g["number"] for g in old["leaks"]] == [1, 2, 3, 4, 5]
    assert (old["symbols"], old["engine"] is not None) == ("debug", True)
    assert (ended["symbols"], ended["engine"]) == (None, None)
