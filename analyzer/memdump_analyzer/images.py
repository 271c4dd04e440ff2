"""The process images of a recording: the program that started, then each one it executed (`p
exec` records), with the recorder that recorded each (docs/dump-format.md, "Images").

A wrapper script, env(1), nice(1) or a shim executes the program the user asked about: the events
before its `p exec` belong to the wrapper, every block live then is gone, and the report says which
image each leak and error belongs to.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Image", "header_tail", "image_of", "images_of", "json_section", "text_row",
           "text_tag"]


@dataclass(frozen=True, slots=True)
class Image:
    """One process image: events `first_seq` to `last_seq` (SEQs; the `p exec` that replaced it
    is not its), its executable, and the recorder of its events (None: the dump does not say)."""

    number: int
    program: str | None
    recorder: str | None
    first_seq: int
    last_seq: int


def images_of(info: dict[str, str], image_info: Sequence[tuple[int, str, str]],
              execs: Sequence[tuple[int, str]], last_seq: int) -> list[Image]:
    """The images, in order: the header's (INFO), then one per exec (SEQ, path) of EXECS, each
    with the `i` records that followed its exec (IMAGE_INFO: SEQ before each, key, value)."""
    starts = [(0, info.get("program"), info.get("recorder"))]
    bounds = [seq for seq, _ in execs[1:]]
    for k, (seq, path) in enumerate(execs):
        until = bounds[k] if k < len(bounds) else None
        recorder = next((value for after, key, value in image_info if key == "recorder"
                         and after >= seq and (until is None or after < until)), None)
        starts.append((seq, path, recorder))
    images = []
    for n, (seq, program, recorder) in enumerate(starts):
        end = starts[n + 1][0] - 1 if n + 1 < len(starts) else last_seq
        images.append(Image(n + 1, program, recorder, seq + 1, max(end, seq)))
    return images


def image_of(images: Sequence[Image], seq: int) -> Image:
    """The image event SEQ belongs to."""
    index = bisect.bisect_right([i.first_seq for i in images], seq) - 1
    return images[max(index, 0)]


def text_tag(images: Sequence[Image], seq: int | None, clean: Callable[[str], str]) -> str:
    """`, in image 2 (prog)` for the title of a leak or error of a dump with an exec: ''
    without one. SEQ: the event (None: the last image's, as every block live at the end is)."""
    if len(images) < 2:
        return ""
    image = images[-1] if seq is None else image_of(images, seq)
    name = clean(os.path.basename(image.program)) if image.program else "?"
    return f", in image {image.number} ({name})"


def header_tail(images: Sequence[Image], clean: Callable[[str], str]) -> str:
    """`, which executed PATH` (the last image's) for the report's first line; '' without exec."""
    if len(images) < 2:
        return ""
    return f", which executed {clean(images[-1].program) if images[-1].program else '?'}"


def text_row(images: Sequence[Image], clean: Callable[[str], str]) -> str | None:
    """The summary's `images` row: each image's events, program and recorder (None: one)."""
    if len(images) < 2:
        return None
    parts = []
    for image in images:
        recorder = f", {clean(image.recorder)} recorder" if image.recorder else ""
        events = (f"events {image.first_seq:,} to {image.last_seq:,}"
                  if image.last_seq >= image.first_seq else "no events")
        program = clean(image.program) if image.program else "?"
        parts.append(f"{image.number}. {program} ({events}{recorder})")
    return "; ".join(parts)


def json_section(images: Sequence[Image]) -> dict[str, Any]:
    """The report's `images` key, only for a dump with an exec (a report of any other dump is
    what it was)."""
    if len(images) < 2:
        return {}
    return {"images": [{"image": i.number, "program": i.program, "recorder": i.recorder,
                        "first_seq": i.first_seq, "last_seq": i.last_seq} for i in images]}
