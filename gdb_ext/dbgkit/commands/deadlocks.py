"""deadlocks: what each thread waits on and holds, the wait-for graph, and its cycles."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap

import gdb

from .. import output
from ..core.locks import glibc as gl
from ..core.locks import progress
from ..core.locks.waitgraph import render_json, render_text
from ..locks.deadlock_probe import (
    Probe,
    ProbeError,
    choose_layout,
    has_threads_library,
    is_core_dump,
)
from . import base

NAME = "deadlocks"
WATCHER_EXIT_SECONDS = 5.0


def _build_parser() -> base.Parser:
    parser = base.Parser(
        prog=NAME,
        description=textwrap.fill(
            "On a stopped or attached process, say for every thread which lock it waits on "
            "(pthread mutex, rwlock, condition variable, semaphore, std::mutex, "
            "std::shared_mutex, or a bare futex), or which thread it joins, and which locks it "
            "holds, then every cycle of the "
            "wait-for graph with each thread, the lock's name and address, and the source line "
            "where the thread waits. Readers of an rwlock and holders of a semaphore are not "
            "recorded by glibc: they are inferred from the threads' code and marked so "
            "(docs/deadlocks.md).", width=78),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true",
                        help="print the versioned JSON report (docs/deadlocks.md)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write the report to FILE (created 0600: it names the program's "
                             "functions and files) and print one line saying how many "
                             "deadlocks and where; the file has the report alone, without "
                             "GDB's own lines of `gdb -batch`")
    parser.add_argument("--layouts", choices=("auto", "table"), default="auto",
                        help="where the lock structures' layouts come from: auto (glibc's debug "
                             "info when GDB has it, else the table for the process's glibc "
                             "version) or table (always the table)")
    parser.add_argument("--watch", action="store_true",
                        help="continue the program until no thread makes progress for "
                             "--quiet-seconds, then stop it and report")
    parser.add_argument("--quiet-seconds", type=float, default=5.0, metavar="N",
                        help="with --watch: seconds without progress that count as a hang "
                             "(default 5)")
    return parser


def _signal_handling(name: str) -> tuple[str, str, str]:
    """(stop|nostop, print|noprint, pass|nopass) of GDB's handling of signal NAME."""
    text = gdb.execute(f"info signals {name}", to_string=True)
    line = next(ln for ln in text.splitlines() if ln.startswith(name))
    stop, prints, passes = line.split()[1:4]
    return (("stop" if stop == "Yes" else "nostop"), ("print" if prints == "Yes" else "noprint"),
            ("pass" if passes == "Yes" else "nopass"))


def _watch(quiet: float) -> None:
    if quiet <= 0:
        raise gdb.GdbError(f"{NAME}: --quiet-seconds must be above 0, not {quiet:g}")
    inferior = gdb.selected_inferior()
    pid = inferior.pid
    saved = _signal_handling("SIGINT")
    output.info(NAME, f"watching process {pid} until no thread progresses for {quiet:g} s")
    # The watcher is a process of its own: GDB's Python is blocked in `continue` meanwhile.
    watcher = subprocess.Popen([_python(), progress.__file__, str(pid), f"{quiet:g}"],
                               stdin=subprocess.DEVNULL)
    try:
        gdb.execute("handle SIGINT stop print nopass", to_string=True)
        gdb.execute("continue", to_string=True)
    finally:
        gdb.execute(f"handle SIGINT {' '.join(saved)}", to_string=True)
        try:  # having sent its SIGINT, the watcher exits at once
            hung = watcher.wait(timeout=WATCHER_EXIT_SECONDS) == 0
        except subprocess.TimeoutExpired:
            hung = False
            watcher.kill()
            watcher.wait()
    if not inferior.pid:
        raise gdb.GdbError(f"{NAME}: process {pid} exited before it hung")
    if not hung:
        raise gdb.GdbError(f"{NAME}: process {pid} stopped before it hung (a breakpoint or a "
                           "signal): run deadlocks there, or deadlocks --watch again")
    output.info(NAME, f"process {pid} made no progress for {quiet:g} s: stopped it")


def _python() -> str:
    """A Python 3 to run the watcher with: GDB's own (sys.executable may be gdb itself)."""
    for candidate in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if (candidate and os.path.basename(candidate).startswith("python")
                and os.access(candidate, os.X_OK)):
            return candidate
    return "python3"


@base.register
class Deadlocks(base.Command):
    NAME = NAME
    SUMMARY = "What each thread waits on and holds, and the deadlock cycles among them."
    PARSER = _build_parser()

    @base.needs_live_process
    def run(self, args: argparse.Namespace) -> None:
        if not has_threads_library():
            raise gdb.GdbError(f"{NAME}: process {gdb.selected_inferior().pid} has no threads "
                               "library (no pthread_mutex_lock in it): no locks to inspect")
        if args.watch:
            if is_core_dump():
                raise gdb.GdbError(f"{NAME}: --watch needs a live process, not a core dump")
            _watch(args.quiet_seconds)
        try:
            layout, version = choose_layout(args.layouts == "table")
            report = Probe(layout, version, use_debug_args=args.layouts != "table").run()
        except (ProbeError, gl.LayoutError) as exc:
            raise gdb.GdbError(f"{NAME}: {exc}") from None
        if not _has_debug_info():
            report.notes.append("the program has no debug information: lock names come from "
                                "its symbol table only, and there are no source lines")
        if args.json:
            text = json.dumps(render_json(report), indent=2, sort_keys=True) + "\n"
        else:
            text = render_text(report)
        if args.output is None:
            output.block(text)
            return
        _write(args.output, text)
        found = len(report.cycles())
        threads = len(report.threads)
        output.info(NAME, f"{found or 'no'} deadlock{'s' if found != 1 else ''}, "
                          f"{threads} thread{'s' if threads != 1 else ''}; "
                          f"report in {args.output}")


def _write(path: str, text: str) -> None:
    """TEXT into PATH, created 0600 (an existing file keeps its mode), replacing what it held."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise gdb.GdbError(f"{NAME}: cannot write {path}: {exc.strerror or exc}") from None


def _has_debug_info() -> bool:
    """Whether the main program has DWARF debug information (a symtab for `main`)."""
    try:
        symbol = gdb.lookup_global_symbol("main")
    except gdb.error:
        return False
    return symbol is not None and symbol.symtab is not None
