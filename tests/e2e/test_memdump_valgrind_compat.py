"""memdump as a drop-in for valgrind's leak checking (docs/valgrind-compat.md): given valgrind
memcheck's options it writes valgrind 3.19's text output and XML, equal to valgrind's own run of the
same program on everything but PIDs and addresses, and CTest's `ctest -T memcheck` counts the same
defects with memdump as MEMORYCHECK_COMMAND as with valgrind."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import memdump_e2e
import pytest
from memdump_e2e import REPO, build_dir, program

MEMDUMP_SH = REPO / "scripts" / "memdump.sh"
FIXTURE = REPO / "tests" / "fixtures" / "ctest_memcheck"
TIMEOUT = 300

if shutil.which("valgrind") is None:
    pytest.fail("valgrind is missing: scripts/setup.sh installs it", pytrace=False)


#: memdump's preamble, where valgrind names itself (and its copyright and version)
PREAMBLE = ["==PID== memdump, a heap recorder under GDB, in valgrind memcheck's output format",
            "==PID== Not valgrind: leaks and heap errors from the heap's events and a pointer scan"]


def _normal(text: str) -> list[str]:
    """valgrind's lines with the PIDs and addresses blanked, from `Command:` on (the preamble
    names the tool); memdump's own lines (the dump's path, its compaction) and the program's left
    out."""
    lines = [re.sub(r"0x[0-9A-Fa-f]+", "0xADDR", re.sub(r"^==\d+==", "==PID==", line))
             for line in text.splitlines() if line.startswith("==")]
    command = next((i for i, line in enumerate(lines) if line.startswith("==PID== Command: ")), 0)
    return lines[command:]


def _preamble(text: str) -> list[str]:
    """The `==PID==` lines before `Command:`."""
    lines = [re.sub(r"^==\d+==", "==PID==", line) for line in text.splitlines()
             if line.startswith("==")]
    return lines[:next((i for i, line in enumerate(lines) if " Command: " in line), 0)]


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """ARGV run in CWD; memdump.sh with the recorder of the test's mode."""
    if argv[0] == str(MEMDUMP_SH) and memdump_e2e.MODE == "breakpoints":
        argv = [argv[0], "--breakpoints", *argv[1:]]
    return subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=TIMEOUT, check=False)


CASES = [["leak_malloc"], ["reach_kinds", "tree"], ["reach_kinds", "cycle"],
         ["reach_kinds", "interior"], ["no_leak"], ["leak_new"], ["leak_new_forms"], ["reach_cpp"],
         ["inline_frames_gcc_O2"]]


@pytest.mark.parametrize("case", CASES, ids=" ".join)
@pytest.mark.parametrize("flags", [["--leak-check=full", "--show-leak-kinds=all"],
                                   ["--leak-check=summary"], ["-q", "--leak-check=yes"]],
                         ids=["full", "summary", "quiet"])
def test_text_is_valgrinds(case: list[str], flags: list[str], tmp_path: Path) -> None:
    argv = [str(program(case[0])), *case[1:]]
    valgrind = _run(["valgrind", *flags, *argv], tmp_path)
    memdump = _run([str(MEMDUMP_SH), *flags, *argv], tmp_path)
    assert memdump.returncode == valgrind.returncode, memdump.stderr
    assert _normal(memdump.stderr) == _normal(valgrind.stderr)
    assert _preamble(memdump.stderr) == ([] if "-q" in flags else PREAMBLE)
    assert len(_preamble(valgrind.stderr)) == (0 if "-q" in flags else 3)
    # a test that compares nothing could not fail: valgrind -q is silent on a program that
    # leaks none of the kinds it shows (no_leak, reach_cpp's reachable blocks)
    assert bool(_normal(valgrind.stderr)) != ("-q" in flags and case in (["no_leak"],
                                                                         ["reach_cpp"]))
    if "-q" in flags:
        assert "memdump.sh: dump:" not in memdump.stderr


SUPPRESSIONS = {
    "indirect": "{\n   tree-kids\n   Memcheck:Leak\n   match-leak-kinds: indirect\n   fun:calloc\n"
                "   fun:case_tree\n   fun:main\n}\n",
    "definite": "{\n   root\n   Memcheck:Leak\n   match-leak-kinds: definite\n   fun:calloc\n"
                "   fun:case_tree\n   fun:main\n}\n",
}


@pytest.mark.parametrize("kind", list(SUPPRESSIONS))
def test_suppressed_loss_records_are_counted_as_valgrind(kind: str, tmp_path: Path) -> None:
    """Suppressed loss records keep their numbers (`loss record 4 of 4`), stay in use at exit,
    move to the LEAK SUMMARY's `suppressed` line and, of --errors-for-leak-kinds, to the ERROR
    SUMMARY's `suppressed: N from N`."""
    (tmp_path / "s.supp").write_text(SUPPRESSIONS[kind])
    flags = ["--leak-check=full", "--show-leak-kinds=all", "--suppressions=s.supp"]
    argv = [str(program("reach_kinds")), "tree"]
    valgrind = _normal(_run(["valgrind", *flags, *argv], tmp_path).stderr)
    memdump = _normal(_run([str(MEMDUMP_SH), *flags, *argv], tmp_path).stderr)
    assert memdump == valgrind
    assert "==PID==     in use at exit: 428 bytes in 4 blocks" in memdump


def test_mismatched_free_errors_are_valgrinds(tmp_path: Path) -> None:
    """Each `Mismatched free() / delete / delete []` with its stacks and the block's size and
    allocation, in valgrind's order, a sized delete named `operator delete(void*, unsigned
    long)` from its call site; the ERROR SUMMARY counts them."""
    argv = [str(program("mismatched_free"))]
    valgrind = _normal(_run(["valgrind", "--leak-check=full", *argv], tmp_path).stderr)
    memdump = _normal(_run([str(MEMDUMP_SH), "--leak-check=full", *argv], tmp_path).stderr)
    assert memdump == valgrind
    assert sum("at 0xADDR: operator delete(void*, unsigned long) (in " in line
               for line in memdump) == 2
    assert "==PID== ERROR SUMMARY: 7 errors from 7 contexts (suppressed: 0 from 0)" in memdump


def _leak_records(path: Path) -> list[tuple[object, ...]]:
    records = []
    for error in ET.parse(path).getroot().iter("error"):
        kind = error.findtext("kind") or ""
        if not kind.startswith("Leak_"):
            continue
        frames = tuple((f.findtext("fn"), f.findtext("file"), f.findtext("line"))
                       for f in error.iter("frame"))
        records.append((kind, error.findtext("xwhat/text"), error.findtext("xwhat/leakedbytes"),
                        error.findtext("xwhat/leakedblocks"), frames))
    return records


@pytest.mark.parametrize("case", [["reach_kinds", "tree"], ["reach_kinds", "list"],
                                  ["leak_new"], ["leak_malloc"]], ids=" ".join)
def test_xml_leak_records_are_valgrinds(case: list[str], tmp_path: Path) -> None:
    argv = [str(program(case[0])), *case[1:]]
    flags = ["--leak-check=full", "--show-leak-kinds=all", "--xml=yes"]
    _run(["valgrind", *flags, "--xml-file=vg.xml", *argv], tmp_path)
    memdump = _run([str(MEMDUMP_SH), *flags, "--xml-file=md.%p.xml", *argv], tmp_path)
    assert memdump.returncode == 0, memdump.stderr
    [made] = tmp_path.glob("md.*.xml")
    ours = ET.parse(made).getroot()
    assert made.name == f"md.{ours.findtext('pid')}.xml"
    assert ours.findtext("protocolversion") == "4"
    assert ours.findtext("protocoltool") == "memcheck"
    assert ours.findtext("args/argv/exe") == argv[0]
    expected = _leak_records(tmp_path / "vg.xml")
    assert expected
    assert _leak_records(made) == expected


@pytest.mark.one_recorder
@pytest.mark.parametrize("case", [["reach_kinds", "tree"], ["mismatched_free"], ["leak_new"],
                                  ["guard_faults", "all"]], ids=" ".join)
def test_valgrind_ci_says_of_our_xml_what_it_says_of_valgrinds(case: list[str],
                                                               tmp_path: Path) -> None:
    """valgrind-ci (PyPI's ValgrindCI, requirements-dev.txt): its summary and error count; the
    guard pages' access errors (`--guard all`) as valgrind's InvalidRead and InvalidWrite."""
    if importlib.util.find_spec("ValgrindCI") is None:
        pytest.fail("ValgrindCI is missing: scripts/setup.sh installs it into .venv", pytrace=False)
    argv = [str(program(case[0])), *case[1:]]
    flags = ["--leak-check=full", "--xml=yes"]
    guard = ["--guard", "all"] if case[0] == "guard_faults" else []
    _run(["valgrind", *flags, "--xml-file=vg.xml", *argv], tmp_path)
    _run([str(MEMDUMP_SH), *guard, *flags, "--xml-file=md.xml", *argv], tmp_path)
    said = []
    for xml in ("vg.xml", "md.xml"):
        proc = subprocess.run([sys.executable, "-m", "ValgrindCI", "--summary",
                               "--number-of-errors", "--source-dir",
                               str(REPO / "tests" / "programs"), xml],
                              cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT,
                              check=False)
        assert proc.returncode == 0, proc.stderr
        said.append(proc.stdout)
    assert said[1] == said[0]
    assert re.match(r"[1-9]\d* errors\.\n", said[0]), said[0]


def test_options_and_exit_status(tmp_path: Path) -> None:
    leak = str(program("leak_malloc"))
    for bad, said in ((["--tool=massif"], "--tool=massif: only memcheck"),
                      (["--track-origins=yes"], "unknown option '--track-origins=yes'"),
                      (["--leak-check=most"], "--leak-check needs no, summary, yes or full"),
                      (["--show-leak-kinds=lost"], "'lost' is not a list of leak kinds"),
                      (["--xml=yes"], "--xml=yes needs --xml-file=FILE"),
                      (["--num-callers=0099"], "--num-callers needs a number from 1 to 500"),
                      (["--error-exitcode=256"], "--error-exitcode needs a number from 0 to 255"),
                      (["--suppressions=none.supp"], "--suppressions=none.supp: no readable file")):
        proc = _run([str(MEMDUMP_SH), *bad, leak], tmp_path)
        assert (proc.returncode, proc.stderr.count("\n")) == (2, 1), proc.stderr
        assert said in proc.stderr
    flags = ["--leak-check=full", "--error-exitcode=7"]
    assert _run([str(MEMDUMP_SH), *flags, leak], tmp_path).returncode == 7
    assert _run([str(MEMDUMP_SH), *flags, str(program("no_leak"))], tmp_path).returncode == 0
    proc = _run([str(MEMDUMP_SH), "--leak-check=full", "--errors-for-leak-kinds=reachable",
                 "--error-exitcode=7", leak], tmp_path)
    assert proc.returncode == 0
    proc = _run([str(MEMDUMP_SH), "-q", "--leak-check=full", "--log-file=log.%p.txt", leak],
                tmp_path)
    [log] = tmp_path.glob("log.*.txt")
    assert proc.stderr == "" or "compacted" in proc.stderr
    assert log.read_text().startswith(f"=={log.name.split('.')[1]}== 24 bytes in 1 blocks are "
                                      "definitely lost in loss record 1 of 1\n")


def _ctest(command: str, tmp_path: Path) -> tuple[list[str], list[str]]:
    build = tmp_path / Path(command).name
    subprocess.run(["cmake", "-S", str(FIXTURE), "-B", str(build), "-G", "Ninja",
                    f"-DMEMORYCHECK_COMMAND={command}", "-DMEMORYCHECK_TYPE=Valgrind"],
                   check=True, capture_output=True, timeout=TIMEOUT)
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True,
                   timeout=TIMEOUT)
    proc = subprocess.run(["ctest", "-T", "memcheck"], cwd=build, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    said = [line.split("  ")[0] + line[line.rfind(" "):] if "MemCheck" in line else line
            for line in proc.stdout.splitlines()
            if "Defects:" in line or re.match(r"(Memory Leak|Potential|Invalid|Mismatched)", line)]
    logs = sorted((build / "Testing" / "Temporary").glob("MemoryChecker.*.log"))
    return said, [line.replace(str(build), "BUILD") for log in logs
                  for line in _normal(log.read_text())]


@pytest.mark.one_recorder
@pytest.mark.parametrize("where", ["tree", "installed"])
def test_ctest_memcheck_counts_what_it_counts_with_valgrind(where: str, tmp_path: Path) -> None:
    """MEMORYCHECK_COMMAND is the checkout's scripts/memdump.sh, or bin/memdump installed by
    `cmake --install` into a fresh prefix."""
    memdump = MEMDUMP_SH
    if where == "installed":
        prefix = tmp_path / "usr"
        subprocess.run(["cmake", "--install", str(build_dir()), "--prefix", str(prefix)],
                       check=True, capture_output=True, timeout=TIMEOUT)
        memdump = prefix / "bin" / "memdump"
    valgrind = _ctest(shutil.which("valgrind") or "valgrind", tmp_path)
    ours = _ctest(str(memdump), tmp_path)
    assert ours == valgrind
    assert "Memory Leak - 2" in ours[0]
    assert any(line.startswith("1/2 MemCheck: #1: leaky") and line.endswith(" 2")
               for line in ours[0]), ours[0]
    assert any("definitely lost in loss record 2 of 2" in line for line in ours[1])


def _errors(xml: Path) -> list[tuple[object, ...]]:
    """(kind, what, auxwhats, each stack's (function, file, line)) of each error of an XML, the
    addresses blanked."""
    out = []
    for error in ET.parse(xml).getroot().iter("error"):
        stacks = tuple(tuple((f.findtext("fn"), f.findtext("file"), f.findtext("line"))
                             for f in stack.iter("frame")) for stack in error.findall("stack"))
        out.append((error.findtext("kind"), error.findtext("what"),
                    tuple(re.sub(r"0x[0-9a-f]+", "0xADDR", a.text or "")
                          for a in error.findall("auxwhat")), stacks))
    return out


@pytest.mark.one_recorder
@pytest.mark.parametrize("mode", ["past-end", "read-loop"])
def test_guard_page_errors_are_valgrinds(mode: str, tmp_path: Path) -> None:
    """`memdump --guard all` and valgrind on guard_faults: the same text from `Command:` on
    (`Invalid write of size 4` with the access's size read from the faulting instruction,
    `Address ... is 0 bytes after a block of size 40 alloc'd`, the stacks, the summaries: a loop
    reading two bytes past the end is 2 errors from 1 context) and the same XML errors."""
    argv = [str(program("guard_faults")), mode]
    flags = ["--leak-check=full"]
    valgrind = _normal(_run(["valgrind", *flags, *argv], tmp_path).stderr)
    memdump = _run([str(MEMDUMP_SH), "--guard", "all", *flags, *argv], tmp_path)
    assert memdump.returncode == 0, memdump.stderr
    assert _normal(memdump.stderr) == valgrind
    what, errors = {"past-end": ("Invalid write of size 4", "1 errors from 1 contexts"),
                    "read-loop": ("Invalid read of size 1", "2 errors from 1 contexts")}[mode]
    assert f"==PID== {what}" in valgrind
    assert f"==PID== ERROR SUMMARY: {errors} (suppressed: 0 from 0)" in valgrind
    _run(["valgrind", *flags, "--xml=yes", "--xml-file=vg.xml", *argv], tmp_path)
    _run([str(MEMDUMP_SH), "--guard", "all", *flags, "--xml=yes", "--xml-file=md.xml", *argv],
         tmp_path)
    assert _errors(tmp_path / "md.xml") == _errors(tmp_path / "vg.xml")


@pytest.mark.one_recorder
@pytest.mark.parametrize(("mode", "errors"), [("uaf-thread", "1 errors from 1 contexts"),
                                              ("all", "4 errors from 3 contexts")])
def test_use_after_free_in_a_thread_is_valgrinds(mode: str, errors: str, tmp_path: Path) -> None:
    """A read inside a freed block in a second thread (alone, and after the main thread's
    errors): valgrind's words and stacks (the free's, then `Block was alloc'd at`), but for what
    memdump cannot know as valgrind does: valgrind numbers threads (`Thread 2:`, memdump says the
    kernel's id) and runs the program with glibc's `clone` where it has `clone3`."""
    argv = [str(program("guard_faults")), mode]
    valgrind = _normal(_run(["valgrind", "--leak-check=full", *argv], tmp_path).stderr)
    memdump = _normal(_run([str(MEMDUMP_SH), "--guard", "all", "--leak-check=full", *argv],
                           tmp_path).stderr)

    def same(lines: list[str]) -> list[str]:
        return [re.sub(r"\(clone3?\.S:\d+\)", "(clone.S)", re.sub(r"Thread \d+:", "Thread N:",
                                                                   line)) for line in lines]
    assert same(memdump) == same(valgrind)
    assert "==PID== Thread 2:" in valgrind
    assert "==PID==  Address 0xADDR is 12 bytes inside a block of size 32 free'd" in memdump
    assert "==PID==  Block was alloc'd at" in memdump
    assert memdump[-1] == f"==PID== ERROR SUMMARY: {errors} (suppressed: 0 from 0)"


@pytest.mark.one_recorder
@pytest.mark.parametrize(("mode", "address"), [
    ("slack", "0 bytes after a block of size 20 alloc'd"),
    ("underrun", "1 bytes before a block of size 16 alloc'd"),
])
def test_red_zone_findings_are_written_as_valgrinds_nearest_error(mode: str, address: str,
                                                                  tmp_path: Path) -> None:
    """`memdump --redzones`: a red zone's finding is an error of valgrind's output, at the free
    that found it (valgrind has the write itself: its stack differs, documented), with valgrind's
    own `Address` sentence and allocation stack, and the same ERROR SUMMARY; --error-exitcode
    counts it."""
    argv = [str(program("redzone_errors")), mode]
    valgrind = _normal(_run(["valgrind", "--leak-check=full", *argv], tmp_path).stderr)
    run = _run([str(MEMDUMP_SH), "--redzones", "--leak-check=full", "--error-exitcode=5", *argv],
               tmp_path)
    assert run.returncode == 5, run.stderr
    memdump = _normal(run.stderr)
    found = memdump_e2e.marker("redzone_errors.c", mode, "FOUND")
    alloc = memdump_e2e.marker("redzone_errors.c", mode, "ALLOC")
    start = next(i for i, line in enumerate(memdump) if "Invalid write (heap block" in line)
    assert memdump[start + 1:start + 3] == [
        "==PID==    at 0xADDR: free (in /usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so)",
        f"==PID==    by 0xADDR: {mode} ({found.file}:{found.line})"]
    block = memdump[start + 4:start + 8]
    assert block[0] == f"==PID==  Address 0xADDR is {address}"
    assert f"==PID==    by 0xADDR: {mode} ({alloc.file}:{alloc.line})" in block
    vg = valgrind.index(block[0])
    assert valgrind[vg:vg + 4] == block
    assert valgrind[-1] == memdump[-1] == \
        "==PID== ERROR SUMMARY: 1 errors from 1 contexts (suppressed: 0 from 0)"
