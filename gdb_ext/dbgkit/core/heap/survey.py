"""The heap walk's document: glibc's heap of a source (source.LiveProcess, source.CoreFile or
GDB's inferior) walked, and on demand its blocks' types and valgrind's leak kinds grouped by
type, as the JSON the driver prints (docs/heapwalk.md) and the memdump commands read."""

from __future__ import annotations

from . import report
from .walk import walk

__all__ = ["survey"]


def survey(source, *, kinds: bool = False, types: bool = False,
           debug_root: str | None = None) -> dict:
    """The document of SOURCE's heap: blocks, free chunks, glibc's own, arenas, problems; with
    TYPES each block's type (`types`), with KINDS the leak kinds and their groups by type
    (`kinds`). Raises walk.WalkError when the heap cannot be walked at all."""
    result = walk(source, debug_root=debug_root)
    out = {
        "source": source.kind, "symbols": result.symbols,
        "blocks": [list(pair) for pair in zip(result.blocks.starts, result.blocks.sizes,
                                              strict=True)],
        "free": [[c, s, w] for c, (s, w) in sorted(result.free.items())],
        "internal": [[a, s] for a, s in sorted(result.internal.items())],
        "mmapped": result.mmapped,
        "arenas": [{"address": a.address, "main": a.main, "top": a.top,
                    "system_mem": a.system_mem, "heaps": a.heaps,
                    "live_blocks": a.live_blocks, "live_bytes": a.live_bytes,
                    "free_chunks": a.free_chunks, "free_bytes": a.free_bytes}
                   for a in result.arenas],
        "problems": result.problems,
    }
    if kinds or types:
        from .blocktypes import block_types
        from .vtables import vtable_table

        labels, codes = block_types(source, result, vtable_table(source.read, source.maps))
        result.heaps = []  # the heaps' bytes, read for the typing: not kept for the scan
        if types:
            out["types"] = report.types_json(labels, codes)
    if kinds:
        from .kinds import leak_kinds

        out["kinds"] = leak_kinds(source, result)
        out["kinds"]["groups"] = report.group_by_type(out["kinds"]["blocks"], labels, codes)
    return out
