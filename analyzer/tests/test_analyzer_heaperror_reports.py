"""The heap errors of guard pages (`ae` records) and red zones (`hc` records) in the reports
beyond the text and JSON ones: valgrind's text and XML (vgmodel.py, vgtext.py, vgxml.py:
`Invalid write` with the block's sentences and stacks, one context per kind and stack), SARIF
(an error result per error, its stacks as code flows) and `--fail-on-error`'s exit status beside
`--fail-on-leak`'s."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from analyzer_testlib import FIXTURES, LIBC, Dump, F, main_at, run_cli
from memdump_analyzer.faultinsn import access_sizes, access_text, describe_access

SCHEMA = json.loads((FIXTURES / "sarif-schema-2.1.0.json").read_text())
REDZONE = str(FIXTURES / "redzone.memdump")
MIXED = str(FIXTURES / "mixed.memdump")
PRELOAD = "(in /usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so)"


def _guarded(tmp_path: Path, *, cut: bool = False, errors: bool = True) -> str:
    """A write one past a 40-byte block in main's thread, then two reads inside a freed 32-byte
    block in thread 101 (one stack: one context of two errors); a leak of the 40 bytes."""
    d = Dump(header="MEMDUMP 2.6")
    d.malloc("0x7000", 40, [F("fill", "/src/app.c", 10), *main_at(50)])
    access = d.stack([F("fill", "/src/app.c", 12), *main_at(50)])
    if errors:
        d.raw(f"ae 100 write 0x7028 {access} 0x7000 40 0 after allocated")
    d.malloc("0x9000", 32, [F("drop", "/src/app.c", 19), *main_at(51)])
    d.free("0x9000", [F("drop", "/src/app.c", 20), *main_at(51)])
    read = d.stack([F("reader", "/src/app.c", 30),
                    F("start_thread", module=LIBC, pc=0x7FFFF7E111F5)])
    if errors:
        d.raw(f"ae 101 read 0x900c {read} 0x9000 32 12 inside freed")
        d.raw(f"ae 101 read 0x900d {read} 0x9000 32 13 inside freed")
    if not cut:
        d.end()
    return d.write(tmp_path)


def test_access_errors_in_valgrinds_text(tmp_path: Path) -> None:
    """valgrind's words (the access's size unknown, and said so: the module cannot be read), the
    faulting instruction's own address first, `Thread N:` when the thread changes, the free's
    stack then `Block was alloc'd at`; the two reads of one stack are one context of two errors."""
    out = run_cli("--format", "valgrind", "--no-symbolize", _guarded(tmp_path)).stdout
    assert out.split("==100== Command: /src/app\n==100== \n")[1].split("==100== \n==100== \n")[0] \
        == ("==100== Invalid write of unknown size\n"
            "==100==    at 0x55555555503F: fill (app.c:12)\n"
            "==100==    by 0x555555555020: main (app.c:50)\n"
            "==100==  Address 0x7028 is 0 bytes after a block of size 40 alloc'd\n"
            f"==100==    at 0x555555555030: malloc {PRELOAD}\n"
            "==100==    by 0x555555555030: fill (app.c:10)\n"
            "==100==    by 0x555555555020: main (app.c:50)\n"
            "==100== \n"
            "==100== Thread 101:\n"
            "==100== Invalid read of unknown size\n"
            "==100==    at 0x55555555508F: reader (app.c:30)\n"
            "==100==    by 0x7FFFF7E111F5: start_thread (in /lib/x86_64-linux-gnu/libc.so.6)\n"
            "==100==  Address 0x900c is 12 bytes inside a block of size 32 free'd\n"
            f"==100==    at 0x555555555070: free {PRELOAD}\n"
            "==100==    by 0x555555555070: drop (app.c:20)\n"
            "==100==    by 0x555555555050: main (app.c:51)\n"
            "==100==  Block was alloc'd at\n"
            f"==100==    at 0x555555555060: malloc {PRELOAD}\n"
            "==100==    by 0x555555555060: drop (app.c:19)\n"
            "==100==    by 0x555555555050: main (app.c:51)\n")
    assert out.endswith("==100== ERROR SUMMARY: 3 errors from 2 contexts (suppressed: 0 from 0)\n")


def _errors(xml: str) -> list[tuple[Any, ...]]:
    """(kind, what, tid, [(auxwhat, functions of its stack)], functions of the first stack) of
    each error, and the error counts by unique."""
    root = ET.fromstring(xml)
    out = []
    for error in root.iter("error"):
        stacks = [[f.findtext("fn") for f in s.iter("frame")] for s in error.findall("stack")]
        aux = [a.text for a in error.findall("auxwhat")]
        out.append((error.findtext("kind"), error.findtext("what"), error.findtext("tid"),
                    stacks[0], list(zip(aux, stacks[1:], strict=True))))
    counts = {p.findtext("unique"): p.findtext("count") for p in root.iter("pair")}
    return [*out, counts]


def test_access_errors_in_valgrinds_xml(tmp_path: Path) -> None:
    """Protocol 4's InvalidWrite and InvalidRead: `<what>`, the access's `<stack>`, then each
    `<auxwhat>` with its `<stack>`; `<errorcounts>` has the second context's two errors."""
    xml = run_cli("--format", "valgrind-xml", "--leak-check=full", "--no-symbolize",
                  _guarded(tmp_path)).stdout
    assert _errors(xml) == [
        ("InvalidWrite", "Invalid write of unknown size", "1", ["fill", "main"],
         [("Address 0x7028 is 0 bytes after a block of size 40 alloc'd",
           ["malloc", "fill", "main"])]),
        ("InvalidRead", "Invalid read of unknown size", "101", ["reader", "start_thread"],
         [("Address 0x900c is 12 bytes inside a block of size 32 free'd",
           ["free", "drop", "main"]),
          ("Block was alloc'd at", ["malloc", "drop", "main"])]),
        ("Leak_DefinitelyLost", None, "1", ["malloc", "fill", "main"], []),
        {"0x0": "1", "0x1": "2"},
    ]


def test_corruption_in_valgrinds_text_and_xml() -> None:
    """A red zone's finding has no valgrind error: an InvalidWrite whose sentence says what
    changed and where it was found, at the free that found it, then the block."""
    out = run_cli("--format", "valgrind", "-q", REDZONE).stdout
    assert out == (
        "==2184== Invalid write (heap block overrun: 1 byte after the 20-byte block), found at "
        "its free at event 2\n"
        f"==2184==    at 0x5555555552BC: free {PRELOAD}\n"
        "==2184==    by 0x5555555552BC: slack (redzone_errors.c:32)\n"
        "==2184==    by 0x55555555598D: main (redzone_errors.c:153)\n"
        "==2184==  Address 0x555555559c94 is 0 bytes after a block of size 20 alloc'd\n"
        f"==2184==    at 0x55555555528B: malloc {PRELOAD}\n"
        "==2184==    by 0x55555555528B: slack (redzone_errors.c:29)\n"
        "==2184==    by 0x55555555598D: main (redzone_errors.c:153)\n"
        "==2184== \n")
    summary = run_cli("--format", "valgrind", REDZONE).stdout
    assert "==2184== ERROR SUMMARY: 1 errors from 1 contexts (suppressed: 0 from 0)\n" in summary
    xml = run_cli("--format", "valgrind-xml", REDZONE).stdout
    assert _errors(xml) == [
        ("InvalidWrite", "Invalid write (heap block overrun: 1 byte after the 20-byte block), "
         "found at its free at event 2", "1", ["free", "slack", "main"],
         [("Address 0x555555559c94 is 0 bytes after a block of size 20 alloc'd",
           ["malloc", "slack", "main"])]),
        {"0x0": "1"},
    ]


def test_write_after_free_found_at_exit(tmp_path: Path) -> None:
    """Found at exit, the block's free is the error's stack; its sentence stands alone."""
    d = Dump(header="MEMDUMP 2.6")
    d.malloc("0x5000", 32, [F("make", "/src/app.c", 5), *main_at(40)])
    d.free("0x5000", [F("make", "/src/app.c", 7), *main_at(40)])
    d.raw(f"hc {d.seq} 100 freed 0x5000 32 8 4 exit")
    d.end()
    out = run_cli("--format", "valgrind", "-q", "--no-symbolize", d.write(tmp_path)).stdout
    assert out.splitlines()[:6] == [
        "==100== Invalid write (write after free into the 32-byte block (bytes 8 to 11 "
        "changed)), found at exit",
        f"==100==    at 0x555555555040: free {PRELOAD}",
        "==100==    by 0x555555555040: make (app.c:7)",
        "==100==    by 0x555555555020: main (app.c:40)",
        "==100==  Address 0x5008 is 8 bytes inside a block of size 32 free'd",
        "==100==  Block was alloc'd at",
    ]


def _valid(log: dict[str, Any]) -> None:
    validator = jsonschema.Draft4Validator(SCHEMA)
    assert [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(log)] == []


def test_access_errors_in_sarif(tmp_path: Path) -> None:
    """One error result per access error under memdump/invalid-write and invalid-read (listed
    only when there is one), located at the access, the block's free and allocation its related
    locations, each stack a code flow."""
    proc = run_cli("--format", "sarif", "--no-symbolize", "--sarif-root", "/src",
                   _guarded(tmp_path))
    log = json.loads(proc.stdout)
    _valid(log)
    run = log["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rules[5:] == ["memdump/invalid-read", "memdump/invalid-write"]
    errors = [r for r in run["results"] if r["ruleId"].startswith("memdump/invalid-")]
    assert [(r["ruleId"], rules[r["ruleIndex"]], r["level"], r["message"]["text"])
            for r in errors] == [
        ("memdump/invalid-write", "memdump/invalid-write", "error",
         "Invalid write at 0x7028: 0 bytes after a block of size 40 alloc'd"),
        ("memdump/invalid-read", "memdump/invalid-read", "error",
         "Invalid read at 0x900c: 12 bytes inside a block of size 32 free'd"),
        ("memdump/invalid-read", "memdump/invalid-read", "error",
         "Invalid read at 0x900d: 13 bytes inside a block of size 32 free'd"),
    ]
    read = errors[1]
    where = read["locations"][0]["physicalLocation"]
    assert (where["artifactLocation"]["uri"], where["region"]["startLine"]) == ("app.c", 30)
    assert [(r["message"]["text"], r["physicalLocation"]["region"]["startLine"])
            for r in read["relatedLocations"]] == [("the block's free", 20),
                                                   ("the block's allocation", 19)]
    flows = [(f["message"]["text"],
              [loc["location"]["message"]["text"] for loc in f["threadFlows"][0]["locations"]])
             for f in read["codeFlows"]]
    assert flows == [("the faulting access's stack", ["start_thread", "reader"]),
                     ("the block's free (free, event 3)",
                      ["__libc_start_call_main", "main", "drop"]),
                     ("the block's allocation (malloc, event 2)",
                      ["__libc_start_call_main", "main", "drop"])]
    assert read["properties"] == {"address": "0x900c", "block": "0x9000", "bytes": 32,
                                  "offset": 12, "relation": "inside", "state": "freed",
                                  "tid": 101}
    # the two reads of one stack share a fingerprint, without an address in it
    assert read["partialFingerprints"] == errors[2]["partialFingerprints"]
    assert errors[0]["partialFingerprints"] != read["partialFingerprints"]


@pytest.mark.parametrize(("options", "code"), [
    (("--fail-on-error",), 4),
    (("--fail-on-leak",), 1),
    (("--fail-on-error", "--fail-on-leak"), 4),  # both fail: the error's status
    ((), 0),
])
@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "valgrind"])
def test_fail_on_error(tmp_path: Path, options: tuple[str, ...], code: int, fmt: str) -> None:
    """--fail-on-error: 4 when the dump holds heap errors, before --fail-on-leak's 1."""
    proc = run_cli("--format", fmt, "--no-symbolize", *options, _guarded(tmp_path))
    assert (proc.returncode, proc.stderr) == (code, "")


@pytest.mark.parametrize(("dump", "code"), [(REDZONE, 4), (MIXED, 4)])
def test_fail_on_error_counts_corruption_and_frees(dump: str, code: int) -> None:
    """A red zone's finding (redzone.memdump) and a double free (mixed.memdump) fail it."""
    assert run_cli("--fail-on-error", dump).returncode == code


def test_fail_on_error_without_errors(tmp_path: Path) -> None:
    """No heap error: 0 (a leak alone fails --fail-on-leak only); no error in a cut recording:
    no verdict (3), said in one line."""
    clean = _guarded(tmp_path, errors=False)
    assert run_cli("--fail-on-error", "--no-symbolize", clean).returncode == 0
    assert run_cli("--fail-on-error", "--fail-on-leak", "--no-symbolize", clean).returncode == 1
    cut = tmp_path / "cut"
    cut.mkdir()
    proc = run_cli("--fail-on-error", "--no-symbolize", _guarded(cut, cut=True, errors=False))
    assert proc.returncode == 3
    assert proc.stderr.endswith("(no end record): --fail-on-error has no verdict "
                                "(exit status 3)\n")


@pytest.mark.parametrize(("asm", "access"), [
    ("movl   $0xa,(%rax)", ("write", 4)),
    ("movzbl (%rax),%eax", ("read", 1)),
    ("mov    (%rax),%eax", ("read", 4)),
    ("mov    %rdx,0x8(%rax)", ("write", 8)),
    ("movb   $0x0,(%rax,%rdx,1)", ("write", 1)),
    ("addl   $0x1,(%rax)", ("read", 4)),  # a read-modify-write is said as its read
    ("movdqu (%rsi),%xmm0", ("read", 16)),
    ("cmpb   $0x0,(%rdi)", ("read", 1)),
])
def test_the_faulting_instruction(asm: str, access: tuple[str, int]) -> None:
    assert describe_access(asm) == access


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("objdump") is None,
                    reason="needs a C compiler and objdump")
def test_access_size_of_the_module_that_ran(tmp_path: Path) -> None:
    """The size is read from the module's code only when the file can be the one that ran: not
    changed after the recording's start (a rebuilt module has another instruction there); else
    it is unknown, and said so."""
    source = tmp_path / "store.c"
    source.write_text("void store(int *p) { *p = 10; }\n")
    module = tmp_path / "store.so"
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(module), str(source)], check=True)
    symbols = subprocess.run(["nm", str(module)], capture_output=True, text=True, check=True)
    [offset] = [int(line.split()[0], 16) for line in symbols.stdout.splitlines()
                if line.endswith(" store")]  # its first instruction: movl $0xa,(%rdi)
    built = os.stat(module).st_mtime

    def utc(seconds: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))

    site = (str(module), offset)
    assert access_sizes([site], start=utc(built)) == {site: 4}  # built within the start's second
    assert access_sizes([site], start=utc(built + 60)) == {site: 4}
    assert access_sizes([site], start=utc(built - 2)) == {}  # changed after the recording began
    assert access_sizes([site]) == {site: 4}  # no start: nothing tells otherwise
    assert access_sizes([(str(tmp_path / "gone.so"), offset)]) == {}
    assert (access_text("write", 4), access_text("read", 0), access_text("read", None)) == (
        "Invalid write of size 4", "Invalid read of unknown size", "Invalid read of unknown size")


def test_free_errors_in_sarif() -> None:
    """mixed.memdump's double free: an error result under memdump/double-free, at the second
    free (app.cc:24), the first free its related location, the report's sentence its message."""
    proc = run_cli("--format", "sarif", MIXED)
    log = json.loads(proc.stdout)
    _valid(log)
    run = log["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rules[5:] == ["memdump/double-free"]
    [error] = [r for r in run["results"] if r["ruleId"] == "memdump/double-free"]
    assert (rules[error["ruleIndex"]], error["level"], error["message"]["text"]) == (
        "memdump/double-free", "error",
        "double free of 0x5555555592a0 (event 6, thread 777): the block was already freed")
    assert error["locations"][0]["physicalLocation"]["region"]["startLine"] == 24
    assert [(r["message"]["text"], r["physicalLocation"]["region"]["startLine"])
            for r in error["relatedLocations"]] == [("the block's free", 23)]
    assert [f["message"]["text"] for f in error["codeFlows"]] == [
        "the free's stack", "the block's free (event 5)"]
    assert error["properties"] == {"pointer": "0x5555555592a0", "op": "free", "seq": 6,
                                   "tid": 777}
