"""valgrind memcheck is the reference: memdump must agree with it on the same program and input.

memdump's leaks equal what valgrind says is in use at exit after glibc's and libstdc++'s freeres
ran (they free exactly the runtime's own memory that memdump keeps apart); its leaks plus the
runtime's blocks equal valgrind's in-use figure with freeres turned off; allocation counts agree.
Programs whose allocations depend on the environment are left out: valgrind adds LD_PRELOAD and
three more variables to it.

Leak kinds: valgrind's LEAK SUMMARY (`--leak-check=full`, after freeres) splits the blocks in use
at exit into definitely, indirectly, possibly lost and still reachable. After freeres those are
memdump's `leak` blocks only, so memdump's leak kinds of its `leak` blocks must equal valgrind's
four lines. One exception, in the pointer-scan cases: a thread still alive at exit keeps glibc's
thread data (its dtv, allocated by `_dl_allocate_tls` for `allocate_stack`), which freeres does not
free (it frees only the stacks of threads that are gone): valgrind counts it, memdump files it as
`runtime`; there its kind must be valgrind's too, and it is added to memdump's side.

Cliques: each of valgrind's `N (D direct, I indirect) bytes in B blocks are definitely lost` loss
records must be one of memdump's definitely lost groups with the same figures (the indirectly lost
blocks whose `r` record names a block of the group as leader).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from memdump_e2e import REPO, analyze, build_dir, frame_site, marker, program

MEMDUMP_SH = REPO / "scripts" / "memdump.sh"
TIMEOUT = 300

if shutil.which("valgrind") is None:
    pytest.fail("valgrind is missing: scripts/setup.sh installs it", pytrace=False)

_VALGRIND_VERSION = subprocess.run(["valgrind", "--version"], capture_output=True, text=True,
                                   check=False).stdout.strip()
_IN_USE = re.compile(r"in use at exit: ([\d,]+) bytes in ([\d,]+) blocks")
_USAGE = re.compile(r"total heap usage: ([\d,]+) allocs, ([\d,]+) frees")
_KIND_LINE = re.compile(
    r"(definitely lost|indirectly lost|possibly lost|still reachable): ([\d,]+) bytes in ([\d,]+) "
    r"blocks"
)
_DIRECT_LINE = re.compile(
    r"([\d,]+) \(([\d,]+) direct, ([\d,]+) indirect\) bytes in ([\d,]+) blocks are definitely lost"
)
_KIND_OF = {"definitely lost": "definite", "indirectly lost": "indirect",
            "possibly lost": "possible", "still reachable": "reachable"}
KINDS = ("definite", "indirect", "possible", "reachable")


def _numbers(pattern: re.Pattern[str], text: str) -> tuple[int, int]:
    match = pattern.search(text)
    assert match, text
    return int(match.group(1).replace(",", "")), int(match.group(2).replace(",", ""))


def _valgrind(argv: list[str], cwd: Path, freeres: bool) -> tuple[tuple[int, int], int]:
    in_use, allocs, _, _ = _valgrind_kinds(argv, cwd, freeres)
    return in_use, allocs


def _valgrind_kinds(
    argv: list[str], cwd: Path, freeres: bool = True
) -> tuple[tuple[int, int], int, dict[str, tuple[int, int]], list[tuple[int, ...]]]:
    """(in use at exit, allocations, {leak kind: (bytes, blocks)}, the loss records `N (D direct,
    I indirect) bytes in B blocks are definitely lost` as sorted (N, D, I, B)) of valgrind
    --leak-check=full."""
    flags = ["--leak-check=full"]
    if not freeres:
        flags += ["--run-libc-freeres=no", "--run-cxx-freeres=no"]
    proc = subprocess.run(["valgrind", *flags, *argv], cwd=cwd, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=TIMEOUT, check=False)
    kinds = dict.fromkeys(KINDS, (0, 0))  # no LEAK SUMMARY when every block was freed
    for match in _KIND_LINE.finditer(proc.stderr):
        kinds[_KIND_OF[match.group(1)]] = (int(match.group(2).replace(",", "")),
                                           int(match.group(3).replace(",", "")))
    cliques = sorted(tuple(int(g.replace(",", "")) for g in m.groups())
                     for m in _DIRECT_LINE.finditer(proc.stderr))
    return _numbers(_IN_USE, proc.stderr), _numbers(_USAGE, proc.stderr)[0], kinds, cliques


def _memdump_cliques(report: dict) -> list[tuple[int, ...]]:  # type: ignore[type-arg]
    """memdump's definitely lost groups that lead indirectly lost blocks, as _valgrind_kinds."""
    return sorted((g["bytes"] + g["indirect_bytes"], g["direct_bytes"], g["indirect_bytes"],
                   g["blocks"]) for g in report["leaks"]
                  if g["kind"] == "leak" and g["leak_kind"] == "definite" and g["indirect_bytes"])


def _memdump_kinds(summary: dict) -> dict[str, tuple[int, int]]:  # type: ignore[type-arg]
    kinds = summary["leak_kinds"]
    assert kinds is not None, summary
    assert kinds["unknown"] == {"bytes": 0, "blocks": 0}, summary
    return {k: (kinds[k]["bytes"], kinds[k]["blocks"]) for k in KINDS}


def _record(argv: list[str], tmp: Path) -> dict:  # type: ignore[type-arg]
    dump = tmp / "run.memdump"
    proc = subprocess.run([str(MEMDUMP_SH), "-o", str(dump), "--", *argv], cwd=tmp,
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=TIMEOUT, check=False)
    assert dump.is_file(), proc.stderr
    return analyze(dump).data


CASES = {
    "leak_malloc": [],
    "leak_loop": [],
    "leak_realloc": [],
    "leak_strdup": [],
    "leak_aligned": [],
    "leak_new": [],
    "leak_new_forms": [],
    "ctor_main": [],
    "leak_threads": [],
    "crash_segv": [],
    "crash_abort": [],
    "leak_sigterm": [],
    "no_leak": [],
    "no_leak_cpp": [],
    "memdump_demo": [],
    "ls": ["-la", "{tmp}"],
    "sort": ["{tmp}/lines.txt"],
}


def _argv(name: str, tmp: Path) -> list[str]:
    if name == "memdump_demo":
        exe = build_dir() / "targets" / "memdump_demo" / "memdump_demo"
    elif name in ("ls", "sort"):
        exe = Path(shutil.which(name) or name)
    else:
        exe = program(name)
    return [str(exe), *(a.format(tmp=tmp) for a in CASES[name])]


@pytest.mark.parametrize("name", sorted(CASES))
def test_memdump_agrees_with_valgrind(name: str, tmp_path: Path) -> None:
    (tmp_path / "lines.txt").write_text("".join(f"line {i * 7919 % 101}\n" for i in range(300)))
    argv = _argv(name, tmp_path)
    report = _record(argv, tmp_path)
    summary = report["summary"]
    leaked = (summary["leaked"]["bytes"], summary["leaked"]["blocks"])
    live = (leaked[0] + summary["runtime"]["bytes"], leaked[1] + summary["runtime"]["blocks"])
    in_use, allocs, vg_kinds, vg_cliques = _valgrind_kinds(argv, tmp_path)
    everything, _ = _valgrind(argv, tmp_path, freeres=False)
    kinds = _memdump_kinds(summary)
    if name == "leak_aligned" and _VALGRIND_VERSION.startswith("valgrind-3.19"):
        # valgrind 3.19 (Debian 12) intercepts neither pvalloc nor reallocarray: it never sees
        # pvalloc(104) and reallocarray(NULL, 7, 8), which memdump records.
        unseen = (104 + 7 * 8, 2)
        in_use = (in_use[0] + unseen[0], in_use[1] + unseen[1])
        everything = (everything[0] + unseen[0], everything[1] + unseen[1])
        allocs += unseen[1]
        for site in (marker("leak_aligned.c", "pvalloc"), marker("leak_aligned.c", "reallocarray")):
            [group] = [g for g in report["leaks"] if g["kind"] == "leak" and g["stack"]
                       and frame_site(g["stack"][0]) == site]
            k = group["leak_kind"]
            kinds[k] = (kinds[k][0] - group["bytes"], kinds[k][1] - group["blocks"])
        # Not a difference of method: valgrind 3.19's pvalloc replacement ends the program with
        # _exit(1) inside pvalloc (vgpreload_memcheck), while main's frame still holds the four
        # blocks before it: still reachable for valgrind. Natively main returns and exit's frames
        # reuse its stack: no pointer is left, memdump finds them definitely lost.
        assert vg_kinds == {"definite": (0, 0), "indirect": (0, 0), "possible": (0, 0),
                            "reachable": (456, 4)}
        vg_kinds = {**vg_kinds, "definite": vg_kinds["reachable"], "reachable": (0, 0)}
    assert leaked == in_use
    assert live == everything
    assert summary["allocations"] == allocs
    assert summary["errors"] == 0
    assert kinds == vg_kinds
    assert _memdump_cliques(report) == vg_cliques


# the pointer-scan cases of test_memdump_reach.py: program, argument; and whether a thread is
# still alive at exit (its glibc thread data is then valgrind's too, see the module docstring)
REACH_CASES = {
    "global": ("reach_kinds", False),
    "list": ("reach_kinds", False),
    "tree": ("reach_kinds", False),
    "interior": ("reach_kinds", False),
    "cycle": ("reach_kinds", False),
    "length64": ("reach_kinds", False),
    "thread-stack": ("reach_kinds", True),
    "thread-exited": ("reach_kinds", False),
    "register": ("reach_kinds", True),
    "mmap-neighbour": ("reach_kinds", False),
    "newarray": ("reach_cpp", False),
    "multipleinheritance": ("reach_cpp", False),
    # a pointer that died with a returned function, under exit's path (memdump.scan._exit_caller;
    # the object cases, a clique whose leader depends on the heap's layout: test_memdump_reach)
    "string": ("exit_stale", False),
}


@pytest.mark.parametrize("case", sorted(REACH_CASES))
def test_leak_kinds_agree_with_valgrind(case: str, tmp_path: Path) -> None:
    prog, live_thread = REACH_CASES[case]
    argv = [str(program(prog)), case]
    report = _record(argv, tmp_path)
    kinds = _memdump_kinds(report["summary"])
    in_use, _, vg_kinds, vg_cliques = _valgrind_kinds(argv, tmp_path)
    kept = [g for g in report["leaks"] if g["kind"] == "runtime"
            and "allocate_stack" in {f["function"] for f in g["stack"]}]
    if live_thread:
        assert [(g["bytes"], g["blocks"]) for g in kept] == [(272, 1)], report
        for g in kept:
            k = g["leak_kind"]
            kinds[k] = (kinds[k][0] + g["bytes"], kinds[k][1] + g["blocks"])
    assert kinds == vg_kinds
    assert sum(b for b, _ in kinds.values()) == in_use[0]
    # each definitely lost loss record with the bytes it leads: `N (D direct, I indirect) bytes`
    assert _memdump_cliques(report) == vg_cliques
