"""A late attach's recording and the heap walk (core/heap/merge.py): which walked blocks are of
unknown origin, the scan's records split between the two sets, the older blocks' with their
types."""

from __future__ import annotations

from dbgkit.core.heap.merge import attached_scan, unrecorded
from dbgkit.core.reach import ScanResult

#: the walk: (address, usable size) in address order
WALKED = [(0x1010, 24), (0x1030, 56), (0x1070, 200), (0x1140, 104), (0x11B0, 4104)]


def test_unrecorded() -> None:
    recorded = {
        0x1070: 200,   # a chunk freed since the attach and allocated again: the recording's
        0x1150: 32,    # an aligned block inside a walked one: that one is the recording's
        0x9000: 48,    # a recorded block the walk does not list (mmapped elsewhere): no matter
    }
    assert unrecorded(WALKED, recorded) == {0x1010: 24, 0x1030: 56, 0x11B0: 4104}
    assert unrecorded(WALKED, {}) == dict(WALKED)
    assert unrecorded([], recorded) == {}
    # a recorded block just past a walked one's end leaves it unknown
    assert unrecorded([(0x1010, 24)], {0x1028: 8}) == {0x1010: 24}
    # loaded into the process when 0x1010 to 0x1140 were in use (0x1070 since freed, taken
    # again and recorded): 0x11B0, allocated since and not recorded (the dynamic linker's), is
    # not from before the recording
    at_load = [0x1010, 0x1030, 0x1070, 0x1140]
    assert unrecorded(WALKED, recorded, at_load) == {0x1010: 24, 0x1030: 56}
    assert unrecorded(WALKED, {}, []) == {}


def test_attached_scan_splits_the_kinds() -> None:
    """The recorded blocks keep their kinds, heuristics and leaders (an old leader included);
    the older blocks go to `older` with their sizes and types, in address order."""
    unknown = {0x1010: 24, 0x1030: 56, 0x11B0: 4104}
    scanned = ScanResult(
        kinds={0x1010: "indirect", 0x1030: "definite", 0x1070: "indirect", 0x11B0: "reachable",
               0x9000: "reachable"},
        heuristics={0x9000: "stdstring"}, leaders={0x1010: 0x1030, 0x1070: 0x1030},
        root_bytes=4096, block_bytes=4456, engine="c")
    labels = {0x1010: ("graph::Node", "vtable"), 0x1030: ("Connection", "vtable")}
    split = attached_scan(scanned, unknown, labels)
    assert list(split.records()) == [(0x1070, "indirect", "0x1030"),
                                     (0x9000, "reachable", "stdstring")]
    assert split.older == ((0x1010, 24, "indirect", "vtable", "graph::Node"),
                           (0x1030, 56, "definite", "vtable", "Connection"),
                           (0x11B0, 4104, "reachable", "unknown", "?"))
    assert (split.root_bytes, split.block_bytes, split.engine) == (4096, 4456, "c")
    assert scanned.older == ()  # a scan of its own is not changed
