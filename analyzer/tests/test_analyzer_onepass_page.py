"""The HTML page reads the dump once: when its last SEQ is known before it is read, the page's
accumulators are made before the analysis and its replay's run computes the views' pass too
(replaypass.py: each event applied to the replay's blocks and to the pass's, the lines Python reads
taken by both), and the page made from that one run is byte for byte the page of the two reads,
on generated dumps (text and compact) with every heap operation, execs, tags, marked runtime frees,
attached recordings, blocks returned again while live, padding and cut last lines, whole and
corrupted; the run's replay is the replay alone's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gendump import check_generated, generated_pair
from memdump_analyzer import analyze, cli, heappass, native
from memdump_analyzer.dumpfile import DumpError, DumpReader
from memdump_analyzer.exports import export, page_pass
from memdump_analyzer.heappass import native_request
from memdump_analyzer.replay import replay
from memdump_analyzer.rules import RUNTIME_FREE_FUNCTIONS


@pytest.fixture(autouse=True)
def _library_built() -> None:
    assert native.library() is not None, f"{native.library_path()} missing: run `make build`"


def _page(path: Path, one_read: bool) -> tuple[Any, int]:
    """The page of `path` (or its error) and how many times the exports' pass ran on its own."""
    calls: list[int] = []
    real = heappass.run

    def counting(*args: Any) -> Any:  # noqa: ANN401
        calls.append(1)
        return real(*args)

    mp = pytest.MonkeyPatch()
    mp.setattr(heappass, "run", counting)
    try:
        page = page_pass("html", str(path), False) if one_read else None
        analysis = analyze(str(path), symbolize=False,
                           also=page.accumulators if page is not None else None)
        return export("html", analysis, symbolize=False, page=page), len(calls)
    except DumpError as e:
        return str(e), len(calls)
    finally:
        mp.undo()


def _replays(path: Path) -> tuple[Any, Any]:
    """The replay alone, and the replay run beside the page's pass (its figures dropped)."""
    out = []
    for both in (False, True):
        with DumpReader(str(path), mark_functions=RUNTIME_FREE_FUNCTIONS) as reader:
            request = None
            page = page_pass("html", str(path), False) if both else None
            if page is not None:
                for acc in page.accumulators:
                    acc.start(reader)
                request = native_request(page.accumulators)
            try:
                out.append(replay(reader, request=request))
            except DumpError as e:
                out.append(str(e))
    return out[0], out[1]


@pytest.mark.parametrize("seed", range(40))
def test_one_read_is_the_two_reads_page(seed: int, tmp_path: Path) -> None:
    def both(path: Path) -> Any:  # noqa: ANN401
        one, passes = _page(path, True)
        two, _ = _page(path, False)
        assert one == two
        alone, beside = _replays(path)
        assert alone == beside
        if not isinstance(beside, str) and page_pass("html", str(path), False) is not None:
            assert (beside.pass_figures is not None) == (passes == 0)
        return one

    check_generated(seed, tmp_path / "gen.memdump", both)
    text, compact = generated_pair(seed, tmp_path)
    assert both(compact) == both(text).replace(str(text).encode(), str(compact).encode())


def test_the_generated_dumps_take_the_one_read(tmp_path: Path) -> None:
    """Most of the dumps above with an `end` last are read once; the Python replay reads twice."""
    once = 0
    for seed in range(40):
        text, _ = generated_pair(seed, tmp_path)
        if page_pass("html", str(text), False) is None:
            continue
        once += _page(text, True)[1] == 0
    assert once >= 10


FIXTURES = Path(__file__).parent / "fixtures"


def test_the_command_reads_the_dump_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`memdump-analyze DUMP --format html` reads DUMP in the analysis alone, and writes the
    same page as the two reads (MEMDUMP_NATIVE=0: the Python replay, then the Python pass)."""
    calls: list[int] = []
    real = heappass.run

    def counting(*args: Any) -> Any:  # noqa: ANN401
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(heappass, "run", counting)
    path = str(FIXTURES / "exports.memdump")
    out = tmp_path / "one.html"
    assert cli.main([path, "--format", "html", "--no-symbolize", "-o", str(out)]) == 0
    assert calls == []
    monkeypatch.setenv("MEMDUMP_NATIVE", "0")
    assert cli.main([path, "--format", "html", "--no-symbolize", "-o",
                     str(tmp_path / "two.html")]) == 0
    assert calls == [1]
    assert out.read_bytes() == (tmp_path / "two.html").read_bytes()
