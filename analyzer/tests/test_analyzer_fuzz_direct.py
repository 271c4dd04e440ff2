"""The C replay and the views' pass fuzzed on compact dumps: `scripts/fuzz-core.sh -d` builds
analyzer/native/fuzz_replay.c with FUZZ_DIRECT, which wraps each input's bytes as a compact block's
payload in a compact file read through the decoder's direct output, so that packed heap events
reach the replay and every step of the views' pass (docs/report-format.md, "Replay"). A file of
its own: the test suite's workers run it beside test_analyzer_fuzz.py's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fuzz-core.sh"


def test_compact_blocks_through_the_pass_crash_nothing(tmp_path: Path) -> None:
    if shutil.which("clang") is None:
        pytest.fail("clang is one of the test packages (scripts/setup.sh): it is missing")
    run = subprocess.run([str(SCRIPT), "-d", "-r", "100000"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    assert "stat::number_of_executed_units: 100000" in run.stderr
    assert run.stderr.endswith("fuzz-core.sh: no crash, sanitizer report or leak\n")


def test_c_and_d_are_exclusive(tmp_path: Path) -> None:
    run = subprocess.run([str(SCRIPT), "-c", "-d"], cwd=tmp_path, capture_output=True, text=True)
    assert (run.returncode, run.stderr) == (
        2, "fuzz-core.sh: -c and -d are two targets: give one\n")
