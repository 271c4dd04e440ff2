"""The last SEQ known before a dump is read (dumptail.py): whenever the tail's `end` record
answers, it is the SEQ the replay ends at (and the dump's `end`), on generated dumps whole, padded,
cut and corrupted; a dump whose last record is a whole `end` line always answers; doubt is None."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from gendump import Dump, corrupt
from memdump_analyzer import analyze, dumptail, native
from memdump_analyzer.compact import BLOCK_TEXT, encode
from memdump_analyzer.compactfile import compact_file
from memdump_analyzer.dumpfile import DumpError


@pytest.mark.parametrize("seed", range(40))
def test_the_tail_tells_the_replays_last_seq(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    text = Dump(rng).build(rng.choice([5, 60, 400]))
    path = tmp_path / "gen.memdump"
    for data in (text, corrupt(rng, text), text + b"+ 1 0x10 8", text + b"\0" * 9000):
        path.write_bytes(data)
        got = dumptail.end_seq(str(path))
        try:
            analysis = analyze(str(path), symbolize=False)
        except DumpError:
            continue  # a bad dump is said by the reading, whatever the tail says
        if got is not None:
            assert analysis.end is not None and analysis.end.seq == got == analysis.last_seq
        last = data.rstrip(b"\0").rsplit(b"\n", 2)
        if data.rstrip(b"\0").endswith(b"\n") and last[-2].startswith(b"end "):
            assert got == analysis.last_seq


def _write(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "d.memdump"
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize(("tail", "seq"), [
    (b"end 7 exit 0\n", 7),
    (b"end 7 exit 0\n" + b"\0" * 10000, 7),  # the recorder's padding after it
    (b"end 7 exit 0\n\0\0\0\n\0\n", 7),  # lines of padding alone
    (b"\0\0end 7 killed SIGKILL\n", 7),  # padding before the record
    (b"+ 1 0x1\0\0end 7 detach -\n", 7),  # a partial record, then padding
    (b"end 7 exit 0", None),  # cut: no line end
    (b"end 7 exit 0\n+ 1 0x10 8", None),  # a cut record after it
    (b"end 7 exit 0\nc 10 0\n", None),  # a record after it
    (b"end 7 exit\n", None), (b"end x exit 0\n", None), (b"end 07 exit 0\n", None),
    (b"", None), (b"\0" * 5000, None)])
def test_the_last_record(tail: bytes, seq: int | None, tmp_path: Path) -> None:
    assert dumptail.end_seq(_write(tmp_path, b"MEMDUMP 2.7\n" + tail)) == seq


def test_a_long_tail_is_read_in_steps(tmp_path: Path) -> None:
    """The `end` line across the reads' boundaries, and after more padding than one read."""
    for pad in (0, 1, dumptail.STEP - 5, dumptail.STEP, 3 * dumptail.STEP + 7):
        data = b"MEMDUMP 2.7\n" + b"x" * 9000 + b"\nend 123 exit 0\n" + b"\0" * pad
        assert dumptail.end_seq(_write(tmp_path, data)) == 123
    assert dumptail.end_seq(_write(tmp_path, b"end 5 exit 0\n")) == 5  # the file's first line


def test_no_file_answers_none(tmp_path: Path) -> None:
    assert dumptail.end_seq(str(tmp_path / "missing")) is None


@pytest.mark.parametrize("seed", range(30))
def test_a_compact_dump_answers_as_its_text(seed: int, tmp_path: Path) -> None:
    """A compact dump's last block alone (compactdec.c's `mdz_last_line`) tells its `end` as the
    text's tail does, whole, cut and padded; in small blocks, padding may fill the last block
    (None: the two reads), never another SEQ."""
    assert native.library() is not None, f"{native.library_path()} missing: run `make build`"
    rng = random.Random(seed)
    text = tmp_path / "gen.memdump"
    compact = tmp_path / "gen.mdz"
    data = Dump(rng).build(rng.choice([5, 60, 400]))
    for tail in (b"", b"+ 1 0x10 8", b"\0" * 300, b"c 10 0\n"):
        text.write_bytes(data + tail)
        with text.open("rb") as src, compact.open("wb") as dst:
            encode(src, dst, block=(block := rng.choice([64, 1000, BLOCK_TEXT])))
        got = dumptail.end_seq(str(compact))
        assert got == dumptail.end_seq(str(text)) or (got is None and block < BLOCK_TEXT)
        compact_file(str(text), str(compact))  # the C encoder
        assert dumptail.end_seq(str(compact)) == dumptail.end_seq(str(text))
