"""Suppressions: valgrind's and LeakSanitizer's files, matched against the leak groups.

valgrind's format (its manual, "Suppressing errors"): entries `{ NAME / TOOL:KIND / extra lines /
frames }`; for `Memcheck:Leak` an optional `match-leak-kinds: LIST` line, then frames `fun:GLOB`,
`obj:GLOB`, `src:FILE[:LINE]` and `...` (zero or more frames), innermost first. An entry matches a
loss record when its frames match the start of the record's stack. Globs have `*` and `?`. Entries
of other kinds (`Memcheck:Free`, `Memcheck:Addr8`...) are read and never match a leak.

LeakSanitizer's format (compiler-rt's sanitizer_suppressions.cpp and lsan_common.cpp): lines
`leak:TEMPLATE`, `#` comments; a leak is suppressed when the template matches the module, the
function or the source file of any frame of its stack. A template matches a substring, with `*`
any run of characters, `^` at its start and `$` at its end anchoring it.

The stack valgrind matches starts with the allocation function the program called (its replacement
of `malloc`, `_Znwm`...), then the caller. A memdump stack starts at the allocator's caller
(`operator new`, `strdup` in libc, or the program): `valgrind_view` rebuilds valgrind's stack with
an *allocation slot* first, named after the call instruction before the call site's return address
(`callsites`; it tells `new` from `new[]`, which libstdc++'s `operator new[]` tail-calls), else
after the operation the dump recorded at the stack (`calloc`, `new`...), else every name the call
may have had. valgrind's choice among matching entries and its counts are `apply`'s, and a
LeakSanitizer entry hides the indirectly lost blocks its blocks lead, as LeakSanitizer's second
check does (docs/memdump.md, "Leaks in CI").
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .callsites import StackNames, stack_names
from .dumpfile import Frame
from .dumpformat import public_name
from .model import Analysis, Group
from .suppfile import DEMANGLED, Suppression, SuppressionError, load, load_all

__all__ = [
    "Suppression",
    "SuppressionError",
    "ViewFrame",
    "apply",
    "call_site",
    "group_names",
    "load",
    "load_all",
    "lsan_match",
    "matches",
    "valgrind_glob",
    "valgrind_view",
]

_C_ALLOCATORS = ("malloc", "calloc", "realloc", "reallocarray", "memalign", "posix_memalign",
                 "aligned_alloc", "valloc", "pvalloc")
#: a second frame valgrind 3.19 shows under its replacement: `memalign` then `posix_memalign`
_VALGRIND_WRAPPERS = ("posix_memalign", "reallocarray")
#: the function the program called -> the names valgrind 3.19's stack starts with (measured:
#: aligned_alloc, valloc and posix_memalign are its memalign; reallocarray(NULL, ...) its malloc)
_VALGRIND_SLOT = {
    "malloc": ("malloc",), "calloc": ("calloc",), "realloc": ("realloc",),
    "reallocarray": ("malloc", "realloc"), "memalign": ("memalign",),
    "aligned_alloc": ("memalign",), "valloc": ("memalign",), "pvalloc": ("memalign",),
    "posix_memalign": ("memalign",),
}
_STRDUPS = ("strdup", "__strdup", "strndup", "__strndup", "wcsdup", "__wcsdup")
_NEW_SUFFIX = {
    "unsigned long": "m",
    "unsigned long, std::nothrow_t const&": "mRKSt9nothrow_t",
    "unsigned long, std::align_val_t": "mSt11align_val_t",
    "unsigned long, std::align_val_t, std::nothrow_t const&": "mSt11align_val_tRKSt9nothrow_t",
}
#: names GDB gives frames that valgrind names otherwise: glibc's internal aliases, `clone3`
#: (valgrind 3.19 refuses clone3, glibc falls back to clone), C++'s `main()`
_ALIASES = {"__strdup": "strdup", "__strndup": "strndup", "__wcsdup": "wcsdup",
            "clone3": "clone", "main()": "main", "__libc_start_main_impl": "__libc_start_main"}
_ALLOCATOR_FRAME = re.compile(
    r"(operator new|operator delete|_Zn[wa]|_Zd[la])|(__libc_)?(malloc|calloc|realloc|"
    r"reallocarray|memalign|posix_memalign|aligned_alloc|valloc|pvalloc|free)$"
)


@dataclass
class ViewFrame:
    """A frame of the stack valgrind would match: the names it may have, its object and source."""

    names: tuple[str, ...]
    module: str | None = None
    file: str | None = None
    line: int | None = None
    #: the allocation slot: the names of every function the call could have been
    slot: bool = False
    frame: Frame | None = None


# -- matching --------------------------------------------------------------------------------------


def _has_glob(pattern: str) -> bool:
    return "*" in pattern or "?" in pattern


def valgrind_glob(pattern: str) -> re.Pattern[str]:
    """valgrind's VG_(string_match): `*` any run, `?` one character, `\\` quotes the next."""
    out = []
    chars = iter(pattern)
    for c in chars:
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "\\":
            out.append(re.escape(next(chars, "\\")))
        else:
            out.append(re.escape(c))
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def lsan_match(template: str, text: str | None) -> bool:
    """compiler-rt's TemplateMatch (sanitizer_common.cpp), step by step: each run of the
    template between `*`s is found at its first place in what is left of `text` (no
    backtracking), `^` first anchors the first run at the start, `$` ends the match (at the end
    of `text`, or anywhere after a `*`); else a substring match."""
    if not text:
        return False
    start = template.startswith("^")
    if start:
        template = template[1:]
    asterisk = False
    while template:
        if template[0] == "*":
            template = template[1:]
            start = False
            asterisk = True
            continue
        if template[0] == "$":
            return text == "" or asterisk
        if text == "":
            return False
        cuts = [i for i in (template.find("*"), template.find("$")) if i >= 0]
        cut = min(cuts) if cuts else len(template)
        part, template = template[:cut], template[cut:]
        pos = text.find(part)
        if pos < 0 or (start and pos != 0):
            return False
        text = text[pos + len(part):]
        start = False
        asterisk = False
    return True


def _new_names(name: str) -> tuple[str, ...]:
    """The names valgrind may give the operator new that GDB names `name`: GDB sees operator
    new[] tail-call operator new (libstdc++), so `new` may have been `new[]`."""
    array = name.startswith(("operator new[]", "_Zna"))
    if name.startswith("_Zn"):
        suffix = name[4:]
    else:
        params = name[name.find("(") + 1:name.rfind(")")]
        suffix = _NEW_SUFFIX.get(params, "m")
    out = [f"_Zna{suffix}"] if array else [f"_Znw{suffix}", f"_Zna{suffix}"]
    return (*out, name)


def _names(frame: Frame) -> tuple[str, ...]:
    name = public_name(frame.function)
    if name is None:
        return ("???",)
    alias = _ALIASES.get(name)
    return (name, alias) if alias else (name,)


def call_site(raw: Sequence[Frame]) -> int:
    """The index in `raw` of the allocator's caller: after the allocator's own frames
    (`operator new`, a `malloc` that `operator new` called...), at `strdup` in libc."""
    start = 0
    while start < len(raw):
        name = public_name(raw[start].function)
        if name is None or name in _STRDUPS or not _ALLOCATOR_FRAME.match(name):
            break
        start += 1
    return start if start < len(raw) else 0


def _slot_names(op: str, new_name: str | None) -> tuple[str, ...]:
    """The names valgrind may give the `new` or `new[]` the dump recorded (`op`): the form
    `new_name` says (GDB's name of the operator's frame), else every form."""
    array = op == "new[]"
    if new_name is not None:
        names = _new_names(new_name)
        return tuple(n for n in names if n.startswith("_Zna" if array else "_Znw")) or names
    prefix = "_Zna" if array else "_Znw"
    return tuple(prefix + suffix for suffix in dict.fromkeys(_NEW_SUFFIX.values()))


def valgrind_view(
    raw: Sequence[Frame], callees: dict[tuple[str, int], str] | None = None,
    op: str | None = None, depth: dict[tuple[str, int], int] | None = None,
) -> list[ViewFrame]:
    """The stack valgrind matches for a block allocated at `raw` (a memdump stack, innermost
    first): the allocation slot, then the frames from the allocator's caller to `main` (or to
    the thread's outermost frame). `callees`: the functions call sites called
    (`callsites.called_functions`), which make the slot exact; else `op`, the operation the
    dump recorded (`calloc`, `new`...), names it. `depth`: how many frames valgrind shows at a
    program counter (its inline chain): GDB's surplus inlined frames there are left out (without
    it, those of a chain whose outer frame has no source line)."""
    start = call_site(raw)
    new_name = None
    for f in raw[:start]:
        name = public_name(f.function) or ""
        if name.startswith(("operator new", "_Zn")):
            new_name = name  # the outermost: the one the program called
    site = raw[start] if raw else None
    callee = None
    if callees and site is not None and site.module is not None:
        callee = callees.get((site.module, site.offset))
    extra: list[ViewFrame] = []
    if op == "posix_memalign" and callee is None:
        callee = op
    if callee is not None and (callee in _VALGRIND_SLOT or callee.startswith(("_Znw", "_Zna"))):
        slot = _VALGRIND_SLOT.get(callee, (callee,))
        if callee == "posix_memalign":  # valgrind 3.19: memalign, then posix_memalign
            extra.append(ViewFrame(("posix_memalign",)))
    elif op in ("new", "new[]"):
        slot = _slot_names(op, new_name)
    elif new_name is not None:
        slot = _new_names(new_name)
    elif site is not None and public_name(site.function) in _STRDUPS:
        slot = ("malloc",)
    elif op in _VALGRIND_SLOT:
        slot = _VALGRIND_SLOT[op]
    else:
        slot = _C_ALLOCATORS
    view = [ViewFrame(slot, slot=True), *extra]
    body = raw[start:]
    end = len(body)
    for i in range(len(body) - 1, -1, -1):
        if public_name(body[i].function) in ("main", "main()"):
            end = i + 1
            break
    for i, f in enumerate(body[:end]):
        if f.inlined and f.module is not None and _surplus(body, i, depth or {}):
            continue
        view.append(ViewFrame(_names(f), f.module, f.file, f.line, frame=f))
    return view


def _surplus(body: Sequence[Frame], i: int, depth: dict[tuple[str, int], int]) -> bool:
    """Whether the inlined frame `body[i]` is one valgrind does not show: GDB gives its program
    counter more frames (the inlined ones, then the outer one) than the DWARF's inline chain
    that valgrind reads has (GDB 13 calls a lambda's body inlined into its enclosing function)."""
    f = body[i]
    first = i
    while first > 0 and body[first - 1].pc == f.pc and body[first - 1].inlined:
        first -= 1
    last = i
    while last + 1 < len(body) and body[last + 1].pc == f.pc:
        last += 1
    n = depth.get((f.module or "", f.offset))
    if n is None:
        # the module cannot be read: a real inline chain's outer frame has the line of the
        # call it inlined, GDB's misnamed one has none (a lambda's body is no inlined code)
        n = 1 if body[last].line is None else last - first + 1
    return i - first < (last - first + 1) - n


@dataclass
class _Patterns:
    cache: dict[str, re.Pattern[str]] = field(default_factory=dict)

    def get(self, pattern: str) -> re.Pattern[str]:
        regex = self.cache.get(pattern)
        if regex is None:
            regex = self.cache[pattern] = valgrind_glob(pattern)
        return regex


_PATTERNS = _Patterns()


def _frame_ok(kind: str, pattern: str, vf: ViewFrame, linkage: dict[Frame, str]) -> bool:
    if kind == "fun":
        names = list(vf.names)
        if vf.frame is not None and vf.frame in linkage:
            names.append(linkage[vf.frame])
        demangled = DEMANGLED.get(pattern)
        regex = _PATTERNS.get(pattern)
        return any(regex.match(n) for n in names) or (demangled is not None
                                                      and demangled in names)
    if kind == "obj":
        if vf.module is None:
            return pattern == "*"
        regex = _PATTERNS.get(pattern)
        return bool(regex.match(vf.module) or regex.match(os.path.realpath(vf.module)))
    # src:FILE or src:FILE:LINE, FILE matched against the source's basename (valgrind's form)
    if vf.file is None:
        return False
    file, _, line = pattern.rpartition(":") if pattern.rpartition(":")[2].isdigit() else (
        pattern, "", "")
    if line and vf.line != int(line):
        return False
    return _PATTERNS.get(file).match(os.path.basename(vf.file)) is not None


def matches(s: Suppression, group: Group, names: StackNames | None = None) -> bool:
    """Does `s` suppress `group` (its kind, and its stack `group.raw`)?"""
    if not s.applies_to_leaks:
        return False
    raw = group.raw or group.stack
    if s.template is not None:
        return any(_lsan_frame(s.template, f) for f in _lsan_frames(raw))
    if s.leak_kinds is not None and group.leak_kind not in s.leak_kinds:
        return False
    names = names or StackNames()
    view = valgrind_view(raw, names.callees, names.ops.get(group.node), names.depth)
    frames = list(s.frames)
    # valgrind 3.19 shows posix_memalign under memalign: when the dump does not say which C
    # function was called, that frame is not in memdump's stack
    if (len(frames) > 1 and frames[1][0] == "fun" and frames[1][1] in _VALGRIND_WRAPPERS
            and view[0].names == _C_ALLOCATORS):
        del frames[1]
    return _match(frames, 0, view, 0, names.linkage)


def _lsan_frame(template: str, f: Frame) -> bool:
    return (lsan_match(template, f.module) or lsan_match(template, public_name(f.function))
            or lsan_match(template, f.file))


def _lsan_frames(raw: Sequence[Frame]) -> Sequence[Frame]:
    """The frames LeakSanitizer's stack has after its allocator's (its interceptor of `malloc`,
    `operator new`, `strdup`... is frame #0, which memdump's stack has not): from the program's
    call on, libc's strdup left out (ASan intercepts it)."""
    start = call_site(raw)
    if start < len(raw) and public_name(raw[start].function) in _STRDUPS:
        start += 1
    return raw[start:]


def _lsan_winner(lsan: Sequence[Suppression], raw: Sequence[Frame]) -> Suppression | None:
    """lsan_common.cpp's GetSuppressionForAddr over the stack, innermost frame first: the
    first suppression matching the frame's module, else the first matching its function or
    source file."""
    for f in _lsan_frames(raw):
        for s in lsan:
            if s.template is not None and lsan_match(s.template, f.module):
                return s
        for s in lsan:
            if s.template is not None and (lsan_match(s.template, public_name(f.function))
                                           or lsan_match(s.template, f.file)):
                return s
    return None


def _match(sup: list[tuple[str, str]], i: int, view: list[ViewFrame], j: int,
           linkage: dict[Frame, str]) -> bool:
    """valgrind's VG_(generic_match): the frames match a prefix of the stack, `...` any run."""
    while i < len(sup):
        kind, pattern = sup[i]
        if kind == "...":
            return any(_match(sup, i + 1, view, k, linkage) for k in range(j, len(view) + 1))
        if j == len(view) or not _frame_ok(kind, pattern, view[j], linkage):
            return False
        i += 1
        j += 1
    return True


#: valgrind's order of loss records of equal size (mc_leakcheck.c, Reachedness)
_KIND_ORDER = {"definite": 0, "indirect": 1, "possible": 2, "reachable": 3}


def _lsan_subtrees(suppressed: list[Group], lsan_won: list[Group]) -> list[Group]:
    """The indirectly lost blocks that the groups LeakSanitizer's entries suppressed lead, as
    groups of their own (a part of a group that other blocks keep): LeakSanitizer checks again
    with the suppressed blocks as roots (lsan_common.cpp, CheckForLeaks), so what they lead is
    no leak, nor counted in its "Suppressions used" table. Those already suppressed stay so."""
    done = set(map(id, suppressed))
    out: list[Group] = []
    for owner in lsan_won:
        for led, nbytes, blocks in owner.leads:
            if id(led) in done:
                continue
            if (nbytes, blocks) == (led.bytes, led.blocks):
                done.add(id(led))
                out.append(led)
                continue
            led.bytes -= nbytes
            led.blocks -= blocks
            out.append(Group(led.kind, nbytes, blocks, led.stack, led.order, led.leak_kind,
                             raw=led.raw, node=led.node))
    return out


def group_names(analysis: Analysis, groups: Sequence[Group]) -> StackNames:
    return stack_names(groups, call_site, analysis.info.get("arch"), analysis.path)


def apply(analysis: Analysis, suppressions: Sequence[Suppression],
          kinds: frozenset[str] | None = None) -> None:
    """Remove from `analysis` the leak groups of `kinds` (None: all; a group of unknown kind
    always) that a suppression matches, as valgrind leaves suppressed loss records out of its
    LEAK SUMMARY, and count them by suppression. valgrind's choice among several matching
    entries is followed: its loss records in order (total size, kind, blocks), its entries
    searched last read first, each that matches moved to the front. LeakSanitizer's entries
    are tried first, in their order."""
    lsan = [s for s in suppressions if s.template is not None]
    # valgrind checks the loss records of `kinds` only; LeakSanitizer reports every block no
    # pointer reaches, definitely or indirectly lost (an interior pointer reaches a block)
    eligible = [g for g in analysis.groups if g.kind == "leak" and (
        kinds is None or g.leak_kind in (None, "unknown") or g.leak_kind in kinds
        or (lsan and g.leak_kind in ("definite", "indirect")))]
    eligible.sort(key=lambda g: (g.total_bytes, _KIND_ORDER.get(g.leak_kind or "", 4), g.blocks,
                                 g.order))
    order = [s for s in reversed(suppressions) if s.template is None and s.applies_to_leaks]
    names = group_names(analysis, eligible) if order else StackNames()
    used: dict[int, list[int]] = {}
    suppressed: list[Group] = []
    lsan_won: list[Group] = []
    for g in eligible:
        winner = _lsan_winner(lsan, g.raw or g.stack) if lsan else None
        if winner is None and (kinds is None or g.leak_kind in (None, "unknown")
                               or g.leak_kind in kinds):
            for n, s in enumerate(order):
                if matches(s, g, names):
                    winner = order.pop(n)
                    order.insert(0, winner)
                    break
        if winner is None:
            continue
        agg = used.setdefault(id(winner), [0, 0, 0])
        agg[0] += 1
        # valgrind's used_suppression: direct and indirect bytes; LeakSanitizer's: the block's
        agg[1] += g.bytes if winner.template is not None else g.total_bytes
        agg[2] += g.blocks
        suppressed.append(g)
        if winner.template is not None:
            lsan_won.append(g)
    suppressed += _lsan_subtrees(suppressed, lsan_won)
    gone = set(map(id, suppressed))
    analysis.groups = [g for g in analysis.groups if id(g) not in gone]
    analysis.suppressed_groups = suppressed
    # LeakSanitizer's in their files' order, then valgrind's as it lists them: its final order
    listed = [*lsan, *order]
    analysis.used_suppressions = [(s.name, s.path, s.line, *used[id(s)]) for s in listed
                                  if id(s) in used]
    analysis.leaked_bytes -= sum(g.bytes for g in suppressed)
    analysis.leaked_blocks -= sum(g.blocks for g in suppressed)
    if analysis.leak_kinds is not None:
        for g in suppressed:
            row = analysis.leak_kinds[g.leak_kind or "unknown"]
            row[0] -= g.bytes
            row[1] -= g.blocks
