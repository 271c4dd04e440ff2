"""python3 -m dbgkit.core.heap PID|CORE [--debug-root DIR] [--kinds] [--types] [--text]: glibc's
heap of a process (attached with ptrace for the walk, detached after) or a core file, as JSON on
stdout, or with --text the leaks by type for people."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# the pointer scan counts its kinds as the analyser's dump format names them (as memdump.py does)
_ANALYZER = str(Path(__file__).resolve().parents[4] / "analyzer")
if _ANALYZER not in sys.path:
    sys.path.append(_ANALYZER)

from . import report  # noqa: E402
from .source import CoreFile, HeapSourceError, LiveProcess  # noqa: E402
from .walk import WalkError, walk  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m dbgkit.core.heap",
                                     description="glibc's heap of a process or a core, as JSON")
    parser.add_argument("target", help="a process id or a core file")
    parser.add_argument("--debug-root", default=None,
                        help="where libc6-dbg's files are (default /usr/lib/debug)")
    parser.add_argument("--kinds", action="store_true",
                        help="valgrind's leak kinds too, and the blocks of each kind by type")
    parser.add_argument("--types", action="store_true", help="each block's type (C++ class "
                        "by its vtable, char[], pointer array or ?)")
    parser.add_argument("--text", action="store_true",
                        help="a report for people (the leaks by type) instead of JSON")
    args = parser.parse_args(argv)
    try:
        source = LiveProcess(int(args.target)) if args.target.isdigit() \
            else CoreFile(args.target)
    except HeapSourceError as exc:
        print(f"heapwalk: {exc}", file=sys.stderr)
        return 1
    try:
        result = walk(source, debug_root=args.debug_root)
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
        if args.kinds or args.types or args.text:
            from .blocktypes import block_types
            from .vtables import vtable_table

            labels, codes = block_types(source, result, vtable_table(source.read, source.maps))
            result.heaps = []  # the heaps' bytes, read for the typing: not kept for the scan
            if args.types:
                out["types"] = report.types_json(labels, codes)
        if args.kinds or args.text:
            from .kinds import leak_kinds

            out["kinds"] = leak_kinds(source, result)
            out["kinds"]["groups"] = report.group_by_type(out["kinds"]["blocks"], labels, codes)
    except WalkError as exc:
        print(f"heapwalk: {exc}", file=sys.stderr)
        return 1
    finally:
        source.close()
    if args.text:
        sys.stdout.write(report.text_report(out))
        return 0
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
