"""native: libmemdump_core.so's replay gives the Replay replay.py's `_Replayer` gives, and leaves
the reader in the same state, on every dump of the fixtures and on generated dumps (threads, every
heap operation and realloc's edge cases, the C++ families and their mismatches, custom blocks,
double and invalid frees, attached recordings, exec, marked runtime frees, clock samples, tags,
NUL padding, partial records, a cut final line) and on corrupted ones, where both give the same
`PATH:LINE: message` (the library leaves such a dump to Python)."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from analyzer_testlib import FIXTURES, REPO
from gendump import Dump, check_generated
from memdump_analyzer import native
from memdump_analyzer.dumpfile import DumpError, DumpReader
from memdump_analyzer.replay import replay
from memdump_analyzer.rules import RUNTIME_FREE_FUNCTIONS


@pytest.fixture(autouse=True)
def _library_built() -> None:
    """A build without the library must fail here, not fall back to Python silently."""
    assert native.library() is not None, (
        f"{native.library_path()} missing or not loadable: run `make build` "
        "(and set MEMDUMP_BUILD_DIR for another build directory)")


def _outcome(path: Path, monkeypatch: pytest.MonkeyPatch, engine: str) -> Any:
    """What replaying `path` gives: the Replay (its live blocks in order), the reader's state;
    or the error's text."""
    monkeypatch.setenv("MEMDUMP_NATIVE", "1" if engine == "c" else "0")
    with DumpReader(str(path), mark_functions=RUNTIME_FREE_FUNCTIONS) as reader:
        try:
            r = replay(reader)
        except DumpError as e:
            return str(e)
        state = {k: list(v.items()) if isinstance(v, Mapping) else v
                 for k, v in vars(reader).items() if k != "_file"}
        state["partial"] = (reader.partial_records, reader.partial_line())
        return r, list(r.live.items()), state


def both(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The outcome, after checking that both replays give it."""
    py = _outcome(path, monkeypatch, "python")
    c = _outcome(path, monkeypatch, "c")
    assert c == py
    return py


FIXTURE_DUMPS = sorted(FIXTURES.rglob("*.memdump"))


@pytest.mark.parametrize("path", FIXTURE_DUMPS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixtures(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = both(path, monkeypatch)
    assert not isinstance(outcome, str)
    assert native.last_fallback is None  # the library replayed it all


# -- generated dumps ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(150))
def test_generated(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check_generated(seed, tmp_path / "gen.memdump", lambda path: both(path, monkeypatch))


def test_generated_dumps_have_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated dumps reach what the test is for: errors of every kind, marked runtime
    frees, untracked frees, custom blocks, execs, C++ families, reused live blocks."""
    seen: dict[str, int] = {}
    for seed in range(150):
        rng = random.Random(seed)
        path = tmp_path / "gen.memdump"
        path.write_bytes(Dump(rng).build(rng.choice([5, 60, 400])))
        r = _outcome(path, monkeypatch, "c")[0]
        for e in r.errors:
            seen[e.kind] = seen.get(e.kind, 0) + 1
        for name in ("runtime_internal_frees", "untracked_frees", "custom_allocations",
                     "custom_frees", "reused_live", "delete_frees", "superblocks"):
            seen[name] = seen.get(name, 0) + getattr(r, name)
        seen["execs"] = seen.get("execs", 0) + len(r.execs)
    assert {k for k, n in seen.items() if n} == {
        "invalid-free", "double-free", "invalid-realloc", "mismatched-free",
        "runtime_internal_frees", "untracked_frees", "custom_allocations", "custom_frees",
        "reused_live", "delete_frees", "superblocks", "execs"}


def test_unusual_spelling_is_left_to_python(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A pointer the library does not read as written (pointers are compared as written): the
    dump is replayed by Python from the start, the reader reset first."""
    path = tmp_path / "odd.memdump"
    text = (b"MEMDUMP 2.4\ns 1 /src/app\nf 1 0x10 1 0x10 0 0 0\nn 1 0 1\nt 5\n"
            b"+ 1 0x10 8\n+ 1 0x0020 16\n- 1 0x10\n")
    path.write_bytes(text)
    r, live, _ = both(path, monkeypatch)
    assert live == [(b"0x0020", (16, 1))]
    assert str(native.last_fallback) == f"offset {text.index(b'+ 1 0x0020')}"


def test_long_lines_and_long_runs_of_definitions(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A record longer than the library's 4 MiB buffer, and runs of more lines for the reader
    than the library hands over at once (512), among events."""
    head = b"MEMDUMP 2.4\ns 1 /src/app\nf 1 0x10 1 0x10 0 0 0\nn 1 0 1\nt 5\n"
    strings = b"".join(b"s %d string%d\n" % (i, i) for i in range(2, 1500))
    text = (head + b"+ 1 0x10 8\n" + strings + b"s 1500 " + b"x" * (5 << 20) + b"\n"
            + b"+ 1 0x20 16\n- 1 0x10\n" + b"# end\n" * 600 + b"e 4 7 malloc 1 0x30 4\n")
    path = tmp_path / "long.memdump"
    path.write_bytes(text)
    r, live, state = both(path, monkeypatch)
    assert native.last_fallback is None
    assert live == [(b"0x20", (16, 1)), (b"0x30", (4, 1))]
    assert (r.events, len(dict(state)["strings"][1499][1]), dict(state)["_other"]) == (
        4, 5 << 20, 4 + 1499 + 600)


def test_padding_across_the_buffers_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of NUL bytes that the library reads in two pieces (its buffer holds 4 MiB), and a
    partial record before it: one run, the record after it read."""
    head = b"MEMDUMP 2.4\ns 1 /src/app\nf 1 0x10 1 0x10 0 0 0\nn 1 0 1\nt 5\n+ 1 0x10 8\n"
    filler = b"# " + b"x" * 97 + b"\n"
    body = head + filler * ((4 << 20) // len(filler))
    body += b"+ 1 0x2" + b"\0" * (4 << 20) + b"+ 1 0x20 16\n- 1 0x10\n"
    path = tmp_path / "padded.memdump"
    path.write_bytes(body)
    r, live, state = both(path, monkeypatch)
    assert native.last_fallback is None
    assert live == [(b"0x20", (16, 1))]
    assert dict(state)["partial"] == (1, 7 + (4 << 20) // len(filler))


def test_python_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMDUMP_NATIVE", "0")
    assert not native.enabled()
    monkeypatch.setenv("MEMDUMP_NATIVE", "1")
    assert native.enabled()


def test_pip_install_builds_the_library(tmp_path: Path) -> None:
    """`pip install .` (offline) puts the library next to the package, where native.py finds it
    first, and the installed analyser replays with it."""
    # from a copy: setuptools writes build/ and *.egg-info next to pyproject.toml
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "setup.py"):
        shutil.copy(REPO / name, src / name)
    for package in ("memdump_analyzer", "native"):
        shutil.copytree(REPO / "analyzer" / package, src / "analyzer" / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", str(src), "--no-build-isolation",
                    "--no-index", "--no-deps", "--target", str(site), "-q"],
                   check=True, capture_output=True, timeout=300)
    library = site / "memdump_analyzer" / "libmemdump_core.so"
    assert library.is_file()
    probe = ("import memdump_analyzer.native as n, memdump_analyzer.replay as r, sys;"
             "from memdump_analyzer.dumpfile import DumpReader;"
             "reader = DumpReader(sys.argv[1]);"
             "print(n.library_path(), r.replay(reader).events, n.last_fallback)")
    env = {**os.environ, "PYTHONPATH": str(site), "MEMDUMP_BUILD_DIR": str(tmp_path / "none")}
    out = subprocess.run([sys.executable, "-P", "-c", probe, str(FIXTURES / "example.memdump")],
                         check=True, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.stdout.split() == [str(library), "5", "None"]


def test_the_line_batch_is_the_librarys() -> None:
    """native.py reads the library's array of lines in place, LINE_BATCH pairs long (core.h)."""
    header = (REPO / "analyzer" / "native" / "core.h").read_text()
    batch = re.search(r"^#define LINE_BATCH (\d+)$", header, re.M)
    assert batch is not None and int(batch.group(1)) == native._LINE_BATCH
