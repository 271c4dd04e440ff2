"""`--format collapsed`: folded stacks, one `outermost;...;innermost N` line per stack, as
flamegraph.pl, speedscope and inferno read them; with `--base`, `STACK BASE NEW`, the two-count
lines of flamegraph.pl's differential flame graphs (difffolded.pl). docs/exports.md, "collapsed".
"""

from __future__ import annotations

from ..dumpfile import Frame
from .metrics import METRICS
from .profile import HeapProfile, frame_label

__all__ = ["METRICS", "frame_name", "render_collapsed"]


NO_STACK = "(no stack)"


def frame_name(f: Frame) -> str:
    """A frame's name in a folded line: its function (module+offset without one); `;` separates
    frames and the count ends the line, so `;` and line breaks in a name become `:` and ` `."""
    return frame_label(f).replace(";", ":").replace("\n", " ").replace("\r", " ")


def _folded(profile: HeapProfile, metric: str) -> dict[str, int]:
    """Folded stack -> the metric's count, summed over the stacks that fold alike (the same
    functions at other lines)."""
    value = METRICS[metric]
    out: dict[str, int] = {}
    # each frame's name by the frame's identity: the stacks share their frames (the reader's)
    names: dict[int, str] = {}
    for row in profile.stacks.values():
        n = value(row)
        if n:
            parts = []
            for f in reversed(row.frames):
                name = names.get(id(f))
                if name is None:
                    name = names[id(f)] = frame_name(f)
                parts.append(name)
            text = ";".join(parts) or NO_STACK
            out[text] = out.get(text, 0) + n
    return out


def render_collapsed(profile: HeapProfile, metric: str, base: HeapProfile | None = None) -> str:
    """The folded lines, sorted by stack (as stackcollapse scripts write them)."""
    new = _folded(profile, metric)
    if base is None:
        return "".join(f"{text} {n}\n" for text, n in sorted(new.items()))
    old = _folded(base, metric)
    return "".join(f"{text} {old.get(text, 0)} {new.get(text, 0)}\n"
                   for text in sorted(new.keys() | old.keys()))
