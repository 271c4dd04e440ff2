"""Inlined frames (`fi` records, dump format 1.2): read, expanded, grouped, reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analyzer_testlib import LIBC, LIBSTDCXX, Dump, F, main_at
from memdump_analyzer import DumpError, DumpReader, analyze, render_json, render_text

NEW = F("operator new(unsigned long)", module=LIBSTDCXX, pc=0x7FFFF7E9C1A2)
# a `new` in open_session, inlined into run(int), called by main
SESSION = F("open_session", "/src/inl.cpp", 13, into=(("run(int)", "/src/inl.cpp", 19),))
# std::vector::reserve's allocation, inlined four levels deep into open_session, into run(int)
RESERVE = F("std::__new_allocator<int>::allocate(unsigned long, void const*)",
            "/usr/include/c++/12/bits/new_allocator.h", 137, into=(
                ("std::allocator_traits<std::allocator<int> >::allocate(std::allocator<int>&, "
                 "unsigned long)", "/usr/include/c++/12/bits/alloc_traits.h", 464),
                ("std::vector<int, std::allocator<int> >::reserve(unsigned long)",
                 "/usr/include/c++/12/bits/vector.tcc", 79),
                ("open_session", "/src/inl.cpp", 14),
                ("run(int)", "/src/inl.cpp", 19)))


def _dump(tmp_path: Path) -> str:
    d = Dump(header="MEMDUMP 1.2")
    d.malloc("0x1000", 32, [NEW, SESSION, *main_at(24)])
    d.malloc("0x2000", 128, [NEW, RESERVE, *main_at(24)])
    d.end()
    return d.write(tmp_path)


def test_a_stack_lists_every_inlined_frame_at_its_program_counter(tmp_path: Path) -> None:
    path = _dump(tmp_path)
    with DumpReader(path) as reader:
        list(reader.records())
        stack = reader.stack(4)
    assert [(f.function, f.line, f.inlined) for f in stack] == [
        ("operator new(unsigned long)", None, False),
        ("open_session", 13, True),
        ("run(int)", 19, False),
        ("main", 24, False),
        ("__libc_start_call_main", None, False),
    ]
    assert stack[1].pc == stack[2].pc and stack[1].offset == stack[2].offset
    assert stack[1].module == stack[2].module == "/src/app"


def test_reports_show_the_inlined_frames(tmp_path: Path) -> None:
    a = analyze(_dump(tmp_path))
    text = render_text(a)
    assert (
        "LEAK 1 of 2: 128 bytes in 1 block\n"
        "    at std::__new_allocator<int>::allocate(unsigned long, void const*) "
        "(new_allocator.h:137) (inlined)\n"
        "    by std::allocator_traits<std::allocator<int> >::allocate(std::allocator<int>&, "
        "unsigned long) (alloc_traits.h:464) (inlined)\n"
        "    by std::vector<int, std::allocator<int> >::reserve(unsigned long) (vector.tcc:79) "
        "(inlined)\n"
        "    by open_session (inl.cpp:14) (inlined)\n"
        "    by run(int) (inl.cpp:19)\n"
        "    by main (app.c:24)\n"
        "\n"
        "LEAK 2 of 2: 32 bytes in 1 block\n"
        "    at open_session (inl.cpp:13) (inlined)\n"
        "    by run(int) (inl.cpp:19)\n"
        "    by main (app.c:24)\n"
    ) in text
    report = json.loads(json.dumps(render_json(a)))
    stack = report["leaks"][1]["stack"]
    assert [(f["function"], f["line"], f["inlined"]) for f in stack] == [
        ("open_session", 13, True), ("run(int)", 19, False), ("main", 24, False)]
    assert stack[0]["pc"] == stack[1]["pc"] and stack[0]["offset"] == stack[1]["offset"]
    # --max-frames counts the frames as shown, inlined ones included
    assert [f["function"] for f in render_json(a, max_frames=2)["leaks"][1]["stack"]] == [
        "open_session", "run(int)"]
    assert "    by run(int) (inl.cpp:19)\n    ... 1 more frame\n" in render_text(a, max_frames=2)


def test_stacks_that_differ_only_in_inlined_frames_are_two_groups(tmp_path: Path) -> None:
    d = Dump(header="MEMDUMP 1.2")
    other = F("open_other", "/src/inl.cpp", 13, into=(("run(int)", "/src/inl.cpp", 20),))
    d.malloc("0x1000", 32, [NEW, SESSION, *main_at(24)])
    d.malloc("0x2000", 32, [NEW, other, *main_at(24)])
    d.end()
    a = analyze(d.write(tmp_path))
    assert sorted(g.stack[0].function for g in a.leaks) == ["open_other", "open_session"]


def test_an_inlined_runtime_function_classifies_the_stack(tmp_path: Path) -> None:
    """The rules see inlined frames too: glibc's tcache_thread_shutdown is inlined into
    __libc_thread_freeres, and its frees are the runtime's own."""
    d = Dump(header="MEMDUMP 1.2")
    d.malloc("0x1000", 16, main_at(3))
    freeres = F("free_all", module=LIBC, pc=0x7FFFF7E5F000, into=(
        ("tcache_thread_shutdown", "malloc.c", 3200), ("__libc_thread_freeres", "thread.c", 20)))
    d.free("0x1000", main_at(4))
    # a frame of the program's (a thread's function): not the rule runtime-only-free
    d.free("0x1000", [freeres, F("worker", "/src/app.c", 30)])
    d.end()
    a = analyze(d.write(tmp_path))
    assert a.errors == [] and a.runtime_internal_frees == 1


def test_a_1_1_reader_would_skip_the_record_and_keep_the_innermost_name(tmp_path: Path) -> None:
    """What docs/dump-format.md promises: without its `fi` records a 1.2 dump is a 1.1 dump whose
    frames carry the innermost function."""
    path = Path(_dump(tmp_path))
    lines = [ln for ln in path.read_text().splitlines(True) if not ln.startswith("fi ")]
    path.write_text("".join(lines))
    a = analyze(str(path))
    assert [f.function for f in a.leaks[1].stack] == ["open_session", "main"]


def test_inlined_frame_record_before_its_frame_is_used(tmp_path: Path) -> None:
    d = Dump(header="MEMDUMP 1.2")
    d.malloc("0x1000", 16, main_at(3))
    d.raw("f 90 0x5555555559f0 1 0x9f0 2 0 5")
    d.raw("fi 90 2 0 x")
    d.end()
    path = d.write(tmp_path)
    with pytest.raises(DumpError) as info:
        analyze(path)
    assert str(info.value) == f"{path}:{len(d.lines) - 1}: malformed LINE 'x' (expected a number)"
