"""The heap walk's answer for the user: the blocks' types in JSON (`types`), the leaks grouped by
kind and type when no stack is known (`groups`), and the driver's text report (`--text`):

    LEAK 1: 12,800 bytes in 200 blocks of `Connection` (vtable), definitely lost

A group is one kind and one type; the leaks (definitely, indirectly, possibly lost) are numbered
largest first (bytes, then blocks, then the type's name), the still reachable blocks summed by
type after them. Bytes are the blocks' usable sizes (the heap does not remember the requests)."""

from __future__ import annotations

from collections import defaultdict

from .blocktypes import LABEL_OFFSET

__all__ = ["KIND_WORDS", "group_by_type", "text_report", "types_json"]

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
    sums: dict[str, dict[tuple[str, str], list[int]]] = defaultdict(lambda: defaultdict(
        lambda: [0, 0]))
    for (_, size, kind, _), code in zip(kind_blocks, codes, strict=True):
        entry = sums[kind][labels[code + LABEL_OFFSET]]
        entry[0] += size
        entry[1] += 1
    return {kind: sorted(([name, how, b, n] for (name, how), (b, n) in groups.items()),
                         key=lambda g: (-g[2], -g[3], g[0]))
            for kind, groups in sums.items()}


def _plural(n: int) -> str:
    return f"{n:,} block" + ("" if n == 1 else "s")


def text_report(out: dict) -> str:
    """The driver's --text output from its JSON document OUT (with `kinds` and their `groups`)."""
    lines = [f"heap of the {out['source']}: {_plural(len(out['blocks']))} in use, "
             f"{sum(s for _, s in out['blocks']):,} bytes; glibc's layout from "
             f"{'its debug symbols' if out['symbols'] == 'debug' else 'the table'}"]
    lines += [f"problem: {p}" for p in out["problems"]]
    groups = out["kinds"]["groups"]
    leaks = sorted(((g, kind) for kind in ("definite", "indirect", "possible")
                    for g in groups.get(kind, [])), key=lambda e: (-e[0][2], -e[0][3], e[0][0]))
    for number, ((name, how, nbytes, blocks), kind) in enumerate(leaks, 1):
        lines.append(f"LEAK {number}: {nbytes:,} bytes in {_plural(blocks)} of `{name}` "
                     f"({how}), {KIND_WORDS[kind]}")
    for name, how, nbytes, blocks in groups.get("reachable", []):
        lines.append(f"reachable: {nbytes:,} bytes in {_plural(blocks)} of `{name}` ({how})")
    totals = out["kinds"]["totals"]
    lines.append("totals: " + ", ".join(f"{KIND_WORDS[k]} {totals[k][0]:,} bytes in "
                                        f"{_plural(totals[k][1])}" for k in KIND_WORDS
                                        if k in totals))
    return "\n".join(lines) + "\n"
