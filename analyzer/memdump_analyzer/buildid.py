"""The GNU build id of an ELF file (its `NT_GNU_BUILD_ID` note), read from its program headers: the
symbol cache's key (symcache.py) and pprof's mappings (exports/pprof.py).

A dump names each module by path and has no build ids (docs/dump-format.md), so an export reads
the module as it is on disk now, and only when the file is not newer than the recording: a file
changed since is not the build that ran.
"""

from __future__ import annotations

import os
import struct

__all__ = ["build_id", "recorded_build_id", "unchanged_since"]

_PT_NOTE = 4
_NT_GNU_BUILD_ID = 3
#: (ELF class) -> (e_phoff, e_phentsize, e_phnum offsets; program header: p_type, p_offset,
#: p_filesz offsets and formats)
_LAYOUT = {
    1: ("I", 0x1C, 0x2A, 0x2C, (0, "I"), (4, "I"), (16, "I")),
    2: ("Q", 0x20, 0x36, 0x38, (0, "I"), (8, "Q"), (32, "Q")),
}


def build_id(path: str) -> str | None:
    """The build id of the ELF file at `path` in lower-case hex, or None (no such note, not an
    ELF file, unreadable)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] not in _LAYOUT or head[5] not in (1, 2):
                return None
            end = "<" if head[5] == 1 else ">"
            word, phoff_at, entsize_at, phnum_at, p_type, p_offset, p_filesz = _LAYOUT[head[4]]
            (phoff,) = struct.unpack_from(end + word, head, phoff_at)
            entsize, phnum = struct.unpack_from(end + "HH", head, entsize_at)
            f.seek(phoff)
            table = f.read(entsize * phnum)
            for i in range(phnum):
                base = i * entsize
                (kind,) = struct.unpack_from(end + p_type[1], table, base + p_type[0])
                if kind != _PT_NOTE:
                    continue
                (offset,) = struct.unpack_from(end + p_offset[1], table, base + p_offset[0])
                (size,) = struct.unpack_from(end + p_filesz[1], table, base + p_filesz[0])
                f.seek(offset)
                found = _note(f.read(min(size, 1 << 16)), end)
                if found is not None:
                    return found
    except (OSError, struct.error):
        return None
    return None


def _note(data: bytes, end: str) -> str | None:
    """The build id in a PT_NOTE segment's notes (4-byte aligned name and descriptor)."""
    at = 0
    while at + 12 <= len(data):
        namesz, descsz, kind = struct.unpack_from(end + "III", data, at)
        name_at = at + 12
        desc_at = name_at + (namesz + 3) // 4 * 4
        if kind == _NT_GNU_BUILD_ID and data[name_at:name_at + namesz] == b"GNU\0":
            return data[desc_at:desc_at + descsz].hex()
        at = desc_at + (descsz + 3) // 4 * 4
    return None


def unchanged_since(path: str, start: str) -> bool:
    """Whether the file at `path` can be the one that ran in a recording that began at `start`
    (the dump's `i start`, ISO 8601 to the second): not changed since. A file changed within
    the second `start` names counts as unchanged (built just before the run: the common case of
    `cc && memdump.sh`); a file that cannot be read or a start that does not parse, as changed."""
    from datetime import datetime  # noqa: PLC0415 - the symbol cache reads build ids alone

    try:
        began = datetime.fromisoformat(start.replace("Z", "+00:00")).timestamp()
        return os.stat(path).st_mtime < began + 1
    except (OSError, ValueError):
        return False


def recorded_build_id(path: str, start: str | None) -> str | None:
    """`build_id(path)` when the file is unchanged since the recording's start (the dump's `i
    start`: `unchanged_since`), else None: without a start time nothing tells the file is the
    one that ran."""
    if start is None or not unchanged_since(path, start):
        return None
    return build_id(path)
