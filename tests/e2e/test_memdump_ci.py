"""memdump-analyze for CI on real recordings: `diff` of two versions of one program (and of two
runs of one version at other addresses), and `--format sarif`, schema-valid, with fingerprints
equal across runs.

GDB turns address randomisation off; these recordings turn it back on, so that the two runs'
addresses differ and the comparison by function and file:line is what makes them match.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from memdump_e2e import (
    ANALYZE_TIMEOUT,
    PYTHON,
    REPO,
    analyze,
    analyze_raw,
    analyzer_env,
    marker,
    record,
)

SOURCE = "leak_versions.c"
ASLR = ["set disable-randomization off"]
SCHEMA = json.loads((REPO / "analyzer" / "tests" / "fixtures" / "sarif-schema-2.1.0.json")
                    .read_text())


def _record(tmp_path: Path, name: str, version: str) -> Path:
    dump = tmp_path / name
    record("leak_versions", version, dump=dump, before=ASLR)
    return dump


def _pcs(dump: Path) -> set[str]:
    return {g["stack"][0]["pc"] for g in analyze(dump).groups()}


def test_diff_of_two_versions(tmp_path: Path) -> None:
    base = _record(tmp_path, "v1.memdump", "1")
    new = _record(tmp_path, "v2.memdump", "2")
    again = _record(tmp_path, "v2-again.memdump", "2")
    assert _pcs(new).isdisjoint(_pcs(again)), "the two runs were loaded at the same address"
    all_kinds = ("--show-leak-kinds", "all")
    result = _diff("--format", "json", *all_kinds, base=base, new=new)
    record_site, cache_site = marker(SOURCE, "record"), marker(SOURCE, "cache")
    assert [(_site(g), g["leak_kind"], g["bytes"], g["blocks"]) for g in result["added"]] == [
        (str(cache_site), "reachable", 64, 1)]
    assert [(_site(g), g["bytes"], g["blocks"], g["base_bytes"], g["base_blocks"])
            for g in result["grown"]] == [(str(record_site), 96, 3, 64, 2)]
    assert result["gone"] == []
    assert result["summary"]["base"] == {"bytes": 80, "blocks": 3}
    assert result["summary"]["new"] == {"bytes": 176, "blocks": 5}
    # exit status: 1 with --fail-on-leak when a group of --errors-for-leak-kinds is new or grew
    fail = ("--fail-on-leak", *all_kinds, "--errors-for-leak-kinds", "all")
    assert _code(*fail, base=base, new=new) == 1
    assert _code(*fail, base=new, new=again) == 0  # same version, other addresses
    assert _code(*fail, base=new, new=base) == 0  # version 1 only leaks less
    # the default kinds (definite,possible, as valgrind): these still reachable blocks do not count
    assert _code("--fail-on-leak", base=base, new=new) == 0
    same = _diff("--format", "json", *all_kinds, base=new, new=again)
    assert (same["added"], same["grown"], same["gone"]) == ([], [], [])
    text = analyze_raw(base, *all_kinds, "--format", "text")  # the plain report still works
    assert text.returncode == 0 and "LEAK 1 of 2" in text.stdout
    out = _diff_text(*all_kinds, base=base, new=new)
    assert (f"NEW LEAK 1 of 1: 64 bytes in 1 block, still reachable\n"
            f"    at make_cache ({cache_site})") in out
    assert (f"GREW 1 of 1: 96 bytes in 3 blocks, still reachable (+32 bytes, +1 block; base: 64 "
            f"bytes in 2 blocks)\n    at make_record ({record_site})") in out


def test_diff_across_an_edit_that_moves_every_line(tmp_path: Path) -> None:
    """diff_moved_edited is diff_moved with one comment line added at the top: its five leaks
    are the same five leaks, one line further down, and none is new or gone; also against the
    edited program killed by SIGKILL, whose dump has no pointer scan."""
    base, edited, killed = (tmp_path / f"{n}.memdump" for n in ("base", "edited", "killed"))
    record("diff_moved", dump=base)
    record("diff_moved_edited", dump=edited)
    record("diff_moved_edited", "kill", dump=killed)
    name, raw = marker("diff_moved.c", "name"), marker("diff_moved.c", "raw")
    first = marker("diff_moved.c", "first", "CALL")
    groups = {d: sorted((_site(g), g["stack"][1]["line"], g["bytes"], g["leak_kind"])
                        for g in analyze(d).groups()) for d in (base, edited)}
    assert groups[base] == sorted([
        (str(name), first.line, 6, "definite"), (str(name), first.line + 1, 11, "definite"),
        (f"diff_moved.c:{marker('diff_moved.c', 'table').line}", first.line + 2, 32, "definite"),
        (f"diff_moved.c:{marker('diff_moved.c', 'table').line}", first.line + 3, 72, "reachable"),
        (str(raw), marker("diff_moved.c", "leak_all", "CALL").line, 48, "definite")])
    assert groups[edited] == sorted((f"diff_moved.c:{int(site.split(':')[1]) + 1}", line + 1,
                                     nbytes, kind) for site, line, nbytes, kind in groups[base])
    assert analyze(killed).summary["leak_kinds"] is None
    all_kinds = ("--show-leak-kinds", "all")
    for old, new in ((base, edited), (edited, base), (base, killed), (killed, base)):
        result = _diff("--format", "json", *all_kinds, base=old, new=new)
        assert (result["added"], result["grown"], result["gone"]) == ([], [], []), (old, new)
        for options in ((), ("--errors-for-leak-kinds", "all")):
            assert _code("--fail-on-leak", *options, base=old, new=new) == 0, (old, new)


def _site(group: dict[str, Any]) -> str:
    frame = group["stack"][0]
    return f"{Path(frame['file']).name}:{frame['line']}"


def _cli(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "memdump_analyzer", *argv], capture_output=True,
                          text=True, timeout=ANALYZE_TIMEOUT, env=analyzer_env(),
                          stdin=subprocess.DEVNULL)


def _run_diff(*options: str, base: Path, new: Path) -> subprocess.CompletedProcess[str]:
    return _cli(["diff", *options, str(base), str(new)])


def _diff(*options: str, base: Path, new: Path) -> dict[str, Any]:
    proc = _run_diff(*options, base=base, new=new)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _diff_text(*options: str, base: Path, new: Path) -> str:
    proc = _run_diff(*options, base=base, new=new)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _code(*options: str, base: Path, new: Path) -> int:
    return _run_diff(*options, base=base, new=new).returncode


def _sarif(dump: Path) -> dict[str, Any]:
    proc = _cli(["--format", "sarif", "--show-leak-kinds", "all", "--sarif-root",
                             str(REPO), str(dump)])
    assert proc.returncode == 0, proc.stderr
    log = json.loads(proc.stdout)
    errors = [e.message for e in jsonschema.Draft4Validator(SCHEMA).iter_errors(log)]
    assert errors == [], errors
    return log


@pytest.mark.parametrize("program", ["leak_versions", "leak_new"])
def test_sarif_fingerprints_are_stable_across_runs(program: str, tmp_path: Path) -> None:
    dumps = [tmp_path / f"{n}.memdump" for n in (1, 2)]
    for dump in dumps:
        record(program, *(["2"] if program == "leak_versions" else []), dump=dump, before=ASLR)
    assert _pcs(dumps[0]).isdisjoint(_pcs(dumps[1]))
    logs = [_sarif(d) for d in dumps]
    prints = [[(r["ruleId"], r["partialFingerprints"]["memdumpStack/v1"])
               for r in log["runs"][0]["results"]] for log in logs]
    assert prints[0] == prints[1]
    results = logs[0]["runs"][0]["results"]
    source = "leak_versions.c" if program == "leak_versions" else "leak_new.cpp"
    where = [(r["locations"][0]["physicalLocation"]["artifactLocation"],
              r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results]
    uri = {"uri": f"tests/programs/{source}", "uriBaseId": "%SRCROOT%"}
    if program == "leak_new":
        assert [r["ruleId"] for r in results] == ["memdump/definitely-lost"] * 2
        assert where == [(uri, marker(source, "new-array").line), (uri, marker(source, "new").line)]
    else:
        assert [r["ruleId"] for r in results] == ["memdump/still-reachable"] * 3
        assert [r["level"] for r in results] == ["note"] * 3
        assert where == [(uri, marker(source, "record").line), (uri, marker(source, "cache").line),
                         (uri, marker(source, "name").line)]
