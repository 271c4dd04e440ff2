"""The memdump dump format's constants and rules, written once (docs/dump-format.md).

Standard library only and GDB-free: the recorder (gdb_ext's `DumpWriter` and memdump session), the
analyser's reader and replay, the benchmarks and the tests all import this module, so that the
version, the record tags, the heap operations with their arguments, the leak kinds, the escaping
and what an operation does to the live blocks cannot drift apart.

The grammar is one table, `GRAMMAR`: each record's tag, its typed fields, what it is and the version
that added it. `RECORDS`, `SEQUENCED` and `SHORT_OPS` are views of it; the reader (dumpfile.py) is
driven by it, GDB reads the recorder's records with `Numbering`, and the C recorder's constants
(gdb_ext/recorder/memdump_format.h) are generated from it (formatheader.py).
"""

from __future__ import annotations

import functools
import posixpath
import re
from bisect import bisect_left
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass

__all__ = [
    "COMPACT_MAGIC",
    "COMPACT_VERSION",
    "FORMAT_LINE",
    "HEADER",
    "KINDS",
    "KIND_BY_CODE",
    "KIND_CODES",
    "KIND_WORDS",
    "OPERATIONS",
    "PADDING",
    "PROCESS_EVENTS",
    "READS_MAJOR",
    "RECORDERS",
    "RECORDS",
    "SEQUENCED",
    "SHORT_OPS",
    "VERSION",
    "GRAMMAR",
    "GRAMMAR_BY_TAG",
    "Field",
    "ProcessEvent",
    "Record",
    "LockRecord",
    "LockWait",
    "CUSTOM",
    "CXX_ENTRY_POINTS",
    "FAMILY",
    "NO_RESULT",
    "RELEASES",
    "apply",
    "checked_blocks",
    "effect",
    "superblocks",
    "escape",
    "Numbering",
    "split_record",
    "event_args",
    "format_args",
    "public_name",
    "source_path",
    "unescape",
]

#: the version this toolkit writes, and the newest whose records it all reads
VERSION: tuple[int, int] = (2, 7)
#: the first line of a dump
FORMAT_LINE = f"MEMDUMP {VERSION[0]}.{VERSION[1]}\n"
#: the major version readers understand (and every older one); a dump of a newer major version is
#: refused
READS_MAJOR = VERSION[0]
#: the first line, as a reader matches it (without its newline)
HEADER = re.compile(rb"MEMDUMP (\d+)\.(\d+)")
#: the first bytes of a compact dump (docs/dump-format.md, "Compact encoding"): a byte no text
#: dump begins with (0x89, not ASCII), then a name and the bytes a text transfer would mangle, as
#: PNG's signature; its version (major, minor) follows as two bytes
COMPACT_MAGIC = b"\x89MDZ\r\n\x1a\n"
COMPACT_VERSION = (2, 1)

#: the types of a record's fields (the "Records" table's words for them)
DEC = "decimal"  # a number written in decimal
HEX = "hex"  # a number written as 0x followed by hex digits
STRING_ID = "string id"  # an `s` record's ID, 0: none
WORD = "word"  # a word without spaces (a key, a kind, an operation, `-` for none)
TEXT = "text"  # the rest of the line, escaped (a string's or a value's text)
ARGS = "args"  # the rest of the fields, as the heap operation names them ("Heap operations")
#: what a record is
COMMENT = "comment"
DEFINITION = "definition"  # a string, frame, stack node or information: kept in the reader's tables
EVENT = "event"  # a heap operation, numbered by SEQ
SHORT = "short event"  # (2.0) a heap operation numbered without its SEQ: an `e` record in short
PROCESS = "process event"  # something the process did, numbered by SEQ
STATE = "unsequenced"  # a thread, tag, clock sample or tail record: between two sequenced records


@dataclass(frozen=True)
class Field:
    """One field of a record: its name in the "Records" table and its type."""

    name: str
    type: str
    optional: bool = False


@dataclass(frozen=True)
class Record:
    """One row of the grammar: a record's tag, its fields, what it is, the version that added
    it and, for a short event record, the heap operation of the `e` record it stands for."""

    tag: str
    fields: tuple[Field, ...]
    kind: str
    since: tuple[int, int]
    op: str | None = None
    #: how the "Records" table writes the fields, when it does not list them one by one
    spelled: str | None = None

    @property
    def text(self) -> str:
        """The fields as the spec and the reader's errors name them (`[X]`: optional)."""
        if self.spelled is not None:
            return self.spelled
        return " ".join(f"[{f.name}]" if f.optional else f.name for f in self.fields)

    @property
    def required(self) -> int:
        """How many fields the record has at least (an `e` record's ARGS apart)."""
        return sum(1 for f in self.fields if not f.optional and f.type != ARGS)


def _fields(spec: str) -> tuple[Field, ...]:
    """`NAME:TYPE ...` (a trailing `?` on the type: optional) as fields."""
    types = {"d": DEC, "x": HEX, "s": STRING_ID, "w": WORD, "t": TEXT, "a": ARGS}
    out = []
    for word in spec.split():
        name, code = word.rsplit(":", 1)
        out.append(Field(name, types[code.rstrip("?")], code.endswith("?")))
    return tuple(out)


def _row(tag: str, spec: str, kind: str, since: tuple[int, int], *,
         spelled: str | None = None) -> Record:
    return Record(tag, _fields(spec), kind, since, spelled=spelled)


def _short(tag: str, since: tuple[int, int], op: str, args: str = "SIZE:d") -> Record:
    # an allocation's short record is `TAG STACK RESULT ARGS` (malloc's ARGS: `SIZE`), a
    # release's `TAG STACK PTR`: the `e` record's fields without SEQ, TID and OP (and RESULT `-`
    # for a release)
    spec = "STACK:d PTR:x" if op in NO_RESULT else "STACK:d RESULT:x " + args
    return Record(tag, _fields(spec), SHORT, since, op)


#: the operations whose RESULT is `-`: they produce no block
NO_RESULT: frozenset[str] = frozenset(("free", "custom_free", "delete", "delete[]"))

#: the grammar of a dump, in the order of the "Records" table: every record's tag, its fields
#: and their types, what it is, and the version that added it. The reader (dumpfile.py) and the
#: C recorder's header (formatheader.py writes gdb_ext/recorder/memdump_format.h) follow it.
GRAMMAR: tuple[Record, ...] = (
    _row("#", "TEXT:t", COMMENT, (1, 0)),
    _row("i", "KEY:w VALUE:t", DEFINITION, (1, 0)),
    _row("s", "ID:d TEXT:t", DEFINITION, (1, 0)),
    _row("f", "ID:d PC:x MODULE:s OFFSET:x FUNCTION:s FILE:s LINE:d", DEFINITION, (1, 0)),
    _row("fi", "ID:d FUNCTION:s FILE:s LINE:d", DEFINITION, (1, 2)),
    _row("fs", "ID:d FUNCTION:s FILE:s LINE:d", DEFINITION, (1, 3)),
    _row("n", "ID:d PARENT:d FRAME:d", DEFINITION, (1, 0)),
    _row("e", "SEQ:d TID:d OP:w STACK:d RESULT:w ARGS:a", EVENT, (1, 0),
         spelled="SEQ TID OP STACK RESULT ARGS..."),
    _row("t", "TID:d", STATE, (2, 0)),
    _short("+", (2, 0), "malloc"),
    _short("-", (2, 0), "free"),
    _short("+n", (2, 1), "new"),
    _short("+a", (2, 1), "new[]"),
    _short("-n", (2, 1), "delete"),
    _short("-a", (2, 1), "delete[]"),
    _short("+c", (2, 5), "calloc", "NMEMB:d SIZE:d"),
    _short("+r", (2, 5), "realloc", "PTR:x SIZE:d"),
    _short("+p", (2, 5), "posix_memalign", "ALIGN:d SIZE:d RC:d"),
    _short("+l", (2, 5), "aligned_alloc", "ALIGN:d SIZE:d"),
    _short("+m", (2, 5), "memalign", "ALIGN:d SIZE:d"),
    _row("p", "SEQ:d WHAT:w DETAIL:t", PROCESS, (1, 0)),
    _row("scan", "AFTER:d STATUS:w ROOT_BYTES:d BLOCK_BYTES:d MILLIS:d", STATE, (1, 1)),
    _row("r", "ADDR:x KIND:w HEURISTIC|LEADER:w?", STATE, (1, 1)),
    _row("end", "SEQ:d REASON:w DETAIL:t", PROCESS, (1, 0)),
    _row("g", "TID:d STRING:s", STATE, (2, 2)),
    _row("u", "TID:d", STATE, (2, 2)),
    _row("c", "MILLIS:d RSS:d", STATE, (2, 2)),
    _row("lk", ("ADDR:x KIND:w LOCKED:d READ_LOCKED:d CHANGED:d CONTENDED:d TRY_BUSY:d "
                "WAIT_NS:d MAX_WAIT_NS:d"), STATE, (2, 3)),
    _row("lw", "ADDR:x STACK:d CONTENDED:d WAIT_NS:d MAX_WAIT_NS:d", STATE, (2, 4)),
    _row("ae", "TID:d ACCESS:w ADDR:x STACK:d BLOCK:x SIZE:d OFFSET:d RELATION:w STATE:w", STATE,
         (2, 6)),
    _row("hc", "SEQ:d TID:d KIND:w BLOCK:x SIZE:d OFFSET:d BYTES:d FOUND:w", STATE, (2, 6)),
    _row("ob", "ADDR:x SIZE:d KIND:w HOW:w TYPE:t", STATE, (2, 7)),
)


@dataclass(frozen=True)
class ProcessEvent:
    """One WHAT of a `p` record (a process event): the word, what its DETAIL is, and the
    version that added it."""

    what: str
    detail: str
    since: tuple[int, int]


#: the `p` records' WHAT words, in the order of the "Records" table's `p` row: the process image
#: was replaced (every live block is gone, the recording goes on in the new image), the program
#: stopped on a fatal signal, (2.2) the process entered a phase (memdump_api.h). Readers skip a
#: WHAT they do not know; the C recorder writes `phase` (memdump_format.h).
PROCESS_EVENTS: dict[str, ProcessEvent] = {ev.what: ev for ev in (
    ProcessEvent("exec", "PATH", (1, 0)),
    ProcessEvent("signal", "SIGNAME", (1, 0)),
    ProcessEvent("phase", "NAME", (2, 2)),
)}

#: record tag -> its row of the grammar
GRAMMAR_BY_TAG: dict[str, Record] = {rec.tag: rec for rec in GRAMMAR}
#: record tag -> its fields, as the "Records" table names them (`[X]`: optional)
RECORDS: dict[str, str] = {rec.tag: rec.text for rec in GRAMMAR}
_BY_TAG: dict[bytes, Record] = {rec.tag.encode(): rec for rec in GRAMMAR}


def split_record(line: bytes) -> list[bytes]:
    """A record's fields, its tag first, as the grammar splits them: at spaces, but the last
    field of a record that ends with the rest of the line (TEXT, VALUE, DETAIL) whole (absent
    when the line ends before it). NUL padding before the record is skipped."""
    line = line.lstrip(PADDING).rstrip(b"\n")
    tag, _, rest = line.partition(b" ")
    rec = _BY_TAG.get(tag)
    if rec is not None and rec.fields[-1].type == TEXT:
        return [tag, *rest.split(b" ", len(rec.fields) - 1)] if rest else [tag]
    return line.split()


#: how a record is numbered: 1 one more than the last SEQ (and an event), 2 its own SEQ (and an
#: event), 3 its own SEQ (a process event); unsequenced records (0) keep the last SEQ
_NUMBERING = {SHORT: 1, EVENT: 2, PROCESS: 3}
_SHORT_ROW = (1, False)


@dataclass
class Numbering:
    """The SEQ and the count of heap events of a run of a dump's lines, as `records` reads them:
    for a writer that appends after the recorder (`DumpReader` checks every SEQ and field)."""

    #: the SEQ of the last sequenced record read (before the first line: where the run starts)
    seq: int = 0
    #: the heap events read (`e` and short records)
    events: int = 0

    def records(self, lines: Iterable[bytes], tags: Collection[str]) -> Iterator[list[bytes]]:
        """The fields (`split_record`) of the records of `tags` in `lines` (a dump's lines
        after the first, or a part of them), counting every record's SEQ as it goes: a short
        record's is one more than the last, an `e`, `p` or `end` record's the one it writes."""
        # tag -> (how it is numbered, whether its fields are wanted); _SHORT_ROW: a short
        # event whose fields are not wanted
        rows = {tag: _SHORT_ROW if rec.kind == SHORT and rec.tag not in tags else
                (_NUMBERING.get(rec.kind, 0), rec.tag in tags) for tag, rec in _BY_TAG.items()}
        seq, events = self.seq, self.events
        for line in lines:
            if line[:1] == PADDING:
                line = line.lstrip(PADDING)
            tag, _, rest = line.partition(b" ")
            row = rows.get(tag) or rows.get(tag.rstrip(b"\n"))
            if row is None:
                continue  # a tag of a newer version
            if row is _SHORT_ROW:  # the most frequent: one more event
                seq += 1
                events += 1
                continue
            numbering, wanted = row
            if numbering == 1:
                seq += 1
                events += 1
            elif numbering:
                seq = int(rest.split(b" ", 1)[0])
                events += numbering == 2
            if wanted:
                self.seq, self.events = seq, events
                yield split_record(line)
        self.seq, self.events = seq, events


@dataclass(frozen=True)
class LockRecord:
    """(2.3) An `lk` record: one lock's counts from the in-process recorder at the end."""

    address: int
    kind: str
    locked: int
    read_locked: int
    owner_changes: int
    contended: int
    try_busy: int
    wait_ns: int
    max_wait_ns: int

    @property
    def avg_wait_ns(self) -> int:
        """Nanoseconds per contended acquisition."""
        return self.wait_ns // self.contended if self.contended else 0


@dataclass(frozen=True)
class LockWait:
    """(2.4) An `lw` record: the contended acquisitions of lock `address` from stack node
    `stack`, and how long they waited (summed, the longest)."""

    address: int
    stack: int
    contended: int
    wait_ns: int
    max_wait_ns: int


#: the `i recorder` values (format 1.3): which recorder wrote the events
RECORDERS: tuple[str, ...] = ("in-process", "breakpoints")
#: the byte that pads a dump (format 1.3): NUL bytes before a record are skipped, a final run
#: without a newline is space the recorder had not written yet
PADDING = b"\0"
#: the tags numbered by SEQ, in one sequence (`+` and `-` implicitly: format 2.0; the C++
#: operators' short records: 2.1; calloc's, realloc's and the aligned allocations': 2.5)
SEQUENCED: tuple[str, ...] = tuple(
    rec.tag for rec in GRAMMAR if rec.kind in (EVENT, SHORT, PROCESS))
#: the short event records (format 2.0; 2.1: the C++ operators'; 2.5: calloc's, realloc's and
#: the aligned allocations') -> the heap operation each one is: a `+` tag makes a block (STACK
#: RESULT ARGS, the operation's ARGS: SIZE but for those of 2.5), a `-` tag is a release (STACK
#: PTR)
SHORT_OPS: dict[str, str] = {rec.tag: rec.op for rec in GRAMMAR if rec.op is not None}

#: heap operation -> the names of its ARGS, in the order of the "Heap operations" table. When a C
#: library exports two of these names at one address (glibc: aligned_alloc is memalign), the
#: event carries the first name of this table.
OPERATIONS: dict[str, tuple[str, ...]] = {
    "malloc": ("SIZE",),
    "calloc": ("NMEMB", "SIZE"),
    "realloc": ("PTR", "SIZE"),
    "reallocarray": ("PTR", "NMEMB", "SIZE"),
    "free": ("PTR",),
    "posix_memalign": ("ALIGN", "SIZE", "RC"),
    "aligned_alloc": ("ALIGN", "SIZE"),
    "memalign": ("ALIGN", "SIZE"),
    "valloc": ("SIZE",),
    "pvalloc": ("SIZE",),
    "custom_alloc": ("SIZE",),
    "custom_free": ("PTR",),
    "new": ("SIZE",),
    "new[]": ("SIZE",),
    "delete": ("PTR",),
    "delete[]": ("PTR",),
}
#: the operations of a custom allocator (memdump_api.h's MEMDUMP_ALLOC and MEMDUMP_FREE): their
#: blocks are custom blocks, kept apart from the malloc'd ones ("Custom blocks")
CUSTOM: frozenset[str] = frozenset(("custom_alloc", "custom_free"))
#: (2.1) the C++ operators: libstdc++'s exported entry points (mangled, as in .dynsym) -> the
#: operation a call records. Every form of one operator is one operation: the nothrow and
#: aligned forms of `operator new` are `new` (SIZE, their first argument), the sized, aligned
#: and nothrow forms of `operator delete` are `delete` (PTR, their first argument).
CXX_ENTRY_POINTS: dict[str, str] = {
    "_Znwm": "new",
    "_ZnwmRKSt9nothrow_t": "new",
    "_ZnwmSt11align_val_t": "new",
    "_ZnwmSt11align_val_tRKSt9nothrow_t": "new",
    "_Znam": "new[]",
    "_ZnamRKSt9nothrow_t": "new[]",
    "_ZnamSt11align_val_t": "new[]",
    "_ZnamSt11align_val_tRKSt9nothrow_t": "new[]",
    "_ZdlPv": "delete",
    "_ZdlPvm": "delete",
    "_ZdlPvRKSt9nothrow_t": "delete",
    "_ZdlPvSt11align_val_t": "delete",
    "_ZdlPvmSt11align_val_t": "delete",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t": "delete",
    "_ZdaPv": "delete[]",
    "_ZdaPvm": "delete[]",
    "_ZdaPvRKSt9nothrow_t": "delete[]",
    "_ZdaPvSt11align_val_t": "delete[]",
    "_ZdaPvmSt11align_val_t": "delete[]",
    "_ZdaPvSt11align_val_tRKSt9nothrow_t": "delete[]",
}
#: (2.1) the allocation family of the blocks each operation makes live: a block must be released
#: by an operation of its family (`RELEASES`), else the release is a mismatched deallocation
#: (valgrind memcheck's "Mismatched free() / delete / delete []"); the custom operations have
#: their own blocks and are not in it
FAMILY: dict[str, str] = {
    **{op: "malloc" for op in ("malloc", "calloc", "realloc", "reallocarray", "posix_memalign",
                               "aligned_alloc", "memalign", "valloc", "pvalloc")},
    "new": "new",
    "new[]": "new[]",
}
#: (2.1) the operations that release a block -> the family of the blocks they may release
RELEASES: dict[str, str] = {
    "free": "malloc",
    "realloc": "malloc",
    "reallocarray": "malloc",
    "delete": "new",
    "delete[]": "new[]",
}

#: leak kind -> (the `r` record's KIND code, valgrind's words), worst first (valgrind's order)
_KINDS: dict[str, tuple[str, str]] = {
    "definite": ("D", "definitely lost"),
    "indirect": ("I", "indirectly lost"),
    "possible": ("P", "possibly lost"),
    "reachable": ("R", "still reachable"),
}
#: the leak kinds, worst first
KINDS: tuple[str, ...] = tuple(_KINDS)
#: leak kind -> the `r` record's KIND code
KIND_CODES: dict[str, str] = {kind: code for kind, (code, _) in _KINDS.items()}
#: the `r` record's KIND code as read -> leak kind
KIND_BY_CODE: dict[bytes, str] = {code.encode(): kind for kind, (code, _) in _KINDS.items()}
#: leak kind -> valgrind's words for it
KIND_WORDS: dict[str, str] = {kind: words for kind, (_, words) in _KINDS.items()}

_ESCAPE = re.compile(rb"\\([\\nr])")
_ESCAPES = {b"\\": b"\\", b"n": b"\n", b"r": b"\r"}


def escape(text: str) -> str:
    """Escape a string for the rest-of-line fields (backslash, newline, carriage return)."""
    if "\\" in text or "\n" in text or "\r" in text:
        text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return text


def unescape(raw: bytes) -> str:
    """Undo the escaping of `TEXT` and `VALUE` fields and decode (non-UTF-8 bytes survive)."""
    if b"\\" in raw:
        raw = _ESCAPE.sub(lambda m: _ESCAPES[m.group(1)], raw)
    return raw.decode("utf-8", "surrogateescape")


@functools.cache
def source_path(path: str | None) -> str | None:
    """A frame's source file as the compiler named it. GDB's `symtab.fullname()` joins the
    unit's directory to the file's name even when both are relative, as in glibc's debug
    information (directory `./libio`, name `./libio/filedoalloc.c`): that gives
    `./libio/./libio/filedoalloc.c`, and `./csu/../csu/libc-start.c` for a name that climbs
    out of it, paths that exist nowhere. A relative path keeps the file's name after the join
    (`./libio/filedoalloc.c`, as heaptrack shows it), its `..` steps resolved within it
    (`./csu/libc-start.c`); an absolute path only loses its `/./` steps (a `..` may cross a
    symbolic link)."""
    if path is None or path.startswith("/"):
        return path if path is None or "/./" not in path else _without_dot_steps(path)
    if "/./" in path:
        path = "./" + path.split("/./", 1)[1]
    if "/../" in path:
        path = "./" + posixpath.normpath(path)
    return path


def _without_dot_steps(path: str) -> str:
    while "/./" in path:
        path = path.replace("/./", "/")
    return path


def public_name(function: str | None) -> str | None:
    """The name a dump gives a function: glibc's hidden internal alias `__GI_x`
    (include/libc-symbols.h) is named after the public function `x`."""
    if function is not None and function.startswith("__GI_"):
        return function[5:]
    return function


def event_args(op: str, regs: tuple[int, ...], rc: int = 0) -> tuple[int, ...]:
    """An `e` record's ARGS for OP from the call's first three integer arguments `regs`, and
    for `posix_memalign(void **memptr, size_t alignment, size_t size)` its return value `rc`."""
    if op == "posix_memalign":
        return (regs[1], regs[2], rc)
    return tuple(regs[: len(OPERATIONS[op])])


def format_args(op: str, args: tuple[int, ...]) -> tuple[str, ...]:
    """ARGS as the `e` record writes them: pointers hex, sizes and counts decimal."""
    return tuple(
        f"{value:#x}" if name == "PTR" else str(value)
        for value, name in zip(args, OPERATIONS[op], strict=True)
    )


def effect(op: str, result: int, args: tuple[int, ...]) -> tuple[int | None, int | None, int]:
    """What one heap operation does to the live blocks ("Heap operations"): (the block it
    releases or None, the block it makes live or None, that block's size).

    `result` is RESULT (0 for `free` and for a failed call), `args` the ARGS as numbers. A
    released pointer that is not live is the caller's to judge (an error, or a block from before
    an attached recording).
    """
    if (op == "malloc" or op == "valloc" or op == "pvalloc" or op == "custom_alloc"
            or op == "new" or op == "new[]"):
        return None, result or None, args[0]
    if op == "calloc":
        return None, result or None, args[0] * args[1]
    if op == "free" or op == "custom_free" or op == "delete" or op == "delete[]":
        return args[0] or None, None, 0
    if op == "posix_memalign":
        return None, (result or None) if args[2] == 0 else None, args[1]
    if op == "realloc" or op == "reallocarray":
        ptr = args[0]
        size = args[1] if op == "realloc" else args[1] * args[2]
        if ptr == 0:
            return None, result or None, size
        if size == 0:
            return ptr, result or None, 0  # freed (glibc returns 0x0)
        if result:
            return ptr, result, size
        return None, None, 0  # the call failed: PTR stays live
    if op == "aligned_alloc" or op == "memalign":
        return None, result or None, args[1]
    raise ValueError(f"unknown heap operation '{op}'")


def apply(live: dict[int, int], op: str, result: int, args: tuple[int, ...],
          custom: dict[int, int] | None = None) -> None:
    """Apply one heap operation to `live` (address -> size) as the format defines it: the
    recorder's live blocks, and the replay's (whose inlined fast path a property test ties to
    this), are those of the dump. With `custom`, the custom blocks (`custom_alloc`,
    `custom_free`) go there, apart from the malloc'd ones (an object may start where its
    superblock starts)."""
    release, new, size = effect(op, result, args)
    if custom is not None and op in CUSTOM:
        live = custom
    if release is not None:
        live.pop(release, None)
    if new is not None:
        live[new] = size


def superblocks(blocks: dict[int, int], custom: Iterable[int]) -> set[int]:
    """The malloc'd blocks of `blocks` (address -> size) that hold a custom block (of the
    addresses `custom`): the superblocks a pool carves its objects from ("Custom blocks").
    A block of size 0 holds nothing; a custom block lies in the block its address falls in."""
    starts = sorted(custom)
    if not starts or not blocks:
        return set()
    found = set()
    for addr, size in blocks.items():
        i = bisect_left(starts, addr)
        if i < len(starts) and starts[i] < addr + size:
            found.add(addr)
    return found


def checked_blocks(live: dict[int, int], custom: dict[int, int]) -> dict[int, int]:
    """The blocks a leak check looks at, as valgrind's memcheck (mc_leakcheck.c): the live
    malloc'd blocks but the superblocks of live custom blocks, and the custom blocks. Where a
    custom block starts at its superblock's address, the custom block is the one kept."""
    if not custom:
        return live
    hidden = superblocks(live, custom)
    blocks = {addr: size for addr, size in live.items() if addr not in hidden}
    blocks.update(custom)
    return blocks
