"""`memdump check-heap`: the in-process recorder's red zones checked at a stop (docs/heap-errors.md,
"Red zones").

With red zones on (`scripts/memdump.sh --redzones`, MEMDUMP_REDZONE), the recorder checks a block's
zones at its free or realloc and every block at exit; at a stop, GDB calls the recorder's
`memdump_recorder_check_heap` in the selected thread alone (scheduler-locking): it checks every
live block and every block in the quarantine, writes an `hc` record into the dump for each zone
found changed (and fills it with its pattern again: it is reported once), and returns how many.
GDB then reads those records from the dump and says each in one line.

The call needs the writer's lock: a thread stopped inside a record holds it, and the check is
refused then (the program goes on a little, and the check can be asked again).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import gdb

from ..core.recorder import PATH_MAX, PATH_OFFSET, REDZONE_FIELDS, REDZONE_OFFSET, Control
from ..inferior_call import call
from .attach import OneThreadCall

__all__ = ["CheckRefused", "NoRedZones", "Target", "check_heap", "counters", "describe_record",
           "hc_records", "prepare", "run"]

KINDS = {"overrun": "heap block overrun", "underrun": "heap block underrun",
         "freed": "write after free"}


class CheckRefused(Exception):
    """Why the check cannot run now (one line)."""


class NoRedZones(CheckRefused):
    """The program has no red zones to check (no recorder, an old one, or red zones off)."""


def describe_record(fields: list[str]) -> str:
    """An `hc` record's fields (after the tag) as one line: the kind, the block, the bytes."""
    _seq, tid, kind, block, size, offset, nbytes, _found = fields
    side = {"overrun": "after the end of", "underrun": "before the start of",
            "freed": "from the start of"}[kind]
    return (f"{KINDS[kind]}: {nbytes} byte(s) changed, from {offset} bytes {side} the "
            f"{size}-byte block at {block} (thread {tid})")


def _address(expression: str) -> int | None:
    try:
        return int(gdb.parse_and_eval(f"(unsigned long)&{expression}"))
    except gdb.error:
        return None


@dataclass(frozen=True)
class Target:
    """Where the check is: the recorder's control block and check function, and its dump."""

    control: int
    function: int
    path: bytes


def prepare() -> Target:
    """The recorder in the selected inferior, ready to be called (CheckRefused when it cannot be
    now: its first words say why)."""
    inferior = gdb.selected_inferior()
    if inferior.pid == 0 or gdb.selected_thread() is None:
        raise CheckRefused("the program is not running")
    address = _address("memdump_recorder_control")
    function = _address("memdump_recorder_check_heap")
    if address is None or function is None:
        raise NoRedZones("the program has no in-process recorder with red zones (record it "
                         "with scripts/memdump.sh --redzones, or MEMDUMP_REDZONE set)")

    def read(at: int, size: int) -> bytes:
        return bytes(inferior.read_memory(at, size))

    control = Control(address, read, lambda at, data: None).load()
    if control.size < REDZONE_OFFSET + 8 * len(REDZONE_FIELDS):
        raise NoRedZones("the recorder in the program is older than red zones")
    tail, _quarantine, _errors = struct.unpack("<3Q", read(address + REDZONE_OFFSET, 24))
    if tail == 0:
        raise NoRedZones("red zones are off (scripts/memdump.sh --redzones, MEMDUMP_REDZONE)")
    if control.state != 1:
        raise NoRedZones("the recording is not on")
    if control.lock != 0:
        raise CheckRefused(f"thread {control.lock} is writing a record: go on a little and "
                           "check again")
    return Target(address, function, read(address + PATH_OFFSET, PATH_MAX).split(b"\0", 1)[0])


def counters(target: Target) -> tuple[int, int]:
    """The recorder's count of red-zone records written so far, and the dump's end."""
    inferior = gdb.selected_inferior()

    def read(at: int, size: int) -> bytes:
        return bytes(inferior.read_memory(at, size))

    end = Control(target.control, read, lambda at, data: None).load().end
    _tail, _quarantine, errors = struct.unpack("<3Q", read(target.control + REDZONE_OFFSET, 24))
    return errors, end


def hc_records(target: Target, start: int, end: int) -> list[list[str]]:
    """The `hc` records of the dump between offsets START and END (their fields after the tag)."""
    with open(os.fsdecode(target.path), "rb") as f:
        f.seek(start)
        text = f.read(end - start).decode("ascii", "replace")
    return [line.split(" ")[1:] for line in text.splitlines() if line.startswith("hc ")]


def run(target: Target) -> tuple[int, list[str]]:
    """Call the check in the selected thread alone: how many zones it found changed, and the
    lines that say it."""
    _errors, before = counters(target)
    with OneThreadCall():
        found = call(target.function)
    _errors, after = counters(target)
    lines = [f"memdump check-heap: {found} zone(s) found changed"
             + (" (hc records in the dump; memdump-analyze reports them with their stacks)"
                if found else "")]
    if found:
        lines += ["  " + describe_record(fields) for fields in hc_records(target, before, after)]
    return found, lines


def check_heap() -> list[str]:
    """Run the check; the lines that say what it found (CheckRefused when it cannot run)."""
    return run(prepare())[1]
