"""Suppression files, valgrind's and LeakSanitizer's, read into `Suppression` entries with
`FILE:LINE: problem` errors; what they match is suppressions.py's.

valgrind's format (its manual, "Suppressing errors"): entries `{ NAME / TOOL:KIND / extra lines /
frames }`; for `Memcheck:Leak` an optional `match-leak-kinds: LIST` line, then frames `fun:GLOB`,
`obj:GLOB`, `src:FILE[:LINE]` and `...`, innermost first, at most valgrind's 24. Entries of other
kinds (`Memcheck:Free`, `Memcheck:Param`...) are read, with their extra lines.

LeakSanitizer's format (compiler-rt's sanitizer_suppressions.cpp): lines `leak:TEMPLATE`, `#`
comments.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .dumpformat import KINDS

__all__ = ["DEMANGLED", "MAX_FRAMES", "Suppression", "SuppressionError", "load", "load_all"]

#: valgrind 3.19's largest number of frames in a suppression (VG_MAX_SUPP_CALLERS)
MAX_FRAMES = 24


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


#: a mangled `fun:` name of the files read -> its demangling (c++filt's)
DEMANGLED: dict[str, str] = {}


def _demangle_patterns(suppressions: Sequence[Suppression]) -> None:
    """c++filt's demangling of the mangled `fun:` names without globs: matched against GDB's
    names of the frames whose linkage name addr2line cannot give (a module that is gone)."""
    names = sorted({p for s in suppressions for k, p in s.frames
                    if k == "fun" and p.startswith("_Z") and "*" not in p and "?" not in p}
                   - set(DEMANGLED))
    program = shutil.which("c++filt")
    if not names or program is None:
        return
    import subprocess  # noqa: PLC0415 - only for suppression files with mangled names

    try:
        run = subprocess.run([program], input="\n".join(names) + "\n", capture_output=True,
                             text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return
    lines = run.stdout.splitlines()
    if run.returncode == 0 and len(lines) == len(names):
        DEMANGLED.update((n, d) for n, d in zip(names, lines, strict=True) if d != n)
