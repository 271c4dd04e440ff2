"""valgrind's view of memdump's stacks, for `--format valgrind` and `valgrind-xml`
(docs/valgrind-compat.md): the frames valgrind would show, as `VgFrame`s both writers print.

The allocator's slot (`malloc`, `operator new(unsigned long)`) is in valgrind's preload, then the
program's frames down to `main`, at most `--num-callers` in all (12 unless told); a heap error's
stack starts at the deallocation valgrind names (a sized `delete` is one) when its call site can
be read (callsites.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .callsites import StackNames
    from .dumpfile import Frame
    from .model import Analysis, Group
    from .suppressions import ViewFrame

__all__ = ["NUM_CALLERS", "PRELOAD", "GroupStacks", "VgFrame", "access_frames", "alloc_frames",
           "callees", "frames", "free_frames", "short_name"]

#: where valgrind 3.19 has its replacement allocators on Debian and Ubuntu (its stacks' `obj`)
PRELOAD = "/usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so"
#: valgrind's default --num-callers
NUM_CALLERS = 12
#: the deallocation a heap error's operation is in valgrind's stacks
_FREE_SLOT = {"free": "free", "delete": "operator delete(void*)",
              "delete[]": "operator delete[](void*)", "realloc": "realloc"}
_NEW_ARGS = {"m": "unsigned long", "mRKSt9nothrow_t": "unsigned long, std::nothrow_t const&",
             "mSt11align_val_t": "unsigned long, std::align_val_t",
             "mSt11align_val_tRKSt9nothrow_t":
             "unsigned long, std::align_val_t, std::nothrow_t const&"}
#: the arguments of `operator delete` and `delete[]` by their mangled suffix
_DELETE_ARGS = {"Pv": "void*", "Pvm": "void*, unsigned long",
                "PvSt11align_val_t": "void*, std::align_val_t",
                "PvmSt11align_val_t": "void*, unsigned long, std::align_val_t",
                "PvRKSt9nothrow_t": "void*, std::nothrow_t const&"}


@dataclass
class VgFrame:
    """A frame as valgrind prints it: its address, function, object and source line."""

    ip: int
    fn: str
    obj: str | None
    file: str | None = None
    line: int | None = None


def _slot_name(names: tuple[str, ...], op: str | None) -> str:
    """The allocator valgrind names: `operator new(unsigned long)` for `_Znwm`..."""
    name = names[0] if len(names) == 1 or op is None else op
    if name.startswith(("_Znw", "_Zna")) and name[4:] in _NEW_ARGS:
        return f"operator new{'[]' if name[3] == 'a' else ''}({_NEW_ARGS[name[4:]]})"
    return {"new": "operator new(unsigned long)",
            "new[]": "operator new[](unsigned long)"}.get(name, name)


def short_name(name: str) -> str:
    """An inlined function as valgrind names it, by its DWARF name: without its scope and
    parameters (`std::vector<int>::reserve(unsigned long)` is `reserve`)."""
    end = len(name)
    if name.endswith(" const"):
        end -= len(" const")
    if end and name[end - 1] == ")":
        depth = 0
        for i in range(end - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                end = i
                break
    depth, start = 0, 0
    for i, c in enumerate(name[:end]):
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(c, 0)
        if depth == 0 and name.startswith("::", i):
            start = i + 2
    return name[start:end] or name


def frames(view: Sequence[ViewFrame], raw: Sequence[Frame], op: str | None,
           limit: int) -> list[VgFrame]:
    """The frames valgrind shows: at most `limit`, down to `main` (its --show-below-main=no)."""
    out = []
    for vf in view[:limit]:
        if vf.slot:
            out.append(VgFrame(raw[0].pc if raw else 0, _slot_name(vf.names, op), PRELOAD))
        elif vf.frame is not None:
            f = vf.frame
            name = vf.names[-1]
            if name.startswith("main("):  # C++'s main(int, char**)
                name = "main"
            elif f.inlined and f.file is not None:
                name = short_name(name)
            out.append(VgFrame(f.pc, name, f.module, f.file, f.line))
            if name == "main":
                break
        else:
            out.append(VgFrame(0, vf.names[-1], PRELOAD))
    return out


def _deallocator(called: str | None) -> str | None:
    """valgrind's name of the deallocation a call site called (`_ZdlPvm`: `operator
    delete(void*, unsigned long)`), None when it is not one it names so."""
    if called in ("free", "realloc"):
        return called
    if called and called.startswith(("_Zdl", "_Zda")) and called[4:] in _DELETE_ARGS:
        return f"operator delete{'[]' if called[3] == 'a' else ''}({_DELETE_ARGS[called[4:]]})"
    return None


def callees(analysis: Analysis,
            stacks: Sequence[Sequence[Frame]]) -> dict[tuple[str, int], str]:
    """The functions the call sites of deallocations' stacks called
    (callsites.called_functions)."""
    from .callsites import called_functions
    from .suppressions import call_site

    sites = []
    for stack in stacks:
        if stack:
            f = stack[call_site(stack)]
            if f.module is not None:
                sites.append((f.module, f.offset))
    return called_functions(sites, arch=analysis.info.get("arch")) if sites else {}


def free_frames(stack: Sequence[Frame], op: str, limit: int,
                called: dict[tuple[str, int], str] | None = None) -> list[VgFrame]:
    """A deallocation's stack as valgrind shows it: the deallocation `op` in its preload (the
    one the call site called, when it can be read: a sized `delete` is one), then the program's
    frames from the call down to `main`."""
    from .suppressions import call_site, valgrind_view

    start = call_site(stack)
    view = valgrind_view(stack[start:] or stack)[1:]
    top = (stack[0].function or "") if start else ""
    site = stack[start] if stack else None
    name = _deallocator((called or {}).get((site.module or "", site.offset))) \
        if site is not None else None
    if name is None:
        name = top if top.startswith("operator delete") else _FREE_SLOT.get(op, op)
    slot = VgFrame(stack[0].pc if stack else 0, name, PRELOAD)
    return [slot, *frames(view, stack, None, limit - 1)]


def access_frames(stack: Sequence[Frame], limit: int) -> list[VgFrame]:
    """A faulting access's stack as valgrind shows it: the faulting instruction's own address
    first (the dump's innermost frame is that address plus one, as if a return address), then
    the program's frames down to `main` (or the thread's outermost frame)."""
    from .suppressions import valgrind_view

    out = frames(valgrind_view(stack)[1:], stack, None, limit)
    if out and stack:
        out[0].ip = stack[0].pc - 1
    return out


def alloc_frames(stack: Sequence[Frame], op: str | None, limit: int) -> list[VgFrame]:
    """A block's allocation as valgrind shows it: the allocator in its preload, then the
    program's frames from the call."""
    from .suppressions import valgrind_view

    return frames(valgrind_view(stack, None, op), stack, op, limit)


class GroupStacks:
    """The groups' stacks in valgrind's view, their names read once for them all."""

    def __init__(self, analysis: Analysis, groups: Sequence[Group], limit: int) -> None:
        from .callsites import StackNames, stack_names
        from .dumpfile import DumpError
        from .rescan import alloc_ops
        from .suppressions import call_site

        self.limit = limit
        self.names: StackNames = StackNames()
        if not groups:
            return
        self.names = stack_names(groups, call_site, analysis.info.get("arch"))
        # the operation recorded at a stack names the slot when its call site could not be read:
        # looked up for those alone (a second reading of the dump, up to their allocations)
        unread = set()
        for g in groups:
            raw = g.raw or g.stack
            site = raw[call_site(raw)] if raw else None
            if g.node and (site is None or (site.module or "", site.offset)
                           not in self.names.callees):
                unread.add(g.node)
        if unread:
            try:
                self.names.ops = alloc_ops(analysis.path, unread)
            except (OSError, DumpError):
                pass  # the dump is gone since it was read: the frames must say

    def of(self, group: Group) -> list[VgFrame]:
        from .suppressions import valgrind_view

        raw = group.raw or group.stack
        op = self.names.ops.get(group.node)
        view = valgrind_view(raw, self.names.callees, op, self.names.depth)
        return frames(view, raw, op, self.limit)
