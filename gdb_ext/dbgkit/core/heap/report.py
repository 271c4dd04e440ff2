"""The heap walk's answer for the user: the blocks' types in JSON (`types`) and the leaks grouped
by kind and type when no stack is known (`groups`, which view.leaks_text prints: "LEAK 1: 12,800
bytes in 200 blocks of `Connection` (vtable), definitely lost"). A group is one kind and one type;
bytes are the blocks' usable sizes (the heap does not remember the requests)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from .blocktypes import LABEL_OFFSET

__all__ = ["KIND_WORDS", "group_by_type", "group_labelled", "plural", "types_json"]

#: valgrind's words for the scan's kinds
KIND_WORDS = {"definite": "definitely lost", "indirect": "indirectly lost",
              "possible": "possibly lost", "reachable": "still reachable"}


def types_json(labels: list[tuple[str, str]], codes) -> dict:
    """{"labels": [[type, how], ...] (those used, in order of first use), "codes": per block (in
    the order of `blocks`) its label's index}."""
    index: dict[int, int] = {}
    used: list[list[str]] = []
    out = []
    for c in codes:
        i = index.get(c)
        if i is None:
            i = index[c] = len(used)
            used.append(list(labels[c + LABEL_OFFSET]))
        out.append(i)
    return {"labels": used, "codes": out}


def group_by_type(kind_blocks: list, labels: list[tuple[str, str]], codes) -> dict:
    """kind -> [[type, how, bytes, blocks], ...] largest first, from the scan's blocks
    ([address, size, kind, extra], in the walk's block order) and their type codes."""
    return group_labelled(kind_blocks, (labels[code + LABEL_OFFSET] for code in codes))


def group_labelled(kind_blocks: list, block_labels: Iterable[tuple[str, str]]) -> dict:
    """group_by_type's groups from each block's (type, how) label, in KIND_BLOCKS' order."""
    sums: dict[str, dict[tuple[str, str], list[int]]] = defaultdict(lambda: defaultdict(
        lambda: [0, 0]))
    for (_, size, kind, _), label in zip(kind_blocks, block_labels, strict=True):
        entry = sums[kind][tuple(label)]
        entry[0] += size
        entry[1] += 1
    return {kind: sorted(([name, how, b, n] for (name, how), (b, n) in groups.items()),
                         key=lambda g: (-g[2], -g[3], g[0]))
            for kind, groups in sums.items()}


def plural(n: int) -> str:
    """N blocks, with a thousands separator (1 block)."""
    return f"{n:,} block" + ("" if n == 1 else "s")
