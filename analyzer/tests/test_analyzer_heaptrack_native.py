"""heaptracknative: `--format heaptrack`'s events written by libmemdump_core.so (htexport.c) make
the file heaptrackfile.py's loop makes, byte for byte: on the fixtures and on generated dumps
(every operation, realloc's edge cases, custom blocks, double and invalid frees, exec, clock
samples, attached recordings), text and compact, whole, cut at any byte and corrupted (then the
same `PATH:LINE: message`)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES
from gendump import Dump, corrupt
from memdump_analyzer import compactfile, heaptrackfile, heaptracknative, native
from memdump_analyzer.dumpfile import DumpError


@pytest.fixture(autouse=True)
def _library_built() -> None:
    """A build without the library must fail here, not fall back to Python silently."""
    assert heaptracknative.library() is not None, (
        f"{native.library_path()} missing, old or not loadable: run `make build`")


def _file(dump: Path, out: Path, engine: str, monkeypatch: pytest.MonkeyPatch) -> bytes | str:
    """The heaptrack file of DUMP made by `engine` ("1" the library, "0" Python), or the error."""
    monkeypatch.setenv("MEMDUMP_NATIVE", engine)
    try:
        heaptrackfile.write(str(dump), str(out), symbolize=False)
    except DumpError as e:
        return str(e)
    return out.read_bytes()


def both(dump: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[bytes | str, bool]:
    """The file (or error), after checking that both engines make it; whether the library
    left the dump to Python."""
    py = _file(dump, tmp / "py.heaptrack", "0", monkeypatch)
    c = _file(dump, tmp / "c.heaptrack", "1", monkeypatch)
    assert c == py
    return c, native.last_fallback is not None


FIXTURE_DUMPS = sorted(FIXTURES.rglob("*.memdump"))


@pytest.mark.parametrize("path", FIXTURE_DUMPS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixtures(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, fell_back = both(path, tmp_path, monkeypatch)
    if not isinstance(out, str):
        assert not fell_back  # the library read it all


def test_the_worked_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/exports.md's example, made by the library (with the exception pool libstdc++
    allocated, freed at exit as heaptrack's hooks free it)."""
    monkeypatch.setattr(heaptrackfile, "machine", lambda: (0x1000, 0x100000))
    out, fell_back = both(FIXTURES / "heaptrack.memdump", tmp_path, monkeypatch)
    assert out == (FIXTURES / "heaptrack.heaptrack").read_bytes()
    assert not fell_back


@pytest.mark.parametrize("seed", range(80))
def test_generated(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole (then by the library alone, and its compact form the same file), cut at a random
    byte, corrupted."""
    rng = random.Random(seed)
    text = Dump(rng).build(rng.choice([5, 60, 400]))
    dump = tmp_path / "gen.memdump"
    dump.write_bytes(text)
    whole, fell_back = both(dump, tmp_path, monkeypatch)
    assert isinstance(whole, bytes) and not fell_back
    packed = tmp_path / "gen.compact"
    compactfile.compact_file(str(dump), str(packed))
    assert both(packed, tmp_path, monkeypatch) == (whole, False)
    dump.write_bytes(text[:rng.randrange(len(text.split(b"\n", 1)[0]) + 1, len(text))])
    both(dump, tmp_path, monkeypatch)
    dump.write_bytes(corrupt(rng, text))
    both(dump, tmp_path, monkeypatch)


def test_generated_dumps_have_everything(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated dumps reach what the test is for: an exec (the file started again), clock
    samples with and without RSS, blocks released and live at the end, infos shared by
    several blocks (the libstdc++ pool freed at exit: the worked example's, above)."""
    seen = dict.fromkeys(("exec", "c", "R", "-", "shared"), 0)
    for seed in range(80):
        rng = random.Random(seed)
        text = Dump(rng).build(rng.choice([5, 60, 400]))
        dump = tmp_path / "gen.memdump"
        dump.write_bytes(text)
        out = _file(dump, tmp_path / "c.heaptrack", "1", monkeypatch)
        assert isinstance(out, bytes)
        lines = out.split(b"\n")
        seen["exec"] += b" exec " in text
        seen["c"] += any(line.startswith(b"c ") for line in lines)
        seen["R"] += any(line.startswith(b"R ") for line in lines)
        seen["-"] += any(line.startswith(b"- ") for line in lines)
        plus = [line for line in lines if line.startswith(b"+ ")]
        seen["shared"] += len(set(plus)) < len(plus)
    assert all(seen.values()), seen


def test_python_when_the_library_is_off(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """MEMDUMP_NATIVE=0 keeps heaptrackfile.py's loop: the library is not asked."""
    called = []
    monkeypatch.setattr(heaptracknative, "_Export", lambda *a: called.append(a))
    _file(FIXTURES / "heaptrack.memdump", tmp_path / "out", "0", monkeypatch)
    assert called == []


@pytest.mark.parametrize(("line", "size", "made"), [
    (b"+c 5 0x555555570200 4294967296 4294967297", 0x10000000100000000, True),  # over 64 bits
    (b"+c 5 0x555555570200 65536 65536", 0x100000000, True),
    (b"e 14 4242 posix_memalign 4 0x555555570300 16 100 12", 100, False),  # failed: no block
    (b"e 14 4242 reallocarray 4 0x555555570320 0x0 3 5", 15, True),
])
def test_sizes_and_operations_the_quick_paths_skip(line: bytes, size: int, made: bool,
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A calloc whose size does not fit 64 bits (left to Python, whose integers do not
    overflow), and operations without a short record: the same file both ways, the block's
    `a` line there or not."""
    lines = (FIXTURES / "heaptrack.memdump").read_bytes().split(b"\n")
    at = lines.index(b"+ 4 0x555555570170 40")  # event 14, before `end 15`
    lines[at] = line
    dump = tmp_path / "edge.memdump"
    dump.write_bytes(b"\n".join(lines))
    out, fell_back = both(dump, tmp_path, monkeypatch)
    assert isinstance(out, bytes)
    assert (b"\na %x " % size in out) == made
    assert fell_back == (size >= 1 << 64)
