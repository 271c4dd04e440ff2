"""`memdump-analyze sizes DUMP`: the allocation size histogram, in power-of-two buckets: how many
blocks of each range of requested sizes were allocated, and their bytes."""

from __future__ import annotations

from typing import Any

from .common import Options, Side, envelope, heading, percent, plural, signed

__all__ = ["NEEDS", "STACKS", "buckets", "build"]

#: the parts of the pass this view needs (stream.PARTS)
NEEDS: frozenset[str] = frozenset(("sizes",))
#: it shows no stack: the dump's frames are not symbolised for it (views.VIEWS)
STACKS = False


def buckets(sizes: dict[int, int]) -> dict[int, list[int]]:
    """bucket -> [blocks, bytes]: bucket 0 holds size 0, bucket B sizes 2**(B-1) to 2**B - 1."""
    out: dict[int, list[int]] = {}
    for size, n in sizes.items():
        row = out.setdefault(size.bit_length(), [0, 0])
        row[0] += n
        row[1] += n * size
    return out


def _bounds(b: int) -> tuple[int, int]:
    return (0, 0) if b == 0 else (1 << (b - 1), (1 << b) - 1)


def build(side: Side, base: Side | None, opts: Options) -> tuple[dict[str, Any], list[str]]:
    """The view's JSON and its text lines. `--top N`: the N buckets with most blocks."""
    mine = buckets(side.profile.sizes)
    theirs = buckets(base.profile.sizes) if base is not None else {}
    diff = base is not None
    rows = {b: [mine.get(b, [0, 0])[i] - theirs.get(b, [0, 0])[i] for i in (0, 1)]
            for b in set(mine) | set(theirs)}
    order = sorted(rows)
    if opts.top is not None:
        kept = set(sorted(order, key=lambda b: (-abs(rows[b][0]), b))[: opts.top])
        more = len(order) - len(kept)
        order = [b for b in order if b in kept]
    else:
        more = 0
    blocks = side.profile.allocations
    nbytes = side.profile.allocated_bytes
    body: dict[str, Any] = {
        "allocations": blocks,
        "allocated_bytes": nbytes,
        "buckets": [{"min": _bounds(b)[0], "max": _bounds(b)[1], "blocks": rows[b][0],
                     "bytes": rows[b][1]} for b in order],
        "more_buckets": more,
    }
    lines = [heading("allocation sizes", side, base),
             f"{plural(blocks, 'allocation')}, {plural(nbytes, 'byte')}", "",
             f"{'size':>25}  {'blocks':>12}  {'':>6}  {'bytes':>15}  {'':>6}"]
    widest = max((abs(rows[b][0]) for b in order), default=0)
    for b in order:
        lo, hi = _bounds(b)
        n, total = rows[b]
        bar = "#" * round(30 * abs(n) / widest) if widest else ""
        shares = ("", "") if diff else (percent(n, blocks), percent(total, nbytes))
        lines.append(f"{f'{lo:,} - {hi:,}':>25}  {signed(n, diff):>12}  {shares[0]:>6}  "
                     f"{signed(total, diff):>15}  {shares[1]:>6}  {bar}")
    if more:
        lines += ["", f"... {plural(more, 'more bucket')} (--top)"]
    return envelope("sizes", side, base, body), lines
