"""What `memdump heap` and `memdump leaks` (without a recording) say of a walked heap, from the
survey's document (survey.py): the heap by type, by size class and by arena, with each arena's
free bytes and fragmentation; the leaks by type in the report's voice. JSON and text; the JSON
formats `memdump-heap` and `memdump-heap-leaks` are specified in docs/heapwalk.md."""

from __future__ import annotations

from collections import defaultdict

from .report import KIND_WORDS, plural

__all__ = ["HEAP_FORMAT", "LEAKS_FORMAT", "VERSION", "heap_json", "heap_text", "leaks_json",
           "leaks_text", "size_class", "walk_head"]

HEAP_FORMAT = "memdump-heap"
LEAKS_FORMAT = "memdump-heap-leaks"
VERSION = "1.0"
_LEAK_KINDS = ("definite", "indirect", "possible")


def size_class(usable: int) -> tuple[int, int]:
    """The size class of a block of USABLE bytes: (lowest, highest) usable size, powers of two
    (1-32, 33-64, 65-128, ...)."""
    high = max(32, 1 << (usable - 1).bit_length())
    return (1 if high == 32 else high // 2 + 1), high


def _arena(arena: dict, free: list) -> dict:
    """An arena's entry: its free bytes, the top chunk's share of them, and its fragmentation: the
    share of its free bytes that lies in free chunks between blocks (not the top chunk: only a
    request that fits one reuses it, and trimming cannot give it back to the system)."""
    inside = [(c, s, w) for c, s, w in free
              if any(start <= c < end for start, end in arena["heaps"])]
    top = sum(s for _, s, w in inside if w == "top")
    total = arena["free_bytes"]
    return {"address": arena["address"], "main": arena["main"], "heaps": len(arena["heaps"]),
            "system_mem": arena["system_mem"], "live_blocks": arena["live_blocks"],
            "live_bytes": arena["live_bytes"], "free_chunks": arena["free_chunks"],
            "free_bytes": total, "top_bytes": top,
            "fragmentation": round((total - top) / total, 4) if total else 0.0,
            "free_by_list": {w: [sum(s for _, s, x in inside if x == w),
                                 sum(1 for _, _, x in inside if x == w)]
                             for w in ("tcache", "fastbin", "bin", "top")}}


def heap_json(doc: dict) -> dict:
    """`memdump heap --json`: the blocks by type and by size class, the arenas, the mmapped
    blocks, glibc's own blocks and the walk's problems."""
    labels, codes = doc["types"]["labels"], doc["types"]["codes"]
    by_type: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    by_size: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
    for (_, size), code in zip(doc["blocks"], codes, strict=True):
        for entry in (by_type[code], by_size[size_class(size)]):
            entry[0] += size
            entry[1] += 1
    types = sorted(([*labels[c], b, n] for c, (b, n) in by_type.items()),
                   key=lambda g: (-g[2], -g[3], g[0]))
    return {"format": HEAP_FORMAT, "version": VERSION, "source": doc["source"],
            "symbols": doc["symbols"], "blocks": len(doc["blocks"]),
            "bytes": sum(s for _, s in doc["blocks"]), "mmapped": doc["mmapped"],
            "internal": [len(doc["internal"]), sum(s for _, s in doc["internal"])],
            "types": types,
            "sizes": [[lo, hi, b, n] for (lo, hi), (b, n) in sorted(by_size.items())],
            "arenas": [_arena(a, doc["free"]) for a in doc["arenas"]],
            "problems": doc["problems"]}


def walk_head(doc: dict, blocks: int, nbytes: int) -> list[str]:
    """The first lines of what is said of a walk (DOC's `source`, `symbols`, `problems`): BLOCKS
    in use of NBYTES, glibc's layout from where, each problem."""
    return [f"heap of the {doc['source']}: {plural(blocks)} in use, {nbytes:,} bytes; glibc's "
            f"layout from {'its debug symbols' if doc['symbols'] == 'debug' else 'the table'}"] \
        + [f"problem: {p}" for p in doc["problems"]]


def heap_text(view: dict) -> str:
    """`memdump heap`: the JSON above for people."""
    lines = walk_head(view, view["blocks"], view["bytes"])
    for a in view["arenas"]:
        lines.append(
            f"arena {a['address']:#x} ({'main' if a['main'] else 'thread'}): "
            f"{a['heaps']} heap{'' if a['heaps'] == 1 else 's'}, {a['system_mem']:,} bytes from "
            f"the system; {a['live_bytes']:,} bytes in {plural(a['live_blocks'])} in use; "
            f"{a['free_bytes']:,} bytes free in {a['free_chunks']:,} "
            f"chunk{'' if a['free_chunks'] == 1 else 's'} ({a['top_bytes']:,} in the top chunk); "
            f"fragmentation {a['fragmentation']:.1%}")
    lines.append(f"mmapped: {plural(view['mmapped'])}; glibc's own: "
                 f"{view['internal'][1]:,} bytes in {plural(view['internal'][0])} (tcache)")
    lines.append("by type:")
    lines += [f"  {b:,} bytes in {plural(n)} of `{name}` ({how})"
              for name, how, b, n in view["types"]]
    lines.append("by size (usable bytes):")
    lines += [f"  {lo:,}-{hi:,}: {b:,} bytes in {plural(n)}" for lo, hi, b, n in view["sizes"]]
    return "\n".join(lines) + "\n"


def _leaks(doc: dict, kinds: frozenset[str] | None, top: int | None) -> tuple[list, list]:
    """The numbered leak groups ([number, kind, type, how, bytes, blocks]) and the reachable
    ones, as the driver's text report orders them, those of KINDS only (None: all), the TOP
    largest leaks only."""
    groups = doc["kinds"]["groups"]
    leaks = sorted(((g, kind) for kind in _LEAK_KINDS for g in groups.get(kind, [])),
                   key=lambda e: (-e[0][2], -e[0][3], e[0][0]))
    numbered = [[n, kind, *g] for n, (g, kind) in enumerate(leaks, 1)
                if kinds is None or kind in kinds]
    reachable = [["reachable", *g] for g in groups.get("reachable", [])
                 if kinds is None or "reachable" in kinds]
    if top is not None:
        numbered, reachable = numbered[:top], reachable[:max(0, top - len(numbered))]
    return numbered, reachable


def leaks_json(doc: dict, kinds: frozenset[str] | None = None, top: int | None = None) -> dict:
    """`memdump leaks --json` without a recording: the leaks by kind and type, the totals."""
    numbered, reachable = _leaks(doc, kinds, top)
    return {"format": LEAKS_FORMAT, "version": VERSION, "source": doc["source"],
            "symbols": doc["symbols"], "blocks": len(doc["blocks"]),
            "bytes": sum(s for _, s in doc["blocks"]), "engine": doc["kinds"]["engine"],
            "origin": "unknown",
            "leaks": [{"number": n, "kind": k, "type": t, "how": h, "bytes": b, "blocks": c}
                      for n, k, t, h, b, c in numbered],
            "reachable": [{"type": t, "how": h, "bytes": b, "blocks": c}
                          for _, t, h, b, c in reachable],
            "totals": doc["kinds"]["totals"], "problems": doc["problems"]}


def leaks_text(doc: dict, kinds: frozenset[str] | None = None, top: int | None = None,
               title: str | None = None) -> str:
    """`memdump leaks` without a recording, the driver's --text report's lines (all kinds, no
    TOP, no TITLE: the same text). After a late attach, `memdump leaks` shows the blocks from
    before the recording with the analyser's olderblocks, as the offline report does."""
    numbered, reachable = _leaks(doc, kinds, top)
    lines = [title] if title else []
    lines += walk_head(doc, len(doc["blocks"]), sum(s for _, s in doc["blocks"]))
    lines += [f"LEAK {n}: {b:,} bytes in {plural(c)} of `{t}` ({h}), {KIND_WORDS[k]}"
              for n, k, t, h, b, c in numbered]
    lines += [f"reachable: {b:,} bytes in {plural(c)} of `{t}` ({h})"
              for _, t, h, b, c in reachable]
    totals = doc["kinds"]["totals"]
    lines.append("totals: " + ", ".join(f"{KIND_WORDS[k]} {totals[k][0]:,} bytes in "
                                        f"{plural(totals[k][1])}" for k in KIND_WORDS
                                        if k in totals))
    return "\n".join(lines) + "\n"
