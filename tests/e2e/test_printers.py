"""dbgkit's pretty printers in the real GDB: each expression of tests/programs/printers.cpp prints
exactly as its `PRINTS:` comment says, they load from the program's .debug_gdb_scripts entry, and
loading them twice registers them once (docs/printers.md)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from memdump_e2e import GDB_TIMEOUT, REPO, SOURCES, GdbRun, build_dir, marker, program, run_gdb

SOURCE = "printers.cpp"
DBGKIT = REPO / "gdb_ext" / "dbgkit.py"
DOC = REPO / "docs" / "printers.md"
_PRINTS = re.compile(r"//\s*PRINTS:\s*(.+?) = (.*)$")
_PRINTED = re.compile(r"^PRINTS (.+)\n\$\d+ = (.*)$", re.MULTILINE)


def expectations() -> dict[str, str]:
    """EXPR -> TEXT of every `// PRINTS: EXPR = TEXT` comment of the test program."""
    found: dict[str, str] = {}
    for number, line in enumerate((SOURCES / SOURCE).read_text().splitlines(), start=1):
        match = _PRINTS.search(line)
        if match:
            assert match.group(1) not in found, f"{SOURCE}:{number}: {match.group(1)} twice"
            found[match.group(1)] = match.group(2)
    return found


def pattern(expected: str, pid: int) -> re.Pattern[str]:
    """EXPECTED as a regexp: `<addr>` any hex address, `<pid>` the program's pid, all else
    literal."""
    parts = re.split(r"(<addr>|<pid>)", expected)
    subs = {"<addr>": "0x[0-9a-f]+", "<pid>": str(pid)}
    return re.compile("".join(subs.get(p, re.escape(p)) for p in parts))


def gdb_at_break(*before: str, printed: list[str], after: tuple[str, ...] = (),
                 source_dbgkit: bool = True) -> GdbRun:
    """GDB on the test program stopped at its BREAK line: BEFORE (-iex), each of PRINTED after an
    `echo PRINTS EXPR` line, AFTER, then the program runs to its end (it unlinks its queues)."""
    argv = ["gdb", "-nx", "-batch"]
    for command in before:
        argv += ["-iex", command]
    if source_dbgkit:
        argv += ["-ex", f"source {DBGKIT}"]
    argv += ["-ex", f"break {marker(SOURCE, 'printers', 'BREAK')}", "-ex", "run",
             "-ex", "python print('pid', gdb.selected_inferior().pid)"]
    for expr in printed:
        argv += ["-ex", f"echo PRINTS {expr}\\n", "-ex", f"print {expr}"]
    for command in after:
        argv += ["-ex", command]
    argv += ["-ex", "continue", str(program("printers"))]
    run = run_gdb(argv)
    assert "printers: ready" in run.stdout and "exited normally" in run.stdout, run.describe()
    return run


def printed(run: GdbRun) -> tuple[int, dict[str, str]]:
    """The program's pid and what GDB printed for each expression."""
    pid = re.search(r"^pid (\d+)$", run.stdout, re.MULTILINE)
    assert pid, run.describe()
    return int(pid.group(1)), dict(_PRINTED.findall(run.stdout))


def test_every_expression_prints_as_its_comment_says() -> None:
    expected = expectations()
    assert len(expected) == 26
    pid, got = printed(gdb_at_break(printed=list(expected)))
    wrong = [f"{expr}\n  expected: {text}\n  printed:  {got.get(expr)}"
             for expr, text in expected.items()
             if not pattern(text, pid).fullmatch(got.get(expr, "<nothing printed>"))]
    assert not wrong, "\n".join(wrong)


def test_the_printers_load_from_the_programs_debug_gdb_scripts_section() -> None:
    safe = f"set auto-load safe-path {program('printers').parent}:$debugdir:$datadir/auto-load"
    run = gdb_at_break(safe, printed=["locked", "tree.item_bytes_"], source_dbgkit=False,
                       after=("info auto-load python-scripts", "info pretty-printer"))
    pid, got = printed(run)
    assert pattern(expectations()["locked"], pid).fullmatch(got["locked"]), run.describe()
    assert got["tree.item_bytes_"] == "8"
    assert re.search(r"^Yes\s+gdb\.inlined-script\.dbgkit-printers *$", run.stdout, re.MULTILINE)
    objfile = f"objfile {program('printers')} pretty-printers:\n  dbgkit\n    AtomicRing\n"
    assert objfile in run.stdout, run.describe()
    assert "global pretty-printers:\n  builtin\n    mpx_bound128\nobjfile" in run.stdout


#: a pointer to every type a printer is registered for, as GDB parses it in the test program
POINTERS = ("dbgkit::targets::LockedRing<int>*",
            "dbgkit::targets::detail::AtomicRing<unsigned long, dbgkit::targets::detail::SeqCst, "
            "dbgkit::targets::detail::AdjacentIndices>*",
            "dbgkit::targets::CoarseQueue<int>*", "dbgkit::targets::FineQueue<int>*",
            "dbgkit::targets::detail::PcRun*", "dbgkit::targets::NewDeletePool*",
            "dbgkit::targets::MutexPool*", "dbgkit::targets::SegmentLinearPool*",
            "dbgkit::targets::SegmentTreePool*", "dbgkit::targets::detail::Segment*",
            "typeof(queue)", "typeof(queue->hdr)")


def test_noise_prints_as_markers_never_as_errors() -> None:
    """Every type printed over a fixed pseudo-random buffer: each print gives a value (no GDB
    error in its place, no Python exception) and no control character reaches the screen."""
    exprs = [f"*({t})(noise + {offset})" for t in POINTERS for offset in (0, 1000, 2000)]
    run = gdb_at_break(printed=exprs)
    _, got = printed(run)
    assert sorted(got) == sorted(exprs), run.describe()
    assert "Python Exception" not in run.output, run.describe()
    for expr, text in got.items():
        assert text.isprintable(), (expr, text)
        assert "Cannot access memory" not in text.replace("<unreadable: Cannot access memory",
                                                          ""), (expr, text)


def test_a_cut_or_looping_list_is_named_not_walked() -> None:
    """GDB itself breaks the FineQueue `fine` (7 popped, 8 and 9 queued): tail_ off the list, then
    the last node pointing back to the first; both are put back before the program ends."""
    first = "fine.head_->next._M_b._M_p"
    last = f"{first}->next._M_b._M_p"
    run = gdb_at_break(printed=[], after=(
        "set var $tail = fine.tail_", "set var fine.tail_ = 0",
        "echo PRINTS cut\\n", "print fine",
        f"set var {last}->next._M_b._M_p = {first}",
        "echo PRINTS loop\\n", "print fine",
        "echo PRINTS first\\n", f"print/x (unsigned long){first}",
        f"set var {last}->next._M_b._M_p = 0", "set var fine.tail_ = $tail",
        "echo PRINTS mended\\n", "print fine"))
    pid, got = printed(run)
    assert got["cut"] == "<corrupt: list ends after 2 nodes, before tail_ 0x0>", run.describe()
    assert got["loop"] == f"<corrupt: list loops back to node {got['first']}>", run.describe()
    assert pattern(expectations()["fine"], pid).fullmatch(got["mended"]), run.describe()


def test_an_entry_whose_gdb_ext_is_gone_says_so_in_one_line(tmp_path: Path) -> None:
    """The template built as CMake builds it, but naming a gdb_ext/ that does not exist (a tree
    moved after the build): GDB goes on, with one line saying why there are no printers."""
    gone = tmp_path / "moved" / "gdb_ext"
    template = (REPO / "gdb_ext" / "dbgkit-gdb-scripts.c.in").read_text()
    entry = tmp_path / "entry.c"
    entry.write_text(template.replace("@DBGKIT_GDB_EXT_HEX@", str(gone).encode().hex()))
    main = tmp_path / "main.c"
    main.write_text("int main(void) { return 0; }\n")
    binary = tmp_path / "prog"
    subprocess.run(["gcc", "-g", str(entry), str(main), "-o", str(binary)], check=True,
                   timeout=GDB_TIMEOUT)
    run = run_gdb(["gdb", "-nx", "-batch", "-iex", f"set auto-load safe-path {tmp_path}",
                   "-ex", "info auto-load python-scripts", str(binary)])
    assert run.stderr == f"dbgkit: printers not loaded: {gone} is gone\n", run.describe()
    assert re.search(r"^Yes\s+gdb\.inlined-script\.dbgkit-printers *$", run.stdout, re.MULTILINE)


@pytest.mark.parametrize("relative", ["spsc_ring/spsc_ring_bench", "mpmc_queue/mpmc_queue_tests",
                                      "object_pool/object_pool_bench", "shmemq/shmemq_bench"])
def test_every_target_program_carries_the_entry(relative: str) -> None:
    """GDB loading a target program (no process) runs its entry: the printers are registered for
    that objfile, and the section holds the script once."""
    path = build_dir() / "targets" / relative
    if not path.is_file():
        pytest.fail(f"{path} is not built: run `make build`", pytrace=False)
    run = run_gdb(["gdb", "-nx", "-batch", "-iex", f"set auto-load safe-path {path.parent}",
                   "-ex", "info auto-load python-scripts", "-ex", f"info pretty-printer {path}",
                   str(path)])
    assert re.search(r"^Yes\s+gdb\.inlined-script\.dbgkit-printers *$", run.stdout, re.MULTILINE)
    assert f"objfile {path} pretty-printers:\n  dbgkit\n    AtomicRing\n" in run.stdout
    assert path.read_bytes().count(b"gdb.inlined-script.dbgkit-printers\n") == 1


def test_without_the_safe_path_gdb_declines_and_prints_the_raw_struct() -> None:
    run = gdb_at_break(printed=["locked"], source_dbgkit=False)
    declined = (f'warning: File "{program("printers")}" auto-loading has been declined by your '
                "`auto-load safe-path'")
    assert declined in run.stderr, run.describe()
    assert printed(run)[1]["locked"].startswith("{mutex_ = {<std::__mutex_base> = {_M_mutex")


def test_loading_twice_registers_once_globally() -> None:
    safe = f"set auto-load safe-path {program('printers').parent}"
    run = gdb_at_break(safe, printed=["wrapped"],
                       after=(f"source {DBGKIT}", f"source {REPO / 'gdb_ext' / 'memdump.py'}",
                              "info pretty-printer global dbgkit",
                              f"info pretty-printer {program('printers')}"))
    assert run.stdout.count("  dbgkit\n") == 1, run.describe()
    assert "global pretty-printers:\n  dbgkit\n    AtomicRing\n" in run.stdout
    pid, got = printed(run)
    assert pattern(expectations()["wrapped"], pid).fullmatch(got["wrapped"])


def test_disable_one_subprinter() -> None:
    run = gdb_at_break(printed=[], after=(
        "disable pretty-printer global dbgkit;LockedRing",
        "echo PRINTS locked\\n", "print locked", "echo PRINTS wrapped\\n", "print wrapped",
        "enable pretty-printer global dbgkit;LockedRing", "echo PRINTS again\\n", "print locked"))
    assert "1 printer disabled\n" in run.stdout, run.describe()
    pid, got = printed(run)
    assert got["locked"].startswith("{mutex_ = "), run.describe()
    assert pattern(expectations()["wrapped"], pid).fullmatch(got["wrapped"])
    assert pattern(expectations()["locked"], pid).fullmatch(got["again"])


def test_the_guides_session_is_what_the_program_prints() -> None:
    """docs/printers.md's example session: each `$N = TEXT` is the PRINTS text of its expression
    (with the run's own addresses and pid)."""
    text = DOC.read_text()
    session = re.search(r"```\n(\(gdb\) print .*?)```", text, re.DOTALL)
    assert session, f"{DOC}: no example session"
    shown = re.findall(r"^\(gdb\) print (.+)\n\$\d+ = (.*)$", session.group(1), re.MULTILINE)
    assert len(shown) >= 5
    pid = re.search(r"/dbgkit-printers-(\d+)", session.group(1))
    assert pid
    expected = expectations()
    for expr, line in shown:
        assert pattern(expected[expr], int(pid.group(1))).fullmatch(line), (expr, line)



def test_the_docs_name_every_registered_printer() -> None:
    """docs/printers.md's `info pretty-printer` listing is the collection's, name for name, and
    its table has a row for each."""
    run = run_gdb(["gdb", "-nx", "-batch", "-ex", f"source {DBGKIT}",
                   "-ex", "info pretty-printer global dbgkit"])
    listed = run.stdout[run.stdout.index("  dbgkit\n"):].splitlines()[1:]
    registered = [line.strip() for line in listed if line.startswith("    ")]
    assert len(registered) == 14, run.stdout
    text = DOC.read_text()
    block = re.search(r"\(gdb\) info pretty-printer global dbgkit\n"
                      r"global pretty-printers:\n  dbgkit\n((?:    \S+\n)+)", text)
    assert block, f"{DOC}: no `info pretty-printer` listing"
    assert block.group(1).split() == registered
    rows = re.findall(r"^\| (.+?) \| .+ \|$", text.split("## What they show", 1)[1]
                      .split("\n## ", 1)[0], re.MULTILINE)
    assert [name for name in registered if not any(name in row for row in rows)] == []
