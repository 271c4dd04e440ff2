"""The command framework under a real GDB: loading, registry, preconditions, debug setting."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Programs

# GDB settings a loader must leave as they were (STYLE.md: loading never changes them).
WATCHED = ("pagination", "confirm", "print pretty", "print elements", "height", "width",
           "style enabled", "python print-stack", "breakpoint pending", "auto-load safe-path")


def _gdb(gdb_path: str, commands: list[str]) -> subprocess.CompletedProcess[str]:
    argv = [gdb_path, "-nx", "-batch"]
    for command in commands:
        argv += ["-ex", command]
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)


def test_loading_twice_by_either_file_is_harmless(gdb_path: str, gdb_ext_dir: Path) -> None:
    dbgkit, memdump = gdb_ext_dir / "dbgkit.py", gdb_ext_dir / "memdump.py"
    shows = [f"show {name}" for name in WATCHED]
    proc = _gdb(gdb_path, [*shows, "echo ---\\n",
                           f"source {dbgkit}", f"source {memdump}",
                           f"source {dbgkit}", f"source {memdump}",
                           *shows, "echo ---\\n", "help memdump"])
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    before, after, helped = proc.stdout.split("---\n")
    assert before == after
    assert helped.count("usage: memdump") == 1, helped
    assert helped.startswith("memdump: record every heap operation")



INSTALLED = ("python from dbgkit.commands import base; "
             "print(' '.join(sorted(base._installed)))")
# The modules of the toolkit and the analyser imported so far, by GDB's Python.
IMPORTED = ("python import sys; print(' '.join(sorted(m for m in sys.modules "
            "if m.startswith(('dbgkit.', 'memdump_analyzer')))))")


def test_dbgkit_py_loads_every_command(gdb_path: str, gdb_ext_dir: Path) -> None:
    proc = _gdb(gdb_path, [f"source {gdb_ext_dir / 'dbgkit.py'}", INSTALLED])
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.split() == ["contention", "ctxswitches", "deadlocks", "memdump"]


def test_a_command_module_is_imported_at_its_first_use(gdb_path: str,
                                                       gdb_ext_dir: Path) -> None:
    """Sourcing either file imports no command's module, `help` neither; the first use of a
    command imports its own module and what it needs, nothing of the other commands'."""
    proc = _gdb(gdb_path, [f"source {gdb_ext_dir / 'memdump.py'}", IMPORTED, "help memdump",
                           IMPORTED, "memdump status", IMPORTED,
                           f"source {gdb_ext_dir / 'dbgkit.py'}", "help deadlocks", IMPORTED,
                           "ctxswitches -h", IMPORTED])
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "memdump: nothing recorded yet (start with: memdump, then run)\n"
    lists = [line.split() for line in proc.stdout.splitlines()
             if line.startswith("dbgkit.batchmode")]
    assert len(lists) == 5, proc.stdout
    sourced, helped, used, all_sourced, other_used = (set(names) for names in lists)
    assert sourced == {"dbgkit.batchmode", "dbgkit.commands", "dbgkit.commands.base",
                       "dbgkit.commands.catalogue", "dbgkit.core", "dbgkit.core.builtfiles",
                       "dbgkit.settings"}
    assert helped == sourced
    assert "dbgkit.commands.memdump" in used and "dbgkit.memdump.recording" in used
    commands = {f"dbgkit.commands.{name}" for name in ("contention", "ctxswitches", "deadlocks")}
    for names in (used, all_sourced):
        assert not names & commands
        assert not {n for n in names if n.startswith(("dbgkit.locks", "dbgkit.core.locks."))
                    and n != "dbgkit.core.locks.glibc"}  # the printers' lock layouts
        assert "memdump_analyzer.cli" not in names
    assert other_used - all_sourced >= {"dbgkit.commands.ctxswitches"}
    assert not (other_used - all_sourced) & (commands - {"dbgkit.commands.ctxswitches"})


def test_the_catalogue_is_the_commands_own_help(gdb_path: str, gdb_ext_dir: Path) -> None:
    """catalogue.py, GDB's help before a module is imported, is what the modules make (else:
    scripts/gen-command-catalogue.py), and each command's `help` is its class's text."""
    catalogue = gdb_ext_dir / "dbgkit" / "commands" / "catalogue.py"
    proc = _gdb(gdb_path, [f"source {gdb_ext_dir / 'dbgkit.py'}",
                           "python from dbgkit import commands; "
                           "gdb.write(commands.catalogue_source())"])
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout == catalogue.read_text(), "run scripts/gen-command-catalogue.py"
    # an installed tree's text, made from the checkout's and the lines that differ, is its own
    proc = _gdb(gdb_path, [f"source {gdb_ext_dir / 'dbgkit.py'}",
                           "python from dbgkit import commands as c; "
                           "docs = c._docs(c.INSTALLED_ANALYZE); "
                           "print(sorted(n for n, (_, doc, patch) in c.COMMANDS.items() "
                           "if patch is not None and c._patched(doc, *patch) == docs[n][1]), "
                           "sorted(n for n, (_, doc, patch) in c.COMMANDS.items() "
                           "if patch is None and doc == docs[n][1]))"])
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout == "['memdump'] ['contention', 'ctxswitches', 'deadlocks']\n"


DEFERRED = '''
from dbgkit.commands import base

class Lazy(base.Command):
    """lazy-one: a command made at its first use."""
    NAME = "lazy-one"
    SUMMARY = __doc__
    PARSER = base.Parser(prog="lazy-one")

    def run(self, args):
        print("ran")

    def complete(self, text, word):
        return ["alpha", "beta"]

def load():
    print("loaded")
    return Lazy

base.install_deferred("lazy-one", gdb.COMMAND_DATA, "lazy-one: the catalogue's text", load)
'''


def test_a_deferred_command_loads_once_and_completes_as_its_own(
        gdb_path: str, gdb_ext_dir: Path, tmp_path: Path) -> None:
    proc = _gdb(gdb_path, [f"source {gdb_ext_dir / 'memdump.py'}",
                           _script(tmp_path, "import gdb\n" + DEFERRED), "help lazy-one",
                           "complete lazy-o", "complete lazy-one a", "lazy-one", "lazy-one",
                           "complete memd"])
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.splitlines() == [
        "lazy-one: the catalogue's text", "lazy-one", "loaded", "lazy-one alpha",
        "lazy-one beta", "ran", "ran", "memdump"]


def test_dbgkit_py_after_memdump_py_loads_the_rest(gdb_path: str, gdb_ext_dir: Path) -> None:
    registry = ("python from dbgkit.commands import base; import gdb.printing; "
                "print(' '.join(sorted(base._installed)), "
                "[p.name for p in gdb.pretty_printers if hasattr(p, 'name')])")
    proc = _gdb(gdb_path, [f"source {gdb_ext_dir / 'memdump.py'}", registry,
                           f"source {gdb_ext_dir / 'dbgkit.py'}", registry, "help contention"])
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["memdump ['builtin']",
                         "contention ctxswitches deadlocks memdump ['dbgkit', 'builtin']"]
    assert lines[2].startswith("contention: ")


def _script(tmp_path: Path, body: str) -> str:
    script = tmp_path / "check.py"
    script.write_text(body)
    return f"source {script}"


REGISTRY_CHECKS = '''
import gdb
from dbgkit import commands
from dbgkit.commands import base

# Every command module registers one command named after the module (at its import).
print("modules", " ".join(commands.command_modules()))
for name in commands.command_modules():
    commands.command_class(name)
print("registered", " ".join(sorted(base.REGISTRY)))
for name, cls in base.REGISTRY.items():
    assert cls.__module__ == f"dbgkit.commands.{name}", (name, cls.__module__)

class Again(base.Command):
    NAME = "memdump"
    SUMMARY = "a second memdump"
    PARSER = base.Parser(prog="memdump")

try:
    base.register(Again)
except base.RegistryError as exc:
    print("duplicate:", exc)

@base.register
class Print(base.Command):
    NAME = "print"
    SUMMARY = "shadows GDB's print"
    PARSER = base.Parser(prog="print")

try:
    base.install()
except base.RegistryError as exc:
    print("built-in:", exc)
del base.REGISTRY["print"]
'''


def test_registry_is_complete_and_refuses_taken_names(gdb_path: str, gdb_ext_dir: Path,
                                                      tmp_path: Path) -> None:
    proc = _gdb(gdb_path, [f"source {gdb_ext_dir / 'dbgkit.py'}",
                           _script(tmp_path, REGISTRY_CHECKS)])
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "modules contention ctxswitches deadlocks memdump"
    assert lines[1] == "registered contention ctxswitches deadlocks memdump"
    assert lines[2] == ("duplicate: dbgkit: command 'memdump' is registered twice "
                        "(dbgkit.commands.memdump and __main__)")
    assert lines[3] == "built-in: dbgkit: command 'print' would replace GDB's own"


PRECONDITION_CHECKS = '''
from dbgkit.commands import base

class Regs(base.Command):
    """regs-of: print the pc of the live process."""
    NAME = "regs-of"
    SUMMARY = __doc__
    PARSER = base.Parser(prog="regs-of", description="Print the program counter.")

    @base.needs_live_process
    def run(self, args):
        print("pc", gdb.selected_frame().pc() != 0)

Regs()
'''


def test_a_precondition_prints_one_uniform_line(gdb_path: str, gdb_ext_dir: Path,
                                                tmp_path: Path, programs: Programs) -> None:
    program = programs.get("chain_O0")
    proc = _gdb(gdb_path, [f"source {gdb_ext_dir / 'dbgkit.py'}",
                           _script(tmp_path, "import gdb\n" + PRECONDITION_CHECKS),
                           "file " + str(program), "regs-of", "regs-of -h", "break main", "run",
                           "regs-of"])
    assert proc.stderr.splitlines()[0] == (
        "regs-of: needs a live process (run the program or attach)")
    assert "usage: regs-of [-h]\n\nPrint the program counter.\n" in proc.stdout
    assert "pc True" in proc.stdout


BOOM = '''
from dbgkit.commands import base

class Boom(base.Command):
    """boom: fail unexpectedly."""
    NAME = "boom"
    SUMMARY = __doc__
    PARSER = base.Parser(prog="boom")

    def run(self, args):
        {}["missing"]

Boom()
'''


def test_debug_setting_shows_the_traceback_of_an_unexpected_error(
        gdb_path: str, gdb_ext_dir: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MEMDUMP_DEBUG"}
    argv = [gdb_path, "-nx", "-batch", "-ex", f"source {gdb_ext_dir / 'dbgkit.py'}",
            "-ex", _script(tmp_path, BOOM), "-ex", "show dbgkit debug", "-ex", "boom",
            "-ex", "set dbgkit debug on", "-ex", "boom"]
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.stdout.startswith(
        "The printing of Python tracebacks of unexpected errors in dbgkit commands is off.\n")
    # Off: the one line alone. On: the traceback, then the same line.
    lines = proc.stderr.splitlines()
    assert lines[0] == ("boom: internal error: KeyError('missing') "
                        "(set dbgkit debug on for the traceback)")
    assert lines[1] == "Traceback (most recent call last):"
    assert "KeyError: 'missing'" in lines[-2]
    assert lines[-1] == lines[0]


def test_help_and_dash_h_print_the_same_parser_text(gdb_path: str, gdb_ext_dir: Path) -> None:
    proc = _gdb(gdb_path, [f"source {gdb_ext_dir / 'dbgkit.py'}", "memdump -h", "echo ---\\n",
                           "help memdump", "memdump status -h"])
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    dash_h, helped = proc.stdout.split("---\n")
    assert dash_h.startswith("usage: memdump [-h] [-o FILE]")
    assert helped.startswith("memdump: record every heap operation of the program with its call "
                             "stack, and report leaks.\n\n" + dash_h)
    assert helped.endswith("usage: memdump status [-h] [--json]\n\noptions:\n"
                           "  -h, --help  show this help message and exit\n"
                           "  --json      print JSON\n")
