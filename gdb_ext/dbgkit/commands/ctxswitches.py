"""ctxswitches: each thread's voluntary and involuntary context switches and CPU time."""

from __future__ import annotations

import argparse
import json
import os

import gdb

from .. import output
from ..core.locks import ctxswitch
from . import base

CMD = "ctxswitches"


def _build_parser() -> base.Parser:
    parser = base.command_parser(
        CMD,
        "List every thread of the process (GDB's id, tid, name, state) with its voluntary "
        "context switches (it blocked: a lock, a read, poll), its involuntary ones (the "
        "scheduler preempted it) and its CPU time, read from /proc/PID/task/TID (no root, no "
        "SystemTap; the process may be stopped or running). The second and later calls also "
        "show what changed since the previous call, or since a named mark.")
    parser.add_argument("--mark", metavar="NAME",
                        help="remember this moment as NAME (ctxswitches --since NAME compares "
                             "with it)")
    parser.add_argument("--since", metavar="NAME",
                        help="show the change since the mark NAME instead of since the previous "
                             "call")
    parser.add_argument("--sort", choices=ctxswitch.SORT_KEYS, default="tid",
                        help="order of the rows: tid (default) and name ascending; voluntary, "
                             "involuntary, switches (both) and cpu descending, by the change "
                             "when there is one")
    parser.add_argument("--json", action="store_true", help="print JSON (docs/ctxswitches.md)")
    return parser


_PARSER = _build_parser()

# The baselines of this GDB session: the previous call's snapshot and the named marks.
_previous: ctxswitch.Snapshot | None = None
_marks: dict[str, ctxswitch.Snapshot] = {}


def _gdb_ids(inferior: gdb.Inferior) -> dict[int, int]:
    """GDB's thread number of each tid of INFERIOR."""
    return {t.ptid[1]: t.num for t in inferior.threads() if t.ptid[1]}


def _baseline(args: argparse.Namespace, pid: int) -> tuple[ctxswitch.Snapshot | None, str]:
    if args.since is not None:
        mark = _marks.get(args.since)
        if mark is None:
            known = ", ".join(sorted(_marks)) or "none yet"
            raise gdb.GdbError(f"{CMD}: no mark named {args.since!r} (marks: {known}; "
                               f"ctxswitches --mark {args.since} sets it)")
        if mark.pid != pid:
            raise gdb.GdbError(f"{CMD}: mark {args.since!r} is of process {mark.pid}, not of "
                               f"process {pid}")
        return mark, f"mark {args.since}"
    if _previous is not None and _previous.pid == pid:
        return _previous, "previous call"
    return None, ""


@base.register
class CtxswitchesCommand(base.Command):
    NAME = CMD
    SUMMARY = __doc__ or ""
    PARSER = _PARSER
    COMMAND_CLASS = gdb.COMMAND_STATUS

    @base.needs_live_process
    def run(self, args: argparse.Namespace) -> None:
        global _previous
        inferior = gdb.selected_inferior()
        pid = inferior.pid
        try:
            now = ctxswitch.snapshot(pid)
        except OSError as exc:
            raise gdb.GdbError(f"{CMD}: cannot read /proc/{pid}/task: "
                               f"{exc.strerror or exc}") from None
        except ctxswitch.ProcError as exc:
            raise gdb.GdbError(f"{CMD}: /proc/{pid}: {exc}") from None
        before, since = _baseline(args, pid)
        report = ctxswitch.deltas(now, before, since)
        report.rows[:] = ctxswitch.sort_rows(report.rows, args.sort)
        hz = os.sysconf("SC_CLK_TCK")
        ids = _gdb_ids(inferior)
        if args.json:
            output.block(json.dumps(ctxswitch.render_json(report, hz, ids), indent=2))
        else:
            output.block(ctxswitch.render_table(report, hz, ids))
        _previous = now
        if args.mark is not None:
            _marks[args.mark] = now
            if not args.json:
                output.info(CMD, f"marked this moment as {args.mark!r}")
