"""The custom blocks of a replay (memdump_api.h: `custom_alloc`, `custom_free`; docs/dump-format.md,
"Custom blocks"): kept apart from the malloc'd blocks, and at the end in place of the malloc'd
blocks that hold them (superblocks). A mixin of the replay's replayer (replay.py), which provides
the attributes declared here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .dumpformat import superblocks

__all__ = ["CustomBlocks"]

_HEX = re.compile(rb"0x[0-9a-fA-F]+")


class CustomBlocks:
    """The replayer's custom block handling."""

    r: Any  # the replay's Replay
    #: pointer as written -> (size, stack node id)
    live: dict[bytes, tuple[int, int]]
    custom: dict[bytes, tuple[int, int]]
    custom_freed: dict[bytes, tuple[int, int]]

    #: the replayer's: (kind, seq, tid, op, ptr, node, freed_seq, freed_node)
    _error: Callable[..., None]

    def _custom(self, fl: list[bytes], seq: int, tid: int, op: str, node: int, arg: int) -> None:
        """A custom block made live (`custom_alloc`, ARG its size) or released (`custom_free`,
        ARG the pointer), in `custom`, apart from the malloc'd blocks."""
        if op == "custom_alloc":
            if fl[5] != b"0x0":
                if fl[5] in self.custom:
                    self.r.reused_live += 1
                self.custom[fl[5]] = (arg, node)
                self.r.custom_allocations += 1
            return
        ptok = fl[6]
        if self.custom.pop(ptok, None) is not None:
            self.r.custom_frees += 1
            self.custom_freed[ptok] = (node, seq)
        elif arg:
            prev = self.custom_freed.get(ptok)
            if prev is not None:
                self._error("double-free", seq, tid, op, arg, node, prev[1], prev[0])
            else:
                self._error("invalid-free", seq, tid, op, arg, node, None, None)

    def _hide_superblocks(self) -> None:
        """The live blocks at the end, as a leak check sees them ("Custom blocks"): the custom
        blocks, and the malloc'd blocks but those that hold a custom block."""
        if not self.custom:
            return
        live = self.live
        sizes = {int(p, 16): p for p in live if _HEX.fullmatch(p)}
        custom = [int(p, 16) for p in self.custom if _HEX.fullmatch(p)]
        hidden = superblocks({a: live[p][0] for a, p in sizes.items()}, custom)
        r = self.r
        for addr in hidden:
            size = live.pop(sizes[addr])[0]
            r.superblocks += 1
            r.superblock_bytes += size
            r.live_bytes -= size
        for p, block in self.custom.items():
            old = live.pop(p, None)
            if old is not None:
                r.live_bytes -= old[0]
            live[p] = block
            r.live_bytes += block[0]
