"""A thread started on the descriptor of one that exited records under its own id.

thread_reuse starts five threads one after another, each joined before the next starts, so glibc
gives each the descriptor and stack the last one left; each prints its kernel id, and thread i > 0
allocates and frees blocks of sizes of its own (1000 + i, 2000 + i; the last through strdup), after
a thread 0 that makes no heap call of its own. Every one of those events must carry the id of the
thread that made it, with GDB's recorders and with memdump.sh's preloaded one; and the tag thread
1 leaves pushed as it exits is that thread's only (recorder.c, "A key's value outlives its
destructor").
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import memdump_e2e
from memdump_e2e import GDB_TIMEOUT, REPO, analyze_raw, program, read_dump, record

THREADS = 5
_LINE = re.compile(r"thread (\d+) tid (\d+) self (0x[0-9a-f]+)$")


def _threads(stdout: str) -> dict[int, str]:
    """Thread index -> its kernel id, as the program printed them; checks that glibc did give
    every thread the descriptor of the one before (else there is nothing to test)."""
    seen = [m.groups() for m in map(_LINE.match, stdout.splitlines()) if m]
    assert [int(i) for i, _, _ in seen] == list(range(THREADS)), stdout
    assert len({self for _, _, self in seen}) == 1, f"no descriptor was reused:\n{stdout}"
    return {int(i): tid for i, tid, _ in seen}


def _expect_own_ids(dump: Path, tids: dict[int, str]) -> None:
    """Each thread's mallocs and frees of its blocks are recorded under its own id, and nothing
    else but glibc's free(NULL) calls as it exits."""
    owners: dict[str, int] = {}  # block -> its size
    got: dict[tuple[str, int], str] = {}
    events = read_dump(dump).events
    for e in events:
        if e[3] == "malloc" and 0 < int(e[6]) % 1000 < THREADS and 1000 <= int(e[6]) < 3000:
            owners[e[5]] = int(e[6])
            got["malloc", int(e[6])] = e[2]
        elif e[3] == "free" and e[6] in owners:
            got["free", owners.pop(e[6])] = e[2]
    expected = {(op, base + i): tids[i] for i in range(1, THREADS) for base in (1000, 2000)
                for op in ("malloc", "free")}
    assert got == expected
    made = Counter(e[2] for e in events if (e[3], e[6]) != ("free", "0x0"))
    assert {i: made[tid] for i, tid in tids.items()} == {0: 0, 1: 4, 2: 4, 3: 4, 4: 4}


def test_each_thread_records_under_its_own_id(dump: Path) -> None:
    run = record("thread_reuse", dump=dump)
    _expect_own_ids(dump, _threads(run.stdout))


def test_the_preloaded_recorder_too(dump: Path) -> None:
    mode = ["--breakpoints"] if memdump_e2e.MODE == "breakpoints" else []
    proc = subprocess.run([REPO / "scripts" / "memdump.sh", *mode, "-o", dump,
                           program("thread_reuse")], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=GDB_TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    _expect_own_ids(dump, _threads(proc.stdout))


def test_a_tag_left_pushed_is_its_threads_only(dump: Path) -> None:
    """Thread 1 exits inside its tag `first`: its two blocks are the tag's, the later threads'
    six untagged."""
    record("thread_reuse", dump=dump)
    tags = json.loads(analyze_raw(dump, "--by-tag", "--format", "json").stdout)["tags"]
    first = [(t["allocated"]["bytes"], t["allocated"]["blocks"]) for t in tags
             if t["tag"] == "first"]
    assert first == [(1001 + 2001, 2)]
