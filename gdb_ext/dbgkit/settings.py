"""Settings of the GDB commands: gdb.Parameters under `set memdump ...`, declared in one table."""

from __future__ import annotations

from dataclasses import dataclass

import gdb


@dataclass(frozen=True)
class Setting:
    """One row of the settings table: name under the `memdump` prefix, GDB type, default, doc."""

    name: str
    kind: int
    default: object
    doc: str
    enum: tuple[str, ...] = ()


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "depth",
        gdb.PARAM_ZUINTEGER,
        32,
        "Number of frames memdump records for each heap operation's call stack.",
    ),
    Setting(
        "unwinder",
        gdb.PARAM_ENUM,
        "auto",
        "How memdump walks call stacks: auto (its own DWARF CFI unwinder, GDB's when that "
        "cannot) or gdb.",
        ("auto", "gdb"),
    ),
    Setting(
        "return-sites",
        gdb.PARAM_ZUINTEGER,
        64,
        "Number of return-address breakpoints memdump keeps inserted to catch allocators' results.",
    ),
    Setting(
        "scan-time-limit",
        gdb.PARAM_ZUINTEGER,
        120,
        "Seconds the pointer scan at the program's exit may take (0: no scan).",
    ),
)

_params: dict[str, gdb.Parameter] = {}


class _Prefix(gdb.Command):
    """Generic prefix command for the memdump settings."""

    def __init__(self, name: str) -> None:
        super().__init__(name, gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)


def _make(setting: Setting) -> gdb.Parameter:
    class _Param(gdb.Parameter):
        __doc__ = setting.doc
        set_doc = "Set the " + setting.doc[0].lower() + setting.doc[1:].rstrip(".") + "."
        show_doc = "Show the " + setting.doc[0].lower() + setting.doc[1:].rstrip(".") + "."

        def __init__(self) -> None:
            if setting.enum:
                super().__init__("memdump " + setting.name, gdb.COMMAND_DATA, setting.kind,
                                 list(setting.enum))
            else:
                super().__init__("memdump " + setting.name, gdb.COMMAND_DATA, setting.kind)
            self.value = setting.default

        def get_show_string(self, svalue: str) -> str:
            return f"{setting.doc[:-1]} is {svalue}."

    return _Param()


def register() -> None:
    """Create the `set memdump` / `show memdump` prefixes and every parameter of the table."""
    if _params:
        return
    _Prefix("set memdump")
    _Prefix("show memdump")
    for setting in SETTINGS:
        _params[setting.name] = _make(setting)


def get(name: str) -> object:
    """Current value of a setting (its default before register())."""
    param = _params.get(name)
    if param is not None:
        return param.value
    return next(s.default for s in SETTINGS if s.name == name)
