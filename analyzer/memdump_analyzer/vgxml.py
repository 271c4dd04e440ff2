"""valgrind memcheck's XML output of a leak report (`--format valgrind-xml`,
docs/valgrind-compat.md): valgrind's protocol 4 (its docs/internals/xml-output-protocol4.txt),
one `<error>` per error vgmodel.errors lists and per shown loss record, with the error counts
and the suppressions' counts.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .vgframes import GroupStacks, VgFrame
from .vgmodel import PREAMBLE, VgOptions, errors, kind_of, shown
from .vgtext import record_text

if TYPE_CHECKING:
    from .model import Analysis

__all__ = ["render_xml"]

_XML_KINDS = {"definite": "Leak_DefinitelyLost", "indirect": "Leak_IndirectlyLost",
              "possible": "Leak_PossiblyLost", "reachable": "Leak_StillReachable"}


def _x(text: object) -> str:
    """Text as XML character data (xml.sax.saxutils' escape would import urllib.request)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _xml_stack(frames: Sequence[VgFrame], indent: str = "  ") -> list[str]:
    lines = [f"{indent}<stack>"]
    for f in frames:
        lines += [f"{indent}  <frame>", f"{indent}    <ip>0x{f.ip:X}</ip>"]
        if f.obj:
            lines.append(f"{indent}    <obj>{_x(f.obj)}</obj>")
        if f.fn != "???":
            lines.append(f"{indent}    <fn>{_x(f.fn)}</fn>")
        if f.file and f.line:
            lines += [f"{indent}    <dir>{_x(os.path.dirname(f.file))}</dir>",
                      f"{indent}    <file>{_x(os.path.basename(f.file))}</file>",
                      f"{indent}    <line>{f.line}</line>"]
        lines.append(f"{indent}  </frame>")
    return [*lines, f"{indent}</stack>"]


def render_xml(analysis: Analysis, opts: VgOptions, ppid: int | None = None) -> str:
    """valgrind's XML output of the run (protocol 4)."""
    command = opts.command or [analysis.program or "?"]
    lines = ['<?xml version="1.0"?>', "", "<valgrindoutput>", "",
             "<protocolversion>4</protocolversion>", "<protocoltool>memcheck</protocoltool>", "",
             "<preamble>", *(f"  <line>{_x(line)}</line>" for line in PREAMBLE),
             f"  <line>Command: {_x(' '.join(command))}</line>", "</preamble>", "",
             f"<pid>{analysis.pid or 0}</pid>", f"<ppid>{ppid if ppid is not None else 0}</ppid>",
             "<tool>memcheck</tool>", "", "<args>", "  <vargv>", "    <exe>memdump</exe>",
             *(f"    <arg>{_x(arg)}</arg>" for arg in opts.tool_args), "  </vargv>",
             "  <argv>", f"    <exe>{_x(command[0])}</exe>",
             *(f"    <arg>{_x(arg)}</arg>" for arg in command[1:]), "  </argv>", "</args>", "",
             "<status>", "  <state>RUNNING</state>", "</status>", "", ""]
    unique = 0
    counts: list[tuple[int, int]] = []
    for error in errors(analysis, opts):
        lines += ["<error>", f"  <unique>0x{unique:x}</unique>", f"  <tid>{error.tid}</tid>",
                  f"  <kind>{error.kind}</kind>", f"  <what>{_x(error.what)}</what>",
                  *_xml_stack(error.stack)]
        for what, frames in error.aux:
            lines += [f"  <auxwhat>{_x(what)}</auxwhat>", *_xml_stack(frames)]
        lines += ["</error>", ""]
        counts.append((unique, error.count))
        unique += 1
    lines += ["<status>", "  <state>FINISHED</state>", "</status>", ""]
    records = shown(analysis, opts)
    stacks = GroupStacks(analysis, [g for g, _, _ in records], opts.num_callers)
    for group, number, total in records:
        lines += ["<error>", f"  <unique>0x{unique:x}</unique>", "  <tid>1</tid>",
                  f"  <kind>{_XML_KINDS[kind_of(group)]}</kind>", "  <xwhat>",
                  f"    <text>{_x(record_text(group, number, total))}</text>",
                  f"    <leakedbytes>{group.total_bytes}</leakedbytes>",
                  f"    <leakedblocks>{group.blocks}</leakedblocks>", "  </xwhat>",
                  *_xml_stack(stacks.of(group)), "</error>", ""]
        unique += 1
    lines.append("<errorcounts>")
    for number, count in counts:
        lines += ["  <pair>", f"    <count>{count}</count>", f"    <unique>0x{number:x}</unique>",
                  "  </pair>"]
    lines += ["</errorcounts>", "", "<suppcounts>"]
    for name, _file, _line, _groups, _bytes, blocks in analysis.used_suppressions:
        lines += ["  <pair>", f"    <count>{blocks}</count>", f"    <name>{_x(name)}</name>",
                  "  </pair>"]
    lines += ["</suppcounts>", "", "</valgrindoutput>", ""]
    return "\n".join(lines)
