"""A compact dump read straight from its decoder (analyzer/native/compact.h, "the direct output"):
the C replay and the views' pass give what they give on the dump's text, without decoding the text
(no temporary file), on the fixtures and on generated dumps; what the direct output cannot hold (a
NUL byte, a STACK of 32 bits or more) is read again from the text, with the same answer; a reader
opens a compact dump knowing its first line and its text's lengths from `compactfile.info`, which
equal the decoded text's, its cut final line included."""

from __future__ import annotations

import ctypes
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from analyzer_testlib import FIXTURES
from gendump import Dump, corrupt
from memdump_analyzer import compactfile, dumpio, native
from memdump_analyzer.dumpfile import DumpError, DumpReader
from memdump_analyzer.dumpio import DumpFile
from memdump_analyzer.replay import replay
from memdump_analyzer.rules import RUNTIME_FREE_FUNCTIONS
from memdump_analyzer.views import VIEWS, Options, load


@pytest.fixture(autouse=True)
def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The library is there (no silent Python), and every decoding of a text is counted."""
    assert native.library() is not None and compactfile._library() is not None
    monkeypatch.setenv("MEMDUMP_NATIVE", "1")
    monkeypatch.setattr(dumpio, "_latest", None)
    calls: list[str] = []

    def decoded(path: str, fd: int) -> int:
        calls.append(path)
        return compactfile.decoded(path, fd)

    monkeypatch.setattr(dumpio, "decoded", decoded)
    return calls


def _compacted(text: Path, tmp: Path, block: int = 1 << 23) -> Path:
    """`text` compacted by the C encoder, into blocks of about `block` bytes of text."""
    lib = compactfile._library()
    assert lib is not None
    out = tmp / (text.stem + ".compact")
    err = ctypes.create_string_buffer(256)
    with open(text, "rb") as src, open(out, "wb") as dst:
        assert lib.mdz_encode(src.fileno(), dst.fileno(), 2, block, err, 256) == 0
    return out


def _replayed(path: Path) -> Any:
    """The replay's outcome (as test_analyzer_native's), or the error's text."""
    dumpio._latest = None
    with DumpReader(str(path), mark_functions=RUNTIME_FREE_FUNCTIONS) as reader:
        try:
            r = replay(reader)
        except DumpError as e:
            return str(e).replace(str(path), "DUMP")
        state = {k: list(v.items()) if isinstance(v, Mapping) else v
                 for k, v in vars(reader).items() if k not in ("_file", "path")}
        state["partial"] = (reader.partial_records, reader.partial_line())
        return r, list(r.live.items()), state


def _same_replay(text: Path, tmp: Path, calls: list[str], block: int = 1 << 23) -> Any:
    """The compact dump's replay equals the text's; read straight from the decoder when the
    text's was the library's and the direct output can hold the dump."""
    want = _replayed(text)
    fell_back = native.last_fallback is not None
    packed = _compacted(text, tmp, block)
    calls.clear()
    got = _replayed(packed)
    if isinstance(want, tuple) and isinstance(got, tuple):
        want[0].__dict__.pop("path", None), got[0].__dict__.pop("path", None)
    assert got == want
    # no text decoded, unless the heap errors' second reading (rescan.py) read it in Python
    if not fell_back and b"\0" not in text.read_bytes() and not want[0].errors:
        assert calls == []
        assert native.last_fallback is None
    return got


FIXTURE_DUMPS = sorted(FIXTURES.rglob("*.memdump"))


@pytest.mark.parametrize("path", FIXTURE_DUMPS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixtures(path: Path, tmp_path: Path, _counted: list[str]) -> None:
    _same_replay(path, tmp_path, _counted)


@pytest.mark.parametrize("seed", range(60))
def test_generated(seed: int, tmp_path: Path, _counted: list[str]) -> None:
    rng = random.Random(seed)
    text = Dump(rng).build(rng.choice([5, 60, 400]))
    path = tmp_path / "gen.memdump"
    path.write_bytes(text)
    block = rng.choice([64, 1000, 1 << 23])  # many blocks: records at every block's edge
    outcome = _same_replay(path, tmp_path, _counted, block)
    assert not isinstance(outcome, str)
    path.write_bytes(corrupt(rng, text))
    _same_replay(path, tmp_path, _counted, block)


@pytest.mark.parametrize("seed", range(8))
def test_views_byte_for_byte(seed: int, tmp_path: Path, _counted: list[str]) -> None:
    """Every view from a compact dump is the text dump's, the pass reading the decoder."""
    rng = random.Random(1000 + seed)
    text = tmp_path / "gen.memdump"
    text.write_bytes(Dump(rng).build(rng.choice([60, 400])))
    packed = _compacted(text, tmp_path, rng.choice([200, 1 << 23]))

    def views(path: Path) -> list[Any]:
        dumpio._latest = None
        got: list[Any] = []
        for view in sorted(VIEWS):
            side, warnings = load(str(path), compute=VIEWS[view].NEEDS, symbols=False)
            got.append((VIEWS[view].build(side, None, Options(top=3)), warnings))
        return [repr(g).replace(str(path), "DUMP") for g in got]

    want = views(text)
    _counted.clear()
    assert views(packed) == want
    assert _counted == ([str(packed)] if b"\0" in text.read_bytes() else [])


def test_what_the_direct_output_cannot_hold_is_read_from_the_text(
        tmp_path: Path, _counted: list[str]) -> None:
    """A STACK of 32 bits or more (the library leaves it to Python, as on the text), a NUL byte
    in a line (padding): the text is decoded, and the answer is the text dump's."""
    for odd in (b"n 4294967296 0 1\n+ 4294967296 0x1000 8\n", b"\0\0+ 1 0x2000 16\n"):
        text = tmp_path / "odd.memdump"
        text.write_bytes(b"MEMDUMP 2.4\nf 1 0x401000\nn 1 0 1\nt 5\n+ 1 0x3000 24\n" + odd
                         + b"- 1 0x3000\n")
        _same_replay(text, tmp_path, _counted)
        assert len(_counted) == 1


@pytest.mark.parametrize("tail", [b"", b"+ 1 0x30", b"\0\0\0", b"y" * 3_000_000])
def test_info_is_the_texts(tail: bytes, tmp_path: Path) -> None:
    """`compactfile.info` (first line, lengths, a written tail) equals what DumpFile finds in the
    decoded text: a final line cut short, NUL bytes alone after the last line end, a final line
    longer than a block (pieces of 1 MiB)."""
    body = b"".join(b"+ 1 0x%x 24\n- 1 0x%x\n" % (0x1000 + i, 0x1000 + i) for i in range(3000))
    text = tmp_path / "t.memdump"
    text.write_bytes(b"MEMDUMP 2.4\nf 1 0x401000\nn 1 0 1\nt 5\n" + body + tail)
    packed = _compacted(text, tmp_path, 4096)
    with open(packed, "rb") as f:
        got = compactfile.info(f.fileno())
    plain = DumpFile(str(text))
    want = (plain.first, len(text.read_bytes()), plain.complete, plain.truncated)
    plain.close()
    if len(tail) > 2_000_000:  # the last block is all one line: info cannot say, DumpFile decodes
        assert got is None
        return
    assert got == want
    opened = DumpFile(str(packed))
    assert (opened.compact_fd >= 0, opened.first, opened.complete, opened.truncated) == (
        True, *want[:1], *want[2:])
    plain = DumpFile(str(text))
    assert b"".join(opened.lines()) == b"".join(plain.lines())
    plain.close()
    opened.close()
