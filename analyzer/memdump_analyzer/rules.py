"""Classification rules: which frames a report hides, and which live blocks are the runtime's own.

All the rules are in `RULES`, the table that docs/report-format.md ("Classification rules")
repeats; a test checks that the two agree. Patterns are shell-style (`fnmatch`, case-sensitive;
`*` matches anything). Function names are matched after removing a leading `__GI_` (glibc's
internal aliases, which GDB sometimes shows), module names by their basename.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import translate

from .dumpfile import Frame
from .dumpformat import public_name

__all__ = [
    "RULES",
    "RUNTIME_FREE_FUNCTIONS",
    "Rule",
    "classify_stack",
    "is_dynamic_loader",
    "is_runtime_frame",
    "is_runtime_module",
    "is_runtime_only",
    "is_lock_wrapper",
    "outer_runtime_frames",
    "rules_markdown",
    "trim_lock_stack",
    "trim_stack",
]


@dataclass(frozen=True)
class Rule:
    """One row of the classification table."""

    name: str
    #: what the patterns are matched against
    matches: str
    patterns: tuple[str, ...]
    effect: str


RULES: tuple[Rule, ...] = (
    Rule(
        "allocator-frame",
        "function of the innermost frames",
        (
            "malloc",
            "calloc",
            "realloc",
            "reallocarray",
            "free",
            "cfree",
            "aligned_alloc",
            "memalign",
            "posix_memalign",
            "valloc",
            "pvalloc",
            "__libc_*alloc*",
            "__libc_free",
            "operator new*",
            "operator delete*",
            "_Znw*",
            "_Zna*",
            "_Zdl*",
            "_Zda*",
            "strdup",
            "__strdup",
            "strndup",
            "__strndup",
            "wcsdup",
            "__wcsdup",
        ),
        "trimmed from the stack while they are innermost: the report names the frame that "
        "called the allocator",
    ),
    Rule(
        "lock-wrapper-frame",
        "function of the innermost frames of a lock's waiting stack",
        (
            "pthread_mutex_*lock",
            "pthread_rwlock_*lock",
            "__pthread_mutex_*lock*",
            "__pthread_rwlock_*lock*",
            "__gthread_*",
            "__gthrw_*",
            "std::mutex::lock*",
            "std::recursive_mutex::lock*",
            "std::timed_mutex::*lock*",
            "std::recursive_timed_mutex::*lock*",
            "std::shared_mutex::lock*",
            "std::shared_timed_mutex::*lock*",
            "std::__shared_mutex_pthread::*lock*",
            "std::unique_lock<*>::lock*",
            "std::unique_lock<*>::unique_lock*",
            "std::lock_guard<*>::lock_guard*",
            "std::scoped_lock<*>::scoped_lock*",
            "std::shared_lock<*>::lock*",
            "std::shared_lock<*>::shared_lock*",
            "std::lock<*>*",
            "std::__detail::__lock_impl*",
            "std::condition_variable::wait*",
            "std::_V2::condition_variable_any::wait*",
            "std::condition_variable_any::wait*",
        ),
        "trimmed from a lock's waiting stack (`contention`, the report's lock section) while they "
        "are innermost: the stack starts at the program's call that asked for the lock, not in "
        "the C++ library's inlined wrappers; a stack that would be left empty is kept whole",
    ),
    Rule(
        "below-main",
        "function",
        ("main", "main(*)"),
        "when a stack contains `main` (GDB names C++'s `main()`), the frames outer to its "
        "outermost `main` (`__libc_start_call_main`, `__libc_start_main`, `_start`) are dropped",
    ),
    Rule(
        "dynamic-loader",
        "module of an allocating frame",
        ("ld-linux*", "ld-*.so*"),
        "the block is `runtime`: the loader's own data (link maps, search paths, TLS). The "
        "allocating frames are those inner to the innermost frame outside the runtime modules, "
        "so a block that a library's constructor or a C++ static initializer allocated while the "
        "loader runs it (at start, or inside `dlopen`) is that library's",
    ),
    Rule(
        "runtime-function",
        "function of an allocating frame",
        (
            "_IO_file_doallocate",
            "_IO_doallocbuf",
            "(anonymous namespace)::pool::pool*",
            "__gnu_cxx::__freeres",
            "_dl_*",
            # the loader's static TLS helpers (elf/dl-tls.c): a thread's DTV, named alone
            # when the stack is one frame deep (`set memdump depth 1`) and its module unknown
            "allocate_dtv",
            "tls_get_addr_tail",
            "update_get_addr",
            "__libc_early_init",
            "__tls_get_addr",
            "_nl_*",
            "__tzfile_read",
            "tzset_internal",
            "__nss_*",
            "nss_*",
            # glibc state that __libc_freeres releases at exit (what valgrind calls before it
            # counts): locale, gettext domains, wide-character and iconv module caches, the
            # static result buffers of the non-reentrant NSS lookups, setenv's environment.
            "setlocale",
            "new_composite_name",
            "bindtextdomain",
            "bind_textdomain_codeset",
            "set_binding_values",
            "textdomain",
            "__textdomain",
            "__wcsmbs_*",
            "__gconv_read_conf",
            "__gconv_load_conf",
            "__gconv_load_cache",
            "__gconv_find_shlib",
            "__gconv_get_path",
            "getpw*",
            "getgr*",
            "getsp*",
            "gethost*",
            "getserv*",
            "getproto*",
            "getnet*",
            "getlogin",
            "ttyname",
            "__add_to_environ",
            "_dlerror_run",
            "__resolv_context_*",
            "__new_exitfn",
        ),
        "the block is `runtime` (allocating frames as for `dynamic-loader`: a runtime function "
        "outer to the program's frames, such as the loader's `_dl_init` that runs constructors, "
        "makes nothing the runtime's)",
    ),
    Rule(
        "runtime-module",
        "module of every frame",
        (
            "libc.so*",
            "libc-*.so",
            "ld-*.so*",
            "ld-linux*",
            "libstdc++.so*",
            "libgcc_s.so*",
            "libm.so*",
            "libm-*.so",
            "libpthread.so*",
            "libpthread-*.so",
            "libdl.so*",
            "libdl-*.so",
        ),
        "when every frame's module is one of these, the block is `runtime`; a frame whose "
        "module is unknown is not",
    ),
    Rule(
        "runtime-frame",
        "function or module of the outermost frames",
        ("std::*", "__gnu_cxx::*", "__cxxabiv1::*", "_start", "(the runtime-module patterns)"),
        "a frame of the C/C++ runtime: in a runtime module (`start_thread`, `clone3`, libstdc++'s "
        "`execute_native_thread_routine`), a function of the C++ standard library's namespaces "
        "compiled into the program (`std::thread::_State_impl<...>::_M_run()`, `std::__invoke`), "
        "or `_start`, the C runtime's entry point linked into every program (crt1.o), which calls "
        "`main` through the C library when `main` itself is not on the stack (a tail call). "
        "The outermost run of them, the callers of the program's outermost frame, is folded into "
        "one line of the text report (`--show-runtime-frames` shows it); frames of the runtime "
        "between the program's frames are always shown",
    ),
    Rule(
        "runtime-free",
        "function of any frame of a `free`",
        ("tcache_thread_shutdown",),
        "the free is the C library's own (a thread's cache being emptied): it is ignored, "
        "counted as `runtime_internal_frees`",
    ),
    Rule(
        "runtime-only-free",
        "module of every frame of a `free` or `realloc` of a pointer that is not live",
        ("(the runtime-module patterns)",),
        "not an error: the runtime freeing its own memory (glibc's thread cache when libc has no "
        "debug information to name `tcache_thread_shutdown`); counted as `runtime_internal_frees`",
    ),
)


def rules_markdown() -> str:
    """`RULES` as the markdown table that docs/report-format.md shows."""
    rows = ["| rule | matched against | patterns | effect |", "| --- | --- | --- | --- |"]
    for rule in RULES:
        patterns = ", ".join(f"`{p}`" for p in rule.patterns)
        rows.append(f"| `{rule.name}` | {rule.matches} | {patterns} | {rule.effect} |")
    return "\n".join(rows) + "\n"


def _rule(name: str) -> Rule:
    for rule in RULES:
        if rule.name == name:
            return rule
    raise KeyError(name)


def _matcher(patterns: Iterable[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{translate(p)})" for p in patterns))


@functools.cache
def _rule_matcher(name: str) -> re.Pattern[str]:
    """Rule `name`'s patterns as one regex, compiled the first time a stack asks for it (a report
    whose frames need no rule compiles none: 10 ms of a small program's analysis)."""
    patterns = _rule(name).patterns
    if name == "runtime-frame":  # its parenthesised patterns are the modules', not functions'
        patterns = tuple(p for p in patterns if not p.startswith("("))
    return _matcher(patterns)


#: functions that make a free the runtime's own (`DumpReader(mark_functions=...)`)
RUNTIME_FREE_FUNCTIONS = frozenset(_rule("runtime-free").patterns)


def _function(frame: Frame) -> str | None:
    return public_name(frame.function)


def is_dynamic_loader(module: str | None) -> bool:
    return (module is not None
            and _rule_matcher("dynamic-loader").match(os.path.basename(module)) is not None)


def is_runtime_module(module: str | None) -> bool:
    return (module is not None
            and _rule_matcher("runtime-module").match(os.path.basename(module)) is not None)


def is_runtime_only(stack: Sequence[Frame]) -> bool:
    """Rule `runtime-only-free`: a known stack with no frame outside the runtime's modules."""
    return bool(stack) and all(is_runtime_module(f.module) for f in stack)


def is_runtime_frame(frame: Frame) -> bool:
    """Rule `runtime-frame`: a runtime module's frame, or a C++ standard library function."""
    if is_runtime_module(frame.module):
        return True
    name = _function(frame)
    return name is not None and _rule_matcher("runtime-frame").match(name) is not None


def outer_runtime_frames(stack: Sequence[Frame]) -> int:
    """How many of the outermost frames of `stack` (innermost first) are the runtime's, callers
    of the program's outermost frame; 0 when every frame is the runtime's (nothing to fold)."""
    n = 0
    for frame in reversed(stack):
        if not is_runtime_frame(frame):
            return n
        n += 1
    return 0


def is_lock_wrapper(function: str | None) -> bool:
    """Rule `lock-wrapper-frame`: a lock function or the C++ library's wrapper of one."""
    name = public_name(function)
    return name is not None and _rule_matcher("lock-wrapper-frame").match(name) is not None


def trim_lock_stack(frames: Sequence[Frame]) -> tuple[Frame, ...]:
    """A lock's waiting stack as reports show it: lock wrapper frames and below-main removed."""
    return trim_stack(frames, _rule_matcher("lock-wrapper-frame"))


def is_allocator_frame(frame: Frame) -> bool:
    """Rule `allocator-frame`: a frame `trim_stack` removes from the inner end of a stack."""
    name = _function(frame)
    return name is not None and _rule_matcher("allocator-frame").match(name) is not None


def is_main_frame(frame: Frame) -> bool:
    """Rule `below-main`: a frame `trim_stack` keeps as a stack's outermost when it is the
    outermost of its kind (its callers are dropped)."""
    name = _function(frame)
    return name is not None and _rule_matcher("below-main").match(name) is not None


def trim_stack(frames: Sequence[Frame], wrapper: re.Pattern[str] | None = None
               ) -> tuple[Frame, ...]:
    """The stack as reports show it (innermost first): allocator frames (or `wrapper`'s) and
    below-main removed.

    A stack that would be left empty is kept whole.
    """
    if wrapper is None:
        wrapper = _rule_matcher("allocator-frame")
    start = 0
    n = len(frames)
    while start < n:
        name = _function(frames[start])
        if name is None or wrapper.match(name) is None:
            break
        start += 1
    if start == n:
        start = 0
    end = n
    for i in range(n - 1, start - 1, -1):
        name = _function(frames[i])
        if name is not None and _rule_matcher("below-main").match(name) is not None:
            end = i + 1
            break
    return tuple(frames[start:end])


def classify_stack(frames: Sequence[Frame]) -> str:
    """`runtime` or `leak` for a (trimmed) allocation stack, by the frames that allocate: those
    inner to the innermost frame outside the runtime modules (the program's code, or another
    library's). The loader's or a runtime function's frames among them make the block the
    runtime's; outer to them (a constructor the loader runs, a callback) they do not."""
    if not frames:
        return "leak"
    for frame in frames:
        if is_dynamic_loader(frame.module):
            return "runtime"
        name = _function(frame)
        if name is not None and _rule_matcher("runtime-function").match(name) is not None:
            return "runtime"
        if not is_runtime_module(frame.module):
            return "leak"
    return "runtime"
