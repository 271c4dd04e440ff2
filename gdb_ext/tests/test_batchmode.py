"""dbgkit.batchmode: batch mode read from GDB's command line as its getopt_long_only reads it."""

from __future__ import annotations

import pytest
from dbgkit.batchmode import is_batch


@pytest.mark.parametrize("argv", [
    ["gdb", "-batch", "./app"],
    ["gdb", "--batch", "./app"],
    ["gdb", "-batch-silent", "./app"],
    ["gdb", "--batch-silent", "./app"],
    ["gdb", "-batch-s", "./app"],                        # a unique prefix of batch-silent
    ["gdb", "-nx", "-q", "-ex", "run", "-batch"],
    ["gdb", "./app", "-batch"],                          # permuted: options after the program
    ["gdb", "-ex=run", "-batch", "--args", "./app"],
    ["gdb", "--eval-command", "memdump", "-batch", "-p", "42"],
    ["gdb", "-x", "cmds.gdb", "-i=mi", "-batch"],
], ids=lambda argv: " ".join(argv[1:]))
def test_batch(argv: list[str]) -> None:
    assert is_batch(argv)


@pytest.mark.parametrize("argv", [
    ["gdb"],
    ["gdb", "./app"],
    ["gdb", "-nx", "-q", "-ex", "run", "./app"],
    ["gdb", "-ex", "-batch", "./app"],                   # the value of -ex, a GDB command
    ["gdb", "--eval-command", "-batch", "./app"],
    ["gdb", "-x", "-batch"],                             # a command file named -batch
    ["gdb", "--args", "./app", "-batch"],                # the program's argument
    ["gdb", "-nx", "--args", "./app", "--batch-silent"],
    ["gdb", "-nx", "--", "-batch"],                      # after --: not an option
    ["gdb", "-b", "-batch", "./app"],                    # -b BAUDRATE takes the next word
    ["gdb", "-bat", "./app"],                            # ambiguous: GDB refuses it
    ["gdb", "-batchy", "./app"],
], ids=lambda argv: " ".join(argv[1:]) or "nothing")
def test_not_batch(argv: list[str]) -> None:
    assert not is_batch(argv)


def test_posixly_correct_stops_at_the_first_operand() -> None:
    assert is_batch(["gdb", "./app", "-batch"])
    assert not is_batch(["gdb", "./app", "-batch"], posixly_correct=True)
    assert is_batch(["gdb", "-batch", "./app"], posixly_correct=True)
