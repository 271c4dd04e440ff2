"""The framework of every dbgkit command: argparse built once, one registry, preconditions.

A command is a `Command` subclass in its own module (named after it), decorated with `@register`.
Its parser is built once, at import, so `help NAME` and `NAME -h` print the same text (wrapped to
78 columns whatever the terminal: the help of a command not yet imported is that text, stored in
catalogue.py); user errors
raise gdb.GdbError (GDB prints the one line, no traceback); an unexpected error prints one line
saying how to see its traceback. A command that must not fail quietly in batch mode (gdb -batch:
`memdump` that cannot record) names the line said before GDB exits with status 1
(Command.batch_failure).
"""

from __future__ import annotations

import argparse
import functools
import textwrap
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import gdb

from ..batchmode import batch_mode
from ..settings import debug_enabled

__all__ = ["REGISTRY", "Command", "Parser", "Precondition", "PreconditionFailed",
           "Deferred", "RegistryError", "command_parser", "debug_enabled", "install",
           "install_deferred", "needs_live_process",
           "quit_batch", "register"]


HELP_WIDTH = 78


class ArgumentError(Exception):
    """argparse refused the arguments; the text is its message ("" when it printed it already)."""


class HelpShown(Exception):
    """`-h` printed the help: the command does nothing else."""


class Parser(argparse.ArgumentParser):
    """argparse that reports errors as exceptions instead of exiting GDB, and knows its
    subcommands (their names are the ones given to add_parser, nowhere else)."""

    subcommands: argparse.Action | None = None

    def add_subparsers(self, **kwargs: Any) -> Any:  # noqa: ANN401 - argparse's own type
        self.subcommands = super().add_subparsers(**kwargs)
        return self.subcommands

    def subcommand_of(self, argv: list[str]) -> str | None:
        """The subcommand ARGV names, None for the command itself (or its -h), even for an ARGV
        argparse refuses: its first word that is not an option, if that is a subcommand."""
        if "-h" in argv or "--help" in argv:
            return "-h"
        words = [w for w in argv if not w.startswith("-")]
        names = self.subcommands.choices if self.subcommands is not None else None
        return words[0] if words and names is not None and words[0] in names else None

    def _get_formatter(self) -> argparse.HelpFormatter:
        # 78 columns whatever the terminal, as argparse without one: the catalogue's stored help
        # (printed before the command's module is imported) is the same text.
        return self.formatter_class(prog=self.prog, width=HELP_WIDTH)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ArgumentError(message)

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        if message:
            gdb.write(message)
        raise ArgumentError("") if status else HelpShown()


def command_parser(prog: str, description: str) -> Parser:
    """A command's parser: DESCRIPTION wrapped to 78 columns, the options' help as written."""
    return Parser(prog=prog, description=textwrap.fill(description, width=78),
                  formatter_class=argparse.RawDescriptionHelpFormatter)


_F = TypeVar("_F", bound=Callable[..., Any])


class PreconditionFailed(Exception):
    """A command cannot run now; the text is the rest of its one line after `NAME: `."""


@dataclass(frozen=True)
class Precondition:
    """What a command needs before it runs; as a decorator, a failure is one uniform line:
    `NAME: REASON (HINT)`."""

    reason: str
    hint: str
    holds: Callable[[], bool]

    @property
    def line(self) -> str:
        """The failure's text after `NAME: `."""
        return f"{self.reason} ({self.hint})"

    def __call__(self, func: _F) -> _F:
        @functools.wraps(func)
        def checked(*args: Any, **kwargs: Any) -> Any:
            if not self.holds():
                raise PreconditionFailed(self.line)
            return func(*args, **kwargs)

        return checked  # type: ignore[return-value]


def _live_process() -> bool:
    inferior = gdb.selected_inferior()
    return bool(inferior.pid) and bool(inferior.threads())


needs_live_process = Precondition("needs a live process", "run the program or attach",
                                  _live_process)


class Command(gdb.Command):
    """Base of the toolkit's commands. A subclass sets NAME, SUMMARY (the `help` summary line),
    PARSER (built once, at import) and implements run()."""

    NAME: ClassVar[str]
    SUMMARY: ClassVar[str]
    PARSER: ClassVar[Parser]
    COMMAND_CLASS: ClassVar[int] = gdb.COMMAND_DATA

    @classmethod
    def help_text(cls) -> str:
        """`help NAME`: the summary and the parser's help, formatted when asked for (memdump's
        takes 6 ms; GDB's one-liner, whose `help memdump` is the catalogue's, never asks)."""
        return cls.SUMMARY.strip() + "\n\n" + cls.PARSER.format_help()

    def __init__(self, *, in_gdb: bool = True) -> None:
        # Deferred (below) holds one created with IN_GDB false: the command GDB has is Deferred.
        if in_gdb:
            self.__doc__ = self.help_text()  # gdb.Command reads `help NAME` from it at creation
            super().__init__(self.NAME, self.COMMAND_CLASS)

    def invoke(self, arg: str, from_tty: bool) -> None:
        argv = gdb.string_to_argv(arg)
        try:
            self._invoke(argv)
        except gdb.GdbError as exc:
            why = self.batch_failure(argv)
            if why is not None:
                quit_batch(str(exc), why)
            raise

    def batch_failure(self, argv: list[str]) -> str | None:
        """The line said before GDB exits with status 1 when the command failed on ARGV in batch
        mode (a script must not go on as if it had worked); None (the default): GDB goes on."""
        return None

    def _invoke(self, argv: list[str]) -> None:
        try:
            args = self.PARSER.parse_args(argv)
        except HelpShown:
            return
        except ArgumentError as exc:
            raise gdb.GdbError(f"{self.NAME}: {exc}" if str(exc) else f"{self.NAME}: bad arguments"
                               ) from None
        try:
            self.run(args)
        except gdb.GdbError:
            raise
        except PreconditionFailed as exc:
            raise gdb.GdbError(f"{self.NAME}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - one line, not a traceback
            if debug_enabled():
                traceback.print_exc()
            raise gdb.GdbError(
                f"{self.NAME}: internal error: {exc!r} (set dbgkit debug on for the traceback)"
            ) from None

    def run(self, args: argparse.Namespace) -> None:
        """What the command does with its parsed arguments; every subclass defines it."""
        raise TypeError(f"{type(self).__name__} defines no run()")


def quit_batch(message: str, why: str) -> None:
    """In batch mode (gdb -batch), say MESSAGE and WHY (what is not done) and exit GDB with status
    1 (a process GDB attached to is detached, one it started is killed); otherwise do nothing."""
    if not batch_mode():
        return
    gdb.write(f"{message}\n", gdb.STDERR)
    gdb.write(f"{why}\n", gdb.STDERR)
    gdb.flush()
    gdb.execute("set confirm off")  # no "A debugging session is active" when a process is there
    gdb.execute("quit 1")


class RegistryError(ValueError):
    """A command name is taken: by another dbgkit command or by GDB itself."""


# Every dbgkit command class by name, in registration order.
REGISTRY: dict[str, type[Command]] = {}
_installed: dict[str, gdb.Command] = {}

_C = TypeVar("_C", bound=type[Command])


def register(cls: _C) -> _C:
    """Class decorator: add a command to the registry; a name registered twice is refused."""
    if cls.NAME in REGISTRY and REGISTRY[cls.NAME] is not cls:
        raise RegistryError(f"dbgkit: command {cls.NAME!r} is registered twice "
                            f"({REGISTRY[cls.NAME].__module__} and {cls.__module__})")
    REGISTRY[cls.NAME] = cls
    return cls


def gdb_has_command(name: str) -> bool:
    """Whether GDB already resolves NAME to a command (a built-in, an alias or a user command)."""
    try:
        gdb.execute(f"help {name}", to_string=True)
    except gdb.error:
        return False
    return True


def _refuse_taken(name: str) -> None:
    if gdb_has_command(name):
        raise RegistryError(f"dbgkit: command {name!r} would replace GDB's own")


def install() -> None:
    """Create every registered command in GDB once; a name GDB already has is refused."""
    for name, cls in REGISTRY.items():
        if name in _installed:
            continue
        _refuse_taken(name)
        _installed[name] = cls()


class Deferred(gdb.Command):
    """A command in GDB whose module is imported at its first use: `help NAME` prints DOC (the
    catalogue's copy of the command's own help), the first call imports the module through LOAD
    (which returns the command's class) and every call goes to one instance of that class."""

    def __init__(self, name: str, command_class: int, doc: str,
                 load: Callable[[], type[Command]]) -> None:
        self.__doc__ = doc  # gdb.Command reads `help NAME` from it when it is created
        self._load = load
        self._command: Command | None = None
        super().__init__(name, command_class)

    def command(self) -> Command:
        """The command's own instance (its module imported at the first call)."""
        if self._command is None:
            self._command = self._load()(in_gdb=False)
        return self._command

    def invoke(self, arg: str, from_tty: bool) -> None:
        self.command().invoke(arg, from_tty)

    def complete(self, text: str, word: str) -> object:
        """The command's own completion of its arguments (its module imported), none if it
        has no `complete`, as GDB does for a command without one."""
        command = self.command()
        return command.complete(text, word) if hasattr(command, "complete") else []


def install_deferred(name: str, command_class: int, doc: str,
                     load: Callable[[], type[Command]]) -> None:
    """Create the command NAME in GDB once, its module imported at its first use (Deferred); a
    name GDB already has is refused."""
    if name in _installed:
        return
    _refuse_taken(name)
    _installed[name] = Deferred(name, command_class, doc, load)
