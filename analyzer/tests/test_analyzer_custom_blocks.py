"""Custom blocks (memdump_api.h's MEMDUMP_ALLOC, MEMDUMP_FREE): the `custom_alloc` and
`custom_free` operations, and the rule that a malloc'd block holding live custom blocks (a pool's
superblock) is left out of the leak check (docs/dump-format.md, "Custom blocks")."""

from __future__ import annotations

from pathlib import Path

from memdump_analyzer import DumpReader
from memdump_analyzer.dumpformat import (
    CUSTOM,
    FORMAT_LINE,
    apply,
    checked_blocks,
    effect,
    superblocks,
)
from memdump_analyzer.replay import replay

_HEAD = FORMAT_LINE + "s 1 /src/pool\nf 1 0x1000 1 0x1000 0 0 0\nn 1 0 1\n"


def _replay(tmp_path: Path, events: list[str]):  # noqa: ANN202
    path = tmp_path / "custom.memdump"
    path.write_text(_HEAD + "".join(f"e {seq} 1 {ev}\n" for seq, ev in enumerate(events, 1)))
    with DumpReader(str(path)) as reader:
        return replay(reader)


def test_effect_of_the_custom_operations() -> None:
    assert CUSTOM == {"custom_alloc", "custom_free"}
    assert effect("custom_alloc", 0x5010, (48,)) == (None, 0x5010, 48)
    assert effect("custom_alloc", 0, (48,)) == (None, None, 48)
    assert effect("custom_free", 0, (0x5010,)) == (0x5010, None, 0)
    assert effect("custom_free", 0, (0,)) == (None, None, 0)


def test_apply_keeps_custom_blocks_apart() -> None:
    live: dict[int, int] = {}
    custom: dict[int, int] = {}
    apply(live, "malloc", 0x5000, (384,), custom)
    apply(live, "custom_alloc", 0x5000, (48,), custom)  # the pool's first object
    apply(live, "custom_alloc", 0x5030, (48,), custom)
    assert live == {0x5000: 384} and custom == {0x5000: 48, 0x5030: 48}
    apply(live, "custom_free", 0, (0x5000,), custom)
    assert live == {0x5000: 384} and custom == {0x5030: 48}
    apply(live, "custom_alloc", 0x6000, (8,))  # without `custom`: one set, as the format says
    assert live == {0x5000: 384, 0x6000: 8}


def test_superblocks_and_checked_blocks() -> None:
    live = {0x5000: 384, 0x6000: 100, 0x7000: 0, 0x8000: 64}
    custom = {0x5030: 48, 0x6064: 4, 0x7000: 16}
    # 0x6000 + 100 = 0x6064: an object there is past the block; a 0-byte block holds nothing
    assert superblocks(live, custom) == {0x5000}
    assert checked_blocks(live, custom) == {0x6000: 100, 0x7000: 16, 0x8000: 64, 0x5030: 48,
                                            0x6064: 4}
    assert checked_blocks(live, {}) is live
    assert superblocks({}, custom) == set()


def test_replay_hides_the_superblock_of_live_objects(tmp_path: Path) -> None:
    r = _replay(tmp_path, [
        "malloc 1 0x5000 384",
        "custom_alloc 1 0x5000 48",
        "custom_alloc 1 0x5030 48",
        "custom_alloc 1 0x5060 48",
        "custom_free 1 - 0x5000",
        "custom_free 1 - 0x5060",
        "malloc 1 0x9000 10",
    ])
    assert r.error_count == 0
    assert {p: size for p, (size, _) in r.live.items()} == {b"0x5030": 48, b"0x9000": 10}
    assert r.live_bytes == 58
    assert (r.superblocks, r.superblock_bytes) == (1, 384)
    assert (r.custom_allocations, r.custom_frees) == (3, 2)
    assert r.calls["custom_alloc"] == 3 and r.calls["custom_free"] == 2
    # the malloc'd blocks alone make the counts and the peak: objects are not memory used twice
    assert (r.allocations, r.frees, r.peak_bytes) == (2, 0, 394)


def test_an_object_at_its_superblock_s_address_is_the_one_reported(tmp_path: Path) -> None:
    r = _replay(tmp_path, ["malloc 1 0x5000 384", "custom_alloc 1 0x5000 48"])
    assert {p: size for p, (size, _) in r.live.items()} == {b"0x5000": 48}
    assert r.live_bytes == 48


def test_a_superblock_without_live_objects_is_a_block_again(tmp_path: Path) -> None:
    r = _replay(tmp_path, [
        "malloc 1 0x5000 384", "custom_alloc 1 0x5010 48", "custom_free 1 - 0x5010",
    ])
    assert {p: size for p, (size, _) in r.live.items()} == {b"0x5000": 384}
    assert r.superblocks == 0


def test_objects_of_a_freed_superblock_stay_live(tmp_path: Path) -> None:
    # valgrind likewise: a MALLOCLIKE block lives until its FREELIKE, whatever its memory does
    r = _replay(tmp_path, ["malloc 1 0x5000 384", "custom_alloc 1 0x5010 48", "free 1 - 0x5000"])
    assert r.error_count == 0
    assert {p: size for p, (size, _) in r.live.items()} == {b"0x5010": 48}


def test_bad_custom_frees_are_errors(tmp_path: Path) -> None:
    r = _replay(tmp_path, [
        "custom_alloc 1 0x5010 48",
        "custom_free 1 - 0x5010",
        "custom_free 1 - 0x5010",  # double free
        "custom_free 1 - 0x7000",  # never allocated
        "custom_free 1 - 0x0",  # nothing
        "free 1 - 0x5020",  # a custom block is not malloc's to free
    ])
    assert [(e.kind, e.op, e.pointer) for e in r.errors] == [
        ("double-free", "custom_free", 0x5010),
        ("invalid-free", "custom_free", 0x7000),
        ("invalid-free", "free", 0x5020),
    ]
    assert r.live == {}


def test_custom_free_has_no_result(tmp_path: Path) -> None:
    path = tmp_path / "bad.memdump"
    path.write_text(_HEAD + "e 1 1 custom_free 1 0x10 0x5010\n")
    with DumpReader(str(path)) as reader:
        try:
            replay(reader)
        except Exception as exc:  # noqa: BLE001
            assert "custom_free has '-'" in str(exc)
        else:
            raise AssertionError("accepted")
