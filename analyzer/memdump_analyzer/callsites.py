"""The function a call site called, read from the module's code with binutils' objdump.

A memdump stack starts at the allocator's caller: its first frame's program counter is the return
address of the call to `malloc`, `calloc`, `operator new[]`... A dump does not say which of them
it was (the recorders watch `malloc`, which `operator new` calls, and libstdc++'s `operator
new[]` tail-calls `operator new`), valgrind's suppressions do. The instruction before the return
address names it: `call 1040 <_Znam@plt>`, or `call *0x2e7a(%rip)  # 3fc0 <calloc@GLIBC_2.2.5>`
(-fno-plt), one objdump process per call site, only for the sites suppressions need.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .dumpfile import DumpError, Frame
from .faultinsn import disassemble
from .model import Group
from .rescan import alloc_ops
from .symbolize import TOOL as ADDR2LINE
from .symbolize import AddrLineError, addr2line

__all__ = ["TOOL", "StackNames", "called_functions", "linkage_names", "stack_names"]

TOOL = "objdump"
#: x86-64's call instructions: `e8 rel32` (5 bytes), `ff 15 disp32` (6 bytes, through the GOT)
_CALL_LENGTHS = (5, 6)
_CALL = re.compile(r"^\s*([0-9a-f]+):\s+call\w*\s.*<([^<>]+)>\s*$")


def _name(symbol: str) -> str:
    """`_Znam@plt` -> `_Znam`, `calloc@GLIBC_2.2.5` -> `calloc`, `malloc+0x10` -> `malloc`."""
    return symbol.split("@", 1)[0].split("+", 1)[0]


def _call_before(program: str, module: str, offset: int) -> str | None:
    for length in _CALL_LENGTHS:
        start = offset - length
        if start < 0:
            continue
        lines = disassemble(program, module, start, offset)
        if lines is None:
            return None
        for line in lines:
            match = _CALL.match(line)
            if match and int(match.group(1), 16) == start:
                return _name(match.group(2))
    return None


def called_functions(
    sites: Iterable[tuple[str, int]], *, program: str = TOOL, arch: str | None = "x86_64"
) -> dict[tuple[str, int], str]:
    """(module, return offset) -> the function the call before it called, for the sites whose
    module is readable and whose instruction before is a call objdump names; x86-64 only."""
    out: dict[tuple[str, int], str] = {}
    if arch not in (None, "x86_64") or shutil.which(program) is None:
        return out
    for module, offset in sorted(set(sites)):
        if not os.path.isfile(module):
            continue
        name = _call_before(program, module, offset)
        if name:
            out[(module, offset)] = name
    return out


def linkage_names(
    groups: Iterable[Group], program: str = ADDR2LINE,
    depth: dict[tuple[str, int], int] | None = None,
) -> dict[Frame, str]:
    """The linkage (mangled) names of the groups' frames, from their modules with addr2line:
    what valgrind's `fun:` lines name. Frames whose module cannot be read have none. `depth`,
    when given, gets how many frames valgrind shows at each (module, offset): the functions of
    addr2line's inline chain there, which valgrind reads from the same DWARF."""
    by_module: dict[str, set[Frame]] = {}
    for g in groups:
        for f in g.raw or g.stack:
            if f.module is not None and f.function is not None:
                by_module.setdefault(f.module, set()).add(f)
    out: dict[Frame, str] = {}
    if shutil.which(program) is None:
        return out
    for module, frames in by_module.items():
        if not os.path.isfile(module):
            continue
        offsets = sorted({f.offset - 1 if f.offset > 0 else 0 for f in frames})
        try:
            found = addr2line(program, module, offsets, demangle=False)
        except AddrLineError:
            continue
        at: dict[int, list[Frame]] = {}
        for f in frames:
            at.setdefault(f.offset, []).append(f)
        for offset, fs in at.items():
            chain = [name for name, _, _ in found.get(offset - 1 if offset > 0 else 0, [])]
            if depth is not None and chain:
                depth[(module, offset)] = len(chain)
            inlined = [f for f in fs if f.inlined]
            outer = [f for f in fs if not f.inlined]
            if outer and chain:
                _keep(out, outer[0], chain[-1])
            if len(inlined) == 1 and len(chain) == 2:
                _keep(out, inlined[0], chain[0])
    return out


def _keep(out: dict[Frame, str], frame: Frame, linkage: str | None) -> None:
    """A C++ frame's linkage name, when it names GDB's function (the module on disk is the one
    recorded): `_ZL11make_widgetv` for `make_widget()`. A C function's is its name already."""
    name = frame.function or ""
    if not linkage or not linkage.startswith("_Z") or "(" not in name:
        return
    base = name.split("(", 1)[0].rsplit("::", 1)[-1].split("<", 1)[0]
    if base and f"{len(base)}{base}" in linkage:
        out[frame] = linkage


@dataclass
class StackNames:
    """What suppressions match beyond the dump: the frames' linkage names, and the functions the
    allocation call sites called."""

    linkage: dict[Frame, str] = field(default_factory=dict)
    callees: dict[tuple[str, int], str] = field(default_factory=dict)
    #: (module, offset) -> how many frames valgrind shows there (its inline chain's length)
    depth: dict[tuple[str, int], int] = field(default_factory=dict)
    #: stack node -> the operation the dump recorded at it (`calloc`, `new`...): the function
    #: the program called, when the call site cannot be read
    ops: dict[int, str] = field(default_factory=dict)


def stack_names(
    groups: Sequence[Group], site: Callable[[Sequence[Frame]], int], arch: str | None,
    path: str | None = None,
) -> StackNames:
    """The names of the groups' frames and call sites (`site`: the index of a stack's call
    site, `suppressions.call_site`); with the dump's `path`, the operations recorded at the
    groups' stacks."""
    sites = []
    for g in groups:
        raw = g.raw or g.stack
        if raw:
            f = raw[site(raw)]
            if f.module is not None:
                sites.append((f.module, f.offset))
    depth: dict[tuple[str, int], int] = {}
    linkage = linkage_names(groups, depth=depth)
    ops: dict[int, str] = {}
    if path:
        try:
            ops = alloc_ops(path, {g.node for g in groups if g.node})
        except (OSError, DumpError):
            pass  # the dump is gone since it was read: the frames must say

    return StackNames(linkage, called_functions(sites, arch=arch), depth, ops)
