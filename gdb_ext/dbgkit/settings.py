"""Settings of the GDB commands: gdb.Parameters under `set memdump ...`, declared in one table.

Everything GDB shows of a setting is generated from its row: `help set memdump NAME` and `help
show memdump NAME` ("Set the SUBJECT." / "Show the SUBJECT." then DOC), `show memdump NAME` ("The
SUBJECT is VALUE."), the list `show memdump` prints, and the settings part of `help memdump`
(usage_lines()).
"""

from __future__ import annotations

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

    @property
    def syntax(self) -> str:
        """What the value looks like: `N` or the choices, `auto|gdb`."""
        return "|".join(self.enum) if self.enum else "N"

    @property
    def help(self) -> str:
        return f"{self.doc} Default: {self.default}."


SETTINGS: tuple[Setting, ...] = (
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
        "scan-time-limit",
        gdb.PARAM_ZUINTEGER,
        120,
        "time limit in seconds of the pointer scan at the program's exit",
        "Past it the dump says timeout and the leak kinds are unknown; 0 turns the scan off.",
    ),
)

_params: dict[str, gdb.Parameter] = {}


def usage_lines() -> list[str]:
    """One line per setting, `NAME SYNTAX  subject (default D)`, for `help memdump`."""
    width = max(len(f"{s.name} {s.syntax}") for s in SETTINGS)
    return [f"  {s.name + ' ' + s.syntax:<{width}}  {s.subject} (default {s.default})"
            for s in SETTINGS]


def show_lines() -> list[str]:
    """What `show memdump` prints: `memdump NAME:  The SUBJECT is VALUE.`, as GDB lists the
    settings under its own prefixes (`show history`)."""
    lines = []
    for setting in SETTINGS:
        text = gdb.execute(f"show memdump {setting.name}", to_string=True).rstrip("\n")
        lines.append(f"memdump {setting.name}:  {text}")
    return lines


class _SetPrefix(gdb.Command):
    """Change a memdump setting: set memdump NAME VALUE (show memdump lists them)."""

    def __init__(self) -> None:
        super().__init__("set memdump", gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)

    def invoke(self, arg: str, from_tty: bool) -> None:
        if arg.strip():
            raise gdb.GdbError(f'Undefined set memdump command: "{arg.strip()}".  '
                               'Try "help set memdump".')
        gdb.write('"set memdump" must be followed by the name of a setting:\n'
                  + "\n".join(usage_lines()) + "\n")


class _ShowPrefix(gdb.Command):
    """Show the memdump settings: every one without a name, or show memdump NAME."""

    def __init__(self) -> None:
        super().__init__("show memdump", gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)

    def invoke(self, arg: str, from_tty: bool) -> None:
        if arg.strip():
            raise gdb.GdbError(f'Undefined show memdump command: "{arg.strip()}".  '
                               'Try "help show memdump".')
        gdb.write("\n".join(show_lines()) + "\n")


def _make(setting: Setting) -> gdb.Parameter:
    class _Param(gdb.Parameter):
        __doc__ = setting.help
        set_doc = f"Set the {setting.subject}."
        show_doc = f"Show the {setting.subject}."

        def __init__(self) -> None:
            if setting.enum:
                super().__init__("memdump " + setting.name, gdb.COMMAND_DATA, setting.kind,
                                 list(setting.enum))
            else:
                super().__init__("memdump " + setting.name, gdb.COMMAND_DATA, setting.kind)
            self.value = setting.default

        def get_show_string(self, svalue: str) -> str:
            return f"The {setting.subject} is {svalue}."

    return _Param()


def register() -> None:
    """Create the `set memdump` / `show memdump` prefixes and every parameter of the table."""
    if _params:
        return
    _SetPrefix()
    _ShowPrefix()
    for setting in SETTINGS:
        _params[setting.name] = _make(setting)


def get(name: str) -> object:
    """Current value of a setting (its default before register())."""
    param = _params.get(name)
    if param is not None:
        return param.value
    return next(s.default for s in SETTINGS if s.name == name)
