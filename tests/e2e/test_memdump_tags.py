"""memdump_api.h's tags and phases in both recorders: each allocation of tags_phases gets the
innermost tag of its thread's stack and the phase it was made in."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from memdump_e2e import analyze_raw, marker, record

_ALLOCATORS = {"+": 0, "+n": 0, "+a": 0}  # short records: SIZE is the last field


def _attributed(dump: Path) -> tuple[Counter, list[str]]:
    """(size, tag or "", phase) -> count over the dump's allocations; the phases in order."""
    strings: dict[str, str] = {"0": ""}
    stacks: dict[str, list[str]] = {}
    phase, phases = "", []
    thread = ""
    seen: Counter = Counter()
    for line in dump.read_text(errors="replace").splitlines():
        f = line.split(" ")
        if f[0] == "s":
            strings[f[1]] = line.split(" ", 2)[2]
        elif f[0] == "t":
            thread = f[1]
        elif f[0] == "g":
            stacks.setdefault(f[1], []).append(strings[f[2]])
        elif f[0] == "u":
            stacks[f[1]].pop()
        elif f[0] == "p" and f[2] == "phase":
            phase = line.split(" ", 3)[3]
            phases.append(phase)
        elif f[0] in _ALLOCATORS or (f[0] == "e" and f[3] in ("malloc", "new", "new[]")):
            tid, size = (thread, f[3]) if f[0] != "e" else (f[2], f[6])
            tags = stacks.get(tid) or [""]
            seen[int(size), tags[-1], phase] += 1
    return seen, phases


def test_allocations_get_their_threads_innermost_tag_and_their_phase(dump: Path) -> None:
    record("tags_phases", dump=dump)
    seen, phases = _attributed(dump)
    assert phases == ["level 1", "level 2"]
    ours = {key: n for key, n in seen.items() if key[0] in (11, 12, 1001, 1002, 2001, 3001)}
    assert ours == {
        (11, "", "level 1"): 1,
        (1001, "physics", "level 1"): 3,
        (1002, "collision", "level 1"): 1,
        (2001, "audio", "level 1"): 2,
        (12, "", "level 1"): 1,
        (3001, "", "level 2"): 1,
    }
    # every tag pushed was popped
    text = dump.read_text(errors="replace")
    assert text.count("\ng ") == text.count("\nu ") == 3


def test_the_macros_are_on_only_while_memdump_records(dump: Path) -> None:
    """memdump sets the program's memdump_api_enabled while it records, and back to 0 when it
    stops: the macros then cost a load and a branch, and record nothing."""
    site = marker("tags_phases.cpp", "level2", "BREAK")
    run = record("tags_phases", dump=dump, before=[f"break {site.file}:{site.line}"],
                 after=["print memdump_api_enabled", "memdump stop",
                        "print memdump_api_enabled", "continue"])
    printed = [line for line in run.stdout.splitlines() if line.startswith("$")]
    assert printed == ["$1 = 1", "$2 = 0"], run.output
    _, phases = _attributed(dump)
    assert phases == ["level 1"]  # level 2 came after the stop


def test_the_analysers_tags_and_phases(dump: Path) -> None:
    """memdump-analyze --by-tag and --phases on the recording: the named tags' figures, and the
    nine blocks of level 1 that outlive it, freed in level 2."""
    record("tags_phases", dump=dump)
    tags = json.loads(analyze_raw(dump, "--by-tag", "--format", "json").stdout)["tags"]
    named = {t["tag"]: (t["allocated"]["bytes"], t["allocated"]["blocks"], t["peak_bytes"],
                        t["leaked"]["bytes"]) for t in tags if t["tag"] != "(untagged)"}
    assert named == {"audio": (4002, 2, 4002, 0), "physics": (3003, 3, 3003, 0),
                     "collision": (1002, 1, 1002, 0)}
    phases = json.loads(analyze_raw(dump, "--phases", "--format", "json").stdout)["phases"]
    level1, level2 = (p for p in phases if p["phase"] in ("level 1", "level 2"))
    ours = [g for g in level1["groups"] if g["stack"][0]["function"].startswith(
        "(anonymous namespace)::Blocks::take")]
    assert sorted(g["bytes"] for g in ours) == [11, 12, 1001, 1001, 1001, 1002, 2001, 2001]
    assert all(g["freed_in"] == {"level 2": 1} for g in ours)
    assert (level2["allocated"], level2["outlived"]["blocks"]) == (
        {"bytes": 3001, "blocks": 1}, 0)
