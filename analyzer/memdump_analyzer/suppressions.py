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
(`operator new`, `strdup` in libc, or the program), and the dump does not say which C allocation
function was called (a `+` record is any of them): `valgrind_view` rebuilds valgrind's stack with an
*allocation slot* first, which matches every name the call could have had (docs/memdump.md,
"Leaks in CI").
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .dumpfile import Frame
from .dumpformat import KINDS, public_name
from .model import Analysis, Group
from .symbolize import TOOL, AddrLineError, addr2line

__all__ = [
    "Suppression",
    "SuppressionError",
    "ViewFrame",
    "apply",
    "load",
    "load_all",
    "lsan_match",
    "matches",
    "valgrind_glob",
    "valgrind_view",
]

#: valgrind 3.19's largest number of frames in a suppression (VG_MAX_SUPP_CALLERS)
MAX_FRAMES = 24

_C_ALLOCATORS = ("malloc", "calloc", "realloc", "reallocarray", "memalign", "posix_memalign",
                 "aligned_alloc", "valloc", "pvalloc")
#: a second frame valgrind 3.19 shows under its replacement: `memalign` then `posix_memalign`
_VALGRIND_WRAPPERS = ("posix_memalign", "reallocarray")
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


class SuppressionError(Exception):
    """A suppression file that cannot be read: `FILE:LINE: problem`."""


@dataclass(frozen=True)
class Suppression:
    name: str
    path: str
    line: int
    #: `Memcheck:Leak`, `Memcheck:Free`...; `leak` for LeakSanitizer's
    kind: str
    #: match-leak-kinds; None: every kind
    leak_kinds: frozenset[str] | None = None
    #: ("fun"|"obj"|"src"|"...", pattern), innermost first
    frames: tuple[tuple[str, str], ...] = ()
    #: LeakSanitizer's template
    template: str | None = None

    @property
    def applies_to_leaks(self) -> bool:
        return self.kind in ("leak", "Leak") or self.kind.endswith(":Leak")


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


# -- reading ---------------------------------------------------------------------------------------


def load_all(paths: Iterable[str]) -> list[Suppression]:
    out: list[Suppression] = []
    for path in paths:
        out.extend(load(path))
    _demangle_patterns(out)
    return out


def load(path: str) -> list[Suppression]:
    """The suppressions of one file, valgrind's or LeakSanitizer's (told by its first line that is
    not blank nor a comment: `{` is valgrind's). Raises SuppressionError."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError as e:
        why = e.strerror or str(e)
        raise SuppressionError(f"{path}: cannot read the suppressions ({why})") from None
    for text in lines:
        text = text.strip()
        if text and not text.startswith("#"):
            return _valgrind(path, lines) if text == "{" else _lsan(path, lines)
    return []


def _lsan(path: str, lines: list[str]) -> list[Suppression]:
    out = []
    for number, text in enumerate(lines, 1):
        text = text.strip()
        if not text or text.startswith("#"):
            continue
        kind, colon, template = text.partition(":")
        if not colon:
            raise SuppressionError(f"{path}:{number}: '{text}' is not TYPE:PATTERN (leak:PATTERN)")
        if kind != "leak":
            raise SuppressionError(
                f"{path}:{number}: suppression type '{kind}' is not LeakSanitizer's (leak:PATTERN)")
        if not template:
            raise SuppressionError(f"{path}:{number}: leak: without a pattern")
        out.append(Suppression(template, path, number, "leak", template=template))
    return out


def _valgrind(path: str, lines: list[str]) -> list[Suppression]:
    out = []
    rows = [(n, t.strip()) for n, t in enumerate(lines, 1)]
    rows = [(n, t) for n, t in rows if t and not t.startswith("#")]
    i = 0
    while i < len(rows):
        number, text = rows[i]
        if text != "{":
            raise SuppressionError(f"{path}:{number}: expected '{{' to start a suppression, "
                                   f"not '{text}'")
        body: list[tuple[int, str]] = []
        i += 1
        while i < len(rows) and rows[i][1] != "}":
            if rows[i][1] == "{":
                raise SuppressionError(f"{path}:{rows[i][0]}: '{{' inside a suppression "
                                       "(a '}' is missing before it)")
            body.append(rows[i])
            i += 1
        if i == len(rows):
            raise SuppressionError(f"{path}:{number}: the suppression has no closing '}}'")
        out.append(_entry(path, rows[i][0], body))
        i += 1
    return out


def _entry(path: str, end: int, body: list[tuple[int, str]]) -> Suppression:
    if len(body) < 2:
        raise SuppressionError(f"{path}:{end}: a suppression needs a name, TOOL:KIND and frames")
    (name_line, name), (kind_line, kind) = body[0], body[1]
    tool, colon, what = kind.partition(":")
    if not colon or not tool or not what or " " in kind:
        raise SuppressionError(f"{path}:{kind_line}: '{kind}' is not TOOL:KIND (Memcheck:Leak)")
    leak = what == "Leak" and "Memcheck" in tool.split(",")
    leak_kinds = None
    frames: list[tuple[str, str]] = []
    for number, text in body[2:]:
        if text.startswith("match-leak-kinds:") and not frames and leak:
            try:
                leak_kinds = _kinds(text.partition(":")[2])
            except ValueError as e:
                raise SuppressionError(f"{path}:{number}: match-leak-kinds: {e}") from None
        elif text == "...":
            frames.append(("...", ""))
        elif text.startswith(("fun:", "obj:", "src:")):
            frames.append((text[:3], text[4:]))
        elif frames or leak:
            raise SuppressionError(f"{path}:{number}: '{text}' is not a frame (fun:, obj:, src: "
                                   "or ...)")
        # else: an extra line of another tool's kind (Memcheck:Param's syscall name...)
    if not frames:
        raise SuppressionError(f"{path}:{end}: the suppression '{name}' has no frames")
    if len(frames) > MAX_FRAMES:
        raise SuppressionError(f"{path}:{end}: more than {MAX_FRAMES} frames (valgrind's limit)")
    # valgrind's used_suppression names the line of the name
    return Suppression(name, path, name_line, kind if not leak else "Memcheck:Leak", leak_kinds,
                       tuple(frames))


def _kinds(text: str) -> frozenset[str]:
    words = [w.strip() for w in text.split(",")]
    if words == ["all"]:
        return frozenset(KINDS)
    if words == ["none"]:
        return frozenset()
    names = {"definite": "definite", "indirect": "indirect", "possible": "possible",
             "reachable": "reachable"}
    bad = [w for w in words if w not in names]
    if bad:
        raise ValueError(f"unknown leak kind '{bad[0]}' (definite, indirect, possible, "
                         "reachable, comma-separated; or all, none)")
    return frozenset(words)


_DEMANGLED: dict[str, str] = {}


def _demangle_patterns(suppressions: Sequence[Suppression]) -> None:
    """c++filt's demangling of the mangled `fun:` names without globs: matched against GDB's
    names of the frames whose linkage name addr2line cannot give (a module that is gone)."""
    names = sorted({p for s in suppressions for k, p in s.frames
                    if k == "fun" and p.startswith("_Z") and not _has_glob(p)} - set(_DEMANGLED))
    program = shutil.which("c++filt")
    if not names or program is None:
        return
    try:
        run = subprocess.run([program], input="\n".join(names) + "\n", capture_output=True,
                             text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return
    lines = run.stdout.splitlines()
    if run.returncode == 0 and len(lines) == len(names):
        _DEMANGLED.update((n, d) for n, d in zip(names, lines, strict=True) if d != n)


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


def valgrind_view(raw: Sequence[Frame]) -> list[ViewFrame]:
    """The stack valgrind matches for a block allocated at `raw` (a memdump stack, innermost
    first): the allocation slot, then the frames from the allocator's caller to `main` (or to
    the thread's outermost frame)."""
    start = 0
    new_name = None
    while start < len(raw):
        name = public_name(raw[start].function)
        if name is None or name in _STRDUPS or not _ALLOCATOR_FRAME.match(name):
            break
        if name.startswith(("operator new", "_Zn")):
            new_name = name
        start += 1
    if new_name is not None:
        slot = _new_names(new_name)
    elif start < len(raw) and public_name(raw[start].function) in _STRDUPS:
        slot = ("malloc",)
    else:
        slot = _C_ALLOCATORS
    view = [ViewFrame(slot, slot=True)]
    body = raw[start:]
    end = len(body)
    for i in range(len(body) - 1, -1, -1):
        if public_name(body[i].function) in ("main", "main()"):
            end = i + 1
            break
    for f in body[:end]:
        view.append(ViewFrame(_names(f), f.module, f.file, f.line, frame=f))
    return view


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
        demangled = _DEMANGLED.get(pattern)
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


def matches(s: Suppression, group: Group, linkage: dict[Frame, str] | None = None) -> bool:
    """Does `s` suppress `group` (its kind, and its stack `group.raw`)?"""
    if not s.applies_to_leaks:
        return False
    raw = group.raw or group.stack
    if s.template is not None:
        return any(lsan_match(s.template, public_name(f.function)) or lsan_match(
            s.template, f.module) or lsan_match(s.template, f.file) for f in raw)
    if s.leak_kinds is not None and group.leak_kind not in s.leak_kinds:
        return False
    view = valgrind_view(raw)
    frames = list(s.frames)
    # valgrind 3.19 shows posix_memalign under memalign, reallocarray under realloc: a frame
    # memdump's stack has not (the dump's stack starts at the program's call)
    if (len(frames) > 1 and frames[1][0] == "fun" and frames[1][1] in _VALGRIND_WRAPPERS
            and view[0].names == _C_ALLOCATORS):
        del frames[1]
    return _match(frames, 0, view, 0, linkage or {})


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


def linkage_names(groups: Iterable[Group], program: str = TOOL) -> dict[Frame, str]:
    """The linkage (mangled) names of the groups' frames, from their modules with addr2line:
    what valgrind's `fun:` lines name. Frames whose module cannot be read have none."""
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


def apply(analysis: Analysis, suppressions: Sequence[Suppression]) -> None:
    """Remove from `analysis` the leak groups a suppression matches (the first that does), as
    valgrind leaves suppressed loss records out of its LEAK SUMMARY; count them by suppression."""
    leaks = [g for g in analysis.groups if g.kind == "leak"]
    linkage = linkage_names(leaks) if any(
        k == "fun" for s in suppressions for k, _ in s.frames) else {}
    used: dict[int, list[int]] = {}
    suppressed: list[Group] = []
    for g in leaks:
        for n, s in enumerate(suppressions):
            if matches(s, g, linkage):
                agg = used.setdefault(n, [0, 0, 0])
                agg[0] += 1
                agg[1] += g.bytes
                agg[2] += g.blocks
                suppressed.append(g)
                break
    gone = set(map(id, suppressed))
    analysis.groups = [g for g in analysis.groups if id(g) not in gone]
    analysis.suppressed_groups = suppressed
    analysis.used_suppressions = [
        (suppressions[n].name, suppressions[n].path, suppressions[n].line, *agg)
        for n, agg in sorted(used.items(), key=lambda item: (-item[1][0], item[0]))
    ]
    analysis.leaked_bytes -= sum(g.bytes for g in suppressed)
    analysis.leaked_blocks -= sum(g.blocks for g in suppressed)
    if analysis.leak_kinds is not None:
        for g in suppressed:
            row = analysis.leak_kinds[g.leak_kind or "unknown"]
            row[0] -= g.bytes
            row[1] -= g.blocks
