"""Classification: trimmed stacks, runtime blocks, grouping and order, and the rules table."""

from __future__ import annotations

from pathlib import Path

import pytest
from analyzer_testlib import APP, LDSO, LIBC, LIBSTDCXX, REPO, Dump, F, main_at
from memdump_analyzer import Analysis, analyze
from memdump_analyzer.dumpfile import Frame
from memdump_analyzer.rules import RULES, classify_stack, rules_markdown, trim_stack


def one_leak(tmp_path: Path, stack: list[F], size: int = 16) -> Analysis:
    d = Dump()
    d.malloc("0x10", size, stack)
    d.end()
    return analyze(d.write(tmp_path))


def names(frames: tuple[Frame, ...] | list[Frame]) -> list[str | None]:
    return [f.function for f in frames]


@pytest.mark.parametrize(
    "wrapper",
    [
        "operator new(unsigned long)",
        "operator new[](unsigned long)",
        "operator new(unsigned long, std::nothrow_t const&)",
        "operator new(unsigned long, std::align_val_t)",
        "_Znwm",
        "_Znam",
        "_ZnwmRKSt9nothrow_t",
        "_ZnwmSt11align_val_t",
    ],
)
def test_operator_new_is_trimmed(tmp_path: Path, wrapper: str) -> None:
    stack = [F(wrapper, module=LIBSTDCXX), F("make_widget(int)", "/src/w.cc", 8), *main_at(20)]
    a = one_leak(tmp_path, stack)
    [group] = a.groups
    assert group.kind == "leak"
    assert names(group.stack) == ["make_widget(int)", "main"]


@pytest.mark.parametrize(
    "inner",
    [
        ["__strdup"],
        ["strdup"],
        ["__strndup"],
        ["__wcsdup"],
        ["malloc", "__strdup"],
        ["__GI___libc_malloc", "__strdup"],
        ["__libc_calloc"],
    ],
)
def test_allocator_frames_are_trimmed(tmp_path: Path, inner: list[str]) -> None:
    stack = [*(F(n, module=LIBC) for n in inner), F("copy_name", "/src/n.c", 5), *main_at(9)]
    a = one_leak(tmp_path, stack)
    assert names(a.groups[0].stack) == ["copy_name", "main"]


def test_asprintf_is_what_the_user_called(tmp_path: Path) -> None:
    stack = [
        F("__vasprintf_internal", module=LIBC),
        F("asprintf", module=LIBC),
        F("describe", "/src/d.c", 3),
        *main_at(9),
    ]
    a = one_leak(tmp_path, stack)
    [group] = a.groups
    assert group.kind == "leak"
    assert names(group.stack) == ["__vasprintf_internal", "asprintf", "describe", "main"]


def test_only_innermost_wrappers_are_trimmed(tmp_path: Path) -> None:
    stack = [
        F("helper", "/src/h.c", 1),
        F("operator new(unsigned long)", module=LIBSTDCXX),
        *main_at(9),
    ]
    a = one_leak(tmp_path, stack)
    assert names(a.groups[0].stack) == ["helper", "operator new(unsigned long)", "main"]


def test_frames_below_main_are_dropped() -> None:
    def frame(name: str | None, module: str = APP) -> Frame:
        return Frame(0x1000 + hash(name) % 1000, module, 0, name, None, None)

    stack = [
        frame("f"),
        frame("main"),
        frame("__libc_start_call_main", LIBC),
        frame("__libc_start_main_impl", LIBC),
        frame("_start"),
    ]
    assert names(trim_stack(stack)) == ["f", "main"]
    cxx = [frame("g()"), frame("main()"), frame("__libc_start_call_main", LIBC), frame("_start")]
    assert names(trim_stack(cxx)) == ["g()", "main()"]
    not_main = [frame("g"), frame("domain"), frame("main_loop"), frame("_start")]
    assert names(trim_stack(not_main)) == ["g", "domain", "main_loop", "_start"]
    thread = [frame("worker"), frame("start_thread", LIBC), frame("clone3", LIBC)]
    assert names(trim_stack(thread)) == ["worker", "start_thread", "clone3"]
    # a stack that is all allocator is kept whole
    alloc = [frame("malloc", LIBC), frame("operator new(unsigned long)", LIBSTDCXX)]
    assert names(trim_stack(alloc)) == ["malloc", "operator new(unsigned long)"]
    assert trim_stack([]) == ()


def test_dynamic_loader_blocks_are_runtime(tmp_path: Path) -> None:
    stack = [
        F("call_init", module=LDSO),
        F("dlopen_worker", module="/lib/x86_64-linux-gnu/ld-2.31.so"),
        *main_at(5),
    ]
    a = one_leak(tmp_path, stack)
    assert [g.kind for g in a.groups] == ["runtime"]
    assert (a.leaked_blocks, a.runtime_blocks, a.runtime_bytes) == (0, 1, 16)


def test_a_library_constructor_run_by_the_loader_is_the_librarys(tmp_path: Path) -> None:
    """The loader's frames outer to a library's code (it runs the constructor) do not make the
    block the runtime's; the loader's frames inner to it (TLS it allocates for the library's
    access) do."""
    plugin = "/opt/app/libplugin.so"
    loader = [F("call_init", module=LDSO), F("_dl_init", module=LDSO),
              F("_dl_catch_exception", module=LIBC), F("dl_open_worker", module=LDSO),
              F("dlopen", module=LIBC), *main_at(7)]
    ctor = [F("plugin_setup", "/src/p.c", 8, module=plugin), F("plugin_init", "/src/p.c", 14,
                                                                module=plugin)]
    assert [g.kind for g in one_leak(tmp_path, ctor + loader).groups] == ["leak"]
    at_start = [*ctor, F("call_init", module=LDSO), F("_dl_init", module=LDSO),
                F("_dl_start_user", module=LDSO)]
    assert [g.kind for g in one_leak(tmp_path, at_start).groups] == ["leak"]
    tls = [F("_dl_resize_dtv", module=LDSO), F("__tls_get_addr", module=LDSO), *ctor, *loader]
    assert [g.kind for g in one_leak(tmp_path, tls).groups] == ["runtime"]
    # libstdc++'s own static initializer, run by the loader: every frame is the runtime's
    pool = [F(None, module=LIBSTDCXX, pc=0x7FFFF7AA57BA), F("call_init", module=LDSO),
            F("_dl_init", module=LDSO), F("_dl_start_user", module=LDSO)]
    assert [g.kind for g in one_leak(tmp_path, pool).groups] == ["runtime"]


def test_stdio_buffer_is_runtime(tmp_path: Path) -> None:
    stack = [
        F("_IO_file_doallocate", module=LIBC),
        F("_IO_doallocbuf", module=LIBC),
        F("puts", module=LIBC),
        *main_at(5),
    ]
    a = one_leak(tmp_path, stack, 1024)
    assert [g.kind for g in a.groups] == ["runtime"]
    assert names(a.groups[0].stack)[0] == "_IO_file_doallocate"


@pytest.mark.parametrize(
    "function",
    [
        "_dl_allocate_tls",
        "__libc_early_init",
        "__tls_get_addr",
        "_nl_load_locale_from_archive",
        "__tzfile_read",
        "tzset_internal",
        "__nss_database_lookup2",
        "__gconv_load_cache",
        "__wcsmbs_getfct",
        "setlocale",
        "new_composite_name",
        "set_binding_values",
        "getpwuid",
        "getgrgid",
        "__add_to_environ",
        "(anonymous namespace)::pool::pool()",
        "__gnu_cxx::__freeres",
        "__new_exitfn",
    ],
)
def test_runtime_functions(tmp_path: Path, function: str) -> None:
    a = one_leak(tmp_path, [F(function, module=LIBSTDCXX), F("setup", "/src/s.c", 2), *main_at(5)])
    assert [g.kind for g in a.groups] == ["runtime"]


def test_iconv_handle_is_the_programs(tmp_path: Path) -> None:
    """iconv_open's descriptor is the program's to iconv_close: never freed, it is a leak (valgrind
    agrees), though glibc's own conversion-module cache beneath it is runtime."""
    stack = [F("__gconv_open", module=LIBC), F("iconv_open", module=LIBC), *main_at(5)]
    a = one_leak(tmp_path, stack)
    assert [g.kind for g in a.groups] == ["leak"]


def test_no_user_module_is_runtime(tmp_path: Path) -> None:
    stack = [
        F("some_libc_function", module=LIBC),
        F("std::locale::_Impl::_Impl(unsigned long)", module=LIBSTDCXX),
        F("_GLOBAL__sub_I_locale_init", module="/lib/x86_64-linux-gnu/libstdc++.so.6.0.30"),
        F("call_init", module="/lib/x86_64-linux-gnu/libm.so.6"),
    ]
    a = one_leak(tmp_path, stack)
    assert [g.kind for g in a.groups] == ["runtime"]


def test_unknown_module_or_user_module_is_a_leak() -> None:
    def frame(module: str | None) -> Frame:
        return Frame(0x10, module, 0, "f", None, None)

    assert classify_stack([frame(LIBC), frame(None)]) == "leak"
    assert classify_stack([frame(LIBC), frame(APP)]) == "leak"
    assert classify_stack([frame("/usr/lib/libfoo.so.1"), frame(LIBC)]) == "leak"
    assert (
        classify_stack([frame(LIBC), frame("/lib/x86_64-linux-gnu/libpthread.so.0")]) == "runtime"
    )
    assert classify_stack([]) == "leak"


def test_grouping_and_order(tmp_path: Path) -> None:
    d = Dump()
    new = F("operator new(unsigned long)", module=LIBSTDCXX)
    site = F("make", "/src/m.cc", 3)
    other_start = F("__libc_start_call_main", module=LIBC, pc=0x7FFFF7DF0000)
    # two stack nodes that are one stack once trimmed: one group
    d.malloc("0x10", 50, [new, site, *main_at(10)])
    d.malloc("0x20", 50, [site, F("main", "/src/app.c", 10), other_start])
    d.malloc("0x30", 100, main_at(20))  # 100 bytes, 1 block
    d.malloc("0x40", 200, main_at(21))  # 200 bytes
    d.malloc("0x50", 60, main_at(22))
    d.malloc("0x60", 40, main_at(22))  # 100 bytes in 2 blocks, after make's
    d.end()
    a = analyze(d.write(tmp_path))
    summary = [(g.bytes, g.blocks, g.stack[0].function, g.stack[0].line) for g in a.groups]
    assert summary == [
        (200, 1, "main", 21),
        (100, 2, "make", 3),
        (100, 2, "main", 22),
        (100, 1, "main", 20),
    ]
    assert (a.leaked_bytes, a.leaked_blocks) == (500, 6)


def test_order_of_equal_groups_follows_allocation(tmp_path: Path) -> None:
    d = Dump()
    d.malloc("0x10", 8, main_at(5))
    d.malloc("0x20", 8, main_at(4))
    d.malloc("0x30", 8, main_at(3))
    d.free("0x10", main_at(6))
    d.malloc("0x40", 8, main_at(5))  # 5's block is now the youngest
    d.end()
    a = analyze(d.write(tmp_path))
    assert [g.stack[0].line for g in a.groups] == [4, 3, 5]


def test_rules_table_in_the_docs_is_the_code_table() -> None:
    doc = (REPO / "docs" / "report-format.md").read_text()
    table = doc.split("<!-- rules:begin -->\n", 1)[1].split("<!-- rules:end -->", 1)[0]
    assert table == rules_markdown()
    assert [r.name for r in RULES] == [
        "allocator-frame",
        "lock-wrapper-frame",
        "below-main",
        "dynamic-loader",
        "runtime-function",
        "runtime-module",
        "runtime-frame",
        "runtime-free",
        "runtime-only-free",
    ]
    for rule in RULES:
        for pattern in rule.patterns:
            assert "[" not in pattern, "a shell pattern's [ would be a character class"
