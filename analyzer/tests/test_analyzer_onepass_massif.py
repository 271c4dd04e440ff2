"""massif reads the dump once: when the dump's last SEQ is known before it is read (its `end`
record is its last: dumptail.py), the analysis's replay takes massif's snapshots itself
(snapshots.c: `exports.replay_snapshots`, `Analysis.node_snapshots`) and the export is made from
the analysis alone, byte for byte the file of the second pass (the views' pass's moments), on
generated dumps (text and compact) with every heap operation, execs, marked runtime frees,
attached recordings, blocks returned again while live, padding and cut last lines, whole and
corrupted. Where the replay cannot tell the snapshots (the Python replay; a block returned again
while live; more changes after the peak than its log keeps; no `end` last), the export takes the
second pass, as before."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from gendump import Dump, check_generated, generated_pair
from memdump_analyzer import analyze, cli, heappass, native
from memdump_analyzer.dumpfile import DumpError
from memdump_analyzer.dumptail import end_seq
from memdump_analyzer.exports import export, replay_snapshots
from memdump_analyzer.exports.profile import SNAPSHOTS, snapshot_plan
from memdump_analyzer.passapi import MOMENT_BY_NODE, MOMENT_TOTALS


@pytest.fixture(autouse=True)
def _library_built() -> None:
    assert native.library() is not None, f"{native.library_path()} missing: run `make build`"


def _counting(calls: list[int]) -> Any:  # noqa: ANN401
    real = heappass.run

    def run(*args: Any) -> Any:  # noqa: ANN401
        calls.append(1)
        return real(*args)
    return run


def _massif(path: Path, one_read: bool) -> tuple[Any, int]:
    """massif's file of `path` (or its error), and how many times the exports' pass ran."""
    calls: list[int] = []
    mp = pytest.MonkeyPatch()
    mp.setattr(heappass, "run", _counting(calls))
    try:
        plan = replay_snapshots("massif", str(path)) if one_read else None
        analysis = analyze(str(path), symbolize=False, allocations=plan is not None,
                           snapshots=plan)
        return export("massif", analysis, symbolize=False, snapshots=plan), len(calls)
    except DumpError as e:
        return str(e), len(calls)
    finally:
        mp.undo()


def _regular_peak(path: Path) -> bool:
    """Whether the dump's peak is at one of massif's regular snapshots (or the last)."""
    a = analyze(str(path), symbolize=False)
    every = max(1, a.last_seq // SNAPSHOTS)
    return a.peak_seq is not None and (a.peak_seq % every == 0 or a.peak_seq == a.last_seq)


@pytest.mark.parametrize("seed", range(60))
def test_one_read_is_the_second_pass(seed: int, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if seed % 5 == 4:  # a small log: the peak's blocks not kept, the second pass taken
        monkeypatch.setattr(native, "PEAK_LOG", seed % 3)

    def both(path: Path) -> Any:  # noqa: ANN401
        one, passes = _massif(path, True)
        two, _ = _massif(path, False)
        assert one == two
        if isinstance(one, bytes) and end_seq(str(path)) is None:
            assert passes == 1  # no end record last: the SEQs are not known before
        return one

    check_generated(seed, tmp_path / "gen.memdump", both)
    text, compact = generated_pair(seed, tmp_path)
    assert both(compact).split(b"\n", 1)[1] == both(text).split(b"\n", 1)[1]  # desc: its path


def test_the_generated_dumps_reach_every_case(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The dumps above take the one read, with the peak at a regular snapshot and between two,
    and the second pass for each reason: no `end` last, a block returned again while live, the
    Python replay."""
    seen = dict.fromkeys(("one read", "peak regular", "peak between", "no end", "reused",
                          "python"), 0)
    path = tmp_path / "gen.memdump"
    for seed in range(60):
        rng = random.Random(seed)
        path.write_bytes(Dump(rng).build(rng.choice([5, 60, 400])))
        one, passes = _massif(path, True)
        if passes == 0:
            seen["one read"] += 1
            seen["peak regular" if _regular_peak(path) else "peak between"] += 1
        elif end_seq(str(path)) is None:
            seen["no end"] += 1
        elif analyze(str(path), symbolize=False).reused_live:
            seen["reused"] += 1
        monkeypatch.setenv("MEMDUMP_NATIVE", "0")
        if end_seq(str(path)) is not None:
            seen["python"] += _massif(path, True)[1] == 1
        monkeypatch.delenv("MEMDUMP_NATIVE")
    assert all(seen.values()), seen
    assert seen["one read"] >= 10, seen


def test_the_plan() -> None:
    """Every `last // 100` events and the last; by node where the peak's place may make a
    snapshot detailed (the m-th: m % 10 is 0 or 1) and at the last."""
    seqs, kinds = snapshot_plan(1005)
    assert seqs == (*range(10, 1001, 10), 1005)
    assert [s for s, k in zip(seqs, kinds, strict=True) if k == MOMENT_BY_NODE] == [
        *(s for s in range(10, 1001, 10) if (s // 10) % 10 in (0, 1)), 1005]
    assert snapshot_plan(1000)[0][-1] == 1000 and snapshot_plan(1000)[1][-1] == MOMENT_BY_NODE
    assert snapshot_plan(3) == ((1, 2, 3), (MOMENT_BY_NODE, MOMENT_TOTALS, MOMENT_BY_NODE))
    assert snapshot_plan(0) == ((), ())


def test_no_plan_but_for_massif_with_an_end(tmp_path: Path) -> None:
    path = tmp_path / "d.memdump"
    path.write_bytes(b"MEMDUMP 2.5\ne 1 1 malloc 0 0x10 16\nend 2 exit 0\n")
    assert replay_snapshots("massif", str(path)) == snapshot_plan(2)
    assert replay_snapshots("html", str(path)) is None
    assert replay_snapshots("pprof", str(path)) is None
    path.write_bytes(b"MEMDUMP 2.5\ne 1 1 malloc 0 0x10 16\n")
    assert replay_snapshots("massif", str(path)) is None


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(("options", "passes"), [
    (["--format", "massif"], 0), (["--format", "massif", "--base", "BASE"], 2),
    (["--format", "html"], 0)])
def test_the_command_reads_the_dump_once(options: list[str], passes: int, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`memdump-analyze DUMP --format massif` reads DUMP in the analysis alone, and writes the
    worked example's file (docs/exports.md), as the HTML page does (test_analyzer_onepass_page.py);
    with --base (every snapshot of both runs detailed) the exports' pass reads both dumps again."""
    path = str(FIXTURES / "exports.memdump")
    options = [path if o == "BASE" else o for o in options]
    calls: list[int] = []
    monkeypatch.setattr(heappass, "run", _counting(calls))
    out = tmp_path / "out"
    assert cli.main([path, *options, "-o", str(out)]) == 0
    assert len(calls) == passes
    if options == ["--format", "massif"]:
        want = (FIXTURES / "exports.massif").read_bytes()  # its desc: names the dump as given
        assert out.read_bytes().split(b"\n", 1)[1] == want.split(b"\n", 1)[1]
