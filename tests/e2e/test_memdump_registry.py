"""What `memdump` keeps between commands, and which of GDB's events clear it
(gdb_ext/dbgkit/memdump/registry.py): the group numbers of `memdump block-list N` name one run's
groups; what `memdump leaks --increased` compares with survives new runs of the program and is
dropped when `file` loads another; each inferior has its own recording.

tests/programs/leak_malloc.c leaks one 24-byte block and frees a 100-byte one.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from memdump_e2e import gdb_argv, marker, program, record, run_gdb

SRC = "leak_malloc.c"
LEAK = marker(SRC, "block")
RECORDED = ("from dbgkit.memdump.registry import RECORDINGS; "
            "print('recorded in', RECORDINGS.inferiors())")


def _between(text: str, start: str, end: str | None = None) -> str:
    rest = text.split(f"=={start}==\n", 1)[1]
    return rest if end is None else rest.split(f"=={end}==\n", 1)[0]


def test_block_list_names_the_groups_of_the_last_run(dump: Path) -> None:
    """After the exit, `memdump leaks` then `block-list 1` gives the leaked block; once the
    program runs again, the numbers named the previous run's groups: block-list has none."""
    run = record("leak_malloc", dump=dump, after=[
        "memdump leaks", "echo ==first==\\n", "memdump block-list 1", "echo ==run==\\n", "run",
        "echo ==again==\\n", "memdump block-list 1"])
    first = _between(run.stdout, "first", "run")
    assert re.fullmatch(r"LEAK 1: 24 bytes in 1 block, definite\n  0x[0-9a-f]+\[24\]\n", first), \
        run.describe()
    assert _between(run.stdout, "again") == "", run.describe()
    assert run.stderr.count("memdump: block-list: no groups yet: run memdump leaks first\n") == 1, \
        run.describe()


def test_increased_compares_with_the_previous_run(dump: Path) -> None:
    """`memdump leaks --increased` in the next run compares with the last check of the previous
    one: the same leak did not grow."""
    run = record("leak_malloc", dump=dump, after=[
        "memdump leaks", "run", "echo ==again==\\n", "memdump leaks --increased"])
    again = _between(run.stdout, "again")
    assert "\nNo group of the program changed since the previous memdump leaks.\n" in again, \
        run.describe()
    assert "LEAK 1" not in again, run.describe()
    assert "    definitely lost: 24 (+0) bytes in 1 (+0) block\n" in again, run.describe()


def test_file_another_program_forgets_the_previous_check(tmp_path: Path, dump: Path) -> None:
    """`file` loads another program (here a copy: the same stacks): `--increased` compares with
    nothing, every leak is new."""
    other = tmp_path / "other_program"
    shutil.copy2(program("leak_malloc"), other)
    run = record("leak_malloc", dump=dump, after=[
        "memdump leaks", f"file {other}", "run", "echo ==other==\\n",
        "memdump leaks --increased"])
    other_text = _between(run.stdout, "other")
    assert "LEAK 1 of 1: 24 (+24) bytes in 1 (+1) block, definitely lost\n" in other_text, \
        run.describe()
    assert f"    at main ({LEAK})\n" in other_text, run.describe()
    assert "    definitely lost: 24 (+24) bytes in 1 (+1) block\n" in other_text, run.describe()


def test_each_inferior_has_its_own_recording(tmp_path: Path, dump: Path) -> None:
    """Inferior 1 recorded; in inferior 2 nothing is recorded until its own `memdump`, whose
    dump is its own; back in inferior 1, its recording is as it was; `remove-inferiors 2` takes
    inferior 2's out of the registry."""
    second = tmp_path / "second.memdump"
    run = run_gdb(gdb_argv([
        f"memdump -o {dump}", "run", "memdump leaks", "add-inferior", "inferior 2",
        f"file {program('leak_malloc')}", "echo ==two==\\n", "memdump status",
        "memdump block-list 1", f"memdump -o {second}", "run", "memdump status",
        "inferior 1", "echo ==one==\\n", "memdump status", "memdump block-list 1",
        f"python {RECORDED}", "remove-inferiors 2", f"python {RECORDED}"],
        [program("leak_malloc")]), dump)
    two = _between(run.stdout, "two", "one")
    one = _between(run.stdout, "one")
    assert f"dump:         {second}\n" in two and str(dump) + "\n" not in two, run.describe()
    assert f"dump:         {dump}\n" in one, run.describe()
    assert re.search(r"LEAK 1: 24 bytes in 1 block, definite\n  0x[0-9a-f]+\[24\]\n", one), \
        run.describe()
    assert "memdump: nothing recorded yet" in run.stderr, run.describe()
    assert second.is_file() and dump.is_file()
    # both inferiors armed again after their exits; inferior 2 removed, its recording goes
    assert one.endswith("recorded in [1, 2]\nrecorded in [1]\n"), run.describe()
