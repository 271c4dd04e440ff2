"""`--format sarif`: the leak groups and heap errors as SARIF 2.1.0 (OASIS), for code scanning
(GitHub).

One result per leak group the report lists, one rule per leak kind; the result's location is the
top frame of the program's own code (not the allocator's, trimmed already, nor the runtime's, rule
`runtime-frame`), the whole stack a code flow, and `partialFingerprints` a hash of the stack's
functions and file:line (no address), equal for two runs of the same program. The access errors
guard pages caught and the heap corruption red zones found follow, one error result each, under
rules of their own listed only when the dump has any.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Any

from . import __version__
from .accesserrors import BlockEvent
from .accesserrors import describe as describe_access
from .dumpfile import Frame
from .heapcorruption import KINDS, describe, found_text
from .leaktext import KIND_NAMES, split_by_kind
from .model import Analysis, Group
from .rules import is_runtime_frame

__all__ = ["FINGERPRINT", "RULES", "SARIF_SCHEMA", "fingerprint", "render_sarif", "user_frame"]

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
#: the partialFingerprints key (versioned: a change of the hash is a new key)
FINGERPRINT = "memdumpStack/v1"

#: leak kind -> (rule id, name, help); "unknown": no scan, or allocated after it
RULES: dict[str, tuple[str, str, str]] = {
    "definite": ("memdump/definitely-lost", "DefinitelyLost",
                 "No pointer to the block was found at exit: the program lost it. Free it on "
                 "every path, or keep a pointer to it."),
    "indirect": ("memdump/indirectly-lost", "IndirectlyLost",
                 "The block is pointed to only from lost blocks: freeing the definitely lost "
                 "block that owns it (and its contents) fixes it."),
    "possible": ("memdump/possibly-lost", "PossiblyLost",
                 "Only a pointer into the middle of the block was found at exit: the program "
                 "probably lost its start."),
    "reachable": ("memdump/still-reachable", "StillReachable",
                  "A pointer to the block was still held at exit: the program could have freed "
                  "it."),
    "unknown": ("memdump/leak", "Leak",
                "The block was still allocated at exit; its leak kind is unknown (the dump has "
                "no pointer scan, or the block was allocated after it)."),
}


def _kind(g: Group) -> str:
    return g.leak_kind if g.leak_kind in RULES else "unknown"


def user_frame(stack: Sequence[Frame]) -> Frame | None:
    """The top frame of the program's own code with a source line; else the top one with one."""
    with_line = [f for f in stack if f.file is not None and f.line]
    for f in with_line:
        if not is_runtime_frame(f):
            return f
    return with_line[0] if with_line else None


def fingerprint(g: Group) -> str:
    """sha256 of the kind and each frame's function and file:line (its module when it has no
    line; module and offset when it has no function either), innermost first: no address, so
    equal across runs."""
    return _stack_hash(_kind(g), g.stack)


def _stack_hash(kind: str, stack: Sequence[Frame]) -> str:
    parts = [kind]
    for f in stack:
        if f.file is not None and f.line:
            where = f"{os.path.basename(f.file)}:{f.line}"
        elif f.function is not None:  # a library's function: its module, not the offset
            where = os.path.basename(f.module or "?")
        else:
            where = f"{os.path.basename(f.module or '?')}+0x{f.offset:x}"
        parts.append(f"{f.function or '?'}@{where}")
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _uri(path: str, root: str) -> dict[str, str]:
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute, root)
    if not relative.startswith(os.pardir + os.sep) and relative != os.pardir:
        return {"uri": relative.replace(os.sep, "/"), "uriBaseId": "%SRCROOT%"}
    return {"uri": "file://" + absolute}


def _location(f: Frame, root: str, text: str | None = None) -> dict[str, Any]:
    name = f.function or f"0x{f.pc:x}"
    loc: dict[str, Any] = {"message": {"text": text or name}}
    if f.file is not None and f.line:
        loc["physicalLocation"] = {"artifactLocation": _uri(f.file, root),
                                   "region": {"startLine": f.line}}
    loc["logicalLocations"] = [{"fullyQualifiedName": name, "kind": "function"}]
    return loc


def _size(g: Group) -> str:
    blocks = f"{g.blocks:,} block{'s' if g.blocks != 1 else ''}"
    if g.indirect_bytes:
        return (f"{g.total_bytes:,} ({g.bytes:,} direct, {g.indirect_bytes:,} indirect) bytes "
                f"in {blocks}")
    return f"{g.bytes:,} byte{'s' if g.bytes != 1 else ''} in {blocks}"


def _result(g: Group, error_kinds: frozenset[str], rule_index: dict[str, int],
            root: str) -> dict[str, Any]:
    kind = _kind(g)
    if kind in error_kinds or kind == "unknown":
        level = "error"
    elif kind == "reachable":
        level = "note"
    else:
        level = "warning"
    top = user_frame(g.stack)
    state = KIND_NAMES[kind] if kind != "unknown" else "still allocated at exit"
    where = ""
    if top is not None:
        where = f", allocated in {top.function or 'an unknown function'} " \
                f"({os.path.basename(top.file or '')}:{top.line})"
    result: dict[str, Any] = {
        "ruleId": RULES[kind][0],
        "ruleIndex": rule_index[kind],
        "level": level,
        "message": {"text": f"{_size(g)} {'is' if g.blocks == 1 else 'are'} {state}{where}"},
        "partialFingerprints": {FINGERPRINT: fingerprint(g)},
        "properties": {"bytes": g.bytes, "blocks": g.blocks, "indirectBytes": g.indirect_bytes,
                       "indirectBlocks": g.indirect_blocks, "leakKind": kind},
    }
    if top is not None:
        result["locations"] = [_location(top, root)]
    if g.stack:
        result["codeFlows"] = [_code_flow(g.stack, root, "the allocation's stack")]
    return result


def _code_flow(stack: Sequence[Frame], root: str, text: str) -> dict[str, Any]:
    """A stack as a code flow, run as the program did: the outermost frame first, the innermost
    (the allocation, the free, the faulting access) last."""
    flow = [{"location": _location(f, root), "nestingLevel": depth}
            for depth, f in enumerate(reversed(stack))]
    return {"message": {"text": text}, "threadFlows": [{"locations": flow}]}


def _rules(table: dict[str, tuple[str, str, str]], kinds: Sequence[str],
           words: dict[str, str]) -> list[dict[str, Any]]:
    """The error rules of `kinds` (their rows of `table`), `words` their short descriptions."""
    return [{"id": table[k][0], "name": table[k][1],
             "shortDescription": {"text": words[k]},
             "fullDescription": {"text": table[k][2]},
             "help": {"text": table[k][2]},
             "defaultConfiguration": {"level": "error"}} for k in kinds]


#: heap corruption's kind (red zones, heapcorruption.py) -> (rule id, name, help)
CORRUPTION_RULES: dict[str, tuple[str, str, str]] = {
    "overrun": ("memdump/heap-block-overrun", "HeapBlockOverrun",
                "Bytes after the block's end were written (its red zone changed): a write past "
                "the end of the block, found at its free, at exit or by memdump check-heap."),
    "underrun": ("memdump/heap-block-underrun", "HeapBlockUnderrun",
                 "Bytes before the block's start were written (its red zone changed)."),
    "freed": ("memdump/write-after-free", "WriteAfterFree",
              "The block was written after its free, while it waited in the quarantine."),
}


def _corruption_results(analysis: Analysis, root: str, first_index: int,
                        ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rules of the heap corruption kinds the analysis has (none without any: the log of a
    dump without red zones is as before) and one error result each, located at the free that
    found it, else at the block's free, else at its allocation."""
    kinds = [k for k in CORRUPTION_RULES if any(r.error.kind == k
                                                for r in analysis.heap_corruption)]
    index = {k: first_index + i for i, k in enumerate(kinds)}
    rules = _rules(CORRUPTION_RULES, kinds, {k: KINDS[k].capitalize() for k in kinds})
    results = []
    for row in analysis.heap_corruption:
        e = row.error
        event = row.found or row.free or row.alloc
        top = user_frame(event.stack) if event is not None else None
        alloc = row.alloc.stack if row.alloc is not None else []
        result: dict[str, Any] = {
            "ruleId": CORRUPTION_RULES[e.kind][0], "ruleIndex": index[e.kind], "level": "error",
            "message": {"text": f"{describe(e)}, {found_text(row)}"},
            "partialFingerprints": {FINGERPRINT: _stack_hash(e.kind, alloc)},
            "properties": {"block": f"0x{e.block:x}", "bytes": e.size, "offset": e.offset,
                           "changed": e.bytes, "found": e.found},
        }
        if top is not None:
            result["locations"] = [_location(top, root)]
        if alloc:
            result["codeFlows"] = [_code_flow(alloc, root, "the block's allocation")]
        results.append(result)
    return rules, results


#: an access error's access (guard pages, accesserrors.py) -> (rule id, name, help)
ACCESS_RULES: dict[str, tuple[str, str, str]] = {
    "read": ("memdump/invalid-read", "InvalidRead",
             "The program read memory outside a heap block, or inside a freed one: a guard page "
             "caught the access as it happened."),
    "write": ("memdump/invalid-write", "InvalidWrite",
              "The program wrote memory outside a heap block, or inside a freed one: a guard "
              "page caught the access as it happened."),
}


def _error_result(rule: tuple[str, int], message: str, kind: str, stack: Sequence[Frame],
                  properties: dict[str, Any], events: Sequence[tuple[str, Sequence[Frame]]],
                  root: str, flow_text: str) -> dict[str, Any]:
    """A heap error's result: located at `stack`'s top frame of the program's code, each of
    `events` (text, stack: the block's free, allocation...) a related location, every stack a
    code flow; its fingerprint the kind and `stack` (no address)."""
    result: dict[str, Any] = {
        "ruleId": rule[0], "ruleIndex": rule[1], "level": "error",
        "message": {"text": message},
        "partialFingerprints": {FINGERPRINT: _stack_hash(kind, stack)},
        "properties": properties,
    }
    top = user_frame(stack)
    if top is not None:
        result["locations"] = [_location(top, root)]
    flows = [_code_flow(stack, root, flow_text)] if stack else []
    related = []
    for text, event in events:
        if not event:
            continue
        flows.append(_code_flow(event, root, text))
        frame = user_frame(event)
        if frame is not None:
            related.append({"id": len(related), **_location(frame, root, text.split(" (")[0])})
    if related:
        result["relatedLocations"] = related
    if flows:
        result["codeFlows"] = flows
    return result


def _at(text: str, event: BlockEvent | None) -> tuple[str, Sequence[Frame]]:
    if event is None:
        return text, []
    return f"{text} ({event.op}, event {event.seq})", event.stack


def _access_results(analysis: Analysis, root: str, first_index: int,
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rules of the access kinds the analysis has (none without any) and one error result
    each: located at the faulting access (its top frame of the program's code), the block's
    free and allocation its related locations, the three stacks its code flows."""
    kinds = [k for k in ACCESS_RULES if any(r.error.access == k for r in analysis.access_errors)]
    index = {k: first_index + i for i, k in enumerate(kinds)}
    rules = _rules(ACCESS_RULES, kinds, {"read": "Invalid read", "write": "Invalid write"})
    results = []
    for row in analysis.access_errors:
        e = row.error
        what, where = describe_access(e)
        results.append(_error_result(
            (ACCESS_RULES[e.access][0], index[e.access]), f"{what}: {where}",
            f"invalid-{e.access}", row.stack,
            {"address": f"0x{e.address:x}", "block": f"0x{e.block:x}", "bytes": e.size,
             "offset": e.offset, "relation": e.relation, "state": e.state, "tid": e.tid},
            [_at("the block's free", row.free), _at("the block's allocation", row.alloc)],
            root, "the faulting access's stack"))
    return rules, results


#: a heap error's kind (the replay's invalid, double and mismatched frees) -> (rule id, name, help)
FREE_RULES: dict[str, tuple[str, str, str]] = {
    "invalid-free": ("memdump/invalid-free", "InvalidFree",
                     "The program freed a pointer that is no block it allocated."),
    "double-free": ("memdump/double-free", "DoubleFree",
                    "The program freed a block it had freed already."),
    "invalid-realloc": ("memdump/invalid-realloc", "InvalidRealloc",
                        "The program reallocated a pointer that is no live block."),
    "mismatched-free": ("memdump/mismatched-free", "MismatchedFree",
                        "The program released a block with a deallocation of another family "
                        "than its allocation's (free of a new, delete of a new[] or malloc...)."),
}


def _free_results(analysis: Analysis, root: str, first_index: int,
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rules of the heap errors' kinds the analysis lists (none without any) and one error
    result each, located at the call that freed, the block's earlier free (a double free) and
    allocation (a mismatched one) its related locations."""
    from .report import error_title

    kinds = [k for k in FREE_RULES if any(e.kind == k for e in analysis.errors)]
    index = {k: first_index + i for i, k in enumerate(kinds)}
    rules = _rules(FREE_RULES, kinds, {k: k.replace("-", " ").capitalize() for k in kinds})
    results = []
    for e in analysis.errors:
        events = [(f"the block's free (event {e.freed_seq})", e.freed_stack or []),
                  (f"the block's allocation ({e.alloc_op}, event {e.alloc_seq})",
                   e.alloc_stack or [])]
        results.append(_error_result(
            (FREE_RULES[e.kind][0], index[e.kind]), error_title(e), e.kind, e.stack,
            {"pointer": f"0x{e.pointer:x}", "op": e.op, "seq": e.seq, "tid": e.tid}, events,
            root, f"the {e.op}'s stack"))
    return rules, results


def render_sarif(
    analysis: Analysis,
    *,
    show_leak_kinds: frozenset[str] | None = None,
    error_kinds: frozenset[str] = frozenset(("definite", "possible")),
    root: str | None = None,
    information_uri: str | None = None,
) -> dict[str, Any]:
    """The SARIF log (a dict: serialise with report.dumps_json) of the program's leak groups that
    `show_leak_kinds` lists; file paths relative to `root` (default: the current directory) when
    they are under it (`uriBaseId` `%SRCROOT%`), else absolute `file://` URIs."""
    root = os.path.abspath(root or os.getcwd())
    listed, _ = split_by_kind(analysis.leaks, show_leak_kinds)
    order = list(RULES)
    rule_index = {k: i for i, k in enumerate(order)}
    driver: dict[str, Any] = {
        "name": "memdump-analyze",
        "version": __version__,
        "rules": [
            {
                "id": RULES[k][0],
                "name": RULES[k][1],
                "shortDescription": {"text": f"Memory {KIND_NAMES[k]}" if k != "unknown"
                                     else "Memory still allocated at exit"},
                "fullDescription": {"text": RULES[k][2]},
                "help": {"text": RULES[k][2]},
                "defaultConfiguration": {"level": "error" if k in error_kinds else "warning"},
            }
            for k in order
        ],
    }
    free_rules, frees = _free_results(analysis, root, len(order))
    access_rules, access = _access_results(analysis, root, len(order) + len(free_rules))
    rules, corruption = _corruption_results(analysis, root, len(order) + len(free_rules)
                                            + len(access_rules))
    driver["rules"] += free_rules + access_rules + rules
    if information_uri:
        driver["informationUri"] = information_uri
    run: dict[str, Any] = {
        "tool": {"driver": driver},
        "originalUriBaseIds": {"%SRCROOT%": {"uri": "file://" + root.rstrip("/") + "/"}},
        "results": [_result(g, error_kinds, rule_index, root) for g in listed] + frees + access
        + corruption,
        "properties": {"dump": analysis.path, "program": analysis.program},
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}
