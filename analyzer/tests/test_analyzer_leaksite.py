"""The leak site of `memdump break --leak N --from DUMP` (leaksite.py): LEAK N is the group the
text report numbers N with its default kinds (leaktext.numbered_leaks), its first block stands
for it, and the call that made that block is counted among the calls from its stack."""

from __future__ import annotations

from pathlib import Path

import pytest
from analyzer_testlib import APP, LIBC, Dump, F, main_at, run_cli
from memdump_analyzer import analyze
from memdump_analyzer.leaksite import LeakSite, LeakSiteError, leak_site
from memdump_analyzer.leaktext import numbered_leaks

#: main_at's frames as (module, offset): the hand-written dump's modules are mapped at their pcs
MAIN = ((APP, 0x55020), (LIBC, 0xF018A))


def _dump(tmp_path: Path) -> str:
    d = Dump(header="MEMDUMP 1.1")
    d.malloc("0x10", 16, main_at(5))
    d.free("0x10", main_at(7))
    d.malloc("0x20", 24, main_at(5))  # the second call from line 5
    d.malloc("0x10", 16, main_at(5))  # the third, at the address the first one freed
    d.malloc("0x40", 100, main_at(6))
    d.malloc("0x50", 8, [F("helper", "/src/app.c", 20), *main_at(9)])
    d.raw(f"scan {d.seq} ok 4096 132 7")
    for record in ("r 0x10 D", "r 0x20 P", "r 0x40 R 0x10", "r 0x50 I 0x10"):
        d.raw(record)
    d.end()
    return d.write(tmp_path)


def test_leak_n_is_the_report_s_leak_n(tmp_path: Path) -> None:
    path = _dump(tmp_path)
    report = run_cli(path).stdout
    # the report's default kinds list the possibly lost group first, then the definitely lost one
    assert "LEAK 1 of 2: 24 bytes in 1 block, possibly lost\n    at main (app.c:5)\n" in report
    assert ("LEAK 2 of 2: 24 (16 direct, 8 indirect) bytes in 1 block, definitely lost\n"
            "    at main (app.c:5)\n") in report
    assert [(g.bytes, g.leak_kind) for g in numbered_leaks(analyze(path))] == [
        (24, "possible"), (16, "definite")]
    assert leak_site(path, 1) == LeakSite(MAIN, 2, 24, "LEAK 1: 24 bytes in 1 blocks")
    # the block at 0x10 is the third call's: the first call's block at 0x10 was freed
    assert leak_site(path, 2) == LeakSite(MAIN, 3, 16, "LEAK 2: 16 bytes in 1 blocks")


@pytest.mark.parametrize("number", [0, 3])
def test_a_group_that_is_not_there(tmp_path: Path, number: int) -> None:
    path = _dump(tmp_path)
    with pytest.raises(LeakSiteError) as err:
        leak_site(path, number)
    assert str(err.value) == (f"{path} has 2 leak groups (memdump-analyze {path} lists them), "
                              f"not {number}")


def test_a_dump_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(LeakSiteError) as err:
        leak_site(str(tmp_path / "none.memdump"), 1)
    assert str(err.value) == f"{tmp_path / 'none.memdump'}: no such file"
    bad = tmp_path / "bad.memdump"
    bad.write_text("not a dump\n")
    with pytest.raises(LeakSiteError) as err:
        leak_site(str(bad), 1)
    assert str(err.value) == f"{bad}:1: not a memdump dump (first line is 'not a dump')"
