"""ctxswitches' GDB-free core: the /proc parsers, deltas, sorting, and the JSON of
docs/ctxswitches.md (its worked example is the fixture, byte for byte)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from dbgkit.core.locks import ctxswitch
from dbgkit.core.locks.ctxswitch import Snapshot, ThreadCounts
from doc_examples import doc_block

FIXTURES = Path(__file__).resolve().parent / "fixtures"

STATUS = """Name:\ttpc-client-1
Umask:\t0022
State:\tS (sleeping)
Tgid:\t32687
voluntary_ctxt_switches:\t51
nonvoluntary_ctxt_switches:\t21
"""
# The name holds a space and a ')' on purpose: fields are counted from the last ')'.
STAT = ("32758 (a) b) S 1 32687 32687 0 -1 4194368 12 0 0 0 7 3 0 0 20 0 5 0 71234 "
        "23330816 1000 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 -1 1 0 0 0 0 0")


def test_parse_status_and_stat() -> None:
    assert ctxswitch.parse_status(STATUS) == ("tpc-client-1", "S (sleeping)", 51, 21)
    assert ctxswitch.parse_stat(STAT) == (7, 3)


def test_parse_refuses_what_is_not_proc5() -> None:
    with pytest.raises(ctxswitch.ProcError, match="status has no valid 'voluntary_ctxt_switches'"):
        ctxswitch.parse_status("Name:\tx\nState:\tR (running)\n")
    with pytest.raises(ctxswitch.ProcError, match="stat has no utime/stime fields"):
        ctxswitch.parse_stat("1 (x) S 1 2")


def _t(tid: int, name: str, vol: int, invol: int, ut: int = 0, st: int = 0,
       state: str = "S (sleeping)") -> ThreadCounts:
    return ThreadCounts(tid, name, state, vol, invol, ut, st)


BEFORE = Snapshot(32687, {32687: _t(32687, "tcp_echo_server", 2, 0),
                          32688: _t(32688, "tpc-accept", 2, 0),
                          32700: _t(32700, "tpc-client-9", 4, 1)})
NOW = Snapshot(32687, {32687: _t(32687, "tcp_echo_server", 3, 0),
                       32688: _t(32688, "tpc-accept", 7, 0),
                       32758: _t(32758, "tpc-client-1", 51, 21, 1, 2),
                       32759: _t(32759, "tpc-client-2", 50, 22, 2, 0)})


def test_deltas_new_and_exited_threads() -> None:
    report = ctxswitch.deltas(NOW, BEFORE, "mark before")
    rows = {r.now.tid: r for r in report.rows}
    assert (rows[32688].voluntary, rows[32688].involuntary, rows[32688].new) == (5, 0, False)
    assert (rows[32758].voluntary, rows[32758].involuntary, rows[32758].cpu) == (51, 21, 3)
    assert rows[32758].new and rows[32759].switches == 72
    assert [t.name for t in report.gone] == ["tpc-client-9"]


def test_a_reused_tid_with_smaller_counts_is_a_new_thread() -> None:
    before = Snapshot(1, {5: _t(5, "old", 90, 0)})
    now = Snapshot(1, {5: _t(5, "young", 3, 0)})
    row = ctxswitch.deltas(now, before, "previous call").rows[0]
    assert (row.new, row.voluntary) == (True, 3)


def test_without_a_baseline_there_is_no_delta() -> None:
    report = ctxswitch.deltas(NOW, None)
    assert all(r.voluntary is None and r.switches is None for r in report.rows)
    assert report.gone == []


def test_sort_orders() -> None:
    report = ctxswitch.deltas(NOW, BEFORE, "mark before")
    tids = [r.now.tid for r in ctxswitch.sort_rows(report.rows, "tid")]
    assert tids == [32687, 32688, 32758, 32759]
    names = [r.now.name for r in ctxswitch.sort_rows(report.rows, "name")]
    assert names == ["tcp_echo_server", "tpc-accept", "tpc-client-1", "tpc-client-2"]
    # by the change, largest first; a tie keeps tid order
    vol = [r.now.tid for r in ctxswitch.sort_rows(report.rows, "voluntary")]
    assert vol == [32758, 32759, 32688, 32687]
    invol = [r.now.tid for r in ctxswitch.sort_rows(report.rows, "involuntary")]
    assert invol == [32759, 32758, 32687, 32688]
    assert [r.now.tid for r in ctxswitch.sort_rows(report.rows, "cpu")][:2] == [32758, 32759]
    # totals when there is no baseline
    totals = [r.now.tid for r in ctxswitch.sort_rows(ctxswitch.deltas(NOW, None).rows,
                                                     "switches")]
    assert totals == [32758, 32759, 32688, 32687]
    with pytest.raises(ValueError, match="unknown sort key 'size'"):
        ctxswitch.sort_rows(report.rows, "size")


def _example_report() -> ctxswitch.Report:
    report = ctxswitch.deltas(NOW, BEFORE, "mark before")
    report.rows[:] = ctxswitch.sort_rows(report.rows, "tid")
    return report


def test_json_is_the_fixture_and_the_docs_example() -> None:
    ids = {32687: 1, 32688: 2, 32758: 3, 32759: 4}
    text = json.dumps(ctxswitch.render_json(_example_report(), 100, ids), indent=2) + "\n"
    assert text == (FIXTURES / "ctxswitches.json").read_text()
    assert doc_block("ctxswitches.md", "### JSON worked example", "json") == text


def test_table_is_the_docs_example() -> None:
    ids = {32687: 1, 32688: 2, 32758: 3, 32759: 4}
    text = ctxswitch.render_table(_example_report(), 100, ids)
    assert "tpc-client-1     S (sleeping)              51          21     0.03   new +51" in text
    assert text.splitlines()[-1] == "exited since mark before: tpc-client-9 (tid 32700)"
    assert doc_block("ctxswitches.md", "### Table worked example") == text


def test_snapshot_of_this_process_counts_a_thread_that_sleeps() -> None:
    """A real /proc: a thread that calls nanosleep(2) three times between the snapshots has
    blocked, so made a voluntary switch, at least three times."""
    start, go, done, end = (threading.Event() for _ in range(4))
    tids: list[int] = []

    def worker() -> None:
        tids.append(threading.get_native_id())
        start.set()
        go.wait()
        for _ in range(3):
            time.sleep(0.001)
        done.set()
        end.wait()

    t = threading.Thread(target=worker)
    t.start()
    start.wait()
    before = ctxswitch.snapshot(os.getpid())
    go.set()
    done.wait()
    now = ctxswitch.snapshot(os.getpid())
    comm = Path(f"/proc/self/task/{tids[0]}/comm").read_text().strip()
    end.set()
    t.join()
    row = next(r for r in ctxswitch.deltas(now, before, "x").rows if r.now.tid == tids[0])
    assert not row.new and row.voluntary is not None and row.voluntary >= 3
    assert row.now.name == comm and os.getpid() in now.threads


def test_snapshot_of_a_gone_process_is_an_oserror() -> None:
    with pytest.raises(OSError):
        ctxswitch.snapshot(2**22 + 12345)
