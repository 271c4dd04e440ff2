"""The one decoder of a dump's text records, driven by the grammar (`dumpformat.GRAMMAR`).

Every Python reader of a dump's lines goes through `decode`: the leak report's replay
(replay.py), the views' and exports' Python pass (heapevents.py), `DumpReader.records()` and
what reads it (rescan.py, leaksite.py), and the lines the C pass hands back (native.py, through
`fields`). It splits each line as the grammar says, reads the short records (format 2.0) as the
`e` records they stand for, numbers the sequenced records and checks their SEQ, gives `t`
records and definitions to the reader (`DumpReader.thread`, `DumpReader.other`, which keep the
tables and count the lines for the errors' line numbers), and yields what a consumer acts on:

- a heap event (an `e` record, or a short record expanded): `(SEQ, FIELDS, LINE)`, FIELDS the
  `e` record's `[b"e", SEQ, TID, OP, STACK, RESULT, ARGS...]` (bytes as written; a short
  record's SEQ field is empty, its TID the last `t` record's, its RESULT `-` for a release);
- a process event (`p`, `end`): `(SEQ, [TAG, SEQ, WHAT, b"", DETAIL], LINE)` (`DumpReader.other`);
- with `state`: a clock sample (`c`, its line counted, its fields still to read:
  `DumpReader.clock_sample`) and a tag record (`g`, after the reader took it) as `(SEQ, FIELDS,
  LINE)`, SEQ the last sequenced record's.

A line the decoder cannot read (empty, a SEQ that is not a number, a short record of the wrong
length or before any `t` record, a wrong SEQ) raises the reader's `DumpError` with its exact
`PATH:LINE: message` (`DumpReader.malformed`); what a consumer finds wrong in the fields it
reads is the consumer's to report, with LINE. A new short record is one row of the grammar.

The compact encoder (compact.py) keeps its own tokenising: it transcodes the bytes of a line, and
a line it does not find written exactly as the writer writes it is kept as a literal, so it must
see the line as written, not as read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .dumpformat import GRAMMAR, NO_RESULT, SHORT

__all__ = ["SHORT_ROWS", "decode", "fields"]

#: short record tag -> (the OP of the `e` record it stands for, its count of words, whether its
#: operation makes a block: then its fields are STACK RESULT ARGS, else STACK PTR and RESULT `-`)
SHORT_ROWS: dict[bytes, tuple[bytes, int, bool]] = {
    rec.tag.encode(): (rec.op.encode(), len(rec.fields) + 1, rec.op not in NO_RESULT)
    for rec in GRAMMAR if rec.kind == SHORT and rec.op is not None
}


def fields(line: bytes) -> list[bytes]:
    """A line's words, its tag first: how the decoder splits a record (a rest-of-line TEXT
    field is split again with `dumpformat.split_record` where it is read)."""
    return line.split()


def decode(reader, lines: Iterable[bytes] | None = None, seq: int = 0, *,  # noqa: ANN001
           state: bool = False) -> Iterator[tuple[int, list[bytes], bytes]]:
    """The heap events and process events of `reader`'s lines after the first (or of `lines`,
    read after sequenced record `seq`), in order, as the module's docstring says."""
    other = reader.other
    thread = reader.thread
    short = SHORT_ROWS
    tid = reader.tid
    head = [b"e", b"", tid]  # an expanded short record's first fields
    line = b""
    try:
        for line in reader.lines() if lines is None else lines:
            fl = line.split()
            tag = fl[0]
            row = short.get(tag)
            if row is not None:  # the most frequent: a short record, the last `t` record's thread
                seq += 1
                op, words, makes = row
                if len(fl) != words or tid is None:
                    raise reader._short_error(fl, seq)
                if makes:  # `e`, SEQ, TID, then OP in the tag's place, STACK RESULT ARGS
                    fl[0] = op
                    yield seq, head + fl, line
                else:
                    yield seq, [b"e", b"", tid, op, fl[1], b"-", fl[2]], line
            elif tag == b"e":
                seq += 1
                if int(fl[1]) != seq:
                    raise reader.seq_error(fl[1], seq)
                yield seq, fl, line
            elif tag == b"t":
                tid = thread(fl, seq)
                head = [b"e", b"", tid]
            elif state and tag == b"c":
                reader._other += 1  # a line, as `DumpReader.other` counts it
                yield seq, fl, line
            else:
                rec = other(line, fl, seq)
                if rec is not None:
                    seq += 1
                    yield seq, rec, line
                elif state and tag == b"g":
                    yield seq, fl, line
    except (ValueError, IndexError, KeyError, TypeError):
        raise reader.malformed(line, seq) from None
    except OSError as e:
        raise reader.read_error(e) from None
