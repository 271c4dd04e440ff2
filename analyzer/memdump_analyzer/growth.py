"""The array analyser: `memdump-analyze --growth` (docs/growth.md) finds growth chains, the
pattern of a std::vector or std::string that grows, or of a C array grown with realloc.

A regrowth is a block replaced by a larger one: the thread allocates the larger block at the
smaller one's allocation stack, and its next heap operation frees the smaller one (libstdc++'s
_M_realloc_insert, _M_create: allocate, copy, deallocate; nothing else allocated in between), or
it reallocs the block to a larger size (the site is then the realloc's stack). Chained
regrowths are one container. Per allocation stack: how many containers regrew, how many times,
their final and largest sizes, the bytes the regrowths copied, and the reserve that would have
made each container's storage once: its largest size. One pass; memory bounded by the live
blocks and the distinct stacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import heappass
from .dumpfile import Frame
from .heappass import Accumulator, Figures
from .rules import is_runtime_frame, trim_stack
from .wording import plural

__all__ = ["GrowthOutput", "GrowthSite", "growth"]

@dataclass
class GrowthSite:
    """The growth chains of one allocation stack."""

    node: int
    containers: int = 0
    regrowths: int = 0
    copied_bytes: int = 0
    #: each container's largest size (its reserve), and its size at the end (from the
    #: library's pass: the least and the most of each, which is what the report shows)
    largest: list[int] = field(default_factory=list)
    final: list[int] = field(default_factory=list)
    stack: list[Frame] = field(default_factory=list)


class _Chain:
    __slots__ = ("site", "regrowths", "largest", "size", "index")

    def __init__(self, site: GrowthSite, size: int) -> None:
        self.site, self.regrowths, self.largest, self.size = site, 0, size, size
        self.index = -1


def growth(path: str) -> list[GrowthSite]:
    """The dump's growth chains by allocation stack, the most regrowths first."""
    out = GrowthOutput()
    heappass.run_path(path, [out])
    return out.sites_found


class GrowthOutput(Accumulator):
    """--growth's accumulator: each thread's block just made, the chains by their current
    block, the sites by allocation stack; in the library's pass, its table of sites
    (analyzer/native/tagviews.c: this class's events are then not called)."""

    events = True
    native = frozenset(("growth",))
    #: the threads' previous operations (`release`'s `last`)
    parts = frozenset(("temporary",))

    def __init__(self) -> None:
        self.chains: dict[bytes, _Chain] = {}  # pointer of a chain's current block -> chain
        # thread -> (pointer, size, node) of the block its last heap operation made (`_NEW`)
        self.last_new: dict[bytes, tuple[bytes, int, int]] = {}
        self.sites: dict[int, GrowthSite] = {}
        #: a realloc's released block (size, its chain) until its new block comes
        self.resized: tuple[int, _Chain | None] | None = None
        self.sites_found: list[GrowthSite] = []

    def release(self, seq: int, tid: bytes, ptr: bytes, size: int, node: int,
                made: bytes | None, last: bytes | None) -> None:
        just_made = self.last_new.pop(tid, None)
        if just_made is not None and just_made[0] != last:
            just_made = None  # the thread did something else since (a free, a failed call)
        chain = self.chains.pop(ptr, None)
        if made is not None:  # a realloc: `alloc` says whether it grew
            self.resized = (size, chain)
        elif just_made is not None and just_made[2] == node and just_made[1] > size:
            # freed right after its thread made a larger block at its stack: a regrowth
            self.chains[just_made[0]] = _regrow(chain, self.sites, (size, node), just_made)

    def alloc(self, seq: int, tid: bytes, ptr: bytes, size: int, node: int,
              resize: bool) -> None:
        if not resize:
            self.last_new[tid] = (ptr, size, node)
            return
        self.last_new.pop(tid, None)
        resized, self.resized = self.resized, None
        if resized is not None and size > resized[0]:  # realloc'd larger, at its own stack
            self.chains[ptr] = _regrow(resized[1], self.sites, (resized[0], node),
                                       (ptr, size, node))

    def record(self, seq: int, rec: list[bytes]) -> None:
        if rec[0] == b"p" and rec[2] == b"exec":
            self.chains.clear()

    def finish(self, figures: Figures) -> None:
        if figures.views is not None:
            for node, containers, regrowths, copied, *sizes in figures.views["sites"]:
                self.sites[node] = GrowthSite(node, containers, regrowths, copied,
                                              largest=sizes[2:], final=sizes[:2])
        for site in self.sites.values():
            site.stack = figures.reader.stack(abs(site.node))
        self.sites_found = sorted(self.sites.values(),
                                  key=lambda s: (-s.regrowths, -s.containers, s.node))


def _regrow(chain: _Chain | None, sites: dict[int, GrowthSite], old: tuple[int, int],
            grown: tuple[bytes, int, int]) -> _Chain:
    """OLD (size, node) replaced by GROWN (address, size, node): the chain goes on or begins,
    at the stack of the growing call (a realloc's own; an allocation's is OLD's too)."""
    if chain is None:
        site = sites.get(grown[2])
        if site is None:
            site = sites[grown[2]] = GrowthSite(grown[2])
        chain = _Chain(site, old[0])
        chain.index = site.containers
        site.containers += 1
        site.largest.append(old[0])
        site.final.append(old[0])
    site = chain.site
    chain.regrowths += 1
    site.regrowths += 1
    site.copied_bytes += old[0]
    chain.size = grown[1]
    chain.largest = max(chain.largest, grown[1])
    site.largest[chain.index] = chain.largest
    site.final[chain.index] = chain.size
    return chain


# -- rendering ------------------------------------------------------------------------------------

#: the JSON's `format` and `version` (docs/growth.md)
FORMAT = "memdump-growth"
VERSION = 1


def _shown(stack: list[Frame]) -> list[Frame]:
    """The frames a report shows, from the innermost one the program called (push_back)."""
    frames = list(trim_stack(stack))
    first = next((i for i, f in enumerate(frames) if not is_runtime_frame(f)), 0)
    return frames[max(0, first - 1):]


def _frame(frame: Frame) -> dict[str, object]:
    return {"function": frame.function, "file": frame.file, "line": frame.line,
            "module": frame.module, "offset": f"0x{frame.offset:x}"}


def growth_json(sites: list[GrowthSite], path: str, top: int | None,
                max_frames: int | None) -> dict[str, object]:
    return {"format": FORMAT, "version": VERSION, "view": "growth", "dump": path,
            "sites": [{"containers": s.containers, "regrowths": s.regrowths,
                       "copied_bytes": s.copied_bytes,
                       "final_bytes": {"min": min(s.final), "max": max(s.final)},
                       "reserve_bytes": {"min": min(s.largest), "max": max(s.largest)},
                       "stack": [_frame(f) for f in _shown(s.stack)[:max_frames]]}
                      for s in sites[:top]]}


def _where(frame: Frame) -> str:
    name = frame.function or (f"{frame.module}+0x{frame.offset:x}" if frame.module else "??")
    return f"{name} ({frame.file.rsplit('/', 1)[-1]}:{frame.line})" if frame.file else name


def _span(values: list[int]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"


def _bytes_span(values: list[int]) -> str:
    return plural(values[0], "byte") if min(values) == max(values) else f"{_span(values)} bytes"


def growth_text(sites: list[GrowthSite], path: str, top: int | None,
                max_frames: int | None) -> str:
    out = [f"memdump growth of {path}"]
    if not sites:
        out.append("no growth chain: no block was replaced by a larger one from its stack")
    for i, s in enumerate(sites[:top], 1):
        per = s.regrowths / s.containers
        out.append("")
        each = f" ({per:,.1f} each)" if s.containers != 1 else ""
        out.append(f"GROWTH {i:,} of {len(sites):,}: {plural(s.containers, 'container')} regrew "
                   f"{plural(s.regrowths, 'time')}{each}, copying "
                   f"{plural(s.copied_bytes, 'byte')}; final size {_bytes_span(s.final)}")
        out.append(f"  reserve {_bytes_span(s.largest)} up front: "
                   f"{plural(s.regrowths, 'allocation')} and "
                   f"{plural(s.copied_bytes, 'copied byte')} fewer")
        for n, frame in enumerate(_shown(s.stack)[:max_frames]):
            out.append(f"    #{n} {_where(frame)}")
    return "\n".join(out) + "\n"
