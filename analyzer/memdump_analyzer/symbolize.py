"""Symbols from the modules, for the frames a dump left without them (format 1.3).

The in-process recorder writes its `f` records with the module and offset only; GDB appends the
symbols (`fs` records) when the recording ends. When GDB died first, the analyser resolves the
frames it needs itself with binutils' `addr2line -f -i -C`: once per distinct frame, one process
per module, the frames' offsets on its standard input. `OFFSET` is the program counter minus the
module's load bias, the address addr2line expects (the ELF virtual address of a PIE or a shared
object, the PC itself of an ET_EXEC). Every frame's PC is a return address, so `OFFSET - 1` is
looked up: the line of the call, as GDB and the recorder's `fs` records give it.

addr2line names an address without debug information after the nearest symbol below it, even
when the address lies past that symbol's end (a static function of a stripped library, such as
libstdc++'s emergency exception pool, is not in its dynamic symbol table). Such an answer, a
function without a file, is kept only when binutils' `nm -S` shows the address inside the
symbol's size: GDB's `info symbol` rule.

Standard library only; no GDB.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .wording import plural

if TYPE_CHECKING:  # the reader is the caller's: GDB's recording imports this module without it
    from .dumpfile import DumpReader
    from .symcache import Entry

__all__ = [
    "TOOL", "AddrLineError", "Symbolized", "addr2line", "frames_without_symbols", "sized_symbols",
    "symbolize",
]

#: the program that resolves the frames
TOOL = "addr2line"
#: the program that lists a module's symbols with their sizes
NM = "nm"
#: seconds one addr2line process may take
TIMEOUT = 300
#: (ELF class, data encoding, machine) -> binutils' name of its target; other ELF files get the
#: generic `elf64-little` and the like
#: ELF section types: the symbol table, the dynamic symbol table
_SHT_SYMTAB, _SHT_DYNSYM = 2, 11
_TARGETS = {(2, 1, 62): "elf64-x86-64", (1, 1, 62): "elf32-x86-64", (1, 1, 3): "elf32-i386"}

#: one level of a frame's symbols: (function, file, line), None when unknown
Level = tuple[str | None, str | None, int | None]


@dataclass
class Symbolized:
    """What `symbolize` did: the frames it needed, and why some kept no function."""

    #: why the dump has frames without symbols: GDB did not finish the recording, or a process
    #: was recorded without GDB (a child, `set memdump children on`)
    why: str = "the recording did not finish"
    #: frames without symbols that the report uses
    wanted: int = 0
    #: of them, those addr2line named a function for
    frames: int = 0
    #: addr2line could not be run (not installed): None, or why
    tool_missing: str | None = None
    #: modules that no longer exist (or are not files), with how many frames they hold
    missing_modules: dict[str, int] = field(default_factory=dict)
    #: modules addr2line failed on, with why
    failed_modules: dict[str, str] = field(default_factory=dict)

    def notes(self) -> list[str]:
        """What the text report says about it when it symbolised frames."""
        if not self.frames:
            return []
        return [
            f"the dump has no symbols for {plural(self.frames, 'frame')} ({self.why}): "
            f"symbolised from the modules with {TOOL}"
        ]

    def problems(self) -> list[str]:
        """Why frames the report uses kept no symbols: warnings."""
        out = []
        if self.tool_missing is not None:
            out.append(
                f"the dump has no symbols for {plural(self.wanted, 'frame')} ({self.why}) and "
                f"{self.tool_missing}: they are shown by module and offset"
            )
        for module, n in self.missing_modules.items():
            out.append(
                f"{plural(n, 'frame')} without symbols in {module}, which no "
                "longer exists: shown by module and offset"
            )
        for module, why in self.failed_modules.items():
            out.append(f"{TOOL} failed on {module} ({why}): its frames are shown by offset")
        return out


def frames_without_symbols(reader: DumpReader, nodes: Iterable[int]) -> list[int]:
    """The frames of the stacks `nodes` that have no function and no `fs` record, each once."""
    if all(f.function is not None or f.module is None for f in reader.frames.values()):
        return []  # a dump with all its symbols: `nodes` is not even looked at
    frames = reader.frames
    nodes = list(nodes)  # walked again by Python when the library leaves it
    if hasattr(reader.nodes, "_final"):  # the library's table of nodes: walked in C
        from .nativegroups import reached_frames

        reached = reached_frames(reader, nodes)
        if reached is not None and all(frame in frames for frame in reached):
            return [frame for frame in reached if _unsymbolized(reader, frame)]
    seen: set[int] = set()
    out: list[int] = []
    table = reader.nodes
    done: set[int] = set()
    for node in nodes:
        node = abs(node)
        while node and node not in done:
            done.add(node)
            node, frame = table[node]
            if frame in seen:
                continue
            seen.add(frame)
            if _unsymbolized(reader, frame):
                out.append(frame)
    return out


def _unsymbolized(reader: DumpReader, frame: int) -> bool:
    """Whether frame `frame` has no function, no `fs` record, and a module to look in."""
    f = reader.frames[frame]
    return f.function is None and frame not in reader.symbolized and f.module is not None


def symbolize(reader: DumpReader, nodes: Iterable[int], *, tool: str = TOOL) -> Symbolized:
    """Resolve the frames without symbols of the stacks `nodes` from their modules, in place
    (`reader.frames`, `reader.inlined_into`)."""
    result = Symbolized()
    if "parent" in reader.info:  # a child recorded without GDB (`set memdump children on`)
        result.why = "recorded without GDB"
    elif reader.symbolized:  # GDB wrote `fs` records: it had no symbol for the others
        result.why = "GDB found none for them"
    wanted = frames_without_symbols(reader, nodes)
    result.wanted = len(wanted)
    if not wanted:
        return result
    by_module: dict[str, list[int]] = {}
    for ident in wanted:
        module = reader.frames[ident].module
        assert module is not None
        by_module.setdefault(module, []).append(ident)
    import shutil  # noqa: PLC0415 - GDB's recording imports this module for addr2line alone

    program = shutil.which(tool)
    if program is None:
        result.tool_missing = f"{tool} (binutils) is not installed"
        return result
    for module, idents in by_module.items():
        if not os.path.isfile(module):
            result.missing_modules[module] = len(idents)
            continue
        offsets = sorted({_lookup(reader.frames[i].offset) for i in idents})
        try:
            found, cache, fresh = _answers(program, module, offsets, True)
        except _Failed as e:
            result.failed_modules[module] = str(e)
            continue
        # an answer naming a function without a file is kept when nm shows the address inside
        # the function's size: the cache keeps that verdict too, so that a run whose answers
        # are all cached starts no nm (four processes, 20 ms of CPU, on cppcheck's dump)
        known = cache.inside if cache is not None else {}
        inside, sizes = {}, _SymbolSizes(module)
        for ident in idents:
            offset = _lookup(reader.frames[ident].offset)
            chain = found.get(offset)
            if not chain or chain[0][0] is None:
                continue
            if chain[0][1] is None and offset not in known and offset not in inside:
                inside[offset] = sizes(offset)
            if chain[0][1] is not None or known.get(offset, inside.get(offset)):
                reader.set_symbols(ident, chain)
                result.frames += 1
        if cache is None:
            continue
        if not sizes.spans:  # nm missing or failed: its "outside" is not a verdict to keep
            inside = {}
        if fresh or inside:
            cache.save(fresh, inside)
        else:
            cache.used()
    return result


class _SymbolSizes:
    """Whether an offset of `module` lies inside a function symbol's size (`nm -S`, its
    symbol table, else its dynamic one), read the first time it is asked."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.spans: list[tuple[int, int]] | None = None

    def __call__(self, offset: int) -> bool:
        if self.spans is None:
            self.spans = _function_spans(self.module)
        i = bisect.bisect_right(self.spans, (offset, float("inf"))) - 1
        return i >= 0 and self.spans[i][0] <= offset < self.spans[i][1]


def _function_spans(module: str) -> list[tuple[int, int]]:
    """[start, end) of each sized function symbol of `module`, sorted; [] when nm is missing or
    fails (then a name without a file is not trusted)."""
    return [(start, end) for start, end, _ in sized_symbols(module, "TtWwi", demangle=False)]


def sized_symbols(module: str, types: str, *, demangle: bool = True,
                  ) -> list[tuple[int, int, str]]:
    """(start, end, demangled name) of each sized symbol of `module` whose nm type is one of
    `types` (`TtWwi` functions, `BbDdVvGgSs` data), sorted; from the symbol table, else the
    dynamic one; [] when nm is missing or fails. `demangle=False`: the linkage names (nm does
    not demangle them, for a caller that reads the spans alone)."""
    import shutil  # noqa: PLC0415 - GDB's recording imports this module for addr2line alone
    import subprocess  # noqa: PLC0415 - a report whose frames all have symbols runs no tool

    program = shutil.which(NM)
    if program is None:
        return []

    for dynamic in symbol_tables(module):
        try:
            run = subprocess.run([program, *bfd_target(module), "-S",
                                  *(["-C"] if demangle else []), "--defined-only", *dynamic,
                                  module],
                                 capture_output=True, timeout=TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return []
        symbols = []
        for line in run.stdout.decode("utf-8", "replace").splitlines():
            parts = line.split(maxsplit=3)
            if len(parts) == 4 and len(parts[2]) == 1 and parts[2] in types:
                try:
                    start, size = int(parts[0], 16), int(parts[1], 16)
                except ValueError:
                    continue
                symbols.append((start, start + size, parts[3]))
        if symbols:
            return sorted(symbols)
    return []


def symbol_tables(module: str) -> list[list[str]]:
    """The nm options that read each symbol table `module` has, in the order `sized_symbols`
    tries them: `[]` its symbol table, `["-D"]` its dynamic one. Both unless its ELF section
    headers say which it has: a stripped module's symbol table is absent, and asking nm for it
    is a process started for nothing (four of the twelve a view ran on cppcheck's dump)."""
    both = [[], ["-D"]]
    try:
        with open(module, "rb") as f:
            head = f.read(64)
            if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) \
                    or head[5] not in (1, 2):
                return both
            end = "<" if head[5] == 1 else ">"
            if head[4] == 2:
                if len(head) < 64:
                    return both
                shoff, = struct.unpack_from(end + "Q", head, 0x28)
                entsize, count = struct.unpack_from(end + "HH", head, 0x3A)
            else:
                shoff, = struct.unpack_from(end + "I", head, 0x20)
                entsize, count = struct.unpack_from(end + "HH", head, 0x2E)
            if shoff == 0 or count == 0 or entsize < 8:  # none, or more than 0xff00 of them
                return both
            f.seek(shoff)
            table = f.read(entsize * count)
    except OSError:
        return both
    if len(table) < entsize * count:
        return both
    types = {struct.unpack_from(end + "I", table, i * entsize + 4)[0] for i in range(count)}
    return [option for option, kind in (([], _SHT_SYMTAB),
                                        (["-D"], _SHT_DYNSYM)) if kind in types]


def bfd_target(module: str) -> list[str]:
    """The option that names `module`'s object format to binutils (`--target=elf64-x86-64`),
    [] when it is not an ELF file. Named, binutils reads the file as that format alone: left to
    itself, it also tries every plugin of its `bfd-plugins` directory on it, and `nm` then loads
    LLVM's linker plugin (a 100 MB library, 20 ms) wherever clang is installed."""
    try:
        with open(module, "rb") as f:
            head = f.read(20)
    except OSError:
        return []
    if len(head) < 20 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
        return []
    machine = int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")
    target = _TARGETS.get((head[4], head[5], machine))
    if target is None:
        target = f"elf{32 * head[4]}-{'little' if head[5] == 1 else 'big'}"
    return [f"--target={target}"]


def _is_binutils(program: str) -> bool:
    """Whether `program` is binutils' addr2line (`x86_64-linux-gnu-addr2line` too), not another
    program that speaks its protocol (memdump-symbolize, which takes no `--target`)."""
    return os.path.basename(program).endswith("addr2line")


def _lookup(offset: int) -> int:
    """The address looked up for a return address: inside the call instruction."""
    return offset - 1 if offset > 0 else offset


class _Failed(Exception):
    """addr2line could not resolve a module: why, in a few words."""


AddrLineError = _Failed


def addr2line(
    program: str, module: str, offsets: list[int], *, demangle: bool = True
) -> dict[int, list[Level]]:
    """offset -> its symbols, innermost first (`-i`: the inlined functions, then the function
    they were inlined into), for each of `offsets` in `module`; `demangle=False`: the functions'
    linkage names (`_ZL11make_widgetv`), as valgrind's suppressions name them. The answers of
    a module with a build id are kept in the symbol cache (symcache.py), and `program` runs on
    the offsets it does not hold only."""
    found, cache, fresh = _answers(program, module, offsets, demangle)
    if cache is not None and fresh:
        cache.save(fresh)
    elif cache is not None:
        cache.used()
    return found


def _answers(program: str, module: str, offsets: list[int], demangle: bool,
             ) -> tuple[dict[int, list[Level]], Entry | None, dict[int, list[Level]]]:
    """`addr2line`'s answers, with the module's cache entry (None: not cached) and the answers
    just computed, which the caller saves into it."""
    from . import symcache  # noqa: PLC0415 - a report whose frames all have symbols runs no tool

    cache = symcache.entry(program, module, demangle=demangle)
    if cache is None:
        return _run(program, module, offsets, demangle), None, {}
    found = {o: cache.frames[o] for o in offsets if o in cache.frames}
    missing = [o for o in offsets if o not in found]
    if not missing:
        return found, cache, {}
    fresh = _run(program, module, missing, demangle)
    return {o: found[o] if o in found else fresh[o] for o in offsets}, cache, fresh


def _run(program: str, module: str, offsets: list[int], demangle: bool,
         ) -> dict[int, list[Level]]:
    """`program`'s answers for `offsets` of `module` (addr2line above, without the cache)."""
    import subprocess  # noqa: PLC0415 - a report whose frames all have symbols runs no tool

    text = "".join(f"0x{o:x}\n" for o in offsets)
    try:
        run = subprocess.run(
            [program, *(bfd_target(module) if _is_binutils(program) else []), "-f", "-i",
             *(["-C"] if demangle else []), "-a", "-e", module],
            input=text.encode(),
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _Failed(f"no answer in {TIMEOUT} s") from None
    except OSError as e:
        raise _Failed(e.strerror or str(e)) from None
    if run.returncode != 0:
        why = run.stderr.decode("utf-8", "replace").strip().splitlines()
        raise _Failed(why[-1] if why else f"exit status {run.returncode}")
    return _parse(run.stdout.decode("utf-8", "surrogateescape").splitlines(), offsets)


def _parse(lines: list[str], offsets: list[int]) -> dict[int, list[Level]]:
    """`addr2line -a -f -i` output: each address, then (function, FILE:LINE) pairs."""
    out: dict[int, list[Level]] = {}
    i = 0
    for k, offset in enumerate(offsets):
        if i >= len(lines) or not _is_address(lines[i], offset):
            raise _Failed("unexpected output")
        i += 1
        nxt = offsets[k + 1] if k + 1 < len(offsets) else None
        chain: list[Level] = []
        while i + 1 < len(lines) and not (nxt is not None and _is_address(lines[i], nxt)):
            chain.append(_level(lines[i], lines[i + 1]))
            i += 2
        out[offset] = chain
    return out


def _is_address(line: str, offset: int) -> bool:
    if not line.startswith("0x"):
        return False
    try:
        return int(line, 16) == offset
    except ValueError:
        return False


def _level(function: str, where: str) -> Level:
    """One (function, FILE:LINE) pair; `??` is unknown, as is line 0 or `?`."""
    name = None if function == "??" else function
    where = where.split(" (discriminator", 1)[0]
    path, _, line = where.rpartition(":")
    if not _:
        path, line = where, ""
    file = None if path in ("??", "") else path
    return name, file, int(line) if line.isdigit() and int(line) > 0 else None
