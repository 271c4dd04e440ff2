"""targets/game_loop under memdump, in both recorders: its tags, its levels as phases, the
texture cache that keeps a level's textures into the next one, the navigation grid it leaks once
per level, the entity vector that regrows, and breaks that stop on its marked lines.

The figures are those of the default run (3 levels of 30 frames; level L spawns 12 * L entities,
3 * L of them AI agents) and are made up from targets/game_loop/game_loop.cpp's constants, as the
comments say (targets/game_loop/README.md tabulates them). The main thread makes no heap
operation while the audio thread works, so the event numbers are the same in every run and in
both recorders.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from memdump_e2e import (
    REPO,
    Site,
    analyze,
    analyze_raw,
    build_dir,
    expect_leaks,
    frame_site,
    marker,
    record,
)

# record() and marker() look in tests/programs (its build directory and its sources): the target
# is two directories up from there.
PROGRAM = "../../targets/game_loop/game_loop"
SOURCE = "../../targets/game_loop/game_loop.cpp"
MODES = ("in-process", "breakpoints")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Both recorders, as conftest.py does for the test_memdump_* modules."""
    if metafunc.definition.get_closest_marker("one_recorder") is None:
        metafunc.parametrize("memdump_mode", MODES, indirect=True)


def _site(name: str, kind: str = "BREAK") -> Site:
    return marker(SOURCE, name, kind)


def _json(dump: Path, *options: str) -> dict:
    res = analyze_raw(dump, *options, "--format", "json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _shown(doc: str, dump: Path, *options: str, lines: int | None = None) -> None:
    """The text output of OPTIONS on DUMP is what docs/DOC shows (the dump named as it names it):
    the docs paste real output; `lines`: its first lines only, which the docs follow with `...`."""
    res = analyze_raw(dump, *options)
    assert res.returncode == 0, res.stderr
    text = res.stdout.replace(str(dump), dump.name)
    if lines is not None:
        text = "".join(text.splitlines(keepends=True)[:lines]) + "...\n"
    assert text in (REPO / "docs" / doc).read_text(), text


def _ours(stack: list[dict]) -> list[Site]:
    """The frames of STACK in game_loop.cpp, as sites."""
    return [s for s in map(frame_site, stack) if s is not None and s.file == "game_loop.cpp"]


# -- the program itself --------------------------------------------------------------------------


@pytest.mark.one_recorder
def test_the_game_plays_the_same_levels_every_time() -> None:
    """Natively: the same output twice (contacts, path nodes and the audio mix's checksum are
    computed from the entities' moves, which depend on nothing but the level number)."""
    program = build_dir() / "targets" / "game_loop" / "game_loop"
    if not program.is_file():
        pytest.fail(f"{program} is not built: run `make build`", pytrace=False)
    runs = [subprocess.run([str(program), *args], capture_output=True, text=True, timeout=60)
            for args in ((), (), ("--levels", "2", "--reserve"))]
    assert [r.returncode for r in runs] == [0, 0, 0], runs
    assert runs[0].stdout == runs[1].stdout == (
        "game_loop: 3 levels of 30 frames\n"
        "level 1: 12 entities, 30 frames, 8 contacts, 95 path nodes, audio 0b6c5086\n"
        "level 2: 24 entities, 30 frames, 47 contacts, 192 path nodes, audio d5466e42\n"
        "level 3: 36 entities, 30 frames, 139 contacts, 244 path nodes, audio fbfefdf5\n")
    # reserving changes where the entities live, not what they do
    assert runs[2].stdout.splitlines()[1:] == runs[0].stdout.splitlines()[1:3]
    bad = subprocess.run([str(program), "--levels", "10"], capture_output=True, text=True,
                         timeout=60)
    assert (bad.returncode, bad.stderr.splitlines()[0]) == (
        2, "game_loop: --levels: not an integer from 1 to 9: '10'")


# -- the analyser's views ------------------------------------------------------------------------


def test_by_tag_per_subsystem(tmp_path: Path) -> None:
    dump = tmp_path / "game.memdump"
    record(PROGRAM, dump=dump)
    _shown("tags.md", dump, "--by-tag", lines=22)  # the totals, the series' first 10 points
    by_tag = _json(dump, "--by-tag")["tags"]
    tags = {t["tag"]: (t["allocated"]["bytes"], t["allocated"]["blocks"], t["peak_bytes"],
                       t["peak_seq"], t["leaked"]["bytes"], t["leaked"]["blocks"])
            for t in by_tag}
    # the runtime's blocks live at the end are set apart, not leaked, as in the leak report
    assert {t["tag"]: (t["runtime"]["bytes"], t["runtime"]["blocks"]) for t in by_tag
            if t["runtime"]["blocks"]} == {"(untagged)": (77088, 3)}
    # The events, in order: the runtime's 4 blocks, level 1's phase (5), its 4 meshes (6-9) and
    # 2 textures (10-11); the entity vector's 5 allocations and 4 frees (12-20), the grid (21),
    # 3 sounds (22-24); each frame a contact list and its free, at frames 0, 10 and 20 a path per
    # agent (and the free of the agent's last one), a mix and its free. Level 2 and 3 begin at
    # events 171 and 359 (test_phases_and_what_outlived_each_level) and load the same way, but
    # free the previous level's 2 textures after loading their own.
    assert tags == {
        # 3 sounds of 4,096 bytes and 30 mixes of 2,048 per level: 3 * (12,288 + 61,440) in
        # 3 * 33 blocks; at most a bank and a mix at once, first at level 1's first mix: after
        # frame 0's contact list (25, 26) and 3 paths (27-29)
        "audio": (221184, 99, 12288 + 2048, 30, 0, 0),
        # 4 meshes of 6,144 and 2 textures of 16,384 per level: 3 * 57,344 in 18 blocks; peak
        # first as level 2 has loaded its meshes and textures while level 1's are still cached
        # (event 171 + 6)
        "assets": (172032, 18, 24576 + 2 * 32768, 177, 0, 0),
        # libstdc++'s emergency pool (72,704), stdout's buffer (4,096: a pipe), the audio thread
        # (16 bytes of std::thread's state, freed at its join; 288 of glibc's thread-local dtv):
        # the three that stay are the runtime's, not leaked
        "(untagged)": (77104, 4, 77104, 4, 0, 0),
        # a contact list of 16 bytes per entity each frame: 30 * 16 * (12 + 24 + 36); peak at
        # level 3's first: 359 + 6 + 2 texture frees + 13 entity vector events + grid + 3 + 1
        "physics": (34560, 90, 16 * 36, 385, 0, 0),
        # a 1,024-byte navigation grid per level, all leaked, and 3 plans of 256-byte paths for
        # 3 * L agents: 3 * 1,024 + (9 + 18 + 27) * 256; peak in level 3's second plan: three
        # grids and 9 paths + the first new one, after frame 0 (385-397: 9 paths, the mix) and
        # 9 frames of 4 events, and frame 10's contact list (434, 435)
        "ai": (16896, 57, 3 * 1024 + 10 * 256, 436, 3072, 3),
        # the entity vector of 32-byte entities grown 1, 2, 4, ... to 16, 32 and 64 entities:
        # (31 + 63 + 127) * 32 in 5 + 6 + 7 blocks; peak as 32 became 64 in level 3 (its 7th
        # allocation, after 6 allocations and 5 frees from 368)
        "entities": (7072, 18, (32 + 64) * 32, 379, 0, 0),
    }


def _capacities(entities: int) -> list[int]:
    """The capacities a vector pushed ENTITIES times goes through: 1, 2, 4, ... (libstdc++)."""
    caps = [1]
    while caps[-1] < entities:
        caps.append(2 * caps[-1])
    return caps


def test_any_number_of_levels_follows_the_same_rules(tmp_path: Path) -> None:
    """--levels 5: each tag's figures from the program's constants, per level L (12 * L
    entities of 32 bytes; contact lists of 16 bytes per entity; 3 * L agents planning 3 paths
    of 256 bytes; 4 meshes of 6,144 and 2 textures of 16,384; 3 sounds of 4,096 and 30 mixes
    of 2,048), and each level's phase outlived by its 2 textures and its grid."""
    dump = tmp_path / "five.memdump"
    record(PROGRAM, "--levels", "5", dump=dump)
    levels = range(1, 6)
    caps = [_capacities(12 * n) for n in levels]
    per_level = {
        "assets": lambda n: (4 * 6144 + 2 * 16384, 6),
        "entities": lambda n: (32 * sum(caps[n - 1]), len(caps[n - 1])),
        "physics": lambda n: (30 * 16 * 12 * n, 30),
        "ai": lambda n: (1024 + 3 * 3 * n * 256, 1 + 9 * n),
        "audio": lambda n: (3 * 4096 + 30 * 2048, 33),
    }
    expected = {}
    for tag, rule in per_level.items():
        figures = [rule(n) for n in levels]
        expected[tag] = (sum(b for b, _ in figures), sum(k for _, k in figures))
    tags = {t["tag"]: (t["allocated"]["bytes"], t["allocated"]["blocks"])
            for t in _json(dump, "--by-tag")["tags"] if t["tag"] != "(untagged)"}
    assert tags == expected == {"assets": (286720, 30), "entities": (15200, 32),
                                "physics": (86400, 150), "ai": (39680, 140),
                                "audio": (368640, 165)}
    phases = _json(dump, "--phases")["phases"]
    assert [p["phase"] for p in phases] == [
        "(before the first phase)", "level 1", "level 2", "level 3", "level 4", "level 5",
        "shutdown"]
    for n, phase in zip(levels, phases[1:6], strict=True):
        allocated = sum(rule(n)[0] for rule in per_level.values())
        following = phases[n + 1]["phase"]
        assert (phase["allocated"]["bytes"], phase["outlived"]) == (
            allocated, {"bytes": 32768 + 1024, "blocks": 3})
        assert [g["freed_in"] for g in phase["groups"]] == [{following: 2}, {"never": 1}]
    [site] = _json(dump, "--growth")["sites"]
    # regrowths: one fewer than the capacities; copied: every capacity but the last
    assert (site["containers"], site["regrowths"], site["copied_bytes"]) == (
        5, sum(len(c) - 1 for c in caps), 32 * sum(sum(c[:-1]) for c in caps)) == (5, 27, 7520)


def _phase(p: dict) -> tuple:
    return (p["phase"], p["seq"], p["allocated"]["bytes"], p["allocated"]["blocks"],
            p["freed_in_phase"]["bytes"], p["freed_in_phase"]["blocks"],
            p["outlived"]["bytes"], p["outlived"]["blocks"])


def test_phases_and_what_outlived_each_level(tmp_path: Path) -> None:
    dump = tmp_path / "game.memdump"
    record(PROGRAM, dump=dump)
    _shown("tags.md", dump, "--phases", "--max-frames", "2")
    phases = _json(dump, "--phases")["phases"]
    # level L allocates 57,344 (assets) + 32 * (2^k - 1) (entities: 992, 2,016, 4,064) +
    # 5,760 * L (physics) + 1,024 + 2,304 * L (ai) + 73,728 (audio), and frees all of it within
    # the level but its 2 textures (32,768) and its grid (1,024). Its events: what it allocated,
    # what it freed and the previous level's 2 textures, then the next phase's record: level 2's
    # is event 5 + 84 + 81 + 1 = 171, level 3's 171 + 94 + 91 + 2 + 1 = 359, shutdown's
    # 359 + 104 + 101 + 2 + 1 = 567.
    assert [_phase(p) for p in phases] == [
        ("(before the first phase)", 0, 77104, 4, 0, 0, 77104, 4),
        ("level 1", 5, 141152, 84, 107360, 81, 33792, 3),
        ("level 2", 171, 150240, 94, 116448, 91, 33792, 3),
        ("level 3", 359, 160352, 104, 126560, 101, 33792, 3),
        ("shutdown", 567, 0, 0, 0, 0, 0, 0),
    ]
    texture, grid = _site("texture", "OUTLIVE"), _site("nav-grid", "LEAK")
    for level, later in (("level 1", "level 2"), ("level 2", "level 3"), ("level 3", "shutdown")):
        [groups] = [p["groups"] for p in phases if p["phase"] == level]
        assert [(g["bytes"], g["blocks"], g["freed_in"], _ours(g["stack"])[0])
                for g in groups] == [(32768, 2, {later: 2}, texture), (1024, 1, {"never": 1}, grid)]


def test_the_report_names_the_grid_and_the_peak(dump: Path) -> None:
    """The 3 grids are the leak, definitely lost (the runtime's blocks are set apart). The peak
    is level 3's second texture: the runtime's 77,104 bytes, 2 grids, level 3's 4 meshes and 4
    textures (level 2's still cached): 77,104 + 2,048 + 24,576 + 65,536 in 4 + 2 + 4 + 4
    blocks, at event 359 + 4 + 2."""
    record(PROGRAM, dump=dump)
    report = analyze(dump)
    expect_leaks(report, {_site("nav-grid", "LEAK"): (3072, 3)})
    assert report.summary["leak_kinds"]["definite"] == {"bytes": 3072, "blocks": 3}
    peak = report.summary["peak"]
    assert (peak["bytes"], peak["blocks"], peak["seq"], frame_site(peak["stack"][0])) == (
        169264, 14, 365, _site("texture", "OUTLIVE")), report.dumps()


def test_growth_of_the_entity_vector_and_none_reserved(tmp_path: Path) -> None:
    dump = tmp_path / "game.memdump"
    record(PROGRAM, dump=dump)
    _shown("growth.md", dump, "--growth")
    sites = _json(dump, "--growth")["sites"]
    # 12, 24 and 36 entities pushed one at a time: 4 + 5 + 6 regrowths, copying
    # (15 + 31 + 63) * 32 bytes, to 16, 32 and 64 entities of 32 bytes
    assert [(s["containers"], s["regrowths"], s["copied_bytes"], s["final_bytes"],
             s["reserve_bytes"], _ours(s["stack"])[0]) for s in sites] == [
        (3, 15, 3488, {"min": 512, "max": 2048}, {"min": 512, "max": 2048},
         _site("spawn", "GROW"))]
    reserved = tmp_path / "reserved.memdump"
    record(PROGRAM, "--reserve", dump=reserved)
    assert _json(reserved, "--growth")["sites"] == []
    _shown("growth.md", reserved, "--growth")
    [entities] = [t for t in _json(reserved, "--by-tag")["tags"] if t["tag"] == "entities"]
    # one vector of 12 * L entities per level: (12 + 24 + 36) * 32
    assert (entities["allocated"], entities["peak_bytes"]) == ({"bytes": 2304, "blocks": 3},
                                                               36 * 32)


def test_heap_map_at_the_levels(dump: Path) -> None:
    """The live blocks as a level begins: the runtime's 4 (chunks of 72,720, 4,112, 32 and 304
    bytes: size + 8 rounded up to 16), the previous level's 2 textures (16,400 each) and one
    grid (1,040) per level played. At the end: the runtime's 3 and the 3 grids."""
    record(PROGRAM, dump=dump)
    runtime = 72720 + 4112 + 32 + 304
    for at, blocks, used in (("phase:level 2", 7, runtime + 2 * 16400 + 1040),
                             ("phase:level 3", 8, runtime + 2 * 16400 + 2 * 1040),
                             ("end", 6, runtime - 32 + 3 * 1040)):
        regions = _json(dump, "--heap-map", "--at", at)["regions"]
        assert [(r["blocks"], r["used_bytes"]) for r in regions] == [(blocks, used)], at


# -- memdump break ---------------------------------------------------------------------------------


def _stop(output: str) -> str:
    [hit] = re.findall(r"^memdump: (break at event \d+: .*?)(?: = 0x[0-9a-f]+)? in thread \d+$",
                       output, re.M)
    return re.sub(r"0x[0-9a-f]+", "ADDR", hit)


def _frames(output: str) -> list[str]:
    """`#N ... FUNCTION (ARGS) at FILE:LINE` of the backtrace printed, as 'FUNCTION FILE:LINE'."""
    return [f"{m[0]} {m[1]}" for m in re.findall(
        r"^#\d+\s+(?:0x[0-9a-f]+ in )?([\w:]+) \(.*\) at .*/([\w.]+:\d+)$", output, re.M)]


def _printed(output: str) -> list[str]:
    return re.findall(r"^\$\d+ = (.*)$", output, re.M)


def test_a_break_on_physics_stops_at_the_contact_list(dump: Path) -> None:
    """The 31st allocation under "physics" is level 2's first contact list: 24 entities * 16
    bytes, event 171 + 4 meshes + 2 textures + 2 textures freed + 11 entity vector events + the
    grid + 3 sounds + 1."""
    run = record(PROGRAM, dump=dump, before=["memdump break --tag physics --on alloc --count 31"],
                 after=["bt 3", "frame 1", "print frame", "memdump break --delete", "continue"])
    assert "memdump: break: --on alloc --tag physics --count 31" in run.stdout
    assert _stop(run.stdout) == "break at event 195: new[](384)", run.stdout
    assert _frames(run.stdout) == [
        f"game::physics_step {_site('contacts')}", f"game::Game::run_frame {_site('physics')}",
        f"game::Game::play_level {_site('frame')}", f"game::Game::run_frame {_site('physics')}"]
    assert _printed(run.stdout) == ["0"]
    assert "exited normally" in run.stdout


def test_a_break_in_the_texture_cache_shows_the_late_free(dump: Path) -> None:
    """The first free in TextureCache::trim: level 2 loading frees a texture of level 1. The
    program stops as delete[] returns, on the line after it."""
    run = record(PROGRAM, dump=dump,
                 before=["memdump break --on free --function game::TextureCache::trim --count 1"],
                 after=["print level", "print e.level", "continue"])
    assert _stop(run.stdout) == "break at event 178: delete[](ADDR)", run.stdout
    assert re.search(rf"game::TextureCache::trim \(this=0x[0-9a-f]+, level=2\) at .*/"
                     rf"{_site('trim')}$", run.stdout, re.M), run.stdout
    assert _printed(run.stdout) == ["2", "1"]


def test_a_break_on_audio_stops_in_the_audio_thread(dump: Path) -> None:
    """Tags are per thread: the first "audio" allocation is the audio thread's first sound,
    made while the main thread is inside "assets" (event 5 + 4 + 2 + 5 entity allocations and
    4 frees + the grid + 1)."""
    run = record(PROGRAM, dump=dump, before=["memdump break --tag audio --count 1"],
                 after=["bt 1", "print level", "continue"])
    assert _stop(run.stdout) == "break at event 22: new[](4096)", run.stdout
    assert _frames(run.stdout) == [f"game::AudioWorker::load_bank {_site('sound')}"]
    assert re.search(r'^Thread 2 "game_loop" hit', run.stdout, re.M), run.stdout
    assert _printed(run.stdout) == ["1"]


def test_a_break_on_a_function_stops_at_the_leaking_allocation(dump: Path) -> None:
    """The 2nd allocation made in build_nav_grid is level 2's grid, the leak's line: event 171 +
    4 meshes + 2 textures + 2 textures freed + 11 entity vector events + 1."""
    run = record(PROGRAM, dump=dump,
                 before=["memdump break --function game::build_nav_grid --count 2"],
                 after=["bt 2", "print level", "continue"])
    assert _stop(run.stdout) == "break at event 191: new(1024)", run.stdout
    assert _frames(run.stdout) == [f"game::build_nav_grid {_site('nav-grid', 'LEAK')}",
                                   f"game::Game::load {_site('grid')}"]
    assert _printed(run.stdout) == ["2"]
