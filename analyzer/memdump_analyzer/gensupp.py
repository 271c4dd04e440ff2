"""`--gen-suppressions`: a leak group as the suppression valgrind's `--gen-suppressions=all`
writes for its loss record, which `--suppressions` applies back."""

from __future__ import annotations

from .callsites import StackNames
from .model import Group
from .suppressions import valgrind_view

__all__ = ["NUM_CALLERS", "suppression_text"]

#: valgrind's default --num-callers: the frames of its stacks, and of the suppressions it writes
NUM_CALLERS = 12


def _slot(names: tuple[str, ...]) -> str:
    """The allocation slot's `fun:` pattern: valgrind's name when the call site or the dump says
    which function was called, else a glob of the names it may be (`_Zn?m`: `new` or `new[]`;
    `_Znw*`: a form of `new`), `*` for a C allocation function (the module could not be read)."""
    mangled = [n for n in names if n.startswith("_Z")]
    if len(mangled) == 1:
        return mangled[0]
    if len(mangled) > 1 and len({n[4:] for n in mangled}) == 1:
        return "_Zn?" + mangled[0][4:]
    if len(mangled) > 1 and len({n[:4] for n in mangled}) == 1:
        return mangled[0][:4] + "*"
    return names[0] if len(names) == 1 else "*"


def _demangled(name: str) -> bool:
    """Whether `name` is a demangled C++ name (`make_widget()`, `app::Registry::add(int)`):
    valgrind's `fun:` lines name such a function by its mangled name, which a frame whose module
    cannot be read has not; its `obj:` line is written instead, which valgrind matches too."""
    return "(" in name or "::" in name or " " in name


def suppression_text(group: Group, name: str, names: StackNames | None = None) -> str:
    """The suppression of `group` named `name`, valgrind's layout (three-space indent);
    `names`: the frames' linkage names and the call sites' callees (`group_names`). Every `fun:`
    line is a name valgrind gives the frame: a C name or a mangled C++ one, never a demangled
    name (valgrind 3.19 matches `fun:` against mangled names: it would never match)."""
    names = names or StackNames()
    lines = ["{", f"   {name}", "   Memcheck:Leak"]
    if group.leak_kind in ("definite", "indirect", "possible", "reachable"):
        lines.append(f"   match-leak-kinds: {group.leak_kind}")
    view = valgrind_view(group.raw or group.stack, names.callees, names.ops.get(group.node),
                         names.depth)[:NUM_CALLERS]
    for vf in view:
        if vf.slot:
            lines.append(f"   fun:{_slot(vf.names)}")
            continue
        known = names.linkage.get(vf.frame) if vf.frame is not None else None
        if known is None and vf.names != ("???",) and not _demangled(vf.names[-1]):
            known = vf.names[-1]  # valgrind's name of it (`clone`, `strdup`, `main`)
        if known is not None:
            lines.append(f"   fun:{known}")
        else:
            lines.append(f"   obj:{vf.module or '*'}")
    lines.append("}")
    return "\n".join(lines) + "\n"
