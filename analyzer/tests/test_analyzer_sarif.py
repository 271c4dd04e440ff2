"""`--format sarif`: valid against the official SARIF 2.1.0 schema (fixtures/, see its README), one
result per listed leak group, one rule per kind, the top user frame as location, the stack as a
code flow, fingerprints without addresses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from analyzer_testlib import FIXTURES, LIBC, LIBSTDCXX, Dump, F, run_cli

SCHEMA = json.loads((FIXTURES / "sarif-schema-2.1.0.json").read_text())


def _valid(log: dict[str, Any]) -> None:
    validator = jsonschema.Draft4Validator(SCHEMA)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(log)]
    assert errors == []


def _recording(tmp_path: Path, name: str, base: int) -> str:
    """A C++ program loaded at `base`: a definitely lost `new` in make_widget (called through
    std::function's internals), a possibly lost malloc in main, a still reachable block of a
    thread, and a definitely lost block without any source line."""
    d = Dump(header="MEMDUMP 1.2")
    lib = 0x7FFF00000000 + (base & 0xFFF00000)  # page-aligned: same offsets
    start = F("__libc_start_call_main", module=LIBC, pc=lib + 0x2718A)
    new = F("operator new(unsigned long)", module=LIBSTDCXX, pc=lib + 0x1A958C)
    d.malloc("0x1000", 48, [
        new, F("make_widget()", "/src/w.cpp", 9, pc=base + 0x1156),
        F("std::_Function_handler<void (), main::{lambda()#1}>::_M_invoke(std::_Any_data const&)",
          "/usr/include/c++/12/bits/std_function.h", 290, pc=base + 0x1300),
        F("main()", "/src/w.cpp", 17, pc=base + 0x1184), start])
    d.malloc("0x2000", 200, [F("main()", "/src/w.cpp", 20, pc=base + 0x11A0), start])
    d.malloc("0x3000", 64, [F("worker(void*)", "/src/w.cpp", 30, pc=base + 0x1200),
                            F("start_thread", module=LIBC, pc=lib + 0x89DAF),
                            F("clone3", module=LIBC, pc=lib + 0x1098EC)], tid=101)
    d.malloc("0x4000", 8, [F(None, None, 0, module="/src/libplugin.so", pc=lib + 0x900123), start])
    d.raw(f"scan {d.seq} ok 4096 600 1")
    for p, kind in (("0x1000", "D"), ("0x2000", "P"), ("0x3000", "R"), ("0x4000", "D")):
        d.raw(f"r {p} {kind}")
    d.end()
    return d.write(tmp_path, name)


def _sarif(dump: str, *options: str) -> dict[str, Any]:
    result = run_cli("--format", "sarif", "--no-symbolize", *options, dump)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    return json.loads(result.stdout)


def test_sarif_is_schema_valid_and_says_what_the_report_says(tmp_path: Path) -> None:
    log = _sarif(_recording(tmp_path, "a.memdump", 0x555555554000), "--show-leak-kinds", "all",
                 "--sarif-information-uri", "https://example.org/dbgkit", "--sarif-root", "/src")
    _valid(log)
    assert (log["version"], len(log["runs"])) == ("2.1.0", 1)
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"], driver["informationUri"]) == (
        "memdump-analyze", "1.0.0", "https://example.org/dbgkit")
    assert [r["id"] for r in driver["rules"]] == [
        "memdump/definitely-lost", "memdump/indirectly-lost", "memdump/possibly-lost",
        "memdump/still-reachable", "memdump/leak"]
    assert all(r["help"]["text"] for r in driver["rules"])
    results = run["results"]
    assert [(r["ruleId"], r["ruleIndex"], r["level"], r["message"]["text"]) for r in results] == [
        ("memdump/possibly-lost", 2, "error",
         "200 bytes in 1 block is possibly lost, allocated in main() (w.cpp:20)"),
        ("memdump/still-reachable", 3, "note",
         "64 bytes in 1 block is still reachable, allocated in worker(void*) (w.cpp:30)"),
        ("memdump/definitely-lost", 0, "error",
         "48 bytes in 1 block is definitely lost, allocated in make_widget() (w.cpp:9)"),
        ("memdump/definitely-lost", 0, "error", "8 bytes in 1 block is definitely lost"),
    ]
    # the location is the top frame of the program's code; paths under --sarif-root are
    # relative to %SRCROOT%
    widget = results[2]
    assert widget["locations"] == [{
        "message": {"text": "make_widget()"},
        "physicalLocation": {"artifactLocation": {"uri": "w.cpp", "uriBaseId": "%SRCROOT%"},
                             "region": {"startLine": 9}},
        "logicalLocations": [{"fullyQualifiedName": "make_widget()", "kind": "function"}]}]
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": "file:///src/"}}
    flow = widget["codeFlows"][0]["threadFlows"][0]["locations"]
    assert [(f["location"]["message"]["text"].split("(")[0], f["nestingLevel"]) for f in flow] == [
        ("main", 0), ("std::_Function_handler<void ", 1), ("make_widget", 2)]
    assert flow[1]["location"]["physicalLocation"]["artifactLocation"] == {
        "uri": "file:///usr/include/c++/12/bits/std_function.h"}
    # a stack without any line: no location, the frames as logical locations
    assert "locations" not in results[3]
    assert results[3]["codeFlows"][0]["threadFlows"][0]["locations"][-1]["location"] == {
        "message": {"text": f"0x{0x7FFF55500000 + 0x900123:x}"},
        "logicalLocations": [{"fullyQualifiedName": f"0x{0x7FFF55500000 + 0x900123:x}",
                              "kind": "function"}]}


def test_std_frames_are_not_the_location(tmp_path: Path) -> None:
    """A block allocated by the runtime's code called from the program: the program's frame."""
    d = Dump(header="MEMDUMP 1.2")
    d.malloc("0x1000", 32, [
        F("std::vector<int, std::allocator<int> >::_M_realloc_insert(int&&)",
          "/usr/include/c++/12/bits/vector.tcc", 440),
        F("fill(std::vector<int>&)", "/src/v.cpp", 5), F("main()", "/src/v.cpp", 9)])
    d.raw(f"scan {d.seq} ok 4096 600 1")
    d.raw("r 0x1000 D")
    d.end()
    log = _sarif(d.write(tmp_path))
    _valid(log)
    location = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert (location["artifactLocation"]["uri"], location["region"]) == (
        "file:///src/v.cpp", {"startLine": 5})


def test_levels_follow_errors_for_leak_kinds_and_no_scan(tmp_path: Path) -> None:
    dump = _recording(tmp_path, "a.memdump", 0x555555554000)
    log = _sarif(dump, "--show-leak-kinds", "all", "--errors-for-leak-kinds", "reachable")
    assert [r["level"] for r in log["runs"][0]["results"]] == ["warning", "error", "warning",
                                                                "warning"]
    assert "informationUri" not in log["runs"][0]["tool"]["driver"]
    # default --show-leak-kinds: definite and possible only
    assert len(_sarif(dump)["runs"][0]["results"]) == 3
    # a dump without a scan: every group is memdump/leak, an error
    d = Dump()
    d.malloc("0x10", 16, [F("main", "/src/app.c", 3)])
    d.end()
    log = _sarif(d.write(tmp_path, "noscan.memdump"))
    _valid(log)
    assert [(r["ruleId"], r["level"]) for r in log["runs"][0]["results"]] == [
        ("memdump/leak", "error")]


def test_fingerprints_are_stable_across_runs(tmp_path: Path) -> None:
    one = _sarif(_recording(tmp_path, "a.memdump", 0x555555554000), "--show-leak-kinds", "all")
    two = _sarif(_recording(tmp_path, "b.memdump", 0x563412340000), "--show-leak-kinds", "all")
    prints = [[r["partialFingerprints"]["memdumpStack/v1"] for r in log["runs"][0]["results"]]
              for log in (one, two)]
    assert prints[0] == prints[1]
    assert len(set(prints[0])) == 4 and all(len(p) == 64 for p in prints[0])
