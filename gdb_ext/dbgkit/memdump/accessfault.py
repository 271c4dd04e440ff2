"""Guard pages from GDB (docs/heap-errors.md): the SPEC memdump writes into the in-process
recorder's control block (`memdump --guard SPEC`, `set memdump guard SPEC`), checked here as
the recorder's guard.c parses it, so that a bad one is refused before the program runs."""

from __future__ import annotations

import re

import gdb

from .. import settings
from ..core.recorder import GUARD_MAX, GUARD_OFFSET, Control
from .checks import CMD

__all__ = ["check_spec", "check_spec_setting", "write_spec"]

_SIZES = re.compile(r"(\d{1,18})-(\d{1,18})")
_TERMS = "all, N%, MIN-MAX, under, over, align16 or tag:NAME"


def check_spec(spec: str) -> str:
    """SPEC as given, or gdb.GdbError naming its first bad term (guard.c's words)."""
    def bad(term: str, why: str) -> gdb.GdbError:
        return gdb.GdbError(f"{CMD}: --guard {spec}: '{term}': {why}")

    if not spec:
        raise gdb.GdbError(f"{CMD}: --guard needs a SPEC, not an empty one (help memdump)")
    if len(spec.encode()) >= GUARD_MAX:
        raise gdb.GdbError(f"{CMD}: --guard: the SPEC is longer than {GUARD_MAX - 1} bytes")
    seen: dict[str, str] = {}
    for term in spec.split(","):
        if not term:
            raise gdb.GdbError(f"{CMD}: --guard {spec}: an empty term")
        sizes = _SIZES.fullmatch(term)
        if term == "all" or term.endswith("%"):
            kind, what = "share", "a second share (all or N%)"
            if term != "all" and not (term[:-1].isdigit() and 1 <= int(term[:-1]) <= 100):
                raise bad(term, "a share is 1% to 100%")
        elif sizes is not None:
            kind, what = "size", "a second size range"
            if int(sizes[1]) > int(sizes[2]):
                raise bad(term, "MIN is larger than MAX")
        elif term in ("under", "over"):
            kind, what = "side", "a second side (under or over)"
        elif term.startswith("tag:") and len(term) > 4:
            kind, what = "tag", "a second tag"
        elif term == "align16":
            continue
        else:
            raise gdb.GdbError(f"{CMD}: --guard {spec}: '{term}' is not {_TERMS}")
        if kind in seen:
            raise bad(term, what)
        seen[kind] = term
    return spec


def check_spec_setting() -> str:
    """`set memdump guard`'s SPEC, checked ("" when it is empty)."""
    spec = str(settings.get("guard") or "")
    return check_spec(spec) if spec else ""


def write_spec(control: Control, spec: str) -> None:
    """SPEC into the control block's `guard` (the recorder reads it when it starts recording);
    an empty SPEC leaves it empty (MEMDUMP_GUARD, when set, then chooses)."""
    data = spec.encode()
    if data:
        control.write_raw(GUARD_OFFSET, data + b"\0")
