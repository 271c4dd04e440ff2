"""scripts/memdump.sh's reports: the leak report (--report), the JSON report (--json FILE) and the
compaction of the dumps, in one analyser (`cli.several_compacting`).

Two ways to run them, with the same result: `main`, a Python of their own that memdump.sh starts
once GDB has exited; and `in_gdb`, in GDB's own Python at the end of GDB's script, for a dump of
at most `IN_GDB_MAX_BYTES`. GDB has imported most of what the report needs by then, where a second
interpreter would start and import it all again: on a small program that start-up was a third of
the whole run's CPU (docs/benchmarks.md, "The whole run"). A larger dump is left to `main`, which
runs once GDB has exited: the analysis's memory then comes after GDB's instead of on top of it.
"""

from __future__ import annotations

import io
import locale
import os
import sys
import traceback

#: text dumps up to this size are reported in GDB's Python (16 MiB: about 700,000 heap events).
#: Measured (CPU): alloc_bench's 15 MB dump 0.06 s in GDB, 0.15 s in a Python of its own;
#: cppcheck's 222 MB, reported and compacted, 2.3-2.5 s in GDB, 2.6-2.8 s apart, but 25 MB more
#: at once in GDB's process
IN_GDB_MAX_BYTES = 16 << 20

#: report status: the report failed (memdump.sh exits 125)
REPORT_FAILED = 1
#: report status: the JSON report failed
JSON_FAILED = 2
#: report status: valgrind's output (docs/valgrind-compat.md) counted errors, which
#: --error-exitcode turns into its status
VALGRIND_ERRORS = 3
#: the file of the valgrind-style report's analyser arguments (each ended by a NUL), if any
VALGRIND_ARGS_ENV = "MEMDUMP_SH_VALGRIND"


def run(me: str, dump: str, report: bool, json_file: str,
        dumps: list[str]) -> tuple[int, list[str]]:
    """The text report of DUMP on stdout when REPORT, the JSON one into JSON_FILE when given,
    while DUMPS are compacted. Returns the status (0, REPORT_FAILED, JSON_FAILED) and the lines
    the compaction said, each prefixed with ME."""
    from .cli import several_compacting

    argvs = ([[dump]] if report else []) + ([["--format", "json", "-o", json_file, dump]]
                                            if json_file else []) + _valgrind_argvs(dump)
    (number, code), said = several_compacting(dumps, *argvs)
    if code == 0:
        status = 0
    elif argvs[number - 1][:2] == ["--format", "json"]:
        status = JSON_FAILED
    elif argvs[number - 1][1].startswith("valgrind") and code == 1:  # cli.EXIT_LEAK
        status = VALGRIND_ERRORS
    else:
        status = REPORT_FAILED
    return status, [f"{me}: {line}" for line in said]


def _valgrind_argvs(dump: str) -> list[list[str]]:
    """The analyser's arguments for memdump.sh's valgrind-style output, from the file
    VALGRIND_ARGS_ENV names (`--format valgrind ...`, the dump last): none without it."""
    path = os.environ.get(VALGRIND_ARGS_ENV, "")
    if not path:
        return []
    with open(path, "rb") as fh:
        words = [os.fsdecode(word) for word in fh.read().split(b"\0")[:-1]]
    return [[*words, dump]]


def main(argv: list[str]) -> int:
    """memdump.sh's analyser after GDB: ARGV is ME DUMP REPORT(0|1) JSON_FILE DUMPS...; the report
    on stdout, the compaction's lines on stderr; exits with the status."""
    me, dump, report, json_file, dumps = argv[0], argv[1], argv[2], argv[3], argv[4:]
    status, said = run(me, dump, report == "1", json_file, dumps)
    for line in said:
        print(line, file=sys.stderr)
    return status


class _Output(io.TextIOWrapper):
    """Text written into the report's file as a Python of its own writes it to memdump.sh's
    stderr: its stdout (ERRORS: the locale's rule) or its stderr (backslashreplace), both in the
    one file in the order they are written; a terminal when memdump.sh's stderr is one, so that
    the report's colours follow the user's terminal, not the file."""

    def __init__(self, raw: io.BufferedWriter, terminal: bool, errors: str) -> None:
        utf8 = _utf8_stdio()
        encoding = "utf-8" if utf8 else locale.getpreferredencoding(False)
        if utf8 and errors == "strict":
            errors = "surrogateescape"
        super().__init__(raw, encoding=encoding, errors=errors, write_through=True)
        self._terminal = terminal

    def isatty(self) -> bool:
        return self._terminal


def _utf8_stdio() -> bool:
    """Whether a Python of its own writes UTF-8, its stdout with surrogateescape: in the C
    locale (which its start-up coerces to C.UTF-8), in C.UTF-8, in UTF-8 mode."""
    return locale.setlocale(locale.LC_CTYPE) in ("C", "POSIX", "C.UTF-8", "C.utf8", "UTF-8") \
        or os.environ.get("PYTHONUTF8") == "1"


def in_gdb(me: str, dump: str, report: bool, json_file: str, dumps: list[str], out_path: str,
           status_path: str, terminal: bool) -> bool:
    """`run` in GDB's Python when every dump is a text dump of at most IN_GDB_MAX_BYTES: what the
    report and the analyser say (stdout and stderr, in their order) and then the compaction's
    lines go to OUT_PATH, the status to STATUS_PATH, for memdump.sh to show once GDB has exited.
    Returns False, writing nothing, when the dumps are left to `main`. Never raises: an error is
    the report's failure, its traceback in OUT_PATH (as `main`'s Python would print it)."""
    try:
        if any(os.path.getsize(path) > IN_GDB_MAX_BYTES for path in dumps + [dump]):
            return False
    except OSError:
        return False
    saved = sys.stdout, sys.stderr
    with open(out_path, "wb") as raw:
        out, err = _Output(raw, terminal, "strict"), _Output(raw, terminal, "backslashreplace")
        sys.stdout, sys.stderr = out, err
        try:
            status, said = run(me, dump, report, json_file, dumps)
            for line in said:
                print(line, file=err)
        except BaseException:  # noqa: BLE001 - the report's failure, said as its Python says it
            traceback.print_exc(file=err)
            status = REPORT_FAILED
        finally:
            sys.stdout, sys.stderr = saved
            out.detach()
            err.detach()
    with open(status_path, "w", encoding="ascii") as fh:
        fh.write(f"{status}\n")
    return True
