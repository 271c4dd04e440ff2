"""Settings of the GDB commands: gdb.Parameters under `set memdump ...` (memdump's) and `set dbgkit
...` (the toolkit's own), declared in one table.

Everything GDB shows of a setting is generated from its row: `help set memdump NAME` and `help
show memdump NAME` ("Set the SUBJECT." / "Show the SUBJECT." then DOC), `show memdump NAME` ("The
SUBJECT is VALUE."), the list `show memdump` prints, and the settings part of `help memdump`
(usage_lines()).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import gdb


@dataclass(frozen=True)
class Setting:
    """One row of the settings table.

    SUBJECT is a noun phrase that reads after "Set the", "Show the" and "The" (before "is VALUE");
    DOC says what the values mean, in sentences.
    """

    name: str
    kind: int
    default: object
    subject: str
    doc: str
    enum: tuple[str, ...] = ()
    prefix: str = "memdump"

    @property
    def default_text(self) -> str:
        """The default as GDB shows it (`on`/`off` for a boolean)."""
        if isinstance(self.default, bool):
            return "on" if self.default else "off"
        return str(self.default) or "none"

    @property
    def syntax(self) -> str:
        """What the value looks like: `N`, `on|off` or the choices, `auto|gdb`."""
        if self.enum:
            return "|".join(self.enum)
        if isinstance(self.default, str):
            return "SPEC"
        return "on|off" if isinstance(self.default, bool) else "N"

    @property
    def help(self) -> str:
        return f"{self.doc} Default: {self.default_text}."


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "recorder",
        gdb.PARAM_ENUM,
        "in-process",
        "way memdump records heap operations",
        "in-process: load libmemdump_recorder.so into the program, which records each call "
        "itself (native speed); breakpoints: stop the program at every allocator call and "
        "return, loading nothing (memdump --breakpoints for one recording).",
        ("in-process", "breakpoints"),
    ),
    Setting(
        "depth",
        gdb.PARAM_ZUINTEGER,
        32,
        "number of frames memdump records per call stack",
        "Each heap operation's call stack is recorded up to this many frames; 0 records none.",
    ),
    Setting(
        "unwinder",
        gdb.PARAM_ENUM,
        "auto",
        "unwinder memdump walks call stacks with",
        "auto: memdump's own DWARF CFI unwinder, GDB's for a frame it cannot walk; gdb: always "
        "GDB's (exact, several times slower).",
        ("auto", "gdb"),
    ),
    Setting(
        "return-sites",
        gdb.PARAM_ZUINTEGER,
        64,
        "number of return-address breakpoints memdump keeps inserted",
        "They catch the allocators' results; each breakpoint slows every stop a little, and one "
        "evicted is created again when needed.",
    ),
    Setting(
        "children",
        gdb.PARAM_BOOLEAN,
        False,
        "recording of the processes the program starts",
        "on: each process the program forks, and each program those execute, is recorded too, "
        "by the in-process recorder alone, into its own dump STEM.PID.memdump beside the "
        "program's (valgrind's --trace-children=yes; without GDB there: no pointer scan, and "
        "the analyser reads the symbols from the modules); off: only the process GDB follows "
        "(memdump --children for one recording).",
    ),
    Setting(
        "locks",
        gdb.PARAM_BOOLEAN,
        False,
        "counting of pthread mutex and rwlock calls by the in-process recorder",
        "on: the recorder counts each lock's acquisitions, owner changes, contended "
        "acquisitions and wait times (read with contention; docs/contention.md); it adds about "
        "15 to 25 ns to every acquisition, a 3 to 4 times slower uncontended lock; off: the lock "
        "calls pass straight through.",
    ),
    Setting(
        "guard",
        gdb.PARAM_STRING,
        "",
        "SPEC of the in-process recorder's guard pages",
        "Blocks placed against an inaccessible page, freed ones kept inaccessible "
        "(docs/heap-errors.md): all, N% (a sampled share of the blocks, 0.0001% to 100% with "
        "at most 4 decimals: 5%, 0.02%), MIN-MAX, under, over, align16, tag:NAME, fn:NAME, "
        "comma-separated; a faulting access stops GDB at the instruction and memdump reports it "
        "(memdump --guard SPEC for one recording); empty: none.",
    ),
    Setting(
        "check-at-stop",
        gdb.PARAM_BOOLEAN,
        True,
        "check of the red zones at every stop",
        "on: with red zones (MEMDUMP_REDZONE, memdump.sh --redzones), each stop GDB shows runs "
        "memdump check-heap's check in the stopped thread alone and says what it found before "
        "the prompt (docs/heap-errors.md); off: only memdump check-heap checks.",
    ),
    Setting(
        "scan-time-limit",
        gdb.PARAM_ZUINTEGER,
        120,
        "time limit in seconds of the pointer scan at the program's exit",
        "Past it the dump says timeout and the leak kinds are unknown; 0 turns the scan off.",
    ),
    Setting(
        "compact",
        gdb.PARAM_BOOLEAN,
        True,
        "compaction of the dump when its recording ends",
        "on: when the program exits, is killed or detached, or at memdump stop, the text dump "
        "is left to its first report, which rewrites it in the compact encoding "
        "(docs/dump-format.md: about 2% of the text's size) while it reads the text "
        "(docs/memdump.md, Compaction), or compacted at once where the file system keeps no "
        "extended attributes; off: the dump stays text.",
    ),
)

# The toolkit's own settings, for every command (`set dbgkit NAME VALUE`).
DBGKIT_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "debug",
        gdb.PARAM_BOOLEAN,
        False,
        "printing of Python tracebacks of unexpected errors in dbgkit commands",
        "on: an unexpected error in a command prints its full traceback; off: one line.",
        prefix="dbgkit",
    ),
)

TABLES: dict[str, tuple[Setting, ...]] = {"memdump": SETTINGS, "dbgkit": DBGKIT_SETTINGS}

_params: dict[str, gdb.Parameter] = {}


def usage_lines(prefix: str = "memdump") -> list[str]:
    """One line per setting, `NAME SYNTAX  subject (default D)`, for `help memdump`."""
    table = TABLES[prefix]
    width = max(len(f"{s.name} {s.syntax}") for s in table)
    return [f"  {s.name + ' ' + s.syntax:<{width}}  {s.subject} (default {s.default_text})"
            for s in table]


def show_lines(prefix: str = "memdump") -> list[str]:
    """What `show PREFIX` prints: `PREFIX NAME:  The SUBJECT is VALUE.`, as GDB lists the
    settings under its own prefixes (`show history`)."""
    lines = []
    for setting in TABLES[prefix]:
        text = gdb.execute(f"show {prefix} {setting.name}", to_string=True).rstrip("\n")
        lines.append(f"{prefix} {setting.name}:  {text}")
    return lines


class _SetPrefix(gdb.Command):
    """Change a setting: set PREFIX NAME VALUE (show PREFIX lists them)."""

    def __init__(self, prefix: str) -> None:
        self.__doc__ = (f"Change a {prefix} setting: set {prefix} NAME VALUE (show {prefix} "
                        "lists them).")
        self.prefix = prefix
        super().__init__(f"set {prefix}", gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)

    def invoke(self, arg: str, from_tty: bool) -> None:
        if arg.strip():
            raise gdb.GdbError(f'Undefined set {self.prefix} command: "{arg.strip()}".  '
                               f'Try "help set {self.prefix}".')
        gdb.write(f'"set {self.prefix}" must be followed by the name of a setting:\n'
                  + "\n".join(usage_lines(self.prefix)) + "\n")


class _ShowPrefix(gdb.Command):
    """Show the settings: every one without a name, or show PREFIX NAME."""

    def __init__(self, prefix: str) -> None:
        self.__doc__ = (f"Show the {prefix} settings: every one without a name, or show {prefix} "
                        "NAME.")
        self.prefix = prefix
        super().__init__(f"show {prefix}", gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)

    def invoke(self, arg: str, from_tty: bool) -> None:
        if arg.strip():
            raise gdb.GdbError(f'Undefined show {self.prefix} command: "{arg.strip()}".  '
                               f'Try "help show {self.prefix}".')
        gdb.write("\n".join(show_lines(self.prefix)) + "\n")


def _make(setting: Setting) -> gdb.Parameter:
    class _Param(gdb.Parameter):
        __doc__ = setting.help
        set_doc = f"Set the {setting.subject}."
        show_doc = f"Show the {setting.subject}."

        def __init__(self) -> None:
            if setting.enum:
                super().__init__(f"{setting.prefix} {setting.name}", gdb.COMMAND_DATA,
                                 setting.kind, list(setting.enum))
            else:
                super().__init__(f"{setting.prefix} {setting.name}", gdb.COMMAND_DATA,
                                 setting.kind)
            self.value = setting.default

        def get_show_string(self, svalue: str) -> str:
            return f"The {setting.subject} is {svalue or 'none'}."

    return _Param()


def register() -> None:
    """Create the `set PREFIX` / `show PREFIX` prefixes and every parameter of the tables."""
    if _params:
        return
    for prefix, table in TABLES.items():
        _SetPrefix(prefix)
        _ShowPrefix(prefix)
        for setting in table:
            _params[f"{prefix} {setting.name}"] = _make(setting)


def get(name: str, prefix: str = "memdump") -> object:
    """Current value of a setting (its default before register())."""
    param = _params.get(f"{prefix} {name}")
    if param is not None:
        return param.value
    return next(s.default for s in TABLES[prefix] if s.name == name)


def debug_enabled() -> bool:
    """Whether unexpected errors show their full traceback: `set dbgkit debug on`, or the
    deprecated MEMDUMP_DEBUG environment variable."""
    return bool(get("debug", "dbgkit")) or os.environ.get("MEMDUMP_DEBUG", "") not in ("", "0")
