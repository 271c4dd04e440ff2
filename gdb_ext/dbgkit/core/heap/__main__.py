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

from . import view  # noqa: E402
from .source import CoreFile, HeapSourceError, LiveProcess  # noqa: E402
from .survey import survey  # noqa: E402
from .walk import WalkError  # noqa: E402


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
        out = survey(source, kinds=args.kinds or args.text, types=args.types,
                     debug_root=args.debug_root)
    except WalkError as exc:
        print(f"heapwalk: {exc}", file=sys.stderr)
        return 1
    finally:
        source.close()
    if args.text:
        sys.stdout.write(view.leaks_text(out))
        return 0
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
