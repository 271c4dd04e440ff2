#!/usr/bin/env python3
"""Write gdb_ext/recorder/memdump_format.h, the C recorder's dump-format constants, from the
analyser's tables (analyzer/memdump_analyzer/dumpformat.py). Run it after changing the format;
`--check` only says whether the committed header is up to date (exit 1 when it is not)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analyzer"))

from memdump_analyzer.formatheader import GENERATOR, HEADER_PATH, c_header  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed header instead of writing it")
    args = parser.parse_args()
    path = ROOT / HEADER_PATH
    text = c_header()
    if args.check:
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            print(f"{HEADER_PATH} is out of date: run {GENERATOR}", file=sys.stderr)
            return 1
        return 0
    path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
