"""Every ubsan_demos build against ubsan_demos/expected.toml: reports, exits, stacks, plain runs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import ubsanlib

EXPECTED = ubsanlib.load_expected()
DEMOS = ubsanlib.demos(EXPECTED)
CASES = [(demo, compiler) for demo in DEMOS for compiler in ubsanlib.COMPILERS]
REPORTED = [(d, c) for d, c in CASES if EXPECTED[d][c]["reports"]]  # type: ignore[index]
LOCATED = [
    (d, c) for d, c in REPORTED
    if not EXPECTED[d][c]["reports"][0].startswith("<unknown>")  # type: ignore[index]
]


def _source(demo: str) -> Path:
    return ubsanlib.DEMO_DIR / f"{demo}.cpp"


def _runtime_errors(stderr: str) -> list[str]:
    """The `runtime error:` lines of stderr, addresses normalised."""
    return [re.sub(r"0x[0-9a-f]+", "0xADDR", line) for line in stderr.splitlines()
            if ": runtime error: " in line]


@pytest.mark.parametrize(("demo", "compiler"), CASES)
def test_reports(build_dir: Path, demo: str, compiler: str) -> None:
    """The exact runtime errors, at the marker's file:line:column, and the exit status."""
    entry = EXPECTED[demo][compiler]  # type: ignore[index]
    got = ubsanlib.run(ubsanlib.binary(build_dir, demo, f"{compiler}-ubsan"))
    wanted = [ubsanlib.resolve_report(demo, r, _source(demo)) for r in entry["reports"]]
    assert _runtime_errors(got.stderr) == wanted
    assert got.status == entry["status"]


@pytest.mark.parametrize(("demo", "compiler"), REPORTED)
def test_no_recover_stops_at_first_report(build_dir: Path, demo: str, compiler: str) -> None:
    """-fno-sanitize-recover=all: the first report, then a non-zero exit."""
    first = EXPECTED[demo][compiler]["reports"][0]  # type: ignore[index]
    got = ubsanlib.run(ubsanlib.binary(build_dir, demo, f"{compiler}-ubsan-abort"))
    assert _runtime_errors(got.stderr) == [ubsanlib.resolve_report(demo, first, _source(demo))]
    assert got.status == "exit 1"


@pytest.mark.parametrize(("demo", "compiler"), LOCATED)
def test_stacktrace_goes_through_the_demo(build_dir: Path, demo: str, compiler: str) -> None:
    """print_stacktrace=1: frame #0 in the demo's source, and a frame in main."""
    got = ubsanlib.run(ubsanlib.binary(build_dir, demo, f"{compiler}-ubsan"), "print_stacktrace=1")
    frames = [ln.strip() for ln in got.stderr.splitlines() if re.match(r"\s*#\d+ 0x", ln)]
    source = re.escape(str(_source(demo)))
    assert frames and re.search(rf"^#0 0x\w+ in \S.* {source}:\d+", frames[0]), got.stderr
    assert any(re.search(rf" in main {source}:\d+", frame) for frame in frames), got.stderr


@pytest.mark.compiler_version
@pytest.mark.parametrize("level", ubsanlib.PLAIN)
@pytest.mark.parametrize("demo", DEMOS)
def test_plain_build(build_dir: Path, gcc_major: str, demo: str, level: str) -> None:
    """What the plain build does on this GCC (the optimiser's effect shows in the -O2 column)."""
    entry = EXPECTED[demo][level]  # type: ignore[index]
    got = ubsanlib.run(ubsanlib.binary(build_dir, demo, level))
    assert (got.status, got.stdout) == (entry["status"], entry["stdout"])


def _disassembly(program: Path, function: str) -> list[str]:
    out = subprocess.run(["gdb", "-nx", "-batch", "-ex", f"disassemble {function}", str(program)],
                         capture_output=True, text=True, timeout=60, check=True)
    return [ln for ln in out.stdout.splitlines() if re.match(r"\s+0x", ln)]


@pytest.mark.compiler_version
def test_tun_null_check_is_deleted_at_O2(build_dir: Path, gcc_major: str) -> None:
    """The tun driver pattern: -O0 compares tun with 0, -O2 has no compare left."""
    def compares(level: str) -> list[str]:
        code = _disassembly(ubsanlib.binary(build_dir, "tun_null_check", level), "tun_chr_poll")
        return [ln for ln in code if re.search(r"\s(test|cmp)[bwlq]?\s", ln)]

    assert len(compares("O0")) == 1
    assert compares("O2") == []


def test_readme_table_is_current() -> None:
    """ubsan_demos/README.md's table is what scripts/ubsan-table.py makes of expected.toml."""
    readme = ubsanlib.README.read_text(encoding="utf-8")
    assert readme == ubsanlib.readme_with_table(readme, ubsanlib.render_table(EXPECTED))
