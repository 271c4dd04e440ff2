"""A late attach's recording and the heap walk (core/heap/merge.py): which walked blocks are of
unknown origin, the scan's records split between the two sets, the older blocks' kinds grouped by
type."""

from __future__ import annotations

from dbgkit.core.heap.merge import split_records, unknown_kinds, unrecorded

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


def test_split_and_group() -> None:
    unknown = {0x1010: 24, 0x1030: 56, 0x11B0: 4104}
    records = [(0x1010, "indirect", "0x1030"), (0x1030, "definite", None),
               (0x1070, "indirect", "0x1030"), (0x11B0, "reachable", None),
               (0x9000, "reachable", "stdstring")]
    mine, old = split_records(records, unknown)
    assert mine == [(0x1070, "indirect", "0x1030"), (0x9000, "reachable", "stdstring")]
    assert old == [(0x1010, "indirect", "0x1030"), (0x1030, "definite", None),
                   (0x11B0, "reachable", None)]
    labels = {0x1010: ("graph::Node", "vtable"), 0x1030: ("Connection", "vtable")}
    kinds = unknown_kinds(old, unknown, labels, "c")
    assert kinds == {
        "engine": "c",
        "totals": {"definite": [56, 1], "indirect": [24, 1], "possible": [0, 0],
                   "reachable": [4104, 1]},
        "blocks": [[0x1010, 24, "indirect", "0x1030"], [0x1030, 56, "definite", None],
                   [0x11B0, 4104, "reachable", None]],
        "groups": {"indirect": [["graph::Node", "vtable", 24, 1]],
                   "definite": [["Connection", "vtable", 56, 1]],
                   "reachable": [["?", "unknown", 4104, 1]]}}
