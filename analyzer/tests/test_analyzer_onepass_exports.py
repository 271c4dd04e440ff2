"""pprof and collapsed read the dump once: the library's replay counts the allocations by stack
node (heap.c's `count_alloc`, `Replay.node_allocs`) as the exports' pass counts them (figures.c's
stacks in C, heappass.py's loop in Python: the same nodes, blocks and bytes, in the same order),
and the blocks live at the peak by node (the end's, the changes since the peak undone:
`mdc_peak_rows`) as the pass's moment at the peak; the exports made from the analysis alone
(`profile.from_replay`) are byte for byte those of the second pass, on generated dumps (text
and compact) with every heap operation, exec, marked runtime frees, attached recordings, tags and
a cut last line."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from gendump import Dump, check_generated, generated_pair
from memdump_analyzer import analyze, cli, heappass, native
from memdump_analyzer.dumpfile import DumpError
from memdump_analyzer.exports import export, from_replay
from memdump_analyzer.exports import profile as profile_mod

#: the exports made from the replay: (format, metric), and collapsed minus a base
_ONE_READ = [("pprof", "leaked-bytes"), ("collapsed", "leaked-bytes"),
             ("collapsed", "leaked-blocks"), ("collapsed", "alloc-bytes"),
             ("collapsed", "alloc-count"), ("collapsed", "peak-bytes")]


@pytest.fixture(autouse=True)
def _library_built() -> None:
    assert native.library() is not None, f"{native.library_path()} missing: run `make build`"


def _pass_allocs(path: Path) -> tuple[list[tuple[int, int, int]], dict[int, list[int]]]:
    """The exports' pass's allocations by node, in its order, and its blocks at the peak by node
    (the reference)."""
    got: list[tuple[int, int, int]] = []
    at_peak: dict[int, list[int]] = {}
    real = profile_mod.StackProfileOutput._make

    def spy(self: Any) -> None:  # noqa: ANN401
        got.extend((node, row[0], row[1]) for node, row in self.allocs.items())  # + temporaries
        at_peak.update(self.at_peak)
        real(self)

    mp = pytest.MonkeyPatch()
    mp.setattr(profile_mod.StackProfileOutput, "_make", spy)
    try:
        profile_mod.collect(analyze(str(path), symbolize=False), symbolize=False)
    finally:
        mp.undo()
    return got, at_peak


def _outputs(path: Path, base: Path, allocations: bool) -> list[bytes]:
    analysis = analyze(str(path), symbolize=False, allocations=allocations)
    old = analyze(str(base), symbolize=False, allocations=allocations)
    outs = [export(name, analysis, metric=metric, symbolize=False) for name, metric in _ONE_READ]
    outs.append(export("collapsed", analysis, old, metric="alloc-bytes", symbolize=False))
    outs.append(export("collapsed", analysis, old, metric="peak-bytes", symbolize=False))
    outs.append(export("pprof", analysis, old, symbolize=False))
    return outs


@pytest.mark.parametrize("seed", range(12))
def test_replay_counts_the_allocations_as_the_exports_pass(
        seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "base.memdump"
    base.write_bytes(Dump(random.Random(seed + 500)).build(60))

    def both(path: Path) -> Any:  # noqa: ANN401
        try:
            monkeypatch.setenv("MEMDUMP_NATIVE", "1")
            rows = analyze(str(path), symbolize=False, allocations=True).node_allocs
            assert rows is not None
            assert analyze(str(path), symbolize=False).node_allocs is None  # not asked: not kept
            _, flat, peak = rows
            it = iter(flat)
            replayed = list(zip(it, it, it, strict=True))
            replayed_peak = {node: [blocks, nbytes] for (node, _, _), blocks, nbytes
                             in zip(replayed, *peak, strict=True) if blocks}
            in_c, in_c_peak = _pass_allocs(path)
            passes: list[int] = []
            monkeypatch.setattr(heappass, "run", _counting(heappass.run, passes))
            one = _outputs(path, base, True)
            assert passes == []  # the dump read once, by the analysis
            two = _outputs(path, base, False)
            monkeypatch.undo()
            monkeypatch.setenv("MEMDUMP_NATIVE", "0")
            in_python, in_python_peak = _pass_allocs(path)
            assert analyze(str(path), allocations=True).node_allocs is None
        except DumpError as e:
            return str(e)
        finally:
            monkeypatch.undo()
        assert replayed == in_c
        assert sorted(replayed) == sorted(in_python)
        assert replayed_peak == in_c_peak == in_python_peak
        assert one == two
        assert len(passes) == len(_ONE_READ) + 6  # without: the pass, the bases' too
        return one

    check_generated(seed, tmp_path / "gen.memdump", both)
    text, compact = generated_pair(seed, tmp_path)
    assert both(compact)[1:-1] == both(text)[1:-1]  # pprof (first, last) names its dump


def _counting(real: Any, calls: list[int]) -> Any:  # noqa: ANN401
    def run(*args: Any) -> Any:  # noqa: ANN401
        calls.append(1)
        return real(*args)
    return run


def test_which_exports_are_made_from_the_replay() -> None:
    assert from_replay("pprof") and from_replay("collapsed")
    assert not from_replay("massif") and not from_replay("html")  # snapshots over time


@pytest.mark.parametrize(("options", "passes"), [
    (["--format", "pprof"], 0), (["--format", "collapsed"], 0),
    (["--format", "collapsed", "--metric", "alloc-count"], 0),
    (["--format", "collapsed", "--metric", "peak-bytes"], 0), (["--format", "massif"], 1),
    (["--format", "pprof", "--base", "BASE"], 0), (["--format", "html"], 0)])
def test_the_command_reads_the_dump_once(options: list[str], passes: int, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`memdump-analyze DUMP --format pprof` reads DUMP in the analysis alone (and in the
    exports' pass again before), and so does the HTML page (the analysis's replay runs the pass
    beside it: test_analyzer_onepass_page.py); massif takes the pass on this dump (it returns
    blocks again while live: test_analyzer_onepass_massif.py has the one read)."""
    path = tmp_path / "gen.memdump"
    path.write_bytes(Dump(random.Random(7)).build(400))
    options = [str(path) if o == "BASE" else o for o in options]
    calls: list[int] = []
    monkeypatch.setattr(heappass, "run", _counting(heappass.run, calls))
    assert cli.main([str(path), *options, "--no-symbolize", "-o", str(tmp_path / "out")]) == 0
    assert len(calls) == passes


@pytest.mark.parametrize("limit", [0, 5, 1000])
def test_more_changes_after_the_peak_than_kept(limit: int, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """With more changes of the live blocks after the peak than the log keeps, the peak's blocks
    are not known from the replay (None, never wrong), and the exports that need them take the
    pass: the same bytes."""
    path = tmp_path / "gen.memdump"
    path.write_bytes(Dump(random.Random(3)).build(400))
    base = tmp_path / "base.memdump"
    base.write_bytes(Dump(random.Random(4)).build(60))
    want = _outputs(path, base, False)
    full = analyze(str(path), symbolize=False, allocations=True).node_allocs
    assert full is not None and full[2] is not None
    monkeypatch.setattr(native, "PEAK_LOG", limit)
    kept = analyze(str(path), symbolize=False, allocations=True).node_allocs
    assert kept is not None and kept[1] == full[1]
    passes: list[int] = []
    monkeypatch.setattr(heappass, "run", _counting(heappass.run, passes))
    assert _outputs(path, base, True) == want
    assert (kept[2] is None) == (limit < 100)  # 105 events after the peak
    if kept[2] is None:
        assert len(passes) >= 3  # peak-bytes, twice, and pprof's --base took it
    else:
        assert [list(a) for a in kept[2]] == [list(a) for a in full[2]]
        assert passes == []
