"""--by-tag, --phases and --growth in libmemdump_core.so (tagviews.c): their text and JSON are
byte for byte the Python accumulators' (tagphases.py, growth.py, MEMDUMP_NATIVE=0) on the fixtures
and on generated dumps with tags, phases, threads and growth chains (allocate larger then free, or
realloc), corrupted ones giving the same `PATH:LINE: message`; the library does the work (the
accumulators' events are not called)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from analyzer_testlib import FIXTURES
from gendump import Dump, check_generated
from memdump_analyzer import heappass, native, nativepass
from memdump_analyzer.dumpfile import DumpError
from memdump_analyzer.growth import GrowthOutput, growth, growth_json, growth_text
from memdump_analyzer.tagphases import (
    TagsPhasesOutput,
    phases_json,
    phases_text,
    tags_and_phases,
    tags_json,
    tags_text,
)
from memdump_analyzer.views import tags_with_series
from memdump_analyzer.views.stream import ProfileOutput


@pytest.fixture(autouse=True)
def _library_built() -> None:
    lib = native.library()
    assert lib is not None and nativepass.typed_library(lib) is not None, (
        f"{native.library_path()} missing, old or not loadable: run `make build`")


def _outputs(path: Path, engine: str, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Each view's text and JSON (--max-frames 1 and all, --top 1 and all), or the error."""
    monkeypatch.setenv("MEMDUMP_NATIVE", engine)
    p = str(path)
    out: list[Any] = []
    fallbacks = []
    for view in ("tags", "phases", "growth"):
        try:
            if view == "tags":
                result, series = tags_with_series(p, points=5)
                out += [tags_text(result, p, series), tags_json(result, p, series)]
            elif view == "phases":
                result = tags_and_phases(p)
                out += [f(result, p, frames) for f in (phases_text, phases_json)
                        for frames in (None, 1)]
            else:
                sites = growth(p)
                out += [f(sites, p, top, frames) for f in (growth_text, growth_json)
                        for top in (None, 1) for frames in (None, 1)]
        except DumpError as e:
            out.append(str(e))
            continue
        fallbacks.append(native.last_fallback)
    if engine == "1":
        out.append(fallbacks)
    return out


def both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[Any]]:
    """The outputs, after checking that both engines give them; and the library's fallbacks
    (`native.last_fallback`) of the three passes."""
    python = _outputs(path, "0", monkeypatch)
    c = _outputs(path, "1", monkeypatch)
    fallbacks = c.pop()
    assert c == python
    return c, fallbacks


@pytest.mark.parametrize("path", sorted(FIXTURES.rglob("*.memdump")),
                         ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixtures(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, fallbacks = both(path, monkeypatch)
    if not any(isinstance(o, str) and o.startswith(str(path) + ":") for o in out):
        assert fallbacks == [None, None, None]  # the library read it all


@pytest.mark.parametrize("seed", range(150))
def test_generated(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[list[Any]] = []

    def check(path: Path) -> list[Any]:
        out, fallbacks = both(path, monkeypatch)
        runs.append(fallbacks)
        return out

    check_generated(seed, tmp_path / "gen.memdump", check)
    assert runs[0] == [None, None, None]  # the dump before it was corrupted: the library's


def test_generated_dumps_have_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated dumps reach what the test is for: several tags, blocks live at the end in a
    tag, phases of several names, blocks that outlived their phase and were freed in a later one
    or never, growth chains by a realloc and by an allocation then a free, several containers of
    one stack."""
    seen = dict.fromkeys(("tags", "tag_live", "phases", "freed_later", "never", "realloc",
                          "malloc_free", "containers"), 0)
    monkeypatch.setenv("MEMDUMP_NATIVE", "1")
    for seed in range(150):
        rng = random.Random(seed)
        path = tmp_path / "gen.memdump"
        dump = Dump(rng)
        text = dump.build(rng.choice([5, 60, 400]))
        path.write_bytes(text)
        result = tags_and_phases(str(path))
        assert native.last_fallback is None
        seen["tags"] += len(result.tags) > 2
        seen["tag_live"] += sum(t.tag != "(untagged)" and t.live_blocks > 0 for t in result.tags)
        seen["phases"] += len({p.phase for p in result.phases}) > 2
        for phase in result.phases:
            for g in phase.groups.values():
                seen["freed_later"] += any(name != "never" for name in g.freed_in)
                seen["never"] += "never" in g.freed_in
        sites = growth(str(path))
        seen["realloc"] += b" realloc " in text and bool(sites)
        seen["malloc_free"] += any(s.regrowths > 0 for s in sites)
        seen["containers"] += any(s.containers > 1 for s in sites)
    assert all(seen.values()), seen


def test_the_library_does_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the library, the accumulators' events are not called: the pass is C's."""
    def called(*_: object) -> None:
        raise AssertionError("an accumulator's event called")

    for cls in (TagsPhasesOutput, GrowthOutput):
        for hook in ("alloc", "release", "record"):
            monkeypatch.setattr(cls, hook, called)
    monkeypatch.setenv("MEMDUMP_NATIVE", "1")
    result, _ = tags_with_series(str(FIXTURES / "tags.memdump"))
    assert [(t.tag, t.allocated_bytes, t.allocated_blocks, t.peak_bytes, t.live_bytes)
            for t in result.tags] == [("(untagged)", 600, 2, 400, 200), ("audio", 128, 1, 128, 128),
                                      ("physics", 128, 2, 128, 64)]
    [site] = growth(str(FIXTURES / "growth.memdump"))[:1]
    assert (site.containers, site.regrowths, site.copied_bytes) == (2, 3, 16)
    assert native.last_fallback is None


def test_a_tag_without_its_string(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tag whose string is not defined: the reader's error, whichever the engine."""
    path = tmp_path / "late.memdump"
    path.write_text("MEMDUMP 2.2\ni program /src/app\ns 1 /src/app\nf 1 0x401000 1 0x1000 0 0 0\n"
                    "n 1 0 1\nt 5\ng 5 9\n+ 1 0x1000 8\ns 9 late\n+ 1 0x2000 16\n")
    out, _ = both(path, monkeypatch)
    assert out == [f"{path}:7: tag string 9 is not defined"] * 3


@pytest.mark.parametrize("engine", ["0", "1"])
def test_the_tags_series_takes_no_fragmentation_sample(engine: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """--by-tag's series (`fragmentation=False`) has the timeline's points and tags, and no
    fragmentation sample, in either engine; the timeline's own has its samples."""
    monkeypatch.setenv("MEMDUMP_NATIVE", engine)
    path = str(FIXTURES / "tags.memdump")
    profiles = []
    for fragmentation in (True, False):
        out = ProfileOutput(frozenset(("timeline",)), 5, fragmentation=fragmentation)
        heappass.run_path(path, [out])
        assert engine == "0" or native.last_fallback is None  # the library's pass
        profiles.append(out.profile)
    sampled, unsampled = profiles
    assert unsampled.frag == []
    assert sampled.frag == [(1, 0, 0, 0), (3, 3680, 3680, 4176), (5, 3680, 3680, 4176),
                            (7, 7696, 4016, 8336), (9, 6880, 4016, 7312)]
    assert (unsampled.timeline, unsampled.tag_names, unsampled.timeline_tags) == (
        sampled.timeline, sampled.tag_names, sampled.timeline_tags)
    assert unsampled.tag_names == ["(untagged)", "physics", "audio"]
