"""Format 2.5: the in-process recorder writes calloc, realloc and the aligned allocations as
short records (`+c`, `+r`, `+p`, `+l`, `+m`).

tests/programs/resize_threads makes, from two threads, 51 callocs, 201 reallocs (grown, moved,
from NULL, to 0) and 50 of each aligned allocation each, at its own call sites: the in-process
recorder writes every one of them short, after the `t` record of its thread, the breakpoint
recorder as `e` records, and both dumps give the same events and the same leak (the last block
of each thread, grown by realloc).
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

from memdump_analyzer.dumpfile import DumpReader
from memdump_e2e import PYTHON, analyze, analyzer_env, expect_leaks, marker, record

ROUNDS = 50  # resize_threads.c's


def _text(dump: Path) -> list[str]:
    """The dump's text records (`memdump-analyze --text`: the dump is compacted)."""
    run = subprocess.run([PYTHON, "-m", "memdump_analyzer", "--text", str(dump)],
                         capture_output=True, text=True, env=analyzer_env(), check=True)
    return run.stdout.splitlines()


def _program_calls(dump: Path) -> Counter[tuple[str, str]]:
    """(operation, its record's tag) of each event made by resize_threads' own function."""
    tags = [line.split(" ", 1)[0] for line in _text(dump)
            if line[:1] in ("e", "+", "-") and line.split(" ", 1)[0] in (
                "e", "+", "-", "+c", "+r", "+p", "+l", "+m")]
    out: Counter[tuple[str, str]] = Counter()
    with DumpReader(str(dump)) as reader:
        events = [(tag, fl[3].decode(), int(fl[4])) for tag, fl in zip(
            tags, (fl for fl in reader.records() if fl[0] == b"e"), strict=True)]
        for tag, op, node in events:  # the in-process recorder's symbols (`fs`) are at the end
            if node and reader.frames[reader.nodes[node][1]].function == "resize":
                out[op, tag] += 1
    return out


def test_calloc_and_realloc_records(dump: Path, memdump_mode: str) -> None:
    record("resize_threads", dump=dump)
    calls = _program_calls(dump)
    threads = 2
    want = {"calloc": threads * (ROUNDS + 1), "realloc": threads * (4 * ROUNDS + 1),
            "posix_memalign": threads * ROUNDS, "aligned_alloc": threads * ROUNDS,
            "memalign": threads * ROUNDS, "free": threads * 4 * ROUNDS}
    if memdump_mode == "in-process":
        tag = {"calloc": "+c", "realloc": "+r", "posix_memalign": "+p", "aligned_alloc": "+l",
               "memalign": "+m", "free": "-"}
        assert calls == {(op, tag[op]): n for op, n in want.items()}
    else:
        assert calls == {(op, "e"): n for op, n in want.items()}
    report = analyze(dump)
    expect_leaks(report, {marker("resize_threads.c", "kept"): (5 * 16 + 5 * 24, 2)})
    assert report.summary["errors"] == 0
