"""Compact dumps end to end (docs/dump-format.md, "Compact encoding"): GDB's memdump leaves the
dump to be compacted by its first report when the recording ends (`set memdump compact`, on by
default), memdump.sh compacts every dump it wrote after its reports (`--no-compact`), and the
analyser reads a compact dump as the text it was: the same leaks, the same events."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import memdump_e2e
import pytest
from memdump_analyzer.dumpformat import COMPACT_MAGIC
from memdump_e2e import REPO, analyze, expect_leaks, marker, program, read_dump, record

ANALYZE = REPO / "scripts" / "memdump-analyze"
MEMDUMP_SH = REPO / "scripts" / "memdump.sh"


def _text_of(dump: Path, out: Path) -> bytes:
    run = subprocess.run([str(ANALYZE), "--text", str(dump), "-o", str(out)],
                         capture_output=True, text=True)
    assert (run.returncode, run.stderr) == (0, ""), run.stderr
    return out.read_bytes()


def test_gdb_leaves_the_compaction_to_the_first_report(dump: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """leak_malloc recorded with `set memdump compact on` (the default): GDB leaves the text dump
    marked (docs/memdump.md, "Compaction") and says so in one line; the first report reads the
    text and compacts the dump meanwhile, says so after it, and the compact dump reads as its
    text: the 24-byte leak and the same events; a second report finds it compact."""
    monkeypatch.setattr(memdump_e2e, "COMPACT", True)
    run = record("leak_malloc", dump=dump)
    text = dump.read_bytes()
    assert text.startswith(b"MEMDUMP 2.7\n"), run.describe()
    assert os.getxattr(dump, "user.memdump.compact") == b"1"
    assert (f"memdump: {dump}: compacted by its first report (or now: scripts/memdump-analyze "
            f"--compact {dump})\n") in run.output, run.describe()
    first = analyze(dump)
    expect_leaks(first, {marker("leak_malloc.c", "block"): (24, 1)})
    packed = dump.read_bytes()
    assert packed[:len(COMPACT_MAGIC)] == COMPACT_MAGIC, first.stderr
    assert first.stderr.endswith(f"memdump-analyze: {dump}: compacted, {len(text):,} bytes of "
                                 f"text in {len(packed):,}\n"), first.stderr
    assert os.stat(dump).st_mode & 0o777 == 0o600
    assert [p.name for p in dump.parent.iterdir() if p.name.startswith(".")] == []
    assert _text_of(dump, tmp_path / "text.memdump") == text
    again = analyze(dump)
    assert again.data == first.data
    assert "compacted" not in again.stderr
    compact_facts, text_facts = read_dump(dump), read_dump(tmp_path / "text.memdump")
    assert compact_facts.events == text_facts.events
    assert compact_facts.end == text_facts.end == ("exit", "0")


def test_gdb_keeps_text_when_asked(dump: Path) -> None:
    run = record("leak_malloc", dump=dump, before=["set memdump compact off"])
    assert dump.read_bytes().startswith(b"MEMDUMP 2.7\n"), run.describe()
    assert "compacted" not in run.output


def _memdump_sh(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MEMDUMP_COMPACT"}
    mode = ["--breakpoints"] if memdump_e2e.MODE == "breakpoints" else []
    return subprocess.run([str(MEMDUMP_SH), *mode, *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


@pytest.mark.one_recorder
def test_memdump_sh_compacts_every_dump_after_the_report(tmp_path: Path, dump: Path) -> None:
    """fork_leak with --children --report: the report is read from the text, then both dumps,
    the parent's and the child's, are compacted and say so; they report the same leaks."""
    run = _memdump_sh("-o", dump, "--children", "--report", "--", program("fork_leak"),
                      cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    [child] = [p for p in tmp_path.iterdir() if p.suffix == ".memdump" and p != dump]
    lines = [line for line in run.stderr.splitlines() if "compacted" in line]
    assert [re.sub(r"[0-9,]+ bytes of text in [0-9,]+", "N", line) for line in lines] == [
        f"memdump.sh: {dump}: compacted, N", f"memdump.sh: {child}: compacted, N"]
    assert run.stderr.index("definitely lost") < run.stderr.index("compacted")
    for path in (dump, child):
        assert path.read_bytes()[:len(COMPACT_MAGIC)] == COMPACT_MAGIC
    expect_leaks(analyze(dump), {marker("fork_leak.c", "parent"): (70, 1)})
    expect_leaks(analyze(child), {marker("fork_leak.c", "child"): (80, 1)})


@pytest.mark.one_recorder
def test_memdump_sh_no_compact(tmp_path: Path, dump: Path) -> None:
    run = _memdump_sh("-o", dump, "--no-compact", "--", program("leak_malloc"), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert dump.read_bytes().startswith(b"MEMDUMP 2.7\n")
    assert "compacted" not in run.stderr
