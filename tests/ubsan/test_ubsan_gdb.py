"""scripts/ubsan-gdb.sh stops at the line the behaviour is on, in batch mode."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import ubsanlib

SCRIPT = ubsanlib.ROOT / "scripts" / "ubsan-gdb.sh"


@pytest.mark.parametrize(
    ("demo", "variant", "marker"),
    [
        ("signed_mul_overflow", "gcc-ubsan", "signed-mul"),
        ("null_deref", "clang-ubsan", "null-load"),
        ("array_bounds", "gcc-ubsan", "index"),
        ("shift_exponent", "clang-ubsan-abort", "shift-exponent"),
    ],
)
def test_stops_at_the_marker(build_dir: Path, demo: str, variant: str, marker: str) -> None:
    program = ubsanlib.binary(build_dir, demo, variant)
    out = subprocess.run([str(SCRIPT), str(program)], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    line = ubsanlib.markers(demo)[marker]
    source = ubsanlib.DEMO_DIR / f"{demo}.cpp"
    stops = out.stdout.split("==== ubsan-gdb: undefined behaviour here ====")[1:]
    assert stops, out.stdout
    frame, _, rest = stops[0].strip().partition("\n")
    assert frame.startswith("#1  ") and frame.endswith(f" at {source}:{line}")
    assert rest.startswith(f"{line}\t")
    assert "---- backtrace ----" in stops[0] and " in main () at " in stops[0]


def test_usage_without_program() -> None:
    out = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 2
    assert out.stderr.startswith("usage: scripts/ubsan-gdb.sh")
