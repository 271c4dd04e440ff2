"""The compact encoding (docs/dump-format.md, "Compact encoding"): the C codec (compact.c) and the
Python reference (compact.py) write the same bytes and read them back to the text byte for byte,
on generated dumps (test_analyzer_native's) and on the fixtures; the worked example is a fixture;
a bad compact dump is one line and exit 2; the analyser reads a compact dump as its text."""

from __future__ import annotations

import ctypes
import io
import lzma
import os
import random
import re
import resource
import signal
import stat
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, REPO
from gendump import Dump, corrupt
from memdump_analyzer import compact, compactfile
from memdump_analyzer.dumpformat import COMPACT_MAGIC

SCRIPT = REPO / "scripts" / "memdump-analyze"
DOC = REPO / "docs" / "dump-format.md"


@pytest.fixture(autouse=True)
def _library_built() -> None:
    if compactfile._library() is None:
        pytest.fail("libmemdump_core.so is not built (cmake --build build)", pytrace=False)


def _c_encode(text: bytes, tmp: Path, block: int = compact.BLOCK_TEXT) -> bytes:
    lib = compactfile._library()
    assert lib is not None
    (tmp / "in").write_bytes(text)
    err = ctypes.create_string_buffer(256)
    with open(tmp / "in", "rb") as src, open(tmp / "out", "wb") as dst:
        assert lib.mdz_encode(src.fileno(), dst.fileno(), compact.LEVEL, block, err, 256) == 0
    return (tmp / "out").read_bytes()


def _py_encode(text: bytes, block: int = compact.BLOCK_TEXT) -> bytes:
    out = io.BytesIO()
    compact.encode(io.BytesIO(text), out, block=block)
    return out.getvalue()


def _decode(data: bytes, tmp: Path, engine: str) -> bytes | str:
    """The text, or the error's message."""
    (tmp / "packed").write_bytes(data)
    out = io.BytesIO() if engine == "python" else open(tmp / "text", "wb")  # noqa: SIM115
    try:
        with open(tmp / "packed", "rb") as src, out:
            compactfile._run("decode", src, out, "d", None if engine == "python" else True)
            if engine == "python":
                return out.getvalue()
    except compact.CompactError as e:
        return e.message
    return (tmp / "text").read_bytes()


def _round_trip(text: bytes, tmp: Path, block: int = compact.BLOCK_TEXT) -> bytes:
    packed = _c_encode(text, tmp, block)
    assert packed == _py_encode(text, block)
    assert _decode(packed, tmp, "c") == text
    assert _decode(packed, tmp, "python") == text
    return packed


@pytest.mark.parametrize("seed", range(40))
def test_generated(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    text = Dump(rng).build(rng.choice([20, 300, 3000]))
    if seed % 4 == 3:
        text = corrupt(rng, text)
    _round_trip(text, tmp_path, block=rng.choice([64, 1000, compact.BLOCK_TEXT]))


def test_heavy_records_are_modelled(tmp_path: Path) -> None:
    """A loop's records cost a few bits each: reuse of freed blocks of a size class (tcache),
    blocks carved from the top chunk, stacks that follow one another."""
    lines = [b"MEMDUMP 2.4\n", b"t 7\n"]
    base, rng = 0x555555559000, random.Random(3)
    for i in range(20000):
        lines.append(b"n %d %d %d\n" % (i + 1, i - rng.choice([1, 1, 2, 5]), rng.randint(1, 30)))
    top = base + 4096
    for _ in range(50000):
        stack = rng.randint(1, 20000)
        lines.append(b"+ %d 0x%x 24\n" % (stack, base))  # the same freed chunk, reused
        size = rng.choice([40, 72, 100])
        lines.append(b"+n %d 0x%x %d\n" % (stack + 1, top, size))  # carved from the top
        top += compact.chunk(size)
        lines.append(b"- %d 0x%x\n" % (stack + 2, base))
    text = b"".join(lines)
    packed = _round_trip(text, tmp_path, block=1 << 20)
    assert (len(text), len(lzma.compress(text)), len(packed)) == (4_044_912, 440_556, 293_046)


def test_resizes_cost_less_than_their_e_records(tmp_path: Path) -> None:
    """(2.0) A loop of calloc, realloc (grown in place, moved, to 0) and posix_memalign, as the
    2.5 recorder writes it and as the 2.4 one did (`e` records, literal lines): the short records
    are modelled, the `e` records' SEQ, TID and operation are not."""
    rng = random.Random(5)
    short, long = [b"MEMDUMP 2.5\n", b"t 7\n"], [b"MEMDUMP 2.4\n"]
    for i in range(4):
        short.append(b"n %d 0 %d\n" % (i + 1, i + 1))
    long += short[2:]
    base, seq = 0x555555559000, 0
    records = []
    for _ in range(20000):
        size = rng.choice([24, 40, 100])
        moved = base + 0x1000 + compact.chunk(size)
        records += [(b"+c", b"1 0x%x 1 %d" % (base, size), b"calloc 1 0x%x 1 %d" % (base, size)),
                    (b"+r", b"2 0x%x 0x%x %d" % (base, base, size + 8),
                     b"realloc 2 0x%x 0x%x %d" % (base, base, size + 8)),
                    (b"+r", b"3 0x%x 0x%x 600" % (moved, base),
                     b"realloc 3 0x%x 0x%x 600" % (moved, base)),
                    (b"+r", b"3 0x0 0x%x 0" % moved, b"realloc 3 0x0 0x%x 0" % moved),
                    (b"+p", b"4 0x%x 64 %d 0" % (base, size),
                     b"posix_memalign 4 0x%x 64 %d 0" % (base, size)),
                    (b"-", b"4 0x%x" % base, b"free 4 - 0x%x" % base)]
    for tag, fields, event in records:
        seq += 1
        short.append(b"%s %s\n" % (tag, fields))
        long.append(b"e %d 7 %s\n" % (seq, event))
    short_text, long_text = b"".join(short), b"".join(long)
    assert (len(short_text), len(long_text)) == (3_519_992, 5_448_883)
    sizes = (len(_round_trip(short_text, tmp_path)), len(_round_trip(long_text, tmp_path)))
    assert sizes == (33_550, 548_434)


def test_blocks_released_long_after(tmp_path: Path) -> None:
    """Releases of blocks allocated more than 65,536 allocations before (the C decoder keeps the
    latest ones in a ring, the older in a map): the same text as the reference."""
    rng = random.Random(8)
    lines = [b"MEMDUMP 2.4\n", b"t 1\n"]
    old = [0x700000000000 + 64 * i for i in range(300)]
    lines += [b"+ 1 0x%x 40\n" % a for a in old]
    for i in range(140000):
        lines.append(b"+ 2 0x%x 24\n" % (0x600000000000 + 32 * (i % 7)))
        lines.append(b"- 3 0x%x\n" % (0x600000000000 + 32 * (i % 7)))
        if i % 500 == 0 and old:
            lines.append(b"-n 4 0x%x\n" % old.pop(rng.randrange(len(old))))
    _round_trip(b"".join(lines), tmp_path, block=1 << 20)


def test_fixtures(tmp_path: Path) -> None:
    for path in sorted(FIXTURES.glob("*.memdump")):
        _round_trip(path.read_bytes(), tmp_path)


def test_odd_text_passes_as_literals(tmp_path: Path) -> None:
    """Whatever the model does not know, or is not written as the recorder writes it, is kept as
    it is: leading zeros, upper-case hex, extra spaces, NULs, a final line without a newline, a
    line longer than a block's long-line limit, numbers past 64 bits."""
    text = (b"MEMDUMP 2.4\nt 1\n+ 01 0x10 8\n+ 1 0X10 8\n+ 1 0x010 8\n+  1 0x10 8\n+ 1 0x10 8 \n"
            b"- 1 0x10\n- 1 0x10\n+ 18446744073709551615 0xffffffffffffffff 18446744073709551615\n"
            b"+ 18446744073709551616 0x1 1\n+ 1 0x10000000000000000 1\nn 0 0 0\nn 1 2\n"
            b"\0\0+ 1 0x0 0\n"
            + b"x" * (compact.LONG_LINE * 2 + 5) + b"\n" + b"y" * compact.LONG_LINE + b"\nzz")
    _round_trip(text, tmp_path, block=100)


def _hexdump(data: bytes) -> str:
    return "".join(f"{i:04x}: {data[i:i + 16].hex(' ')}\n" for i in range(0, len(data), 16))


def test_worked_example_is_the_fixture(tmp_path: Path) -> None:
    """docs/dump-format.md's worked example of the compact encoding is inprocess.memdump encoded,
    inprocess.compact; its hex dump in the page is the fixture's bytes."""
    text = (FIXTURES / "inprocess.memdump").read_bytes()
    packed = (FIXTURES / "inprocess.compact").read_bytes()
    assert _round_trip(text, tmp_path) == packed
    doc = DOC.read_text(encoding="utf-8")
    m = re.search(r"<!-- inprocess.compact -->\n```\n(.*?)```", doc, re.S)
    assert m is not None, "the worked example is missing from docs/dump-format.md"
    assert m.group(1) == _hexdump(packed)


def test_cli_round_trip_and_report(tmp_path: Path) -> None:
    dump = tmp_path / "app.memdump"
    dump.write_bytes((FIXTURES / "inprocess.memdump").read_bytes())
    text_report = subprocess.run([str(SCRIPT), str(dump)], capture_output=True)
    run = subprocess.run([str(SCRIPT), "--compact", str(dump)], capture_output=True, text=True)
    assert (run.returncode, run.stdout) == (0, "")
    assert run.stderr == f"memdump-analyze: {dump}: compacted, 735 bytes of text in 491\n"
    assert dump.read_bytes() == (FIXTURES / "inprocess.compact").read_bytes()
    assert os.stat(dump).st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["app.memdump"]
    printed = subprocess.run([str(SCRIPT), "--text", str(dump)], capture_output=True)
    assert printed.stdout == (FIXTURES / "inprocess.memdump").read_bytes()
    compact_report = subprocess.run([str(SCRIPT), str(dump)], capture_output=True)
    assert compact_report.returncode == text_report.returncode == 0
    assert compact_report.stdout == text_report.stdout
    assert compact_report.stderr == text_report.stderr
    again = subprocess.run([str(SCRIPT), "--compact", str(dump)], capture_output=True, text=True)
    assert (again.returncode, again.stderr) == (
        2, f"memdump-analyze: {dump}: the dump is compact already\n")


@pytest.mark.parametrize("engine", ["c", "python"])
def test_bad_compact_dumps_are_one_line(engine: str, tmp_path: Path) -> None:
    packed = (FIXTURES / "inprocess.compact").read_bytes()
    cases = {
        packed[:9]: "not a compact memdump dump",
        COMPACT_MAGIC + b"\x03\x00": "compact encoding 3.0 is not supported (reads 1.x and 2.x)",
        packed[:-1]: "the compact dump is cut short (no end block)",
        packed[:40]: "the compact dump is cut short (in a block)",
        packed + b"x": "bytes follow the end block",
        packed[:30] + bytes([packed[30] ^ 0xFF]) + packed[31:]: "a block's compressed data is "
                                                                "corrupt",
        packed[:11] + bytes([packed[11] ^ 1]) + packed[12:]: "a block's text does not match its "
                                                             "checksum",
    }
    for data, message in cases.items():
        assert _decode(data, tmp_path, engine) == message


@pytest.mark.parametrize("inflater", ["libdeflate", "zlib"])
def test_both_inflaters_check_the_stream(inflater: str, tmp_path: Path) -> None:
    """The C decoder inflates a block by libdeflate where it is installed, else (and with
    MEMDUMP_INFLATE=zlib) by zlib: both give the text and the leak report, and both say a block
    whose stream's Adler-32 is wrong is corrupt, to the text and to the replay's direct output."""
    packed = (FIXTURES / "inprocess.compact").read_bytes()
    clen = struct.unpack_from("<I", packed, 22)[0] & ~compact.XZ_BLOCK
    damaged = bytearray(packed)
    damaged[10 + 16 + clen - 1] ^= 1  # the last byte of the first block's Adler-32
    good, bad = tmp_path / "good.memdump", tmp_path / "bad.memdump"
    env = {**os.environ, "MEMDUMP_INFLATE": inflater}
    good.write_bytes((FIXTURES / "inprocess.memdump").read_bytes())
    plain = subprocess.run([str(SCRIPT), str(good)], capture_output=True, env=env)
    good.write_bytes(packed)
    bad.write_bytes(bytes(damaged))
    text = subprocess.run([str(SCRIPT), "--text", str(good)], capture_output=True, env=env)
    assert text.stdout == (FIXTURES / "inprocess.memdump").read_bytes()
    report = subprocess.run([str(SCRIPT), str(good)], capture_output=True, env=env)
    assert (report.returncode, report.stdout) == (plain.returncode, plain.stdout)
    for args in (["--text", str(bad)], [str(bad)]):
        run = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env)
        assert (run.returncode, run.stdout, run.stderr) == (
            2, "", f"memdump-analyze: {bad}: a block's compressed data is corrupt\n")


def test_cli_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.memdump"
    bad.write_bytes((FIXTURES / "inprocess.compact").read_bytes()[:40])
    for args in ([str(bad)], ["--text", str(bad)]):
        run = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True)
        assert (run.returncode, run.stdout, run.stderr) == (
            2, "", f"memdump-analyze: {bad}: the compact dump is cut short (in a block)\n")
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    run = subprocess.run([str(SCRIPT), "--compact", str(other)], capture_output=True, text=True)
    assert (run.returncode, run.stderr) == (
        2, f"memdump-analyze: {other}: not a memdump dump (it does not begin with 'MEMDUMP')\n")


def test_an_output_that_is_not_a_regular_file_is_written_not_replaced(tmp_path: Path) -> None:
    """`--text -o /dev/null` (or a pipe) writes into it: renaming a temporary file over it would
    replace the device (as root, /dev/null itself). A dump compacted over itself must be a
    regular file."""
    dump = tmp_path / "app.compact"
    dump.write_bytes((FIXTURES / "inprocess.compact").read_bytes())
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open before the writer: no wait
    try:
        run = subprocess.run([str(SCRIPT), "--text", str(dump), "-o", str(fifo)],
                             capture_output=True, timeout=60)
        got = os.read(reader, 1 << 16)
    finally:
        os.close(reader)
    assert (run.returncode, run.stderr) == (0, b"")
    assert got == (FIXTURES / "inprocess.memdump").read_bytes()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.compact", "out.fifo"]
    run = subprocess.run([str(SCRIPT), "--compact", str(fifo)], capture_output=True, text=True,
                         timeout=60)
    assert (run.returncode, run.stderr) == (
        2, f"memdump-analyze: {fifo}: not a regular file (a dump is compacted over itself)\n")


def test_random_damage_is_an_error_in_both(tmp_path: Path) -> None:
    """Any byte changed: both decoders give the same text or an error (never a crash)."""
    rng = random.Random(5)
    packed = _c_encode(Dump(rng).build(400), tmp_path, block=2000)
    for _ in range(200):
        data = bytearray(packed)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        c, py = _decode(bytes(data), tmp_path, "c"), _decode(bytes(data), tmp_path, "python")
        assert isinstance(c, str) == isinstance(py, str)
        if not isinstance(c, str):
            assert c == py


def _limited(limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.parametrize("native", ["1", "0"])
def test_a_full_disk_leaves_the_text_dump(native: str, tmp_path: Path) -> None:
    """A file size limit (as a full disk: the write fails) stops the compaction: the text dump
    stays, the partial file is removed, and one line says why."""
    rng = random.Random(1)
    text = Dump(rng).build(30000)
    dump = tmp_path / "app.memdump"
    dump.write_bytes(text)
    run = subprocess.run([str(SCRIPT), "--compact", str(dump)], capture_output=True, text=True,
                         preexec_fn=lambda: _limited(len(text) // 50),
                         env={**os.environ, "MEMDUMP_NATIVE": native})
    assert run.returncode == 2
    assert run.stderr == f"memdump-analyze: {dump}: cannot write the file (File too large)\n"
    assert dump.read_bytes() == text
    assert [p.name for p in tmp_path.iterdir()] == ["app.memdump"]


@pytest.mark.parametrize("engine", ["c", "python"])
def test_encoding_1_0_still_reads(engine: str, tmp_path: Path) -> None:
    """A dump compacted in encoding 1.0 (its blocks under xz) decodes to its text, as 2.1's: the
    worked example as format 2.4 wrote it."""
    packed = (FIXTURES / "inprocess-1.0.compact").read_bytes()
    assert packed[8:10] == b"\x01\x00"
    text = (FIXTURES / "inprocess.memdump").read_bytes()
    assert _decode(packed, tmp_path, engine) == text.replace(b"MEMDUMP 2.5\n", b"MEMDUMP 2.4\n")
    damaged = packed[:30] + bytes([packed[30] ^ 0xFF]) + packed[31:]
    assert _decode(damaged, tmp_path, engine) == "a block's compressed data is corrupt"


@pytest.mark.parametrize("engine", ["c", "python"])
def test_encoding_2_0_still_reads(engine: str, tmp_path: Path) -> None:
    """A dump compacted in encoding 2.0 (every block under deflate) decodes to its text."""
    packed = (FIXTURES / "inprocess-2.0.compact").read_bytes()
    assert packed[8:10] == b"\x02\x00"
    assert _decode(packed, tmp_path, engine) == (FIXTURES / "inprocess.memdump").read_bytes()


def test_a_loops_blocks_go_under_xz(tmp_path: Path) -> None:
    """(2.1) A block of a loop's records, which deflate makes more than REPETITIVE times smaller,
    is written under xz when that is smaller (PACKED_LEN's top bit), by both encoders alike, and
    decodes; a real program's blocks stay under deflate."""
    lines = [b"MEMDUMP 2.5\nf 1 0x401000\nn 1 0 1\nn 2 1 1\nn 3 1 1\nn 4 1 1\nt 9\n"]
    for i in range(200000):
        size = 16 + i * 7919 % 512
        lines.append(b"+ %d 0x%x %d\n- 1 0x%x\n" % (1 + i % 4, 0x5000 + size * 64, size,
                                                    0x5000 + size * 64))
    text = b"".join(lines)
    packed = _round_trip(text, tmp_path, block=1 << 20)
    heads, pos = [], 10
    while True:
        tlen, _, plen, clen = compact._HEAD.unpack_from(packed, pos)
        if tlen == 0:
            break
        heads.append((plen, clen))
        pos += 16 + (clen & ~compact.XZ_BLOCK)
    assert len(heads) > 3 and all(clen & compact.XZ_BLOCK for _, clen in heads)
    deflated = sum(len(zlib.compress(compact_payload, compact.LEVEL)) for compact_payload in
                   _payloads(text, 1 << 20))
    assert len(packed) * 2 < deflated  # xz writes a loop's repeats in bits, deflate in bytes
    real = (FIXTURES / "inprocess.memdump").read_bytes()
    assert not compact._HEAD.unpack_from(_round_trip(real, tmp_path), 10)[3] & compact.XZ_BLOCK


def _payloads(text: bytes, block: int) -> list[bytes]:
    """The payloads of the blocks `encode` cuts `text` into."""
    enc, out, size = compact._Encoder(), [], 0
    for line in compact._pieces(io.BytesIO(text)):
        enc.line(line)
        size += len(line)
        if size >= block:
            out.append(enc.payload())
            enc.reset()
            size = 0
    if size:
        out.append(enc.payload())
    return out


def test_python_fallback_reads_a_compact_dump(tmp_path: Path) -> None:
    dump = tmp_path / "app.memdump"
    dump.write_bytes((FIXTURES / "inprocess.compact").read_bytes())
    run = subprocess.run([sys.executable, "-m", "memdump_analyzer", str(dump)],
                         capture_output=True, env={**os.environ, "MEMDUMP_NATIVE": "0"},
                         cwd=REPO / "analyzer")
    want = subprocess.run([str(SCRIPT), str(FIXTURES / "inprocess.memdump")], capture_output=True)
    assert run.returncode == 0
    assert run.stdout == want.stdout.replace(str(FIXTURES / "inprocess.memdump").encode(),
                                             str(dump).encode())


def test_pending_is_a_marked_finished_text_dump(tmp_path: Path) -> None:
    """What the analyser compacts while it reports (compactfile.pending): a text dump that GDB
    marked when its recording ended; not one without the mark (a fixture, a dump of memdump.sh),
    nor one whose last line is not the `end` record, nor a compact one."""
    dump = tmp_path / "app.memdump"
    text = (FIXTURES / "inprocess.memdump").read_bytes()
    assert text.endswith(b"\nend 4 exit 0\n")
    dump.write_bytes(text)
    assert not compactfile.pending(str(dump))
    os.setxattr(dump, compactfile.PENDING, b"1")
    assert compactfile.pending(str(dump))
    with open(dump, "ab") as fh:
        fh.write(b"+ 1 0x10 8\n")  # a recording going on
    assert not compactfile.pending(str(dump))
    compactfile.compact_file(str(dump))
    os.setxattr(dump, compactfile.PENDING, b"1")
    assert not compactfile.pending(str(dump))
    assert not compactfile.pending(str(tmp_path / "none.memdump"))


def test_a_marked_dump_is_compacted_by_its_first_report(tmp_path: Path) -> None:
    """The report, then one line: the dump compacted meanwhile; a compaction that fails (a full
    disk, as a file size limit) leaves the text, says why, and takes the mark off."""
    dump = tmp_path / "app.memdump"
    text = (FIXTURES / "inprocess.memdump").read_bytes()
    want = subprocess.run([str(SCRIPT), str(FIXTURES / "inprocess.memdump")], capture_output=True,
                          text=True)
    want_stdout = want.stdout.replace(str(FIXTURES / "inprocess.memdump"), str(dump))
    dump.write_bytes(text)
    os.setxattr(dump, compactfile.PENDING, b"1")
    run = subprocess.run([str(SCRIPT), str(dump)], capture_output=True, text=True,
                         preexec_fn=lambda: _limited(100))
    assert (run.returncode, run.stdout) == (want.returncode, want_stdout)
    assert run.stderr == (f"memdump-analyze: {dump}: cannot write the file (File too large); the "
                          "dump stays text\n")
    assert dump.read_bytes() == text
    assert not compactfile.pending(str(dump))
    assert [p.name for p in tmp_path.iterdir()] == ["app.memdump"]
    os.setxattr(dump, compactfile.PENDING, b"1")
    run = subprocess.run([str(SCRIPT), str(dump)], capture_output=True, text=True)
    assert (run.returncode, run.stdout) == (want.returncode, want_stdout)
    assert run.stderr == f"memdump-analyze: {dump}: compacted, 735 bytes of text in 491\n"
    assert dump.read_bytes() == (FIXTURES / "inprocess.compact").read_bytes()


def test_a_library_without_every_function_leaves_compaction_to_python(tmp_path: Path) -> None:
    """A C library older than the analyser (a build not redone, an install of another version)
    that lacks one of the compaction's functions is not used: the report and the compaction
    are Python's, byte for byte the library's, and nothing but the compaction's line is said."""
    stub = tmp_path / "libold.so"
    src = tmp_path / "old.c"
    src.write_text("int mdz_encode(void) { return -1; }\nint mdz_decode(void) { return -1; }\n"
                   "int mdz_info(void) { return -1; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(stub), str(src)], check=True)
    dump = tmp_path / "app.memdump"
    dump.write_bytes((FIXTURES / "inprocess.memdump").read_bytes())
    os.setxattr(dump, compactfile.PENDING, b"1")
    want = subprocess.run([str(SCRIPT), str(FIXTURES / "inprocess.memdump")], capture_output=True,
                          text=True)
    run = subprocess.run([str(SCRIPT), str(dump)], capture_output=True, text=True,
                         env={**os.environ, "MEMDUMP_CORE_LIB": str(stub)})
    assert (run.returncode, run.stdout) == (
        want.returncode, want.stdout.replace(str(FIXTURES / "inprocess.memdump"), str(dump)))
    assert run.stderr == f"memdump-analyze: {dump}: compacted, 735 bytes of text in 491\n"
    assert dump.read_bytes() == (FIXTURES / "inprocess.compact").read_bytes()


def test_the_html_page_decodes_a_compact_dump_once(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The HTML page's outputs open the dump more than once: the compact dump is decoded once
    (dumpio keeps the latest decoded), and the page is the text dump's."""
    from memdump_analyzer import cli, dumpio

    dump = tmp_path / "app.memdump"
    dump.write_bytes((FIXTURES / "inprocess.compact").read_bytes())
    text = tmp_path / "text.memdump"
    text.write_bytes((FIXTURES / "inprocess.memdump").read_bytes())
    calls: list[str] = []

    def counted(path: str, fd: int) -> int:
        calls.append(path)
        return compactfile.decoded(path, fd)

    monkeypatch.setattr(dumpio, "decoded", counted)
    monkeypatch.setattr(dumpio, "_latest", None, raising=False)
    assert cli.main(["--format", "html", "-o", str(tmp_path / "c.html"), str(dump)]) == 0
    assert calls == [str(dump)]
    assert cli.main(["--format", "html", "-o", str(tmp_path / "t.html"), str(text)]) == 0
    page = (tmp_path / "c.html").read_text().replace(str(dump), str(text))
    assert page == (tmp_path / "t.html").read_text()
