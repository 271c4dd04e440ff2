"""memdump end to end: custom allocators that report their objects with memdump_api.h.

Both recorders (conftest.py runs every test in each mode) see MEMDUMP_ALLOC and MEMDUMP_FREE:
the object a pool leaked is reported with its size, its site and its kind, and the malloc'd
superblock the pool carves its objects from is not (docs/dump-format.md, "Custom blocks").
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from memdump_e2e import analyze, base_name, expect_leaks, marker, program, read_dump, record


def _custom_events(dump: Path) -> list[list[str]]:
    return [e[3:] for e in read_dump(dump).events if e[3].startswith("custom_")]


def test_pool_object_leak(dump: Path) -> None:
    record("pool_leak", dump=dump)
    report = analyze(dump)
    site = marker("pool_leak.c", "pool_object")
    expect_leaks(report, {site: (48, 1)})
    group = report.group_at(site)
    assert base_name(group["stack"][0]["function"]) == "pool_get"
    assert base_name(group["stack"][1]["function"]) == "take_leaked"
    assert group["stack"][1]["line"] == marker("pool_leak.c", "take_leaked", "CALL").line
    assert group["leak_kind"] == "definite"
    # the superblock (8 objects of 48 bytes) is neither leaked nor still reachable: not a group
    events = _custom_events(dump)
    assert [e[0] for e in events] == ["custom_alloc"] * 4 + ["custom_free"] * 3
    assert {e[-1] for e in events if e[0] == "custom_alloc"} == {"48"}
    facts = read_dump(dump)
    assert facts.sizes("malloc").count(384) == 1
    kinds = _kinds(dump)
    leaked = [e[2] for e in events if e[0] == "custom_alloc"][2]
    assert kinds.get(leaked) == "D", kinds
    superblock = next(e[2] for e in facts.events if e[3] == "malloc" and e[-1] == "384")
    assert superblock not in kinds, kinds


def test_pool_object_leak_cpp(dump: Path) -> None:
    record("pool_leak_cpp", dump=dump)
    report = analyze(dump)
    site = marker("pool_leak_cpp.cpp", "pool_node")
    expect_leaks(report, {site: (40, 1)})
    group = report.group_at(site)
    assert "make" in group["stack"][0]["function"]
    assert group["leak_kind"] == "definite"
    events = _custom_events(dump)
    assert [e[0] for e in events] == ["custom_alloc"] * 3 + ["custom_free"] * 2
    leaked = [e[2] for e in events if e[0] == "custom_alloc"][1]
    assert _kinds(dump).get(leaked) == "D"
    # the slots (new[], 6 of 40 bytes) hold live objects: neither leaked nor reachable


def _kinds(dump: Path) -> dict[str, str]:
    kinds = {}
    with open(dump, "rb") as f:
        for line in f:
            line = line.lstrip(b"\0")
            if line.startswith(b"r "):
                fields = line.split()
                kinds[fields[1].decode()] = fields[2].decode()
    return kinds


@pytest.mark.parametrize("name", ["pool_leak", "pool_leak_cpp", "pool_leak_O2", "pool_leak_cpp_O2",
                                  "pool_leak_nopie", "pool_lib_main"])
def test_without_memdump_the_macros_do_nothing(name: str, memdump_mode: str) -> None:
    if memdump_mode != "in-process":
        pytest.skip("no recorder: one mode is enough")
    proc = subprocess.run([program(name)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return
    proc = subprocess.run([valgrind, "-q", "--error-exitcode=3", "--leak-check=no", program(name)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", ["pool_leak_O2", "pool_leak_cpp_O2", "pool_leak_nopie"])
def test_optimised_pools_and_no_pie(name: str, dump: Path) -> None:
    """-O2: the pool's functions are inlined, the site is still the MEMDUMP_ALLOC line. -no-pie:
    the weak symbols are still resolved at run time (a GOT entry)."""
    record(name, dump=dump)
    report = analyze(dump)
    if name.startswith("pool_leak_") and "cpp" not in name:
        expect_leaks(report, {marker("pool_leak.c", "pool_object"): (48, 1)})
    else:
        expect_leaks(report, {marker("pool_leak_cpp.cpp", "pool_node"): (40, 1)})
    assert report.data["leaks"][0]["leak_kind"] == "definite"


def test_pool_in_a_shared_library(dump: Path) -> None:
    """The header in a library built with -O2 -fvisibility=hidden: its hooks are in .dynsym."""
    record("pool_lib_main", dump=dump)
    report = analyze(dump)
    site = marker("pool_lib.c", "lib_object")
    expect_leaks(report, {site: (32, 1)})
    group = report.group_at(site)
    assert group["leak_kind"] == "definite"
    assert group["stack"][1]["line"] == marker("pool_lib_main.c", "lib_object", "CALL").line
    assert report.summary["custom"] == {"allocations": 2, "frees": 1, "superblocks": 1,
                                        "superblock_bytes": 256}
