"""memdump end to end: record each leaky test program under GDB, analyse the dump, check every leak.

Each test asserts the exact leaked bytes and blocks, one group per allocation site at the
`file:line` of its `// LEAK:` marker and, where it means something, the allocating function.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from memdump_analyzer.dumpfile import DumpReader
from memdump_e2e import (
    analyze,
    base_name,
    expect_leaks,
    functions,
    marker,
    program,
    read_dump,
    record,
)


def test_single_malloc(dump: Path) -> None:
    record("leak_malloc", dump=dump)
    report = analyze(dump)
    site = marker("leak_malloc.c", "block")
    expect_leaks(report, {site: (24, 1)})
    assert base_name(report.group_at(site)["stack"][0]["function"]) == "main"
    assert report.summary["allocations"] == 2
    assert report.summary["frees"] == 1
    assert report.complete
    assert report.end is not None and report.end["reason"] == "exit"
    facts = read_dump(dump)
    assert facts.end == ("exit", "0")
    assert facts.sizes("malloc") == [100, 24]


def test_loop_of_leaks_groups_by_site(dump: Path) -> None:
    record("leak_loop", dump=dump)
    report = analyze(dump)
    expect_leaks(report, {
        marker("leak_loop.c", "loop32"): (320, 10),
        marker("leak_loop.c", "loop100"): (300, 3),
    })
    # Largest group first.
    assert [g["bytes"] for g in report.groups()] == [320, 300]


def test_calloc(dump: Path) -> None:
    record("leak_calloc", dump=dump)
    report = analyze(dump)
    expect_leaks(report, {marker("leak_calloc.c", "calloc"): (63, 1)})
    events = read_dump(dump).events
    assert [e[3:] for e in events if e[3] == "calloc"][0][-2:] == ["7", "9"]


def test_realloc(dump: Path) -> None:
    """Grown twice then leaked: the last realloc's site. realloc(NULL, n) is an allocation;
    realloc(p, 0) frees p."""
    record("leak_realloc", dump=dump)
    report = analyze(dump)
    expect_leaks(report, {
        marker("leak_realloc.c", "grown"): (4000, 1),
        marker("leak_realloc.c", "from-null"): (50, 1),
    })
    ops = [e[3] for e in read_dump(dump).events]
    # realloc(NULL, n) calling malloc inside glibc is one realloc event; so is realloc(p, 0).
    assert ops == ["malloc", "realloc", "realloc", "realloc", "malloc", "realloc"], ops


def test_strdup_site_is_the_callers_line(dump: Path) -> None:
    record("leak_strdup", dump=dump)
    report = analyze(dump)
    site = marker("leak_strdup.c", "strdup")
    expect_leaks(report, {site: (12, 1)})
    names = [base_name(f) for f in functions(report.group_at(site))]
    assert names == ["copy_name", "main"], names  # strdup's malloc and frames below main trimmed


def test_aligned_allocators(dump: Path) -> None:
    record("leak_aligned", dump=dump)
    report = analyze(dump)
    src = "leak_aligned.c"
    expect_leaks(report, {
        marker(src, "posix_memalign"): (40, 1),
        marker(src, "aligned_alloc"): (256, 1),
        marker(src, "memalign"): (72, 1),
        marker(src, "valloc"): (88, 1),
        marker(src, "pvalloc"): (104, 1),  # what the program asked for, not the page it got
        marker(src, "reallocarray"): (56, 1),
    })
    # each call named as the program called it, though glibc 2.36 exports aligned_alloc and
    # memalign at one address (the breakpoint design reads the caller's GOT slot's symbol)
    ops = [e[3] for e in read_dump(dump).events]
    assert ops == ["posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc",
                   "reallocarray"], ops
    calls = report.summary["calls"]
    assert (calls["aligned_alloc"], calls["memalign"]) == (1, 1), calls


def test_every_form_of_new_is_the_users_line(dump: Path) -> None:
    """Aligned, nothrow and cookie-carrying array new: the 304 bytes in 5 blocks valgrind finds."""
    record("leak_new_forms", dump=dump)
    report = analyze(dump)
    expect_leaks(report, {
        marker("leak_new_forms.cpp", "aligned"): (64, 1),
        marker("leak_new_forms.cpp", "aligned-array"): (192, 1),
        marker("leak_new_forms.cpp", "nothrow"): (4, 1),
        marker("leak_new_forms.cpp", "nothrow-array"): (28, 1),
        marker("leak_new_forms.cpp", "cookie-array"): (16, 1),
    })
    assert report.leaked == (304, 5)
    for group in report.groups():
        assert [base_name(f) for f in functions(group)] == ["main"], group
    # each form is its operator (dump format 2.1), not the aligned_alloc or malloc inside it
    assert [(e[3], int(e[-1])) for e in read_dump(dump).events if e[3].startswith("new")] == [
        ("new", 64), ("new[]", 192), ("new", 4), ("new[]", 28), ("new[]", 16)]


def test_cpp_names_without_debug_info_are_demangled(dump: Path) -> None:
    """libstdc++ has no debug information here: its frames are named from the ELF symbol tables,
    demangled the way GDB prints functions that have debug information."""
    record("no_leak_cpp", dump=dump)  # std::string and an exception allocate inside libstdc++
    with DumpReader(str(dump)) as reader:
        for _ in reader.records():
            pass
        names = {f.function or "" for f in reader.frames.values()
                 if f.module and "libstdc++" in f.module}
    assert {"std::logic_error::logic_error(char const*)",
            "std::invalid_argument::invalid_argument(char const*)",
            "std::basic_string<char, std::char_traits<char>, std::allocator<char> >::_Rep::"
            "_S_create(unsigned long, unsigned long, std::allocator<char> const&)"} <= names, names
    assert not [n for n in names if n.startswith("_Z")], names


def test_new_and_new_array_site_is_the_users_line(dump: Path) -> None:
    record("leak_new", dump=dump)
    report = analyze(dump)
    new_site = marker("leak_new.cpp", "new")
    array_site = marker("leak_new.cpp", "new-array")
    expect_leaks(report, {new_site: (48, 1), array_site: (100, 1)})
    # Stacks start at the user's function and end at main (GDB names C++ functions `main()`).
    assert [base_name(f) for f in functions(report.group_at(new_site))] == ["make_widget", "main"]
    assert [base_name(f) for f in functions(report.group_at(array_site))] == ["make_array", "main"]
    for group in report.groups():
        assert not any("operator new" in (f or "") for f in functions(group)), group


def test_two_threads_at_once(dump: Path) -> None:
    record("leak_threads", dump=dump)
    report = analyze(dump)
    site_a = marker("leak_threads.c", "thread-a")
    site_b = marker("leak_threads.c", "thread-b")
    expect_leaks(report, {site_a: (555, 5), site_b: (666, 3)})
    assert base_name(report.group_at(site_a)["stack"][0]["function"]) == "worker_a"
    assert base_name(report.group_at(site_b)["stack"][0]["function"]) == "worker_b"
    facts = read_dump(dump)
    tids_a = {e[2] for e in facts.events if e[3] == "malloc" and e[-1] == "111"}
    tids_b = {e[2] for e in facts.events if e[3] == "malloc" and e[-1] == "222"}
    assert len(tids_a) == 1 and len(tids_b) == 1 and tids_a != tids_b
    assert facts.info["pid"] not in tids_a | tids_b
    assert facts.end == ("exit", "0")


def _recursion_frames(dump: Path) -> list[dict]:
    report = analyze(dump)
    bottom = marker("deep_recursion.c", "bottom")
    expect_leaks(report, {bottom: (77, 1)})
    return report.group_at(bottom)["stack"]


def test_deep_recursion_default_depth(dump: Path) -> None:
    record("deep_recursion", dump=dump)
    stack = _recursion_frames(dump)
    assert read_dump(dump).info["depth"] == "32"
    assert len(stack) == 32
    assert {base_name(f["function"]) for f in stack} == {"descend"}
    call = marker("deep_recursion.c", "descend", "CALL")
    assert all(f"{os.path.basename(f['file'])}:{f['line']}" == str(call) for f in stack[1:])


def test_deep_recursion_set_depth(dump: Path) -> None:
    record("deep_recursion", dump=dump, before=["set memdump depth 8"])
    stack = _recursion_frames(dump)
    assert read_dump(dump).info["depth"] == "8"
    assert len(stack) == 8
    assert {base_name(f["function"]) for f in stack} == {"descend"}


def test_whole_recursion_fits_a_larger_depth(dump: Path) -> None:
    record("deep_recursion", dump=dump, before=["set memdump depth 100"])
    stack = _recursion_frames(dump)
    names = [base_name(f["function"]) for f in stack]
    # 50 frames of descend, then main; frames below main are not shown.
    assert names == ["descend"] * 50 + ["main"], names
    assert f"{os.path.basename(stack[-1]['file'])}:{stack[-1]['line']}" == str(
        marker("deep_recursion.c", "main", "CALL"))


def test_without_debug_info_function_still_named(dump: Path) -> None:
    record("leak_malloc_nodebug", dump=dump)
    report = analyze(dump)
    groups = report.groups()
    assert [(g["bytes"], g["blocks"]) for g in groups] == [(24, 1)], report.dumps()
    assert report.leaked == (24, 1)
    frame = groups[0]["stack"][0]
    assert frame["function"] == "main"
    assert not frame.get("file") and not frame.get("line")
    assert os.path.basename(frame["module"]) == "leak_malloc_nodebug"


def _main_range(binary: Path) -> tuple[int, int]:
    """[start, end) of main in BINARY's symbol table (file offsets equal addresses in a PIE)."""
    out = subprocess.run(["nm", "-S", "--defined-only", str(binary)], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] == "main":
            start, size = int(parts[0], 16), int(parts[1], 16)
            return start, start + size
    raise AssertionError(f"no main in {binary}")


def test_stripped_module_and_offset(dump: Path) -> None:
    record("leak_malloc_stripped", dump=dump)
    report = analyze(dump)
    groups = report.groups()
    assert [(g["bytes"], g["blocks"]) for g in groups] == [(24, 1)], report.dumps()
    assert report.leaked == (24, 1)
    frame = groups[0]["stack"][0]
    assert os.path.basename(frame["module"]) == "leak_malloc_stripped"
    assert not frame.get("file") and not frame.get("line")
    # The stripped binary is the no-debug one minus its symbols: same code, same offsets.
    start, end = _main_range(program("leak_malloc_nodebug"))
    offset = frame["offset"]
    offset = int(offset, 16) if isinstance(offset, str) else int(offset)
    assert start < offset < end, (hex(offset), hex(start), hex(end))


def test_dlopen_plugin_site(dump: Path) -> None:
    record("dlopen_main", program("libmemdump_plugin.so"), dump=dump)
    report = analyze(dump)
    site = marker("plugin.c", "plugin")
    expect_leaks(report, {site: (33, 1)})
    stack = report.group_at(site)["stack"]
    assert base_name(stack[0]["function"]) == "plugin_leak"
    assert os.path.basename(stack[0]["module"]) == "libmemdump_plugin.so"
    caller = stack[1]
    assert base_name(caller["function"]) == "main"
    assert f"{os.path.basename(caller['file'])}:{caller['line']}" == str(
        marker("dlopen_main.c", "plugin", "CALL"))
    assert read_dump(dump).end == ("exit", "0")


@pytest.mark.parametrize("name", ["no_leak", "no_leak_cpp"])
def test_no_leaks_runtime_blocks_apart(dump: Path, name: str) -> None:
    """A program that frees all it allocates leaks nothing; the C/C++ runtime's blocks (stdout's
    buffer, libstdc++'s emergency exception pool) are counted apart, as kind runtime."""
    result = record(name, dump=dump)
    report = analyze(dump)
    expect_leaks(report, {})
    assert report.groups() == []
    runtime_bytes, runtime_blocks = report.runtime
    assert runtime_blocks >= 1 and runtime_bytes > 0, report.dumps()
    groups = report.groups("runtime")
    assert sum(g["bytes"] for g in groups) == runtime_bytes
    assert sum(g["blocks"] for g in groups) == runtime_blocks
    if name == "no_leak_cpp":
        # The emergency pool is the largest runtime block (tens of kilobytes).
        assert max(g["bytes"] for g in groups) >= 1024
        assert "a string longer than the small string buffer 100 2 " in result.stdout
    assert report.summary["frees"] > 0
    assert read_dump(dump).end == ("exit", "0")
