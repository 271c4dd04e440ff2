"""Reports of an `Analysis`: text (like valgrind's) and JSON (docs/report-format.md)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from . import accesserrors, heapcorruption, images, locks, olderblocks
from .dumpfile import Frame
from .leaktext import (
    FILTERED_KINDS,
    KIND_NAMES,
    clean,
    clean_or_none,
    frame_text,
    numbered_leaks,
    sections,
    stack_json,
    stack_text,
)
from .model import Analysis, ErrorReport, Group
from .rules import outer_runtime_frames
from .wording import plural

__all__ = ["REPORT_FORMAT", "REPORT_VERSION", "dumps_json", "render_json", "render_text"]

REPORT_FORMAT = "memdump-report"
REPORT_VERSION = "1.9"

#: `--gen-suppressions`: the suppression text of a listed leak group and its number in the list
SuppressionOf = Callable[[Group, int], str]

_BOLD = "\033[1m"
_RED = "\033[1;31m"
_YELLOW = "\033[33m"
_DIM = "\033[2m"
_RESET = "\033[0m"


def _size(nbytes: int, blocks: int) -> str:
    return f"{plural(nbytes, 'byte')} in {plural(blocks, 'block')}"


def _group_size(g: Group, delta: tuple[int, int] | None = None) -> str:
    """valgrind's `428 (24 direct, 404 indirect) bytes in 1 block` when the group's blocks lead
    indirectly lost ones, else `24 bytes in 1 block`; with DELTA (`memdump leaks --increased`),
    valgrind's `24 (+8) bytes in 1 (+0) block`."""
    if delta is not None:
        return _size_delta(g.total_bytes, g.blocks, delta)
    if not g.indirect_bytes and not g.indirect_blocks:
        return _size(g.bytes, g.blocks)
    return (
        f"{g.total_bytes:,} ({g.bytes:,} direct, {g.indirect_bytes:,} indirect) bytes in "
        f"{plural(g.blocks, 'block')}"
    )


def _size_delta(nbytes: int, blocks: int, delta: tuple[int, int]) -> str:
    return (f"{nbytes:,} ({delta[0]:+,}) bytes in {blocks:,} ({delta[1]:+,}) "
            f"block{'s' if blocks != 1 else ''}")


# -- how the recording ended ---------------------------------------------------------------------


def _ending(analysis: Analysis, live: bool) -> str:
    end = analysis.end
    if end is None:
        if live:
            text = f"the program is still running (event {analysis.last_seq:,})"
        else:
            text = (
                f"stopped early at event {analysis.last_seq:,} ({analysis.cut_by}); "
                "everything up to it was analysed"
            )
    else:
        reason, detail = end.reason, clean(end.detail)
        if reason == "exit":
            text = f"the program exited with code {detail}"
        elif reason == "killed":
            text = f"the program was killed by {detail}"
        elif reason == "detach":
            text = "GDB detached from the program"
        elif reason == "stop":
            text = "recording stopped by 'memdump stop'"
        elif reason == "gdb-exit":
            text = "GDB quit while the program was running"
        else:
            text = f"ended: {clean(reason)} {detail}"
        text += f" (event {end.seq:,})"
    for seq, name in analysis.signals:
        text += f"; fatal signal {clean(name)} at event {seq:,}"
    for seq, path in analysis.execs:
        text += f"; exec of {clean(path)} at event {seq:,} (blocks before it are gone)"
    return text


def _end_json(analysis: Analysis) -> dict[str, Any] | None:
    end = analysis.end
    if end is None:
        return None
    detail: str | int | None = clean(end.detail)
    if end.reason == "exit" and end.detail.lstrip("-").isdigit():
        detail = int(end.detail)
    elif detail == "-":
        detail = None
    return {"reason": clean(end.reason), "detail": detail, "seq": end.seq}


# -- text ----------------------------------------------------------------------------------------


def _site(stack: Sequence[Frame]) -> str:
    return frame_text(stack[0]) if stack else "an unknown stack"


def error_title(e: ErrorReport) -> str:
    """A heap error's sentence: `double free of 0x... (event 3, thread 7): the block was
    already freed` (the text report's ERROR heading; SARIF's message)."""
    where = f"(event {e.seq:,}, thread {e.tid})"
    if e.kind == "double-free":
        return f"double free of 0x{e.pointer:x} {where}: the block was already freed"
    if e.kind == "mismatched-free":  # valgrind's "Mismatched free() / delete / delete []"
        return (f"mismatched {e.op} of 0x{e.pointer:x} {where}: the block was allocated by "
                f"{e.alloc_op}")
    if e.kind == "invalid-free":
        return f"invalid {e.op} of 0x{e.pointer:x} {where}: not a block the program allocated"
    if e.freed_seq is not None:
        return f"invalid {e.op} of 0x{e.pointer:x} {where}: the block was already freed"
    return f"invalid {e.op} of 0x{e.pointer:x} {where}: not a live block"


def render_text(
    analysis: Analysis,
    *,
    show_runtime: bool = False,
    title: str = "memdump report",
    live: bool = False,
    max_frames: int | None = None,
    top: int | None = None,
    color: bool = False,
    show_leak_kinds: frozenset[str] | None = None,
    show_runtime_frames: bool = False,
    suppression_of: SuppressionOf | None = None,
    older_heading: olderblocks.Heading | None = None,
) -> str:
    """The text report. `live`: the program is still running (no end record is expected, and
    its live blocks are labelled LIVE, not LEAK). `show_leak_kinds`: the leak kinds whose groups
    are listed (None: all; groups of unknown kind are always listed); `top`: at most that many
    groups are listed, the largest, of the program's and of the runtime's. The outermost frames of
    the C/C++ runtime (rule `runtime-frame`) are folded into one line unless
    `show_runtime_frames`."""
    fold = not show_runtime_frames

    def paint(code: str, text: str) -> str:
        return f"{code}{text}{_RESET}" if color else text

    a = analysis
    out: list[str] = []
    older_shown = bool(a.older) or older_heading is not None
    program = clean(a.program) if a.program is not None else "an unknown program"
    pid = f" (pid {a.pid})" if a.pid is not None else ""
    out.append(paint(_BOLD, f"{title} for {program}{pid}{images.header_tail(a.images, clean)}"))
    details = []
    if "start" in a.info:
        details.append(f"recorded {clean(a.info['start'])}")
    if "arch" in a.info:
        details.append(clean(a.info["arch"]))
    if "gdb" in a.info:
        details.append(f"GDB {clean(a.info['gdb'])}")
    if "recorder" in a.info:
        details.append(f"{clean(a.info['recorder'])} recorder")
    if a.info.get("depth") == "0":
        details.append("no stacks (depth 0)")
    if "parent" in a.info:  # a child recorded without GDB (`set memdump children on`)
        details.append(f"a child of process {clean(a.info['parent'])}, recorded without GDB")
    elif a.attached:
        details.append("attached to the running program")
    line = f"dump: {clean(a.path)}"
    if details:
        line += f" ({', '.join(details)})"
    out.append(line)
    for note in a.symbol_notes:
        out.append(f"note: {note}")
    for warning in a.warnings(live=live):
        out.append(paint(_YELLOW, f"note: {warning}"))

    leak_word = "LIVE" if live else "LEAK"
    for kind, listed, shown, by_top, by_kind in sections(a, show_runtime, top, show_leak_kinds):
        label, code = (leak_word, _RED) if kind == "leak" else ("RUNTIME", _DIM)
        for i, g in enumerate(shown, 1):
            out.append("")
            delta = a.deltas.get(id(g)) if a.deltas is not None else None
            title = f"{label} {i:,} of {listed:,}: {_group_size(g, delta)}"
            if g.leak_kind is not None:  # live: when `memdump leaks` could scan
                title += f", {KIND_NAMES[g.leak_kind]}"
            title += images.text_tag(a.images, None, clean)  # live blocks: the last image's
            out.append(paint(code, title))
            out.extend(stack_text(g.stack, max_frames, fold))
            if suppression_of is not None and kind == "leak":
                out.extend(suppression_of(g, i).rstrip("\n").split("\n"))
        if by_top:
            out.append("")
            out.append(
                f"... and {plural(len(by_top), 'more ' + label.lower() + ' group')} "
                f"({_size(sum(g.bytes for g in by_top), sum(g.blocks for g in by_top))}) "
                "not shown (--top)"
            )
        if by_kind:
            hidden_kinds = {g.leak_kind for g in by_kind}
            names = [KIND_NAMES[k] for k in FILTERED_KINDS if k in hidden_kinds]
            out.append("")
            out.append(
                f"... and {plural(len(by_kind), 'leak group')} {' or '.join(names)} "
                f"({_size(sum(g.bytes for g in by_kind), sum(g.blocks for g in by_kind))}) "
                "not shown (--show-leak-kinds all lists them)"
            )
    if not a.leaks:
        out.append("")
        if a.deltas is not None:
            out.append("No group of the program changed since the previous memdump leaks.")
        else:
            out.append(olderblocks.NONE_RECORDED.format("live blocks" if live else "leaks")
                       if older_shown else "No live blocks of the program." if live
                       else "No leaks.")

    for i, e in enumerate(a.errors, 1):
        out.append("")
        out.append(paint(_RED, f"ERROR {i:,} of {a.error_count:,}: {error_title(e)}"
                                f"{images.text_tag(a.images, e.seq, clean)}"))
        out.extend(stack_text(e.stack, max_frames, fold))
        if e.freed_stack is not None and e.freed_seq is not None:
            out.append(f"  freed at event {e.freed_seq:,}:")
            out.extend(stack_text(e.freed_stack, max_frames, fold))
        if e.alloc_stack is not None:
            at = f" at event {e.alloc_seq:,}" if e.alloc_seq is not None else ""
            out.append(f"  Address 0x{e.pointer:x} is 0 bytes inside a block of size "
                       f"{e.alloc_size:,} alloc'd by {e.alloc_op}{at}:")
            out.extend(stack_text(e.alloc_stack, max_frames, fold))

    out.extend(accesserrors.text_section(a.access_errors, max_frames, fold, stack_text))
    out.extend(heapcorruption.text_section(a.heap_corruption, max_frames, fold, stack_text))
    out.extend(locks.text_section(a.locks, max_frames, stack_text))
    out.append("")
    out.append(paint(_BOLD, "SUMMARY"))
    rows: list[tuple[str, str]] = []
    leaked_label = "live" if live else "leaked"
    rows.append((leaked_label, _size(a.leaked_bytes, a.leaked_blocks)))
    runtime = _size(a.runtime_bytes, a.runtime_blocks)
    if a.runtime_blocks and not show_runtime:
        runtime += " (the C/C++ runtime's own; --show-runtime lists them)"
    rows.append(("runtime", runtime))
    if not live or a.scan is not None:
        rows.extend(_kind_rows(a))
    if a.suppressed_groups is not None:
        rows.append(("suppressed", _size(*_suppressed(a))))
    calls = ", ".join(f"{op} {n:,}" for op, n in a.calls.items() if n)
    rows.append(("calls", calls or "none"))
    rows.append(("allocations", plural(a.allocations, "block")))
    rows.append(("frees", _frees_text(a)))
    rows.append(("allocated", plural(a.allocated_bytes, "byte")))
    if a.peak_seq is not None:
        peak = (
            f"{_size(a.peak_bytes, a.peak_blocks)} at event {a.peak_seq:,}, "
            f"allocated at {_site(a.peak_stack)}"
        )
    else:
        peak = "0 bytes (nothing was allocated)"
    rows.append(("peak", peak))
    rows.append(("errors", f"{a.error_count:,}"))
    if a.access_errors:
        rows.append(("access errors", f"{len(a.access_errors):,} (caught by a guard page: the "
                                      "heap access errors above)"))
    if a.heap_corruption:
        rows.append(("heap corruption", f"{len(a.heap_corruption):,} (found by red zones: the "
                                        "heap corruption above)"))
    if a.untracked_frees:
        rows.append(
            ("untracked", f"{plural(a.untracked_frees, 'free')} of blocks from before recording")
        )
    if a.runtime_internal_frees:
        rows.append(
            (
                "ignored",
                f"{plural(a.runtime_internal_frees, 'free')} by the C library's thread cache",
            )
        )
    rows.append(("events", f"{a.events:,}"))
    rows.append(("recording", _ending(a, live)))
    if (row := images.text_row(a.images, clean)) is not None:
        rows.append(("images", row))
    width = max(len(k) for k, _ in rows) + 2
    for key, value in rows:
        out.append(f"    {key + ':':<{width}}{value}")
    if a.used_suppressions:
        out.append("")
    for name, path, line, count, nbytes, blocks in a.used_suppressions:
        # valgrind -v's line, word for word ("1 blocks" too: tools compare the two)
        out.append(f"used_suppression: {count:6d} {clean(name)} {clean(path)}:{line} "
                   f"suppressed: {nbytes:,} bytes in {blocks:,} blocks")
    # after a late attach, the blocks from before it, as GDB's `memdump leaks` shows them
    if older_shown:
        heading = older_heading or olderblocks.Heading()
        out += olderblocks.older_text(a.older, show_leak_kinds, top,
                                      len(numbered_leaks(a, show_leak_kinds)) + 1,
                                      title=heading.title, head=heading.head)
    return "\n".join(out) + "\n"


def _suppressed(a: Analysis) -> tuple[int, int]:
    groups = a.suppressed_groups or []
    return sum(g.bytes for g in groups), sum(g.blocks for g in groups)


def _suppressed_json(a: Analysis) -> dict[str, Any] | None:
    if a.suppressed_groups is None:
        return None
    nbytes, blocks = _suppressed(a)
    return {
        "bytes": nbytes,
        "blocks": blocks,
        "suppressions": [
            {"name": clean(name), "file": clean(path), "line": line, "count": count,
             "bytes": b, "blocks": n}
            for name, path, line, count, b, n in a.used_suppressions
        ],
    }


def _frees_text(a: Analysis) -> str:
    """`N blocks`, and why that is not the count of `free` calls when it is not: the calls that
    released no block (free(NULL), the runtime's own frees, errors, blocks from before an attached
    recording) and the blocks released by delete and realloc, from the replay's figures."""
    text = plural(a.frees, "block")
    calls = a.calls.get("free", 0)
    fc = a.free_calls
    by_free = fc.get("released", a.frees)
    by_realloc = a.frees - by_free - a.delete_frees
    notes = []
    if calls != by_free:
        why = []
        for key, one, many in (
            ("null", "freed NULL", "freed NULL"),
            ("runtime", "freed the C/C++ runtime's own memory",
             "freed the C/C++ runtime's own memory"),
            ("errors", "was an invalid or double free", "were invalid or double frees"),
            ("untracked", "freed a block from before the recording",
             "freed blocks from before the recording"),
        ):
            n = fc.get(key, 0)
            if n:
                why.append(f"{n:,} {one if n == 1 else many}")
        note = f"{by_free:,} of the {plural(calls, 'free call')} released blocks"
        notes.append(note + (f"; {', '.join(why)}" if why else ""))
    elif by_realloc or a.delete_frees:
        notes.append(f"{by_free:,} by free")
    if a.delete_frees:
        names = " and ".join(op for op in ("delete", "delete[]") if a.calls.get(op))
        notes.append(f"{a.delete_frees:,} by {names}")
    if by_realloc:
        names = " and ".join(op for op in ("realloc", "reallocarray") if a.calls.get(op))
        notes.append(f"{by_realloc:,} by {names or 'realloc'}")
    return f"{text} ({'; '.join(notes)})" if notes else text


def _kind_rows(a: Analysis) -> list[tuple[str, str]]:
    """valgrind's LEAK SUMMARY lines for the leaked blocks, or why they are unknown."""
    if a.leak_kinds is None:
        if a.scan is None and "parent" in a.info:
            why = "no pointer scan (recorded without GDB)"
        elif a.scan is None:
            why = "no pointer scan (the program did not reach _exit while recorded)"
        elif a.scan.line == 0:  # made now, on the live process (memdump leaks)
            why = "the pointer scan did not complete"
        else:
            why = "the pointer scan at exit did not complete"
        return [("leak kinds", f"unknown: {why}")]
    rows = []
    for kind, (nbytes, blocks) in a.leak_kinds.items():
        if kind != "unknown" or blocks:
            delta = a.kind_deltas.get(kind) if a.kind_deltas is not None else None
            size = _size(nbytes, blocks) if delta is None else _size_delta(nbytes, blocks, delta)
            rows.append((KIND_NAMES[kind], size))
    return rows


def _scan_json(a: Analysis) -> dict[str, Any] | None:
    if a.scan is None:
        return None
    return {
        "status": clean(a.scan.status),
        "after_seq": a.scan.after,
        "root_bytes": a.scan.root_bytes,
        "block_bytes": a.scan.block_bytes,
        "ms": a.scan.millis,
    }


# -- JSON ----------------------------------------------------------------------------------------


def render_json(
    analysis: Analysis,
    *,
    show_runtime: bool = False,
    live: bool = False,
    max_frames: int | None = None,
    top: int | None = None,
    show_leak_kinds: frozenset[str] | None = None,
    suppression_of: SuppressionOf | None = None,
    older_heading: olderblocks.Heading | None = None,
) -> dict[str, Any]:
    """The JSON report as a dict (serialise it with `dumps_json`); the options are
    `render_text`'s, and `leaks` lists the groups the text report lists."""
    a = analysis
    listed = sections(a, show_runtime, top, show_leak_kinds)
    left_out = [g for kind, _, _, by_top, by_kind in listed if kind == "leak"
                for g in (*by_top, *by_kind)]
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "dump": clean(a.path),
        "program": clean_or_none(a.program),
        "pid": a.pid,
        "complete": a.complete,
        "end": _end_json(a),
        "summary": {
            "leaked": {"bytes": a.leaked_bytes, "blocks": a.leaked_blocks},
            "runtime": {"bytes": a.runtime_bytes, "blocks": a.runtime_blocks},
            "leak_kinds": None
            if a.leak_kinds is None
            else {k: {"bytes": b, "blocks": n} for k, (b, n) in a.leak_kinds.items()},
            "scan": _scan_json(a),
            "allocations": a.allocations,
            "frees": a.frees,
            "allocated_bytes": a.allocated_bytes,
            "peak": {
                "bytes": a.peak_bytes,
                "blocks": a.peak_blocks,
                "seq": a.peak_seq,
                "stack": stack_json(a.peak_stack, max_frames),
            },
            "errors": a.error_count,
            "events": a.events,
            "calls": dict(a.calls),
            "untracked_frees": a.untracked_frees,
            "runtime_internal_frees": a.runtime_internal_frees,
            "free_calls": dict(a.free_calls),
            **({"custom": dict(a.custom)} if a.custom is not None else {}),
        },
        "leaks": [
            {
                "kind": g.kind,
                "leak_kind": g.leak_kind,
                "bytes": g.bytes,
                "blocks": g.blocks,
                "direct_bytes": g.bytes,
                "indirect_bytes": g.indirect_bytes,
                "indirect_blocks": g.indirect_blocks,
                "runtime_frames": outer_runtime_frames(g.stack),
                "stack": stack_json(g.stack, max_frames),
                **({"suppression": suppression_of(g, i)}
                   if suppression_of is not None and kind == "leak" else {}),
                **({"delta": dict(zip(("bytes", "blocks"), a.deltas[id(g)], strict=True))}
                   if a.deltas is not None and id(g) in a.deltas else {}),
                **({"image": a.images[-1].number} if len(a.images) > 1 else {}),
            }
            for kind, _, shown, _, _ in listed
            for i, g in enumerate(shown, 1)
        ],
        "suppressed": _suppressed_json(a),
        "not_shown": {
            "groups": len(left_out),
            "bytes": sum(g.bytes for g in left_out),
            "blocks": sum(g.blocks for g in left_out),
        },
        "errors": [
            {
                "kind": e.kind,
                "op": e.op,
                "seq": e.seq,
                "tid": e.tid,
                "pointer": f"0x{e.pointer:x}",
                "stack": stack_json(e.stack, max_frames),
                "freed_at": None
                if e.freed_stack is None
                else {"seq": e.freed_seq, "stack": stack_json(e.freed_stack, max_frames)},
                "allocated_at": None
                if e.alloc_stack is None
                else {"op": e.alloc_op, "seq": e.alloc_seq, "bytes": e.alloc_size,
                      "stack": stack_json(e.alloc_stack, max_frames)},
                **({"image": images.image_of(a.images, e.seq).number}
                   if len(a.images) > 1 else {}),
            }
            for e in a.errors
        ] + accesserrors.json_rows(a.access_errors, max_frames, stack_json)
        + heapcorruption.json_errors(a.heap_corruption, max_frames, stack_json),
        "symbolized_frames": a.symbolized_frames,
        "warnings": [clean(w) for w in a.warnings(live=live)],
        **locks.json_section(a.locks, max_frames, stack_json),
        **images.json_section(a.images),
        **olderblocks.json_section(a.older, show_leak_kinds, top,
                                   len(numbered_leaks(a, show_leak_kinds)) + 1, older_heading),
    }


def dumps_json(report: dict[str, Any]) -> str:
    """The JSON text of a report: keys sorted, indent 2, ending with a newline."""
    return json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
