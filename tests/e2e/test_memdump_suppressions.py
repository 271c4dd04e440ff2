"""Suppressions written by valgrind and LeakSanitizer suppress the same leaks in memdump's dump of
the same program, and the suppressions memdump-analyze writes suppress the same loss records under
valgrind.

valgrind 3.19 runs each program with `--leak-check=full --show-leak-kinds=all
--gen-suppressions=all`; its suppressions (named vg-1, vg-2... in the order it wrote them) are given
to memdump-analyze on memdump's recording of the program, and to valgrind itself with `-v`: both
must leave no leak and count the same groups, bytes and blocks for each name (valgrind's
`used_suppression:` lines). Then memdump-analyze --gen-suppressions's file is given to valgrind -v.
LeakSanitizer: the program built with clang -fsanitize=address, its `Suppressions used:` table
compared with memdump's counts of the same file (LeakSanitizer counts blocks, not groups).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from memdump_e2e import SOURCES, analyze, analyze_raw, gdb_argv, program, record, run_gdb

TIMEOUT = 300

if shutil.which("valgrind") is None:
    pytest.fail("valgrind is missing: scripts/setup.sh installs it", pytrace=False)

_BLOCK = re.compile(r"^\{\n.*?^\}\n", re.M | re.S)
_USED = re.compile(r"used_suppression: +(\d+) (\S+) (\S+):\d+ suppressed: ([\d,]+) bytes in "
                   r"([\d,]+) blocks")
_SUMMARY = re.compile(r"^==\d+== +(definitely lost|indirectly lost|possibly lost|still reachable|"
                      r"suppressed): ([\d,]+) bytes in ([\d,]+) blocks", re.M)

Counts = dict[str, tuple[int, int, int]]  # name -> (groups, bytes, blocks)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _valgrind(argv: list[str], tmp: Path, *flags: str) -> str:
    log = tmp / f"valgrind.{len(list(tmp.glob('valgrind.*')))}.log"
    subprocess.run(["valgrind", "--leak-check=full", "--show-leak-kinds=all",
                    f"--log-file={log}", *flags, *argv], cwd=tmp, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=TIMEOUT,
                   check=False)
    return log.read_text()


def _generated(log: str) -> str:
    """valgrind's suppressions from its log, named vg-1, vg-2... in order."""
    blocks = [re.sub(r"^==\d+== ", "", b, flags=re.M) for b in _BLOCK.findall(log)]
    return "".join(b.replace("<insert_a_suppression_name_here>", f"vg-{n}")
                   for n, b in enumerate(blocks, 1))


def _valgrind_used(log: str, supp: Path) -> Counts:
    return {m.group(2): (int(m.group(1)), _int(m.group(4)), _int(m.group(5)))
            for m in _USED.finditer(log) if m.group(3) == str(supp)}


def _valgrind_summary(log: str) -> dict[str, tuple[int, int]]:
    return {m.group(1): (_int(m.group(2)), _int(m.group(3))) for m in _SUMMARY.finditer(log)}


def _memdump_used(report_data: dict) -> Counts:  # type: ignore[type-arg]
    return {s["name"]: (s["count"], s["bytes"], s["blocks"])
            for s in report_data["suppressed"]["suppressions"]}


CASES: dict[str, tuple[str, list[str], Counts]] = {
    "leak_malloc": ("leak_malloc", [], {"vg-1": (1, 24, 1)}),
    "leak_strdup": ("leak_strdup", [], {"vg-1": (1, 12, 1)}),
    "leak_new": ("leak_new", [], {"vg-1": (1, 48, 1), "vg-2": (1, 100, 1)}),
    "leak_new_forms": ("leak_new_forms", [], {"vg-1": (1, 4, 1), "vg-2": (1, 16, 1),
                                              "vg-3": (1, 28, 1), "vg-4": (1, 64, 1),
                                              "vg-5": (1, 192, 1)}),
    "leak_threads": ("leak_threads", [], {"vg-1": (1, 555, 5), "vg-2": (1, 666, 3)}),
    # three indirectly lost records with one stack (calloc, case_tree, main): valgrind tries its
    # last suppression first, and keeps using it; a definitely lost record's bytes are its
    # direct and indirect bytes (428 = 24 + 404), the LEAK SUMMARY counts direct bytes only
    "tree": ("reach_kinds", ["tree"], {"vg-3": (3, 404, 3), "vg-4": (1, 428, 1)}),
    "list": ("reach_kinds", ["list"], {"vg-1": (1, 192, 4), "vg-2": (1, 240, 1)}),
    "interior": ("reach_kinds", ["interior"], {"vg-1": (1, 200, 1)}),
    # a lambda (GDB 13 names its frame twice, valgrind once: `_ZZL9cxx_namesvENKUlmE_clEm`), a
    # member function and a template; a lost tree whose kids another function allocated
    "supp_alloc": ("supp_alloc", [], {"vg-1": (1, 21, 1), "vg-2": (1, 24, 1),
                                      "vg-3": (1, 33, 1), "vg-4": (1, 47, 1),
                                      "vg-6": (2, 224, 2), "vg-7": (1, 128, 1),
                                      "vg-8": (1, 288, 1)}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_valgrind_suppressions_suppress_the_same_leaks(case: str, tmp_path: Path,
                                                       dump: Path) -> None:
    name, args, expected = CASES[case]
    argv = [str(program(name)), *args]
    supp = tmp_path / "valgrind.supp"
    supp.write_text(_generated(_valgrind(argv, tmp_path, "--gen-suppressions=all")))
    vg = _valgrind(argv, tmp_path, "-v", f"--suppressions={supp}")
    assert _valgrind_used(vg, supp) == expected, vg
    record(name, *args, dump=dump)
    report = analyze(dump, "--suppressions", str(supp))
    what = f"{supp.read_text()}\n{report.dumps()}"
    assert _memdump_used(report.data) == expected, what
    assert report.groups() == [] and report.leaked == (0, 0), what
    # everything memdump saw leak is suppressed: valgrind's LEAK SUMMARY figure
    total = analyze(dump).leaked
    assert (report.data["suppressed"]["bytes"], report.data["suppressed"]["blocks"]) == total
    assert _valgrind_summary(vg)["suppressed"] == total
    kinds = report.summary["leak_kinds"]
    assert all(kinds[k] == {"bytes": 0, "blocks": 0} for k in kinds), what
    # the text report: valgrind's lines
    text = analyze_raw(dump, "--suppressions", str(supp), "--show-leak-kinds", "all").stdout
    assert f"    suppressed:      {total[0]:,} bytes in {total[1]:,} block" in text
    for sname, (count, nbytes, blocks) in expected.items():
        assert (f"used_suppression: {count:6d} {sname} {supp}:") in text
        assert f"suppressed: {nbytes:,} bytes in {blocks:,} blocks\n" in text


@pytest.mark.parametrize("case", sorted(CASES))
def test_generated_suppressions_suppress_the_same_loss_records_under_valgrind(
        case: str, tmp_path: Path, dump: Path) -> None:
    name, args, _ = CASES[case]
    record(name, *args, dump=dump)
    gen = analyze_raw(dump, "--gen-suppressions", "--show-leak-kinds", "all")
    assert gen.returncode == 0, gen.stderr
    supp = tmp_path / "memdump.supp"
    supp.write_text("".join(_BLOCK.findall(gen.stdout)))
    before = analyze(dump)
    # one suppression per group, named memdump-leak-N-KIND as memdump-analyze numbers them
    assert len(_BLOCK.findall(gen.stdout)) == len(before.groups()) > 0
    back = analyze(dump, "--suppressions", str(supp))
    assert back.groups() == [] and back.leaked == (0, 0), back.dumps()
    mine = _memdump_used(back.data)
    vg = _valgrind([str(program(name)), *args], tmp_path, "-v", f"--suppressions={supp}")
    # valgrind uses the same suppressions for the same records, bytes and blocks (where two
    # suppressions are equal, as the tree's three indirectly lost blocks', both pick the same)
    assert _valgrind_used(vg, supp) == mine, f"{supp.read_text()}\n{vg}"
    summary = _valgrind_summary(vg)
    for kind in ("definitely lost", "indirectly lost", "possibly lost", "still reachable"):
        assert summary.get(kind, (0, 0)) == (0, 0), vg
    assert summary["suppressed"] == before.leaked, vg


#: one line for each allocation function: valgrind's frame 0 is the function the program called
CALLOC_ONLY = "{\n   calloc-only\n   Memcheck:Leak\n   fun:calloc\n   ...\n}\n"


def test_the_allocation_function_is_the_one_called_when_the_program_is_gone(
        tmp_path: Path, dump: Path) -> None:
    """supp_alloc's make_both calls calloc and operator new: `fun:calloc` suppresses the calloc'd
    block only, as valgrind does, though the program was deleted after it was recorded (its call
    sites cannot be read: the dump's operations say which function was called). The suppressions
    written then name no demangled function (`obj:` where the mangled name is unknown), and
    valgrind applies them to the same program, put back where it was, as memdump does."""
    exe = tmp_path / "supp_alloc"
    shutil.copy2(program("supp_alloc"), exe)
    supp = tmp_path / "calloc.supp"
    supp.write_text(CALLOC_ONLY)
    vg = _valgrind([str(exe)], tmp_path, "-v", f"--suppressions={supp}")
    assert _valgrind_used(vg, supp) == {"calloc-only": (1, 128, 1)}, vg
    run = run_gdb(gdb_argv([f"memdump -o {dump}", "run"], [exe]), dump)
    assert dump.is_file(), run.describe()
    exe.unlink()
    report = analyze(dump, "--suppressions", str(supp))
    assert _memdump_used(report.data) == {"calloc-only": (1, 128, 1)}, report.dumps()
    assert (report.data["suppressed"]["bytes"], report.data["suppressed"]["blocks"]) == (128, 1)
    gen = analyze_raw(dump, "--gen-suppressions", "--show-leak-kinds", "all")
    assert gen.returncode == 0, gen.stderr
    written = "".join(_BLOCK.findall(gen.stdout))
    assert re.findall(r"^   fun:.*[(): ].*$", written, re.M) == [], written
    assert f"   obj:{exe}\n" in written and "   fun:_Znw*\n" in written, written
    mine = tmp_path / "memdump.supp"
    mine.write_text(written)
    back = _memdump_used(analyze(dump, "--suppressions", str(mine)).data)
    shutil.copy2(program("supp_alloc"), exe)
    vg = _valgrind([str(exe)], tmp_path, "-v", f"--suppressions={mine}")
    assert _valgrind_used(vg, mine) == back, f"{written}\n{vg}"
    summary = _valgrind_summary(vg)
    for kind in ("definitely lost", "indirectly lost"):
        assert summary.get(kind, (0, 0)) == (0, 0), vg
    assert summary["suppressed"] == (541, 8), vg


LSAN = {
    # function, source file (LeakSanitizer's stacks have the whole path), anchored template
    "leak_new.cpp": ("leak:make_widget\n# the array\nleak:/leak_new.cpp$\n",
                     {"make_widget": (48, 1), "/leak_new.cpp$": (100, 1)}),
    "leak_strdup.c": ("leak:^copy_name$\n", {"^copy_name$": (12, 1)}),
    # the tree's root: LeakSanitizer checks again with it as a root, so the two kids it leads
    # (allocated from main) are no leak either, and its table counts the root alone; the kids
    # named: 2 blocks, 224 bytes, and the root is left (-fsanitize=leak: under ASan a stale
    # pointer keeps the tree reachable)
    "supp_alloc.cpp": ("leak:make_tree\n", {"make_tree": (64, 1)}),
    "supp_alloc.cpp:kids": ("leak:make_kid\n", {"make_kid": (224, 2)}),
}


@pytest.mark.one_recorder
@pytest.mark.parametrize("source", sorted(LSAN))
def test_lsan_suppressions_suppress_the_same_leaks(source: str, tmp_path: Path,
                                                   dump: Path) -> None:
    text, expected = LSAN[source]
    source = source.partition(":")[0]
    compiler = "clang++" if source.endswith(".cpp") else "clang"
    if shutil.which(compiler) is None:
        pytest.fail(f"{compiler} is missing: scripts/setup.sh installs it", pytrace=False)
    supp = tmp_path / "lsan.supp"
    supp.write_text(text)
    exe = tmp_path / "asan"
    sanitizer = "leak" if source == "supp_alloc.cpp" else "address"
    subprocess.run([compiler, "-g", "-O0", f"-fsanitize={sanitizer}", str(SOURCES / source),
                    "-o", str(exe)], check=True, timeout=TIMEOUT)
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=TIMEOUT,
                          env={"LSAN_OPTIONS": f"suppressions={supp}:print_suppressions=1",
                               "PATH": "/usr/bin:/bin"}, check=False)
    table = re.search(r"Suppressions used:\n  count      bytes template\n(.*?)\n-+\n",
                      proc.stderr, re.S)
    assert table, proc.stderr
    lsan = {parts[2]: (int(parts[1]), int(parts[0])) for parts in
            (line.split(None, 2) for line in table.group(1).splitlines())}
    assert lsan == expected, proc.stderr
    record(Path(source).stem, dump=dump)
    report = analyze(dump, "--suppressions", str(supp))
    mine = {s["name"]: (s["bytes"], s["blocks"]) for s in report.data["suppressed"]["suppressions"]}
    assert mine == expected, report.dumps()
    # what is left is what LeakSanitizer reports: its SUMMARY's bytes and blocks
    left = re.search(r"SUMMARY: \w+: (\d+) byte\(s\) leaked in (\d+) allocation", proc.stderr)
    assert report.leaked == ((int(left.group(1)), int(left.group(2))) if left else (0, 0)), (
        f"{proc.stderr}\n{report.dumps()}")
