"""Leaks made by shared libraries' constructors are the program's, not the runtime's.

ctor_main links a C library whose `__attribute__((constructor))` leaks 41 bytes and keeps 19, and a
C++ library whose static initializer leaks 27 bytes; it dlopen()s a plugin whose constructor leaks
57 bytes. The loader runs all of them (`_dl_init`, at start or inside `dlopen`), but the blocks are
the libraries' own. valgrind 3.19 (`--leak-check=full`) on the same runs: with the plugin,
"definitely lost: 125 bytes in 3 blocks" in three loss records (ctor_lib.c:10, 41 bytes;
ctor_cpp_lib.cpp:9, 27; ctor_plugin.c:8, 57) and the 19 bytes of ctor_lib.c:12 still reachable;
without it, "definitely lost: 68 bytes in 2 blocks". The loader's own blocks of the `dlopen` (its
link map, version table, name) stay the runtime's; test_memdump_vs_valgrind compares the run
without the plugin with valgrind run live.
"""

from __future__ import annotations

from pathlib import Path

from memdump_e2e import (
    analyze,
    analyze_raw,
    base_name,
    expect_leaks,
    functions,
    marker,
    program,
    record,
)

LIB_LEAK = marker("ctor_lib.c", "lib-ctor")
LIB_KEPT = marker("ctor_lib.c", "lib-ctor-kept")
CPP_LEAK = marker("ctor_cpp_lib.cpp", "cpp-static-init")
PLUGIN_LEAK = marker("ctor_plugin.c", "plugin-ctor")


def test_constructor_leaks_of_linked_and_dlopened_libraries(dump: Path) -> None:
    record("ctor_main", program("libmemdump_ctor_plugin.so"), dump=dump)
    report = analyze(dump)
    expect_leaks(report, {LIB_LEAK: (41, 1), LIB_KEPT: (19, 1), CPP_LEAK: (27, 1),
                          PLUGIN_LEAK: (57, 1)})
    kinds = {k: (v["bytes"], v["blocks"]) for k, v in report.summary["leak_kinds"].items()}
    assert kinds == {"definite": (125, 3), "indirect": (0, 0), "possible": (0, 0),
                     "reachable": (19, 1), "unknown": (0, 0)}, report.dumps()
    assert [base_name(f) for f in functions(report.group_at(PLUGIN_LEAK))[:3]] == [
        "ctor_plugin_setup", "ctor_plugin_init", "call_init"]
    assert functions(report.group_at(CPP_LEAK))[:2] == [
        "(anonymous namespace)::register_codecs()",
        "__static_initialization_and_destruction_0(int, int)"]
    # the loader's own allocations in the same dlopen remain the runtime's
    runtime_sites = {base_name(functions(g)[0]) for g in report.groups("runtime")}
    assert {"_dl_new_object", "_dl_check_map_versions", "_dl_map_object"} <= runtime_sites
    for group in report.groups("runtime"):
        files = {Path(f["file"]).name for f in group["stack"] if f.get("file")}
        assert not files & {"ctor_lib.c", "ctor_plugin.c", "ctor_cpp_lib.cpp"}, report.dumps()


def test_fail_on_leak_counts_a_constructors_leak(dump: Path) -> None:
    record("ctor_main", dump=dump)
    proc = analyze_raw(dump, "--fail-on-leak")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "definitely lost: 68 bytes in 2 blocks" in proc.stdout
    report = analyze(dump)
    expect_leaks(report, {LIB_LEAK: (41, 1), LIB_KEPT: (19, 1), CPP_LEAK: (27, 1)})
