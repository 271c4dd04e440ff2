"""dumpnames: the default dump name, the series after `memdump -o`, and never overwriting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dbgkit.core.dumpnames import (
    COMPACT_PENDING,
    DumpPathError,
    candidates,
    create_dump,
    open_dump,
)


def test_candidates() -> None:
    base, ext, names = candidates("/usr/bin/app", 42, None)
    assert (base, ext) == ("app.42", ".memdump")
    assert [next(names) for _ in range(3)] == ["app.42.memdump", "app.42-2.memdump",
                                                "app.42-3.memdump"]
    assert next(candidates("", 7, None)[2]) == "program.7.memdump"
    # the next runs of `memdump -o out/run.memdump`, and of a name without the extension
    assert next(candidates("/usr/bin/app", 42, "out/run.memdump")[2]) == "out/run-2.memdump"
    assert next(candidates("/usr/bin/app", 42, "out/run")[2]) == "out/run-2"


def test_create_dump_takes_the_first_free_name(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app.9.memdump").write_text("earlier")
    fd, path = create_dump("/bin/app", 9, None)
    os.close(fd)
    assert path == "app.9-2.memdump"
    assert (tmp_path / "app.9.memdump").read_text() == "earlier"
    fd, path = create_dump("/bin/app", 9, str(tmp_path / "run.memdump"))
    os.close(fd)
    assert path == str(tmp_path / "run-2.memdump")


def test_open_dump_truncates_and_refuses(tmp_path: Path) -> None:
    target = tmp_path / "named.memdump"
    target.write_text("old")
    fd = open_dump(str(target))
    os.close(fd)
    assert target.read_text() == ""
    with pytest.raises(DumpPathError, match=r"cannot write the dump to .*/nodir/x: No such file"):
        open_dump(str(tmp_path / "nodir" / "x"))


def test_create_dump_in_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(DumpPathError, match=r"cannot write the dump to"):
        create_dump("/bin/app", 1, str(tmp_path / "nodir" / "run.memdump"))


def test_open_dump_takes_off_an_earlier_recordings_compaction_mark(tmp_path: Path) -> None:
    """A path named again (`memdump -o`) is recorded anew into the same file: the mark that left
    the earlier, finished recording to its first report to compact must not stay on this one,
    which an analyser would otherwise compact while it is written (the analyser's name for the
    mark is the same)."""
    from memdump_analyzer.compactfile import PENDING

    assert PENDING == COMPACT_PENDING
    dump = tmp_path / "run.memdump"
    dump.write_bytes(b"MEMDUMP 2.4\nend 1 exit 0\n")
    os.setxattr(dump, COMPACT_PENDING, b"1")
    os.close(open_dump(str(dump)))
    assert os.listxattr(dump) == []
    os.close(open_dump(str(dump)))  # no mark: nothing to take off
