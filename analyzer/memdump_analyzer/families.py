"""Allocation families (dump format 2.1): the blocks of `new`, `new[]` and the C library's
allocators, and the mismatched deallocation, a block released by another family's operation
(valgrind memcheck's "Mismatched free() / delete / delete []").

The replay (replay.py) keeps the family of each live block of the `new` and `new[]` families in
its hot loop (the others are `malloc`'s); this is the rest: the family each releasing operation
expects, and the error.
"""

from __future__ import annotations

from typing import Protocol

from .dumpformat import RELEASES

__all__ = ["RELEASES_B", "FamilyChecks"]

#: a releasing operation -> the family of the blocks it releases, both as written
RELEASES_B: dict[bytes, bytes] = {op.encode(): family.encode() for op, family in RELEASES.items()}


class _Events(Protocol):
    """What FamilyChecks needs of the replay it is part of."""

    reader: object

    def _event(self, fl: list[bytes], seq: int) -> tuple[int, str, int, int | None, list[int]]: ...

    def _error(self, kind: str, seq: int, tid: int, op: str, ptr: int, node: int,
               freed_seq: int | None, freed_node: int | None,
               alloc: tuple[int, int, str] | None = None) -> None: ...


class FamilyChecks:
    """The replay's mismatched-free error (a mixin of its replayer)."""

    def _mismatched(self: _Events, fl: list[bytes], seq: int, family: bytes,
                    block: tuple[int, int]) -> None:
        """`e` record `seq` (fields `fl`, as the decoder gives a short record too) released the
        live block `block` (size, STACK) of `family`, which its operation does not release: a
        mismatched deallocation. The block is released all the same (valgrind frees it too)."""
        tid, op, node, _, args = self._event(fl, seq)
        self._error("mismatched-free", seq, tid, op, args[0], node, None, None,
                    (block[0], block[1], family.decode()))
