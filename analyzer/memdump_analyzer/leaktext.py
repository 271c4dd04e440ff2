"""How the reports show a leak report's pieces: a frame and a stack as text (valgrind's `at` and
`by` lines) and as JSON, the leak kinds' words, the groups a report lists by kind, and the leak
groups numbered as the text report numbers them (`LEAK N of M`).

The leak report (`report.py`) is made of these, and so is what shows its groups or frames beside
it: the difference of two dumps (`diff.py`), the views, SARIF, the HTML page, and the leak site
that `memdump break --leak N --from DUMP` stops at (`leaksite.py`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, NamedTuple

from .dumpfile import Frame
from .dumpformat import KIND_WORDS, KINDS
from .model import Analysis, Group
from .rules import outer_runtime_frames
from .wording import plural

__all__ = [
    "DEFAULT_SHOW_KINDS",
    "FILTERED_KINDS",
    "KIND_NAMES",
    "Section",
    "clean",
    "clean_or_none",
    "frame_key",
    "frame_json",
    "frame_text",
    "numbered_leaks",
    "sections",
    "split_by_kind",
    "stack_json",
    "stack_text",
]

#: leak kind -> valgrind's words for it; "unknown": a block the pointer scan did not see
KIND_NAMES: dict[str, str] = {**KIND_WORDS, "unknown": "not scanned"}
#: the leak kinds a report can leave out (`show_leak_kinds`); "unknown" and None are always listed
FILTERED_KINDS = KINDS
#: the kinds a report lists unless told: valgrind 3.19's default of --show-leak-kinds
DEFAULT_SHOW_KINDS = frozenset(("definite", "possible"))


def clean(text: str) -> str:
    """Text that can be written anywhere: bytes that were not UTF-8 are shown as `\\xNN`."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


def clean_or_none(text: str | None) -> str | None:
    return None if text is None else clean(text)


# -- frames and stacks ---------------------------------------------------------------------------


def frame_text(frame: Frame) -> str:
    """`function (file:line)`, else `function (module+0xoffset)`, `(inlined)` after an inlined
    call's frame; the pc when the function is unknown."""
    name = clean(frame.function) if frame.function is not None else f"0x{frame.pc:x}"
    if frame.file is not None and frame.line is not None:
        text = f"{name} ({clean(os.path.basename(frame.file))}:{frame.line})"
    elif frame.module is not None:
        text = f"{name} ({clean(os.path.basename(frame.module))}+0x{frame.offset:x})"
    else:
        text = name
    return f"{text} (inlined)" if frame.inlined else text


def stack_text(
    stack: Sequence[Frame], max_frames: int | None, fold: bool = False, indent: str = "    "
) -> list[str]:
    """The frames, one a line; `fold`: the outermost run of the runtime's frames as one line."""
    if not stack:
        return [f"{indent}(no stack: it could not be read)"]
    folded = outer_runtime_frames(stack) if fold else 0
    body = stack[: len(stack) - folded]
    shown = body if max_frames is None else body[:max_frames]
    lines = [
        f"{indent}{'at' if i == 0 else 'by'} {frame_text(frame)}" for i, frame in enumerate(shown)
    ]
    if len(shown) < len(body):
        lines.append(f"{indent}... {plural(len(body) - len(shown), 'more frame')}")
    if folded:
        lines.append(
            f"{indent}... {plural(folded, 'frame')} of the C/C++ runtime (--show-runtime-frames)"
        )
    return lines


def frame_key(f: Frame) -> tuple[str, ...]:
    """What matches a frame across runs and stacks: its function and line (module and offset
    when it has no line), not its address."""
    if f.file is not None and f.line:
        return (f.function or "?", os.path.basename(f.file), str(f.line))
    return (f.function or "?", os.path.basename(f.module or "?"), f"+0x{f.offset:x}")


def frame_json(frame: Frame) -> dict[str, Any]:
    """A frame as the JSON reports write it (docs/report-format.md)."""
    return {
        "function": clean_or_none(frame.function),
        "file": clean_or_none(frame.file),
        "line": frame.line,
        "module": clean_or_none(frame.module),
        "pc": f"0x{frame.pc:x}",
        "offset": f"0x{frame.offset:x}",
        "inlined": frame.inlined,
    }


def stack_json(stack: Sequence[Frame], max_frames: int | None) -> list[dict[str, Any]]:
    shown = stack if max_frames is None else stack[:max_frames]
    return [frame_json(f) for f in shown]


# -- the groups a report lists -------------------------------------------------------------------


class Section(NamedTuple):
    """The program's groups (`leak`) or the runtime's (`runtime`), as a report lists them."""

    kind: str
    #: how many groups are listed (those --top leaves out counted)
    listed: int
    shown: Sequence[Group]
    #: left out by --top
    by_top: Sequence[Group]
    #: left out by --show-leak-kinds
    by_kind: list[Group]


def split_by_kind(
    groups: Sequence[Group], kinds: frozenset[str] | None
) -> tuple[list[Group], list[Group]]:
    """The groups listed with `show_leak_kinds=kinds` (None: all), and those left out."""
    if kinds is None:
        return list(groups), []
    listed: list[Group] = []
    hidden: list[Group] = []
    for g in groups:
        if g.leak_kind in FILTERED_KINDS and g.leak_kind not in kinds:
            hidden.append(g)
        else:
            listed.append(g)
    return listed, hidden


def _select(groups: Sequence[Group], top: int | None) -> tuple[Sequence[Group], Sequence[Group]]:
    if top is None or len(groups) <= top:
        return groups, ()
    return groups[:top], groups[top:]


def sections(
    analysis: Analysis, show_runtime: bool, top: int | None, kinds: frozenset[str] | None
) -> list[Section]:
    """The program's groups and, with `show_runtime`, the runtime's (never filtered by kind), in
    the order a report lists them; each section's groups are numbered from 1."""
    out = []
    for kind, groups, filt in (
        ("leak", analysis.leaks, kinds),
        ("runtime", analysis.runtime, None),
    ):
        if kind == "runtime" and not show_runtime:
            continue
        listed, hidden = split_by_kind(groups, filt)
        shown, by_top = _select(listed, top)
        out.append(Section(kind, len(listed), shown, by_top, hidden))
    return out


def numbered_leaks(analysis: Analysis, kinds: frozenset[str] | None = DEFAULT_SHOW_KINDS
                   ) -> list[Group]:
    """The program's leak groups as the text report with `show_leak_kinds=kinds` numbers them:
    `LEAK N` is the list's item N - 1."""
    return list(sections(analysis, False, None, kinds)[0].shown)
