"""The views of a dump beyond its leaks (docs/views.md): `peak`, `hotspots`, `temporary`,
`lifetimes`, `timeline` and `sizes`, each a `memdump-analyze` subcommand, all computed by one
streaming pass (heappass.py, of which `stream.ProfileOutput` is the views' accumulator) and each
rendered by its module, as text and as JSON."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from types import ModuleType

from .. import heappass
from ..dumpfile import DumpError, DumpReader
from ..heappass import Accumulator, diagnose
from ..progress import Progress
from ..rules import RUNTIME_FREE_FUNCTIONS
from ..symbolize import symbolize
from ..tagphases import UNTAGGED, TagsAndPhases, TagsPhasesOutput
from . import hotspots, lifetimes, peak, sizes, temporary, timeline
from .common import LazyGroups, Options, Side, stack_nodes
from .stream import PARTS, Profile, ProfileOutput

__all__ = ["VIEWS", "Options", "Side", "load", "shows_stacks", "tag_series", "tags_with_series"]

#: view name -> its module: its `NEEDS` (the parts of the pass it reads), its `build(side, base,
#: options)` (the JSON and the text lines), for a view that keeps figures of its own, its
#: `accumulator()` (an `heappass.Accumulator`, found after the pass as `Side.accumulated`), and
#: `STACKS = False` in a view that shows no stack (`shows_stacks`)
VIEWS: dict[str, ModuleType] = {
    "peak": peak,
    "hotspots": hotspots,
    "temporary": temporary,
    "lifetimes": lifetimes,
    "timeline": timeline,
    "sizes": sizes,
}


def load(path: str, *, points: int = 200, symbols: bool = True,
         progress: Progress | None = None,
         compute: frozenset[str] = PARTS,
         also: Sequence[Accumulator] = ()) -> tuple[Side, list[str]]:
    """Pass over the dump at `path` once; its groups, and warnings. Raises `DumpError`.
    `compute`: the parts of the pass wanted (a view's `NEEDS`; all by default); `also`: other
    accumulators of the same pass (a view's own, `Side.accumulated`)."""
    collecting = gc.isenabled()
    gc.disable()  # no reference cycles are made; the collector would walk the live blocks
    warnings: list[str] = []
    try:
        with DumpReader(path, mark_functions=RUNTIME_FREE_FUNCTIONS) as reader:
            if progress is not None and progress.enabled:
                progress.total = reader.on_read(progress.on_read)
            try:
                out = ProfileOutput(compute, points)
                heappass.run(reader, [out, *also])
                prof: Profile = out.profile
            except (ValueError, IndexError, KeyError, TypeError, DumpError):
                raise diagnose(path) from None
            except OSError as e:
                raise reader.read_error(e) from None
            nodes = stack_nodes(prof) if symbols else None
            if nodes is not None:
                warnings += symbolize(reader, nodes).problems()
            for tag, line in reader.unknown_tags.items():
                warnings.append(f"skipped records with unknown tag '{tag}' (first at line "
                                f"{line}): the dump was written by a newer memdump")
            if reader.truncated:
                warnings.append("the dump's last line is incomplete (the recorder was killed "
                                "while writing it): it was ignored")
            return Side(path, prof, LazyGroups(reader, prof, nodes), dict(reader.info),
                        also[0] if also else None), warnings
    finally:
        if collecting:
            gc.enable()


def shows_stacks(view: str) -> bool:
    """Whether view `view` shows stacks, whose frames `load` then symbolises."""
    return getattr(VIEWS[view], "STACKS", True)


def tag_series(p: Profile) -> dict[str, list[list[int]]]:
    """Each tag's live bytes at the `timeline`'s points of profile `p` (its "timeline" part):
    tag -> [[SEQ, bytes], ...] (a dump without tags: `(untagged)`, the whole heap)."""
    if not p.tag_names:
        return {UNTAGGED: [[seq, heap] for seq, heap, _, _ in p.timeline]}
    return {name: [[pt[0], values[i]] for pt, values in zip(p.timeline, p.timeline_tags,
                                                            strict=True)]
            for i, name in enumerate(p.tag_names)}


def tags_with_series(path: str, points: int = 200) -> tuple[TagsAndPhases,
                                                            dict[str, list[list[int]]]]:
    """--by-tag's figures and each tag's series over time, in one pass over the dump at
    `path`. Raises `DumpError`."""
    tags = TagsPhasesOutput()
    series = ProfileOutput(frozenset(("timeline",)), points, fragmentation=False)
    heappass.run_path(path, [tags, series])
    return tags.result, tag_series(series.profile)
