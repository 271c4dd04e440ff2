"""How a dump reader reads the records that are not events (docs/dump-format.md, "Records").

`Definitions` is a part of `DumpReader` (dumpfile.py): the definitions (`i`, `s`, `f`, `fi`, `fs`,
`n`) go into its tables, the tags (`g`, `u`), the clock samples (`c`), the pointer scan (`scan`,
`r`) and the locks (`lk`, `lw`: locks.py) into its state. Each record's fields are counted and
decoded as the grammar, `dumpformat.GRAMMAR`, types them; `READ` is which method reads which tag.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from .accesserrors import read_record as read_access_error
from .dumperrors import EventErrors
from .dumpformat import DEC, GRAMMAR, HEX, KIND_BY_CODE, STRING_ID, TEXT, source_path, unescape
from .dumpio import DumpError, show
from .heapcorruption import read_record as read_heap_corruption
from .locks import read_record as read_lock_record

__all__ = ["FI_MAY_FOLLOW", "READ", "TEXT_RECORDS", "Definitions", "Frame", "OlderBlock",
           "ScanRecord"]

_TAG = re.compile(rb"[A-Za-z][A-Za-z0-9_.-]*")
#: a HEX field, as `_hexnum` takes it
_is_hex = re.compile(rb"0x[0-9a-fA-F]+").fullmatch
#: tag -> (type, name) of each of its fields, as `fields()` decodes them
_DECODE = {rec.tag.encode(): tuple((f.type, f.name) for f in rec.fields) for rec in GRAMMAR}
#: tag -> the index of its first word from which all its fields are decimal numbers
_DECIMAL_FROM = {
    rec.tag.encode(): 1 + max((i + 1 for i, f in enumerate(rec.fields) if f.type != DEC), default=0)
    for rec in GRAMMAR
}



@dataclass(frozen=True, slots=True)
class Frame:
    """One frame of a stack: a program counter and what GDB knew about it.

    Code inlined at a program counter makes several frames with that one `pc`, `module` and
    `offset` (an `f` record and its `fi` records): each but the outermost has `inlined` set, its
    function having been inlined into the next frame's.
    """

    pc: int
    module: str | None
    offset: int
    function: str | None
    file: str | None
    line: int | None
    inlined: bool = False


@dataclass(frozen=True, slots=True)
class ScanRecord:
    """The `scan` record: the pointer scan at exit, made after sequenced record `after`."""

    after: int
    status: str
    root_bytes: int
    block_bytes: int
    millis: int
    line: int


@dataclass(frozen=True, slots=True)
class OlderBlock:
    """(2.7) An `ob` record: a block in use at the last `scan` that the recording, begun with an
    attach, does not know (allocated before it), found by walking glibc's heap: its address, its
    chunk's usable size, its leak kind (`definite` ...), its type and how that was found (the
    heap walk's labels, docs/heapwalk.md: `Connection` by `vtable`, `?` `unknown`)."""

    addr: int
    size: int
    kind: str
    how: str
    type: str


class Definitions(EventErrors):
    """The reading of definitions, tags, clock samples, the scan and locks: a part of
    `DumpReader`, which provides the attributes declared here."""

    strings: dict[int, str]
    frames: dict[int, Frame]
    inlined_into: dict[int, list[Frame]]
    nodes: dict[int, tuple[int, int]]
    info: dict[str, str]
    image_info: list[tuple[int, str, str]]
    unknown_tags: dict[str, int]
    scan: ScanRecord | None
    kinds: dict[bytes, tuple[str, str | None]]
    leaders: dict[bytes, bytes]
    older: list[OlderBlock]
    symbolized: dict[int, int]
    tags: dict[int, list[int]]
    clock: tuple[int, int]
    clocks: int
    _used_frames: set[int]
    _mark_functions: frozenset[str]
    _marked_frames: set[int]
    _open_fs: tuple[int, int]

    def fields(self, fl: list[bytes], seq: int, start: int = 1) -> list[int | str | bytes | None]:
        """The fields of record `fl` from index `start` on, decoded as the grammar types them:
        numbers (decimal or hex), the strings a string id names (or None), words as bytes."""
        if start >= _DECIMAL_FROM[fl[0]]:
            tail = fl[start:]
            if b"".join(tail).isdigit():  # all decimal, as most are (split() gives no empty one)
                return [int(tok) for tok in tail]
        out: list[int | str | bytes | None] = []
        for tok, (kind, name) in zip(fl[start:], _DECODE[fl[0]][start - 1:], strict=False):
            if kind == DEC:
                # bytes.isdigit() is `[0-9]+`: the decimal numbers `_num` takes, without its regex
                out.append(int(tok) if tok.isdigit() else self._num(tok, name, seq))
            elif kind == HEX:
                out.append(self._hexnum(tok, name, seq))
            elif kind == STRING_ID:
                out.append(self._str_ref(tok, name, seq))
            else:
                out.append(tok)
        return out

    # Definitions are rare next to events: they are read carefully, not fast. Each reads its
    # record's fields in the grammar's order, so that a line's first wrong field is the one named.

    def _tag(self, fl: list[bytes], seq: int) -> None:
        """`g TID STRING` (2.2): thread TID pushed a tag (memdump_api.h); `u TID`: it popped
        its innermost one. `tags` keeps each thread's stack of string ids."""
        self.check_fields(fl, seq)
        tid = self._num(fl[1], "TID", seq)
        stack = self.tags.setdefault(tid, [])
        if fl[0] == b"u":
            if not stack:
                raise DumpError(self.path, self._here(seq),
                                f"thread {tid} pops a tag it has not pushed")
            stack.pop()
            return
        string = self._num(fl[2], "STRING", seq)
        if string and string not in self.strings:
            raise DumpError(self.path, self._here(seq), f"tag string {string} is not defined")
        stack.append(string)

    def tag_of(self, tid: int) -> str | None:
        """Thread TID's innermost tag now (memdump_api.h), None when it has none."""
        stack = self.tags.get(tid)
        return self.strings.get(stack[-1], "") if stack else None

    def _new_id(self, tok: bytes, kind: str, table: dict, seq: int) -> int:  # type: ignore[type-arg]
        ident = self._num(tok, f"{kind} id", seq)
        if ident == 0:
            raise DumpError(self.path, self._here(seq), f"{kind} id 0 is reserved for 'none'")
        if ident in table:
            raise DumpError(self.path, self._here(seq), f"{kind} {ident} is defined twice")
        return ident

    def _str_ref(self, tok: bytes, what: str, seq: int) -> str | None:
        ident = self._num(tok, f"{what} string id", seq)
        if ident == 0:
            return None
        try:
            return self.strings[ident]
        except KeyError:
            raise DumpError(
                self.path, self._here(seq), f"string {ident} is used before it is defined"
            ) from None

    def _string(self, fl: list[bytes], seq: int) -> None:
        if len(fl) < 2:
            raise self._fields_error(b"s", len(fl) - 1, seq)
        ident = self._new_id(fl[1], "string", self.strings, seq)
        self.strings[ident] = unescape(fl[2]) if len(fl) > 2 else ""

    def _info(self, fl: list[bytes], seq: int) -> None:
        if len(fl) < 2 or not fl[1]:
            raise self._fields_error(b"i", len(fl) - 1, seq)
        key, value = unescape(fl[1]), unescape(fl[2]) if len(fl) > 2 else ""
        if seq:
            self.image_info.append((seq, key, value))
        else:
            self.info[key] = value

    def _frame(self, fl: list[bytes], seq: int) -> None:
        # `f ID PC MODULE OFFSET FUNCTION FILE LINE`, as the recorders write it: every field
        # checked at once (the few thousand records of a big dump: a third of the Python in a
        # view's pass); anything else, read field by field for the first wrong one's error
        if len(fl) == 8 and _is_hex(fl[2]) and _is_hex(fl[4]) and b"".join(
                (fl[1], fl[3], fl[5], fl[6], fl[7])).isdigit():
            ident, module, function, file = int(fl[1]), int(fl[3]), int(fl[5]), int(fl[6])
            strings = self.strings
            if ident and ident not in self.frames and (not module or module in strings) and (
                    not function or function in strings) and (not file or file in strings):
                name = strings[function] if function else None
                self.frames[ident] = Frame(
                    int(fl[2], 16), strings[module] if module else None, int(fl[4], 16), name,
                    source_path(strings[file]) if file else None, int(fl[7]) or None)
                if name is not None and name in self._mark_functions:
                    self._marked_frames.add(ident)
                return
        self.check_fields(fl, seq)
        ident = self._new_id(fl[1], "frame", self.frames, seq)
        pc, module, offset, function, file, line = self.fields(fl, seq, 2)
        self.frames[ident] = Frame(pc, module, offset, function, source_path(file),
                                   line or None)
        if function is not None and function in self._mark_functions:
            self._marked_frames.add(ident)

    def _inlined(self, fl: list[bytes], seq: int) -> None:
        self.check_fields(fl, seq)
        ident = self._num(fl[1], "frame id", seq)
        inner = self.frames.get(ident)
        if inner is None:
            raise DumpError(
                self.path, self._here(seq), f"frame {ident} is used before it is defined"
            )
        if ident in self._used_frames and self._open_fs != (ident, seq):
            raise DumpError(
                self.path,
                self._here(seq),
                f"'fi' record of frame {ident} after a stack node used the frame",
            )
        function, file, line = self.fields(fl, seq, 2)
        outer = self.inlined_into.setdefault(ident, [])
        if outer:
            outer[-1] = replace(outer[-1], inlined=True)
        else:
            self.frames[ident] = replace(inner, inlined=True)
        outer.append(Frame(inner.pc, inner.module, inner.offset, function,
                           source_path(file), line or None))
        if function is not None and function in self._mark_functions:
            self._marked_frames.add(ident)

    def _symbols(self, fl: list[bytes], seq: int) -> None:
        """An `fs` record (1.3): frame ID's symbols, written after its use; `fi` records may
        follow it at once."""
        self.check_fields(fl, seq)
        ident = self._num(fl[1], "frame id", seq)
        frame = self.frames.get(ident)
        if frame is None:
            raise DumpError(
                self.path, self._here(seq), f"'fs' record of frame {ident}, which is not defined"
            )
        if ident in self.symbolized:
            raise DumpError(
                self.path,
                self._here(seq),
                f"second 'fs' record of frame {ident} (the first is at line "
                f"{self.symbolized[ident]})",
            )
        if ident in self.inlined_into:
            raise DumpError(
                self.path,
                self._here(seq),
                f"'fs' record of frame {ident}, whose 'f' record has 'fi' records already",
            )
        function, file, line = self._names(fl, seq)
        self.frames[ident] = Frame(frame.pc, frame.module, frame.offset, function,
                                   source_path(file), line or None, frame.inlined)
        self.symbolized[ident] = self._here(seq)
        self._open_fs = (ident, seq)
        if function is not None and function in self._mark_functions:
            self._marked_frames.add(ident)

    def _names(self, fl: list[bytes], seq: int) -> tuple[str | None, str | None, int]:
        """An `fs` record's FUNCTION, FILE and LINE (`fields`), decoded at once when they are
        numbers and the strings are defined (as GDB writes them)."""
        if len(fl) == 5 and b"".join(fl[2:]).isdigit():
            function, file, strings = int(fl[2]), int(fl[3]), self.strings
            if (not function or function in strings) and (not file or file in strings):
                return (strings[function] if function else None,
                        strings[file] if file else None, int(fl[4]))
        function, file, line = self.fields(fl, seq, 2)
        return function, file, line  # type: ignore[return-value]

    def _node(self, fl: list[bytes], seq: int) -> None:
        self.check_fields(fl, seq)
        ident = self._new_id(fl[1], "stack", self.nodes, seq)
        parent, frame = self.fields(fl, seq, 2)
        if parent not in self.nodes:
            raise DumpError(
                self.path, self._here(seq), f"stack {parent} is used before it is defined"
            )
        if frame not in self.frames:
            raise DumpError(
                self.path,
                self._here(seq),
                "stack node needs a frame (FRAME is 0)"
                if frame == 0
                else f"frame {frame} is used before it is defined",
            )
        self.nodes[ident] = (parent, frame)
        self._used_frames.add(frame)
        marked = frame in self._marked_frames or (
            parent != 0 and self.node_ids[str(parent).encode()] < 0
        )
        self.node_ids[str(ident).encode()] = -ident if marked else ident

    def clock_sample(self, fl: list[bytes], seq: int) -> tuple[int, int]:
        """A `c` record (2.2): (MILLIS, RSS), the clock of the events after sequenced record
        `seq`; MILLIS never goes back."""
        self.check_fields(fl, seq)
        millis, rss = self.fields(fl, seq)
        if millis < self.clock[0]:
            raise DumpError(
                self.path,
                self._here(seq),
                f"clock sample at {millis} ms is earlier than the one before ({self.clock[0]} ms)",
            )
        self.clock = (millis, rss)
        self.clocks += 1
        return self.clock

    def _scan(self, fl: list[bytes], seq: int) -> None:
        self.check_fields(fl, seq)
        after = self._num(fl[1], "AFTER", seq)
        if after != seq:
            raise DumpError(
                self.path,
                self._here(seq),
                f"scan record says it follows event {after}, but it follows event {seq}",
            )
        status, root_bytes, block_bytes, millis = self.fields(fl, seq, 2)
        self.scan = ScanRecord(after, status.decode("utf-8", "surrogateescape"),
                               root_bytes, block_bytes, millis, self._here(seq))
        self.kinds.clear()
        self.leaders.clear()
        self.older.clear()

    def _kind(self, fl: list[bytes], seq: int) -> None:
        self.check_fields(fl, seq)
        if self.scan is None:
            raise DumpError(self.path, self._here(seq), "'r' record before any 'scan' record")
        self._hexnum(fl[1], "ADDR", seq)
        kind = KIND_BY_CODE.get(fl[2])
        if kind is None:
            raise DumpError(
                self.path, self._here(seq), f"unknown leak kind '{show(fl[2])}' (D, I, P or R)"
            )
        heuristic = None
        if len(fl) > 3:
            if kind == "indirect":
                self._hexnum(fl[3], "LEADER", seq)
                self.leaders[fl[1]] = fl[3]  # as written, like the pointers of events
            else:
                heuristic = fl[3].decode("utf-8", "surrogateescape")
        self.kinds[fl[1]] = (kind, heuristic)

    def _older(self, fl: list[bytes], seq: int) -> None:
        """(2.7) `ob ADDR SIZE KIND HOW TYPE`: a block from before the recording, at the last
        scan."""
        self.check_fields(fl, seq)
        if self.scan is None:
            raise DumpError(self.path, self._here(seq), "'ob' record before any 'scan' record")
        addr, size = self._hexnum(fl[1], "ADDR", seq), self._num(fl[2], "SIZE", seq)
        kind = KIND_BY_CODE.get(fl[3])
        if kind is None:
            raise DumpError(
                self.path, self._here(seq), f"unknown leak kind '{show(fl[3])}' (D, I, P or R)"
            )
        self.older.append(OlderBlock(addr, size, kind, fl[4].decode("utf-8", "surrogateescape"),
                                     unescape(fl[5])))

    def _unknown(self, tag: bytes, seq: int) -> None:
        if _TAG.fullmatch(tag) is None:
            raise DumpError(self.path, self._here(seq), f"malformed record (tag '{show(tag)}')")
        name = tag.decode("ascii")
        self.unknown_tags.setdefault(name, self._here(seq))


#: how `DumpReader.other()` reads each unsequenced record of the grammar (`e`, the short
#: records, `t` and the process events are `records()`'s), from its fields (`split_record`'s for
#: the records that end with the rest of the line)
READ: dict[bytes, Callable[[Definitions, list[bytes], int], object]] = {
    b"i": Definitions._info,
    b"s": Definitions._string,
    b"f": Definitions._frame,
    b"fi": Definitions._inlined,
    b"fs": Definitions._symbols,
    b"n": Definitions._node,
    b"scan": Definitions._scan,
    b"r": Definitions._kind,
    b"g": Definitions._tag,
    b"u": Definitions._tag,
    b"c": Definitions.clock_sample,
    b"lk": read_lock_record,
    b"lw": read_lock_record,
    b"ae": read_access_error,
    b"hc": read_heap_corruption,
    b"ob": Definitions._older,
}
#: the records whose last field is the rest of the line (TEXT, VALUE)
TEXT_RECORDS = frozenset(rec.tag.encode() for rec in GRAMMAR if rec.fields[-1].type == TEXT)
#: the records after which an `fs` record's `fi` records may still follow: `fi`, `fs`, strings
FI_MAY_FOLLOW = frozenset((b"fi", b"fs", b"s"))
