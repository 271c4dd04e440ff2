"""The errors a dump reader reports about a line (docs/dump-format.md, "Errors a reader reports").

`EventErrors` is a part of `DumpReader` (dumpfile.py): the sentences for a wrong SEQ, an undefined
STACK, a record with the wrong number of fields (as the grammar, `dumpformat.GRAMMAR`, counts them),
a malformed number, a short record (format 2.0) without its thread, and `diagnose`, which finds what
is wrong with a line that made a fast path raise.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .dumpdecode import fields as split_line
from .dumpformat import GRAMMAR_BY_TAG, PROCESS, SHORT_OPS, split_record
from .dumpio import DumpError, show

__all__ = ["EventErrors"]

_DEC = re.compile(rb"[0-9]+")
_HEX = re.compile(rb"0x[0-9a-fA-F]+")
#: tag -> the fewest and the most words of its records, the tag included
_WORDS = {rec.tag.encode(): (rec.required + 1, len(rec.fields) + 1)
          for rec in GRAMMAR_BY_TAG.values()}
_SHORT = tuple(tag.encode() for tag in SHORT_OPS)
_PROCESS = frozenset(tag.encode() for tag, rec in GRAMMAR_BY_TAG.items() if rec.kind == PROCESS)


class EventErrors:
    """The error sentences of `DumpReader`, which provides the attributes declared here."""

    path: str
    tid: bytes | None
    node_ids: dict[bytes, int]

    _here: Callable[[int], int]  # the line of sequenced record SEQ
    expand: Callable[[list[bytes], int], list[bytes]]  # a short record as its `e` record

    def read_error(self, e: OSError) -> DumpError:
        return DumpError(self.path, None, f"cannot read the file ({e.strerror or e})")

    def _fields_error(self, tag: bytes, found: int, seq: int) -> DumpError:
        """The error for a `tag` record of `found` fields, which its row of the grammar says is
        not its count."""
        rec = GRAMMAR_BY_TAG[tag.decode()]
        return DumpError(
            self.path,
            self._here(seq),
            f"'{show(tag)}' record has {found} field{'s' if found != 1 else ''}, "
            f"expected {rec.required} ({rec.text})",
        )

    def check_fields(self, fl: list[bytes], seq: int) -> None:
        """Raise the error for record `fl` (split) when its fields are not as many as the
        grammar's row of its tag has (its optional fields may be left out)."""
        least, most = _WORDS[fl[0]]
        if not least <= len(fl) <= most:
            raise self._fields_error(fl[0], len(fl) - 1, seq)

    def _num(self, tok: bytes, what: str, seq: int) -> int:
        if tok.isdigit():  # bytes.isdigit() is `[0-9]+`, faster than the regex
            return int(tok)
        if _DEC.fullmatch(tok) is None:
            raise DumpError(
                self.path, self._here(seq), f"malformed {what} '{show(tok)}' (expected a number)"
            )
        return int(tok)

    def _hexnum(self, tok: bytes, what: str, seq: int) -> int:
        if _HEX.fullmatch(tok) is None:
            raise DumpError(
                self.path,
                self._here(seq),
                f"malformed {what} '{show(tok)}' (expected a hex number like 0x1f)",
            )
        return int(tok, 16)

    def _short_error(self, fl: list[bytes], seq: int) -> DumpError:
        tag = fl[0].decode()
        if self.tid is None:
            return DumpError(
                self.path,
                self._here(seq),
                f"'{tag}' record before any 't' record (the thread of its event is unknown)",
            )
        return self._fields_error(fl[0], len(fl) - 1, seq)

    def seq_error(self, tok: bytes, seq: int) -> DumpError:
        """The error for SEQ `tok` where `seq` was expected (raises ValueError if not a number)."""
        got = int(tok)
        here = self._here(seq)
        if got == seq:
            return DumpError(self.path, here, f"malformed SEQ '{show(tok)}' (expected {seq})")
        if seq == 1:
            return DumpError(
                self.path, here, f"the first event is numbered {got}, not 1 (events are missing)"
            )
        prev = seq - 1
        if got > seq:
            return DumpError(
                self.path, here, f"event {got} follows event {prev} (events are missing)"
            )
        return DumpError(
            self.path, here, f"event {got} follows event {prev} (events are out of order)"
        )

    def undefined_stack(self, tok: bytes, seq: int) -> DumpError:
        if _DEC.fullmatch(tok) is None:
            return DumpError(
                self.path,
                self._here(seq),
                f"malformed STACK '{show(tok)}' (expected a number)",
            )
        return DumpError(
            self.path, self._here(seq), f"stack {int(tok)} is used before it is defined"
        )

    def diagnose(self, line: bytes, seq: int) -> DumpError | None:
        """The error in a line's tag, SEQ or (for `e`) STACK, or None when those are right.

        For a line that made a fast path raise: `seq` is the SEQ that the line should have if it
        is a sequenced record, or the last one if it is not.
        """
        fl = split_line(line)
        if not fl:
            return DumpError(self.path, self._here(seq) + 1, "empty line (expected a record)")
        tag = fl[0]
        here = self._here(seq)
        if tag in _SHORT:
            try:
                fl = self.expand(fl, seq)
            except DumpError as e:
                return e
            if fl[4] not in self.node_ids:
                return self.undefined_stack(fl[4], seq)
            return None
        if tag in _PROCESS:
            fl = split_record(line)
        elif tag != b"e":
            return None
        if len(fl) < 2 or not fl[1]:
            return DumpError(self.path, here, f"'{show(tag)}' record has no SEQ")
        if _DEC.fullmatch(fl[1]) is None:
            return DumpError(self.path, here, f"malformed SEQ '{show(fl[1])}' (expected a number)")
        if int(fl[1]) != seq:
            return self.seq_error(fl[1], seq)
        if tag == b"e":
            if len(fl) < 6:
                found = len(fl) - 1
                rec = GRAMMAR_BY_TAG["e"]
                fields = (f"field{'s' if found != 1 else ''}, expected at least {rec.required} "
                          f"({rec.text})")
                return DumpError(self.path, here, f"'e' record has {found} {fields}")
            if fl[4] not in self.node_ids:
                return self.undefined_stack(fl[4], seq)
        return None

    def malformed(self, line: bytes, seq: int) -> DumpError:
        """The error for a line that made a fast path raise, as precise as `diagnose` can be."""
        error = self.diagnose(line, seq)
        if error is None:
            error = DumpError(
                self.path, self._here(seq), f"malformed record '{show(line.rstrip())}'"
            )
        return error
