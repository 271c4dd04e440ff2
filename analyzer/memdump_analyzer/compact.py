"""The compact encoding of a dump (docs/dump-format.md, "Compact encoding"): the readable reference.

A compact dump is a lossless transform of a text dump: decoding gives back the text byte for byte.
The text is cut into blocks of about `BLOCK_TEXT` bytes at line ends; each block's records are
modelled (the heavy ones: the short allocation and release records and the stack nodes) into
separate streams of small numbers, and the streams are compressed together with deflate (`zlib`,
in Python's standard library, so that every reader can decode; encoding 1.x used xz, `lzma`, which
costs five times deflate's CPU for two thirds of its size, and is still read). Since 2.1 a block
that deflate makes `REPETITIVE` times smaller or more (a loop's records) is also tried under xz,
whose repeated matches cost a few bits where deflate's cost bytes, and kept so when smaller (its
PACKED_LEN's top bit, `XZ_BLOCK`, says so). Any line the model
does not know, or does not write exactly as the recorder does, passes as a literal. The model's
state (the live blocks, the freed blocks per size class, the stacks that follow one another)
carries from block to block; the compressor's does not, so that a reader holds one block at a time.

The C library (analyzer/native/compact.c, compactdec.c) does the same, faster; the randomised tests
hold the two to the same bytes. Standard library only, like `dumpformat`; compactfile.py converts
files, in C when the library loads. """

from __future__ import annotations

import lzma
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from .dumpformat import COMPACT_MAGIC, COMPACT_VERSION

__all__ = ["BLOCK_TEXT", "CompactError", "decode", "encode", "is_compact"]

#: text bytes per block (a block ends at the first line end at or after it)
BLOCK_TEXT = 8 << 20
#: a line longer than this is written as raw pieces (kind RAW), so that a block stays bounded
LONG_LINE = 1 << 20
#: most text and payload bytes one block may declare (a reader refuses more)
MAX_TEXT = 16 << 20
#: deflate level of the streams (docs/benchmarks.md, "Compact dumps": the levels measured)
LEVEL = 2
#: freed blocks remembered per size class, and the largest class modelled (chunk bytes)
LIFO = 64
MAX_CLASS = 1 << 16
#: most memory the xz decoder of a block may take (a hostile header cannot ask for more)
MEMLIMIT = 128 << 20
#: (2.1) a block deflate makes this many times smaller is tried under xz (preset XZ_PRESET), and
#: PACKED_LEN's top bit says it is one xz stream
REPETITIVE = 16
XZ_PRESET = 0
XZ_BLOCK = 1 << 31

_M = (1 << 64) - 1
_HEAD = struct.Struct("<IIII")  # text length, crc32 of the text, payload length, packed length
# record kinds (the low 4 bits of an OPS byte); the high bits are flags. (2.0) CALLOC to
# MEMALIGN: the short records of format 2.5, `TAG STACK RESULT ARGS` with SIZE the fourth field
LIT, RAW, ALLOC, ALLOC_N, ALLOC_A, FREE, FREE_N, FREE_A, NODE = range(9)
CALLOC, REALLOC, POSIX_MEMALIGN, ALIGNED_ALLOC, MEMALIGN = range(9, 14)
_TAGS = {b"+": ALLOC, b"+n": ALLOC_N, b"+a": ALLOC_A, b"-": FREE, b"-n": FREE_N, b"-a": FREE_A,
         b"n": NODE, b"+c": CALLOC, b"+r": REALLOC, b"+p": POSIX_MEMALIGN, b"+l": ALIGNED_ALLOC,
         b"+m": MEMALIGN}
_TAG_OF = {v: k for k, v in _TAGS.items()}
#: each kind's fields after its tag: whether each is hex
_HEXES = {ALLOC: (False, True, False), FREE: (False, True), NODE: (False, False, False),
          CALLOC: (False, True, False, False), REALLOC: (False, True, True, False),
          POSIX_MEMALIGN: (False, True, False, False, False),
          ALIGNED_ALLOC: (False, True, False, False), MEMALIGN: (False, True, False, False)}
for _k in (ALLOC_N, ALLOC_A):
    _HEXES[_k] = _HEXES[ALLOC]
for _k in (FREE_N, FREE_A):
    _HEXES[_k] = _HEXES[FREE]
F_STACK = 0x10  # the stack is the predicted one
F_SIZE = 0x20  # (allocation) the size is the stack's last; (node) ID is the last plus one
F_NO_PTR = 0x40  # (realloc) PTR is 0x0
F_NO_RESULT = 0x80  # (realloc) RESULT is 0x0
#: the OPS bytes a block may hold: each kind with the flags it has
VALID_OPS = frozenset([LIT, RAW, NODE, NODE | F_SIZE]
                      + [k | f for k in (ALLOC, ALLOC_N, ALLOC_A, CALLOC, POSIX_MEMALIGN,
                                         ALIGNED_ALLOC, MEMALIGN)
                         for f in (0, 0x10, 0x20, 0x30)]
                      + [k | f for k in (FREE, FREE_N, FREE_A) for f in (0, F_STACK)]
                      + [REALLOC | f << 4 for f in range(16)])
# streams, in payload order
OPS, LITS, ASTK, ASIZE, AADDR, DELTA, FREF, FSTK, NID, NPAR, NFRM = range(11)
N_STREAMS = 11


class CompactError(Exception):
    """A compact dump that cannot be decoded, or a text that cannot be compacted: one line,
    `PATH: message`, as dumpio.DumpError (which the reader raises for it)."""

    def __init__(self, path: str, line: None, message: str) -> None:
        super().__init__(path, line, message)
        self.path = path
        self.message = message

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def is_compact(head: bytes) -> bool:
    """Whether a file's first bytes are the compact magic."""
    return head[: len(COMPACT_MAGIC)] == COMPACT_MAGIC


def _varint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _zigzag(d: int) -> int:
    d &= _M
    return ((d << 1) & _M) ^ (_M if d >> 63 else 0)


def _unzigzag(z: int) -> int:
    return (z >> 1) ^ (_M if z & 1 else 0)


def chunk(size: int) -> int:
    """glibc's chunk size for a request: the size class whose freed blocks a new one reuses."""
    return max(32, ((size + 8 + 15) & _M) & ~15)


def _number(word: bytes, hexa: bool) -> int | None:
    """The value of a field written as the recorder writes it (canonical), else None."""
    if hexa:
        if word[:2] != b"0x" or len(word) < 3 or len(word) > 18:
            return None
        digits = word[2:]
        if digits != b"0" and digits[:1] == b"0" or digits.strip(b"0123456789abcdef"):
            return None
        return int(digits, 16)
    if not word or len(word) > 20 or word.strip(b"0123456789") or (
            word[:1] == b"0" and word != b"0"):
        return None
    v = int(word)
    return v if v <= _M else None


class _Model:
    """The predictions, the same in the encoder and the decoder (docs/dump-format.md)."""

    def __init__(self) -> None:
        self.prev = 0  # the last address of a record (allocation result, released pointer)
        self.top = 0  # where the next block carved from the top chunk starts
        self.lifo: dict[int, list[int]] = {}  # chunk size -> freed addresses, most recent last
        #: the live blocks: the encoder's by address, (allocation number, size, stack); the
        #: decoder's by allocation number, (address, size, stack) (an address allocated again
        #: while live leaves its old number there: the encoder never refers to it)
        self.live: dict[int, tuple[int, int, int]] = {}
        self.numbers: dict[int, tuple[int, int, int]] = {}
        self.decoding = False
        self.allocs = 0
        self.next_stack: dict[int, int] = {}  # allocation stack -> the one that followed it
        self.last_astk = 0
        self.size_of: dict[int, int] = {}  # allocation stack -> its last size
        self.free_of: dict[int, int] = {}  # allocation stack -> stack of its block's last release
        self.last_fstk = 0
        self.last_nid = 0
        self.last_frame = 0

    def allocated(self, stack: int, addr: int, size: int, reused: bool,
                  total: int | None = None) -> None:
        """A block allocated; `reused`: its address was a freed block's of its size class (the
        top chunk, where the next new block is carved, is then where it was). `size` is the
        record's SIZE, the stack's prediction; `total` the block's bytes when not SIZE (calloc:
        NMEMB * SIZE)."""
        self.next_stack[self.last_astk] = stack
        self.last_astk = stack
        self.size_of[stack] = size
        self.prev = addr
        if total is not None:
            size = total
        if addr:
            if self.decoding:
                self.numbers[self.allocs] = (addr, size, stack)
            else:
                self.live[addr] = (self.allocs, size, stack)
            self.allocs += 1
            if not reused:
                self.top = (addr + chunk(size)) & _M

    def freed(self, ptr: int, size: int) -> None:
        """A live block of `size` bytes at `ptr` released: the latest of its size class's."""
        c = chunk(size)
        if c <= MAX_CLASS:
            lifo = self.lifo.setdefault(c, [])
            if len(lifo) == LIFO:
                del lifo[0]
            lifo.append(ptr)

    def released(self, stack: int, ptr: int, astk: int | None) -> None:
        if astk is not None:
            self.free_of[astk] = stack
        self.last_fstk = stack
        self.prev = ptr


def _split(line: bytes) -> tuple[int, list[int]] | None:
    """(kind, values) of a modelled record written canonically, else None (a literal)."""
    words = line[:-1].split(b" ")
    kind = _TAGS.get(words[0])
    if kind is None:
        return None
    hexes = _HEXES[kind]
    if len(words) != len(hexes) + 1:
        return None
    values = []
    for word, hexa in zip(words[1:], hexes, strict=True):
        v = _number(word, hexa)
        if v is None:
            return None
        values.append(v)
    return kind, values


class _Encoder:
    def __init__(self) -> None:
        self.m = _Model()
        self.reset()

    def reset(self) -> None:
        self.streams = [bytearray() for _ in range(N_STREAMS)]
        self.records = 0

    def literal(self, kind: int, text: bytes) -> None:
        self.streams[OPS].append(kind)
        _varint(self.streams[LITS], len(text))
        self.streams[LITS] += text
        self.records += 1

    def line(self, line: bytes) -> None:
        parsed = _split(line) if line[-1:] == b"\n" else None
        if parsed is None:
            if line[-1:] == b"\n":
                self.literal(LIT, line[:-1])
            else:
                self.literal(RAW, line)
            return
        kind, v = parsed
        s, m = self.streams, self.m
        self.records += 1
        if kind == NODE:
            ident, parent, frame = v
            op = kind
            if ident == (m.last_nid + 1) & _M:
                op |= F_SIZE
            else:
                _varint(s[NID], ident)
            _varint(s[NPAR], _zigzag(ident - parent))
            _varint(s[NFRM], _zigzag(frame - m.last_frame))
            m.last_nid, m.last_frame = ident, frame
            s[OPS].append(op)
            return
        if kind <= ALLOC_A or kind >= CALLOC:
            stack, addr, size = v[0], v[1], v[-1] if kind <= ALLOC_A else v[3]
            op = kind
            if m.next_stack.get(m.last_astk) == stack:
                op |= F_STACK
            else:
                _varint(s[ASTK], stack)
            if m.size_of.get(stack) == size:
                op |= F_SIZE
            else:
                _varint(s[ASIZE], size)
            total = None
            if kind == REALLOC:  # PTR released first, as by a `-` record
                op |= self._resize(v[2])
            elif kind >= CALLOC:  # the other fields after SIZE: NMEMB or ALIGN, then RC
                for extra in (v[2], *v[4:]):
                    _varint(s[ASIZE], extra)
                if kind == CALLOC:  # the block is NMEMB * SIZE bytes
                    total = (v[2] * size) & _M
            if kind == REALLOC and addr == 0:  # RESULT 0x0: realloc(p, 0), or it failed
                op |= F_NO_RESULT
                code = LIFO + 1
            else:
                code = self._where(addr, size if total is None else total)
                _varint(s[AADDR], code)
            s[OPS].append(op)
            m.allocated(stack, addr, size, 0 < code <= LIFO, total)
            return
        stack, ptr = v
        op = kind
        block = m.live.pop(ptr, None)
        if block is None:
            _varint(s[FREF], 0)
            _varint(s[DELTA], _zigzag(ptr - m.prev))
            predicted, astk = m.last_fstk, None
        else:
            _varint(s[FREF], m.allocs - block[0])
            m.freed(ptr, block[1])
            astk = block[2]
            predicted = m.free_of.get(astk, m.last_fstk)
        if stack == predicted:
            op |= F_STACK
        else:
            _varint(s[FSTK], stack)
        s[OPS].append(op)
        m.released(stack, ptr, astk)

    def _resize(self, ptr: int) -> int:
        """A realloc's PTR: F_NO_PTR for 0x0, else written as a release's (FREF, and DELTA)
        and released in the model; the last address is then PTR."""
        m = self.m
        if ptr == 0:
            return F_NO_PTR
        block = m.live.pop(ptr, None)
        if block is None:
            _varint(self.streams[FREF], 0)
            _varint(self.streams[DELTA], _zigzag(ptr - m.prev))
        else:
            _varint(self.streams[FREF], m.allocs - block[0])
            m.freed(ptr, block[1])
        m.prev = ptr
        return 0

    def _where(self, addr: int, size: int) -> int:
        """An allocation's address code: 0 the top chunk's, 1+k the k-th latest freed block of its
        size class, LIFO+1 written as a difference from the last address (DELTA stream)."""
        m = self.m
        if addr and addr == m.top:
            return 0
        lifo = m.lifo.get(chunk(size))
        if lifo and addr:
            for k in range(len(lifo)):
                if lifo[-1 - k] == addr:
                    del lifo[-1 - k]
                    return 1 + k
        _varint(self.streams[DELTA], _zigzag(addr - m.prev))
        return LIFO + 1

    def payload(self) -> bytes:
        out = bytearray()
        _varint(out, self.records)
        for st in self.streams:
            _varint(out, len(st))
        for st in self.streams:
            out += st
        return bytes(out)


def _pieces(lines: Iterable[bytes]) -> Iterator[bytes]:
    """The lines, a long one cut into pieces without a newline (RAW records) and its end."""
    for line in lines:
        while len(line) > LONG_LINE:
            yield line[:LONG_LINE]
            line = line[LONG_LINE:]
        yield line


def encode(src: BinaryIO, dst: BinaryIO, level: int = LEVEL, block: int | None = None) -> None:
    """Writes the compact encoding of the text dump read from `src` to `dst`."""
    block = BLOCK_TEXT if block is None else block
    enc = _Encoder()
    dst.write(COMPACT_MAGIC + bytes(COMPACT_VERSION))
    text = bytearray()
    total = 0

    def flush() -> None:
        payload = enc.payload()
        packed, xz = zlib.compress(payload, level), 0
        if len(packed) * REPETITIVE < len(payload):  # a loop's records
            other = lzma.compress(payload, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64,
                                  preset=XZ_PRESET)
            if len(other) < len(packed):
                packed, xz = other, XZ_BLOCK
        dst.write(_HEAD.pack(len(text), zlib.crc32(text), len(payload), len(packed) | xz))
        dst.write(packed)
        enc.reset()
        text.clear()

    for piece in _pieces(src):
        enc.line(piece)
        text += piece
        total = zlib.crc32(piece, total)
        if len(text) >= block:
            flush()
    if text:
        flush()
    dst.write(_HEAD.pack(0, total, 0, 0))


class _Decoder:
    def __init__(self, path: str) -> None:
        self.m = _Model()
        self.m.decoding = True
        self.path = path

    def bad(self, message: str) -> CompactError:
        return CompactError(self.path, None, message)

    def block(self, payload: bytes, limit: int) -> bytes:
        """The text of a block's payload, at most `limit` bytes."""
        pos = 0

        def varint(buf: bytes, at: int) -> tuple[int, int]:
            v = shift = 0
            while True:
                if at >= len(buf) or shift > 63:
                    raise self.bad("a block's streams are cut short or corrupt")
                b = buf[at]
                v |= (b & 0x7F) << shift
                at += 1
                if b < 0x80:
                    if v > _M:
                        raise self.bad("a number of a block is too large")
                    return v, at
                shift += 7

        records, pos = varint(payload, pos)
        lengths = []
        for _ in range(N_STREAMS):
            n, pos = varint(payload, pos)
            lengths.append(n)
        if pos + sum(lengths) != len(payload):
            raise self.bad("a block's streams do not add up to its payload")
        bufs, at = [], [0] * N_STREAMS
        for n in lengths:
            bufs.append(payload[pos:pos + n])
            pos += n

        def num(i: int) -> int:
            v, at[i] = varint(bufs[i], at[i])
            return v

        if records != len(bufs[OPS]):
            raise self.bad("a block's record count is wrong")
        m, out = self.m, bytearray()
        for op in bufs[OPS]:
            if op not in VALID_OPS:
                raise self.bad(f"unknown record code {op} in a block")
            kind = op & 0x0F
            if kind in (LIT, RAW):
                n = num(LITS)
                a = at[LITS]
                if a + n > len(bufs[LITS]):
                    raise self.bad("a literal record is cut short")
                if n + (kind == LIT) > limit - len(out):
                    raise self.bad("a block decodes to more text than its header says")
                out += bufs[LITS][a:a + n]
                at[LITS] = a + n
                if kind == LIT:
                    out += b"\n"
            elif kind == NODE:
                ident = (m.last_nid + 1) & _M if op & F_SIZE else num(NID)
                parent = (ident - _unzigzag(num(NPAR))) & _M
                frame = (m.last_frame + _unzigzag(num(NFRM))) & _M
                m.last_nid, m.last_frame = ident, frame
                out += b"n %d %d %d\n" % (ident, parent, frame)
            elif kind <= ALLOC_A or kind >= CALLOC:
                stack = m.next_stack.get(m.last_astk) if op & F_STACK else num(ASTK)
                if stack is None:
                    raise self.bad("a predicted stack has no prediction")
                size = m.size_of.get(stack) if op & F_SIZE else num(ASIZE)
                if size is None:
                    raise self.bad("a predicted size has no prediction")
                total = ptr = None
                extra: list[int] = []
                if kind in (CALLOC, ALIGNED_ALLOC, MEMALIGN):  # NMEMB or ALIGN
                    extra = [num(ASIZE)]
                elif kind == POSIX_MEMALIGN:  # ALIGN, RC
                    extra = [num(ASIZE), num(ASIZE)]
                if kind == CALLOC:
                    total = (extra[0] * size) & _M
                elif kind == REALLOC:  # the encoder's `_resize`
                    ptr = 0
                    if not op & F_NO_PTR:
                        ptr = m.prev = self._released(num)[0]
                if op & F_NO_RESULT:
                    code, addr = LIFO + 1, 0
                else:
                    code = num(AADDR)
                    addr = self._address(code, size if total is None else total, num)
                if extra:
                    out += b"%s %d 0x%x %d %d%s\n" % (
                        _TAG_OF[kind], stack, addr, extra[0], size,
                        b"".join(b" %d" % x for x in extra[1:]))
                elif ptr is not None:
                    out += b"+r %d 0x%x 0x%x %d\n" % (stack, addr, ptr, size)
                else:
                    out += b"%s %d 0x%x %d\n" % (_TAG_OF[kind], stack, addr, size)
                m.allocated(stack, addr, size, 0 < code <= LIFO, total)
            else:
                ptr, astk = self._released(num)
                predicted = m.last_fstk if astk is None else m.free_of.get(astk, m.last_fstk)
                stack = predicted if op & F_STACK else num(FSTK)
                out += b"%s %d 0x%x\n" % (_TAG_OF[kind], stack, ptr)
                m.released(stack, ptr, astk)
            if len(out) > limit:
                raise self.bad("a block decodes to more text than its header says")
        if any(at[i] != len(bufs[i]) for i in range(N_STREAMS) if i != OPS):
            raise self.bad("a block's streams hold more than its records")
        return bytes(out)

    def _released(self, num: Callable[[int], int]) -> tuple[int, int | None]:
        """A release's PTR (FREF, and DELTA when 0) and, when it was a live block's (released
        in the model), its allocation's STACK."""
        m = self.m
        ref = num(FREF)
        if ref == 0:
            return (m.prev + _unzigzag(num(DELTA))) & _M, None
        found = m.numbers.pop(m.allocs - ref, None) if ref <= m.allocs else None
        if found is None:
            raise self.bad("a release refers to no live block")
        ptr, size, astk = found
        m.freed(ptr, size)
        return ptr, astk

    def _address(self, code: int, size: int, num: object) -> int:
        m = self.m
        if code == 0:
            if not m.top:
                raise self.bad("a block from the top chunk before any")
            return m.top
        if code <= LIFO:
            lifo = m.lifo.get(chunk(size), [])
            if code > len(lifo):
                raise self.bad("a reused block beyond its size class's")
            return lifo.pop(-code)
        if code != LIFO + 1:
            raise self.bad("an address code is out of range")
        return (m.prev + _unzigzag(num(DELTA))) & _M  # type: ignore[operator]


def _unxz(packed: bytes, plen: int) -> bytes | None:
    """A block's payload in one xz stream (encoding 1.x, 2.1's flagged blocks), None when it is
    not exactly that."""
    try:
        dz = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=MEMLIMIT)
        payload = dz.decompress(packed, max_length=plen + 1)
    except lzma.LZMAError:
        return None
    return payload if len(payload) == plen and dz.eof and not dz.unused_data else None


def _inflated(packed: bytes, plen: int) -> bytes | None:
    """A block's payload in encoding 2.x (one zlib stream), None when it is not exactly that."""
    try:
        dz = zlib.decompressobj()
        payload = dz.decompress(packed, plen + 1)
    except zlib.error:
        return None
    return payload if len(payload) == plen and dz.eof and not dz.unused_data else None


def decode(src: BinaryIO, dst: BinaryIO, path: str = "<dump>") -> None:
    """Writes the text of the compact dump read from `src` to `dst`; CompactError when it is not
    one, or is cut short or corrupt."""
    head = src.read(len(COMPACT_MAGIC) + 2)
    if len(head) < len(COMPACT_MAGIC) + 2 or not is_compact(head):
        raise CompactError(path, None, "not a compact memdump dump")
    if head[-2] not in (1, COMPACT_VERSION[0]):
        raise CompactError(path, None, f"compact encoding {head[-2]}.{head[-1]} is not supported "
                           f"(reads 1.x and {COMPACT_VERSION[0]}.x)")
    old = head[-2] == 1  # 1.x: every block under xz
    dec = _Decoder(path)
    total = 0
    while True:
        raw = src.read(_HEAD.size)
        if len(raw) < _HEAD.size:
            raise CompactError(path, None, "the compact dump is cut short (no end block)")
        tlen, crc, plen, clen = _HEAD.unpack(raw)
        unpack = _unxz if old or clen & XZ_BLOCK else _inflated
        clen &= ~XZ_BLOCK
        if tlen == 0:
            if plen or clen:
                raise CompactError(path, None, "the end block is corrupt")
            if crc != total:
                raise CompactError(path, None, "the text's checksum does not match")
            if src.read(1):
                raise CompactError(path, None, "bytes follow the end block")
            return
        if tlen > MAX_TEXT or plen > 2 * MAX_TEXT + 64 or clen > plen + plen // 64 + 4096:
            raise CompactError(path, None, "a block is larger than a compact dump's blocks")
        packed = src.read(clen)
        if len(packed) < clen:
            raise CompactError(path, None, "the compact dump is cut short (in a block)")
        payload = unpack(packed, plen)
        if payload is None:
            raise CompactError(path, None, "a block's compressed data is corrupt")
        text = dec.block(payload, tlen)
        if len(text) != tlen or zlib.crc32(text) != crc:
            raise CompactError(path, None, "a block's text does not match its checksum")
        total = zlib.crc32(text, total)
        dst.write(text)
