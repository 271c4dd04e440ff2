"""Shared by the benchmark scripts: the machine description and docs/benchmarks.md tables."""

from __future__ import annotations

import os
import platform
from pathlib import Path

BENCHMARKS_MD = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def machine() -> str:
    """CPU model, core count and kernel, for the line above each table."""
    model = platform.processor() or platform.machine() or "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def write_section(name: str, table: str, path: Path = BENCHMARKS_MD) -> None:
    """Replace the text between `<!-- NAME:start -->` and `<!-- NAME:end -->` (append if absent)."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    block = f"{start}\n{table}\n{end}"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def publish(name: str, table: str, write: bool) -> None:
    """Print a benchmark's table, and write it into docs/benchmarks.md's section NAME if WRITE."""
    print(table)
    if write:
        write_section(name, table)
