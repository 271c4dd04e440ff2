"""contention: which locks threads wait for, how often, who holds them, and from which stacks."""

from __future__ import annotations

import argparse
import json

import gdb
from memdump_analyzer.rules import is_lock_wrapper

from .. import lock_counts, output
from ..core import locktable
from ..core.locks import contention
from ..locks import sampler
from . import base

CMD = "contention"


def _build_parser() -> base.Parser:
    parser = base.command_parser(
        CMD,
        "Find the locks the program's threads wait for (pthread mutexes, reader-writer locks, "
        "and what is built on them: std::mutex, std::shared_mutex), by lock and by waiting "
        "stack, like mutrace. Without --sample: the counts of memdump's in-process recorder, "
        "which hooks every lock call (locked, owner changes, contended, wait times). --sample "
        "SECONDS lets the program run and stops it every --interval MS to note every thread "
        "blocked in glibc's lock wait, the lock's address and name, and its owner; the process "
        "is left stopped.")
    parser.add_argument("--sample", type=float, metavar="SECONDS",
                        help="sample for SECONDS of the program's run (no recorder needed)")
    parser.add_argument("--interval", type=int, default=10, metavar="MS",
                        help="milliseconds between samples (default 10)")
    parser.add_argument("--stacks", type=int, default=3, metavar="N",
                        help="waiting stacks shown per lock in the table (default 3)")
    parser.add_argument("--json", action="store_true", help="print JSON (docs/contention.md)")
    return parser


_PARSER = _build_parser()


def _stopped() -> bool:
    thread = gdb.selected_thread()
    return thread is not None and thread.is_stopped()


needs_stopped = base.Precondition("the program is running", "interrupt it first", _stopped)


@base.register
class ContentionCommand(base.Command):
    NAME = CMD
    SUMMARY = __doc__ or ""
    PARSER = _PARSER
    COMMAND_CLASS = gdb.COMMAND_STATUS

    @base.needs_live_process
    @needs_stopped
    def run(self, args: argparse.Namespace) -> None:
        if args.sample is None:
            _counted(args)
            return
        if gdb.parameter("non-stop"):
            raise gdb.GdbError(f"{CMD}: --sample needs GDB's all-stop mode (set non-stop off "
                               "before the program runs)")
        if not args.sample > 0:
            raise gdb.GdbError(f"{CMD}: --sample takes a positive number of seconds, "
                               f"not {args.sample:g}")
        if args.interval < 1:
            raise gdb.GdbError(f"{CMD}: --interval takes at least 1 millisecond, "
                               f"not {args.interval}")
        inferior = gdb.selected_inferior()
        output.progress(CMD, f"sampling process {inferior.pid} for {args.sample:g} s")
        run = sampler.sample(args.sample, args.interval)
        names = {t.ptid[1]: t.name or "" for t in inferior.threads() if t.is_valid()}
        locks = contention.aggregate(run, is_lock_wrapper)
        states = sampler.owner_states({t for r in locks for t in r.owners}, names)
        if args.json:
            output.block(json.dumps(contention.render_json(run, locks, names, states), indent=2))
        else:
            output.block(contention.render_table(run, locks, names, args.stacks, states))


def _counted(args: argparse.Namespace) -> None:
    """The in-process recorder's counts, when it is loaded."""
    try:
        table = lock_counts.read()
    except lock_counts.NotLoaded:
        raise gdb.GdbError(f"{CMD}: the in-process recorder is not loaded in this process "
                           "(memdump loads it); contention --sample SECONDS samples "
                           "instead") from None
    except (locktable.LockTableError, gdb.MemoryError) as exc:
        raise gdb.GdbError(f"{CMD}: cannot read the recorder's lock table: {exc}") from None
    if not table.enabled and not table.locks:
        raise gdb.GdbError(f"{CMD}: the in-process recorder does not count lock calls: set "
                           "memdump locks on before the program runs, or contention --sample "
                           "SECONDS")
    names = {}
    for counts in table.locks:
        name, _ = sampler.lock_name(counts.address, [])
        if name:
            names[counts.address] = name
    resolved = lock_counts.resolve(table)
    if args.json:
        doc = contention.render_counts_json(table, names, resolved, is_wrapper=is_lock_wrapper)
        output.block(json.dumps(doc, indent=2))
    else:
        output.block(contention.render_counts_table(table, names, resolved, args.stacks,
                                                    is_wrapper=is_lock_wrapper))
