"""The C replay's reader fuzzed: scripts/fuzz-core.sh runs libFuzzer on
analyzer/native/fuzz_replay.c under AddressSanitizer and UndefinedBehaviorSanitizer for a million
inputs, seeded with the fixture dumps; any crash, sanitizer report or leak fails it with the input
that did it. (A crash planted in the mismatched-free path is found within the million.) The longer
documented run: docs/report-format.md, "Replay"."""

from __future__ import annotations

import subprocess
from pathlib import Path

from analyzer_testlib import fuzz_clean

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fuzz-core.sh"


def test_a_million_inputs_crash_nothing(tmp_path: Path) -> None:
    fuzz_clean(tmp_path, runs=1000000)


def test_the_compact_decoder_crashes_on_nothing(tmp_path: Path) -> None:
    """The compact encoding's decoder (fuzz_compact.c: whole compact files and blocks' payloads,
    seeded with the fixtures compacted), 100,000 inputs (about 30 s; a million took 7 minutes,
    docs/dump-format.md)."""
    fuzz_clean(tmp_path, "-c", runs=100000)


def test_bad_arguments_are_one_line(tmp_path: Path) -> None:
    run = subprocess.run([str(SCRIPT), "-r", "many"], cwd=tmp_path, capture_output=True, text=True)
    assert (run.returncode, run.stderr) == (
        2, "fuzz-core.sh: -r and -t take a number, not 'many' / '0'\n")
