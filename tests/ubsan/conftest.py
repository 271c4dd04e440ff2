"""Fixtures of the ubsan_demos tests: where the demo builds are, and their expectations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import ubsanlib  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "compiler_version: asserts what one GCC version's optimiser makes of undefined behaviour "
        "(skipped under another version)",
    )


@pytest.fixture(scope="session")
def build_dir() -> Path:
    """The CMake build tree holding ubsan_demos/ (make test passes MEMDUMP_BUILD_DIR)."""
    build = Path(os.environ.get("MEMDUMP_BUILD_DIR", ROOT / "build"))
    if not (build / "ubsan_demos").is_dir():
        pytest.fail(f"{build}/ubsan_demos is missing: build the project first (make build)",
                    pytrace=False)
    return build


@pytest.fixture(scope="session")
def expected() -> dict[str, object]:
    return ubsanlib.load_expected()


@pytest.fixture(scope="session")
def gcc_major(expected: dict[str, object]) -> str:
    """This machine's GCC version; skips when it is not the one expected.toml was observed with."""
    version = subprocess.run(["gcc", "-dumpversion"], capture_output=True, text=True,
                             check=True).stdout.strip()
    if version != expected["gcc_version"]:
        pytest.skip(f"plain-build behaviour recorded with GCC {expected['gcc_version']}, "
                    f"this is GCC {version}")
    return version
