"""--suppressions (valgrind's and LeakSanitizer's files) and --gen-suppressions on hand-written
dumps: the parsers, their one-line errors, valgrind's matching rules, the counts by name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from analyzer_testlib import LIBC, LIBSTDCXX, Dump, F, main_at, run_cli
from memdump_analyzer import analyze
from memdump_analyzer.suppressions import (
    SuppressionError,
    apply,
    load,
    load_all,
    lsan_match,
    valgrind_glob,
)

START = F("__libc_start_call_main", module=LIBC, pc=0x7FFFF7DF018A)
NEW = [F("operator new(unsigned long)", module=LIBSTDCXX, pc=0x7FFFF7CA958C),
       F("make_widget()", "/src/w.cpp", 9), F("main()", "/src/w.cpp", 17), START]
STRDUP = [F("__strdup", module=LIBC, pc=0x7FFFF7E0D1A0), F("copy_name", "/src/app.c", 12),
          *main_at(20)]
THREAD = [F("worker", "/src/app.c", 30), F("start_thread", module=LIBC, pc=0x7FFFF7E3CDAF),
          F("clone3", module=LIBC, pc=0x7FFFF7EBC8EC)]
MALLOC = [F("make_list", "/src/app.c", 3), *main_at(7)]


def _dump(tmp_path: Path) -> str:
    """Four groups: new (48, definite), strdup (12, definite), a thread's (333 in 3, reachable),
    malloc (64 in 2, possible)."""
    d = Dump(header="MEMDUMP 1.2")
    d.malloc("0x1000", 48, NEW)
    d.malloc("0x2000", 12, STRDUP)
    for i in range(3):
        d.malloc(f"0x3{i}00", 111, THREAD, tid=101)
    d.malloc("0x4000", 32, MALLOC)
    d.malloc("0x4100", 32, MALLOC)
    d.raw(f"scan {d.seq} ok 4096 600 1")
    for p, kind in (("0x1000", "D"), ("0x2000", "D"), ("0x3000", "R"), ("0x3100", "R"),
                    ("0x3200", "R"), ("0x4000", "P"), ("0x4100", "P")):
        d.raw(f"r {p} {kind}")
    d.end()
    return d.write(tmp_path)


def _supp(tmp_path: Path, text: str, name: str = "s.supp") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


#: what valgrind 3.19 --gen-suppressions=all writes for these stacks (leak_new, leak_strdup,
#: leak_threads, leak_malloc of tests/programs), named
VALGRIND = """\
# written by valgrind, named by hand
{
   widget
   Memcheck:Leak
   match-leak-kinds: definite
   fun:_Znwm
   fun:_ZL11make_widgetv
   fun:main
}
{
   name
   Memcheck:Leak
   match-leak-kinds: definite
   fun:malloc
   fun:strdup
   fun:copy_name
   fun:main
}
{
   thread
   Memcheck:Leak
   match-leak-kinds: reachable
   fun:malloc
   fun:worker
   fun:start_thread
   fun:clone
}
"""


def _suppressed(tmp_path: Path, text: str) -> list[tuple[str, int, int, int]]:
    a = analyze(_dump(tmp_path), symbolize=False)
    apply(a, load_all([_supp(tmp_path, text)]))
    return [(name, count, nbytes, blocks) for name, _, _, count, nbytes, blocks
            in a.used_suppressions]


def test_valgrind_generated_suppressions_match_memdump_stacks(tmp_path: Path) -> None:
    a = analyze(_dump(tmp_path), symbolize=False)
    path = _supp(tmp_path, VALGRIND)
    apply(a, load_all([path]))
    # valgrind's order: it tries its loss records smallest first (name, widget, thread) and
    # moves each suppression that matches to the front of its list, which it prints
    assert a.used_suppressions == [("thread", path, 20, 1, 333, 3), ("widget", path, 3, 1, 48, 1),
                                   ("name", path, 11, 1, 12, 1)]
    assert [(g.bytes, g.blocks, g.leak_kind) for g in a.leaks] == [(64, 2, "possible")]
    assert (a.leaked_bytes, a.leaked_blocks) == (64, 2)
    assert a.leak_kinds == {"definite": [0, 0], "indirect": [0, 0], "possible": [64, 2],
                            "reachable": [0, 0], "unknown": [0, 0]}


def test_the_text_report_counts_what_was_suppressed_by_name(tmp_path: Path) -> None:
    dump = _dump(tmp_path)
    path = _supp(tmp_path, VALGRIND)
    result = run_cli("--suppressions", path, "--show-leak-kinds", "all", dump)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "    suppressed:      393 bytes in 5 blocks\n" in out
    assert "    definitely lost: 0 bytes in 0 blocks\n" in out
    # valgrind -v's lines, in its order
    assert out.endswith(
        f"\nused_suppression:      1 thread {path}:20 suppressed: 333 bytes in 3 blocks\n"
        f"used_suppression:      1 widget {path}:3 suppressed: 48 bytes in 1 blocks\n"
        f"used_suppression:      1 name {path}:11 suppressed: 12 bytes in 1 blocks\n")
    report = json.loads(run_cli("--format", "json", "--suppressions", path, "--show-leak-kinds",
                                "all", dump).stdout)
    assert report["suppressed"] == {"bytes": 393, "blocks": 5, "suppressions": [
        {"name": "thread", "file": path, "line": 20, "count": 1, "bytes": 333, "blocks": 3},
        {"name": "widget", "file": path, "line": 3, "count": 1, "bytes": 48, "blocks": 1},
        {"name": "name", "file": path, "line": 11, "count": 1, "bytes": 12, "blocks": 1}]}
    assert report["summary"]["leaked"] == {"bytes": 64, "blocks": 2}
    # without --suppressions: no `suppressed` row, `suppressed` null
    plain = run_cli(dump).stdout
    assert "suppressed" not in plain and "used_suppression" not in plain
    # two files, one of them empty of suppressions: the counts are per entry, files in order
    empty = _supp(tmp_path, "# nothing\n", "empty.supp")
    again = run_cli("--suppressions", empty, "--suppressions", path, "--show-leak-kinds", "all",
                    dump)
    assert again.stdout == out
    # valgrind checks only the loss records it shows or counts as errors: by default
    # (definite,possible) the still reachable group is not suppressed, and stays counted
    default = run_cli("--suppressions", path, dump).stdout
    assert "    suppressed:      60 bytes in 2 blocks\n" in default
    assert "    still reachable: 333 bytes in 3 blocks\n" in default
    assert "used_suppression:      1 thread" not in default


def test_match_leak_kinds_must_hold(tmp_path: Path) -> None:
    text = VALGRIND.replace("match-leak-kinds: reachable", "match-leak-kinds: definite,possible")
    assert _suppressed(tmp_path, text) == [("widget", 1, 48, 1), ("name", 1, 12, 1)]
    no_kinds = VALGRIND.replace("   match-leak-kinds: reachable\n", "")
    assert ("thread", 1, 333, 3) in _suppressed(tmp_path, no_kinds)
    every = VALGRIND.replace("match-leak-kinds: reachable", "match-leak-kinds: all")
    assert ("thread", 1, 333, 3) in _suppressed(tmp_path, every)
    none = VALGRIND.replace("match-leak-kinds: reachable", "match-leak-kinds: none")
    assert [n for n, *_ in _suppressed(tmp_path, none)] == ["widget", "name"]


@pytest.mark.parametrize(("frames", "suppressed"), [
    # `...` matches zero or more frames
    (["fun:malloc", "...", "fun:main"], [("make_list", 2, 76, 3)]),  # and strdup's
    (["...", "fun:copy_name"], [("copy_name", 1, 12, 1)]),
    (["fun:*", "...", "fun:start_thread"], [("start_thread", 1, 333, 3)]),
    (["...", "fun:main", "..."], [("main", 3, 124, 4)]),
    # globs: `*` and `?`, anchored at both ends
    (["fun:*alloc", "fun:make_*"], [("make_list", 1, 64, 2)]),
    (["fun:malloc", "fun:make_lis?"], [("make_list", 1, 64, 2)]),
    (["fun:malloc", "fun:make_li?"], []),
    (["fun:malloc", "fun:make"], []),
    # the allocation function: valgrind names it, memdump's C stacks do not say which it was
    (["fun:calloc", "fun:make_list"], [("make_list", 1, 64, 2)]),
    (["fun:memalign", "fun:posix_memalign", "fun:make_list"], [("make_list", 1, 64, 2)]),
    (["fun:_Znwm", "fun:make_list"], []),
    (["fun:_Znam", "fun:make_widget()"], [("make_widget()", 1, 48, 1)]),
    (["fun:_Zn?m", "fun:_ZL11make_widgetv", "fun:main"], [("make_widget()", 1, 48, 1)]),
    (["fun:malloc", "fun:_ZL11make_widgetv"], []),
    # obj: the module's path, glob
    (["fun:malloc", "obj:/src/app", "fun:main"], [("make_list", 1, 64, 2)]),
    (["fun:malloc", "fun:worker", "obj:*/libc.so.6", "obj:*libc*"], [("worker", 1, 333, 3)]),
    (["fun:malloc", "obj:/opt/*"], []),
    (["fun:malloc", "obj:/lib/*"], [("strdup", 1, 12, 1)]),  # __strdup in libc
    # src:FILE[:LINE], FILE the source's basename
    (["fun:malloc", "src:app.c:3"], [("make_list", 1, 64, 2)]),
    (["fun:malloc", "src:app.c:4"], []),
    # a suppression longer than the stack, or a stack frame that differs
    (["fun:malloc", "fun:worker", "fun:start_thread", "fun:clone", "fun:more"], []),
    (["fun:malloc", "fun:copy_name"], []),
])
def test_valgrind_matching_rules(tmp_path: Path, frames: list[str],
                                 suppressed: list[tuple[str, int, int, int]]) -> None:
    text = "{\n  " + (suppressed[0][0] if suppressed else "x") + "\n  Memcheck:Leak\n"
    text += "".join(f"  {f}\n" for f in frames) + "}\n"
    assert _suppressed(tmp_path, text) == [s for s in suppressed if s[1]]


def test_other_memcheck_kinds_are_read_and_not_applied(tmp_path: Path) -> None:
    text = """\
{
   free
   Memcheck:Free
   fun:free
   fun:main
}
{
   param
   Memcheck:Param
   write(buf)
   fun:write
   obj:*
}
{
   addr
   Memcheck:Addr8,Memcheck:Cond
   ...
}
{
   leak-too
   Memcheck:Leak
   ...
}
"""
    loaded = load(_supp(tmp_path, text))
    assert [(s.name, s.kind, s.line, s.frames) for s in loaded] == [
        ("free", "Memcheck:Free", 2, (("fun", "free"), ("fun", "main"))),
        ("param", "Memcheck:Param", 8, (("fun", "write"), ("obj", "*"))),
        ("addr", "Memcheck:Addr8,Memcheck:Cond", 15, (("...", ""),)),
        ("leak-too", "Memcheck:Leak", 20, (("...", ""),)),
    ]
    assert _suppressed(tmp_path, text) == [("leak-too", 4, 457, 7)]


@pytest.mark.parametrize(("text", "problem"), [
    ("{\n  a\n  Memcheck:Leak\n  fun:main\n", "1: the suppression has no closing '}'"),
    ("{\n  a\n  Memcheck:Leak\n}\n", "4: the suppression 'a' has no frames"),
    ("{\n  a\n}\n", "3: a suppression needs a name, TOOL:KIND and frames"),
    ("{\n  a\n  Leak\n  fun:main\n}\n", "3: 'Leak' is not TOOL:KIND (Memcheck:Leak)"),
    ("{\n  a\n  Memcheck:Leak\n  match-leak-kinds: lost\n  fun:main\n}\n",
     "4: match-leak-kinds: unknown leak kind 'lost' (definite, indirect, possible, reachable, "
     "comma-separated; or all, none)"),
    ("{\n  a\n  Memcheck:Leak\n  fun:main\n  main\n}\n",
     "5: 'main' is not a frame (fun:, obj:, src: or ...)"),
    ("# c\n{\n  a\n  Memcheck:Leak\n  fun:main\n{\n", "6: '{' inside a suppression (a '}' is "
     "missing before it)"),
    ("{\n  a\n  Memcheck:Leak\n  fun:main\n}\nfun:x\n",
     "6: expected '{' to start a suppression, not 'fun:x'"),
    ("{\n  a\n  Memcheck:Leak\n" + "  fun:f\n" * 25 + "}\n", "29: more than 24 frames "
     "(valgrind's limit)"),
    ("# lsan\nleak:ok\nrace:foo\n",
     "3: suppression type 'race' is not LeakSanitizer's (leak:PATTERN)"),
    ("leak\n", "1: 'leak' is not TYPE:PATTERN (leak:PATTERN)"),
    ("leak:\n", "1: leak: without a pattern"),
])
def test_malformed_files_are_one_line_and_exit_2(tmp_path: Path, text: str, problem: str) -> None:
    path = _supp(tmp_path, text)
    with pytest.raises(SuppressionError) as e:
        load(path)
    assert str(e.value) == f"{path}:{problem}"
    result = run_cli("--suppressions", path, _dump(tmp_path))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"memdump-analyze: {path}:{problem}\n"


def test_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.supp"
    result = run_cli("--suppressions", str(missing), _dump(tmp_path))
    assert (result.returncode, result.stderr) == (
        2, f"memdump-analyze: {missing}: cannot read the suppressions (No such file or "
        "directory)\n")


def test_valgrind_glob() -> None:
    assert valgrind_glob("a*c").match("abbbc") and valgrind_glob("a*c").match("ac")
    assert not valgrind_glob("a*c").match("acd")
    assert valgrind_glob("a?c").match("abc") and not valgrind_glob("a?c").match("ac")
    assert valgrind_glob(r"a\*c").match("a*c") and not valgrind_glob(r"a\*c").match("abc")
    assert valgrind_glob("operator new(unsigned long)").match("operator new(unsigned long)")
    assert valgrind_glob("[ab]").match("[ab]") and not valgrind_glob("[ab]").match("a")


@pytest.mark.parametrize(("template", "text", "result"), [
    ("foo", "xfooy", True),  # a substring
    ("^foo", "xfoo", False),
    ("^foo", "foox", True),
    ("foo$", "xfoo", True),
    ("foo$", "foox", False),
    ("^foo$", "foo", True),
    ("f*o", "fxxo", True),
    ("f*o$", "fxoxo", False),  # no backtracking: the first `o` after `f` is taken, as LSan does
    ("f*$", "fxx", True),
    ("a*b*c", "xxaxxbxxcxx", True),
    ("a*b*c", "cba", False),
    ("make_widget", "make_widget()", True),
    ("libc.so", "/usr/lib/x86_64-linux-gnu/libc.so.6", True),
    ("x", "", False),
    ("x", None, False),
])
def test_lsan_template_match(template: str, text: str | None, result: bool) -> None:
    assert lsan_match(template, text) is result


def test_lsan_suppressions_match_function_module_or_file(tmp_path: Path) -> None:
    text = """\
# LeakSanitizer's suppressions
leak:make_widget
leak:^copy_name$

leak:libc.so.6
leak:app.c
"""
    # LeakSanitizer's rule: the innermost frame that a suppression matches (by module first,
    # then by function or file) picks the first suppression that matches it; libc.so.6 would
    # match __libc_start_call_main (and the thread's start_thread) further out
    assert _suppressed(tmp_path, text) == [("make_widget", 1, 48, 1), ("^copy_name$", 1, 12, 1),
                                           ("app.c", 2, 397, 5)]
    assert _suppressed(tmp_path, "leak:^make_l\nleak:app.c\n") == [("^make_l", 1, 64, 2),
                                                                    ("app.c", 2, 345, 4)]
    assert _suppressed(tmp_path, "leak:libc.so\n") == [("libc.so", 4, 457, 7)]
    # libc's strdup and libstdc++'s operator new are the allocator's frames, not LSan's
    assert _suppressed(tmp_path, "leak:strdup\nleak:libstdc++\n") == []
    assert _suppressed(tmp_path, "leak:/src/w.cpp$\nleak:^worker()\n") == [
        ("/src/w.cpp$", 1, 48, 1)]


def _blocks(text: str) -> list[str]:
    return re.findall(r"^\{\n.*?^\}\n", text, re.M | re.S)


def test_gen_suppressions_round_trip(tmp_path: Path) -> None:
    dump = _dump(tmp_path)
    result = run_cli("--gen-suppressions", "--show-leak-kinds", "all", dump)
    assert result.returncode == 0, result.stderr
    blocks = _blocks(result.stdout)
    assert blocks == [
        "{\n   memdump-leak-1-reachable\n   Memcheck:Leak\n   match-leak-kinds: reachable\n"
        "   fun:*\n   fun:worker\n   fun:start_thread\n   fun:clone\n}\n",
        "{\n   memdump-leak-2-possible\n   Memcheck:Leak\n   match-leak-kinds: possible\n"
        "   fun:*\n   fun:make_list\n   fun:main\n}\n",
        "{\n   memdump-leak-3-definite\n   Memcheck:Leak\n   match-leak-kinds: definite\n"
        "   fun:_Zn?m\n   fun:make_widget()\n   fun:main\n}\n",
        "{\n   memdump-leak-4-definite\n   Memcheck:Leak\n   match-leak-kinds: definite\n"
        "   fun:malloc\n   fun:strdup\n   fun:copy_name\n   fun:main\n}\n",
    ]
    # each right after its group's stack, as valgrind writes it
    assert "    by main (app.c:7)\n{\n   memdump-leak-2-possible\n" in result.stdout
    path = _supp(tmp_path, "".join(blocks))
    back = run_cli("--suppressions", path, "--show-leak-kinds", "all", dump)
    assert "No leaks." in back.stdout
    assert "    suppressed:      457 bytes in 7 blocks\n" in back.stdout
    assert re.findall(r"used_suppression: +(\d+) (\S+) \S+:(\d+) suppressed: (.*)",
                      back.stdout) == [
        ("1", "memdump-leak-1-reachable", "2", "333 bytes in 3 blocks"),
        ("1", "memdump-leak-2-possible", "11", "64 bytes in 2 blocks"),
        ("1", "memdump-leak-3-definite", "19", "48 bytes in 1 blocks"),
        ("1", "memdump-leak-4-definite", "27", "12 bytes in 1 blocks")]
    # JSON: each listed leak carries its suppression, numbered in the list (definite,possible)
    report = json.loads(run_cli("--format", "json", "--gen-suppressions", dump).stdout)
    assert [leak["suppression"] for leak in report["leaks"]] == [
        blocks[1].replace("leak-2", "leak-1"), blocks[2].replace("leak-3", "leak-2"),
        blocks[3].replace("leak-4", "leak-3")]
