"""Flame graphs as SVG for `--format html`: one rectangle per frame of a stack tree, the root at
the bottom, each frame as wide as its count; the page's script zooms into a clicked frame
(html.py). Written by hand: no library, nothing fetched."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from html import escape

from .collapsed import frame_name
from .profile import HeapProfile, StackFigures, TreeNode

__all__ = ["GROW", "PALETTE", "SHRINK", "WIDTH", "diff_flame_svg", "flame_svg"]

WIDTH = 1000
ROW = 18
#: frames narrower than this (in pixels at full width) are left out; their counts stay in their
#: parents'
MIN_WIDTH = 0.5
#: warm colours as flamegraph.pl's, picked by the function's name so that one function keeps its
#: colour in every graph of the page
PALETTE = ("#e8743b", "#f0a04b", "#e5542f", "#f2c14e", "#d9472b", "#eb8f3c")
#: a difference's frames: grew (red) and shrank (green)
GROW = "#d62728"
SHRINK = "#2ca02c"


def _tree(profile: HeapProfile, value: Callable[[StackFigures], int]) -> TreeNode:
    """The stacks by function name, the outermost at the root."""
    root = TreeNode("all")
    for row in profile.stacks.values():
        n = value(row)
        if n > 0:
            root.add(((name, name) for name in map(frame_name, reversed(row.frames))), n)
    return root


def _colour(name: str) -> str:
    return PALETTE[zlib.crc32(name.encode("utf-8", "surrogateescape")) % len(PALETTE)]


def flame_svg(profile: HeapProfile, value: Callable[[StackFigures], int], ident: str,
              unit: str) -> str:
    """The flame graph of `value` per stack, as an inline <svg> with id `ident`; an empty string
    when nothing counts. Each frame is a <g class="f"> with its place as fractions of the whole
    (data-x, data-w), its depth (data-d), its number (data-i), a <title> with its count in
    `unit`."""
    root = _tree(profile, value)
    return _svg(root, ident, lambda node, depth: "#c8c8c8" if depth == 0 else _colour(
        str(node.label)), lambda node: f"{node.value:,} {unit} "
        f"({100 * node.value / root.value:.2f}%)")


def diff_flame_svg(profile: HeapProfile, value: Callable[[StackFigures], int], ident: str,
                   unit: str) -> str:
    """The flame graph of a difference (`profile.difference`): each frame as wide as the bytes
    that changed under it, grown or shrunk, red when they grew on the whole, green when they
    shrank; its title gives the net change and the bytes that changed."""
    root = TreeNode("all")
    net: dict[int, int] = {}
    for row in profile.stacks.values():
        n = value(row)
        if n == 0:
            continue
        node = root
        root.value += abs(n)
        net[id(root)] = net.get(id(root), 0) + n
        for name in map(frame_name, reversed(row.frames)):
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = TreeNode(name)
            child.value += abs(n)
            net[id(child)] = net.get(id(child), 0) + n
            node = child

    def colour(node: TreeNode, depth: int) -> str:
        share = net.get(id(node), 0) / node.value if node.value else 0.0
        return GROW if share > 0 else SHRINK if share < 0 else "#c8c8c8"

    return _svg(root, ident, colour, lambda node: f"{net.get(id(node), 0):+,} {unit} "
                f"({node.value:,} changed)")


def _svg(root: TreeNode, ident: str, colour: Callable[[TreeNode, int], str],
         what: Callable[[TreeNode], str]) -> str:
    if root.value <= 0:
        return ""
    frames: list[tuple[TreeNode, float, float, int]] = []  # node, x, width (fractions), depth
    stack = [(root, 0.0, 0)]
    while stack:
        node, x, depth = stack.pop()
        w = node.value / root.value
        if w * WIDTH < MIN_WIDTH:
            continue
        frames.append((node, x, w, depth))
        at = x
        for child in sorted(node.children.values(), key=lambda c: str(c.label)):
            stack.append((child, at, depth + 1))
            at += child.value / root.value
    depth_max = max(d for _, _, _, d in frames)
    height = (depth_max + 1) * ROW
    out = [f'<svg id="{ident}" class="flame" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
           f'height="{height}">']
    for i, (node, x, w, depth) in enumerate(sorted(frames, key=lambda t: (t[3], t[1]))):
        y = height - (depth + 1) * ROW
        name = escape(str(node.label))
        out.append(
            f'<g class="f" data-i="{i}" data-x="{x:.6f}" data-w="{w:.6f}" data-d="{depth}" '
            f'data-n="{name}"><title>{name}: {escape(what(node))}</title>'
            f'<rect x="{x * WIDTH:.2f}" y="{y}" width="{w * WIDTH:.2f}" height="{ROW - 1}" '
            f'fill="{colour(node, depth)}"/>'
            f'<text x="{x * WIDTH + 3:.2f}" y="{y + ROW - 5}"></text></g>')
    out.append("</svg>")
    return "\n".join(out)
