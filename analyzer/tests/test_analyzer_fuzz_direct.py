"""The C replay and the views' pass fuzzed on compact dumps: `scripts/fuzz-core.sh -d` builds
analyzer/native/fuzz_replay.c with FUZZ_DIRECT, which wraps each input's bytes as a compact block's
payload in a compact file read through the decoder's direct output, so that packed heap events
reach the replay and every step of the views' pass (docs/report-format.md, "Replay"). A file of
its own: the test suite's workers run it beside test_analyzer_fuzz.py's."""

from __future__ import annotations

import subprocess
from pathlib import Path

from analyzer_testlib import fuzz_clean

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fuzz-core.sh"


def test_compact_blocks_through_the_pass_crash_nothing(tmp_path: Path) -> None:
    fuzz_clean(tmp_path, "-d", runs=100000)


def test_c_and_d_are_exclusive(tmp_path: Path) -> None:
    run = subprocess.run([str(SCRIPT), "-c", "-d"], cwd=tmp_path, capture_output=True, text=True)
    assert (run.returncode, run.stderr) == (
        2, "fuzz-core.sh: -c and -d are two targets: give one\n")
