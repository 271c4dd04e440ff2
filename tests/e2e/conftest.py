"""Fixtures of the memdump end-to-end tests; the helpers are in memdump_e2e.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from memdump_e2e import GDB_EXTENSION


@pytest.fixture(scope="session", autouse=True)
def _tools() -> None:
    if shutil.which("gdb") is None:
        pytest.fail("gdb is not installed (scripts/setup.sh installs it)", pytrace=False)
    if not GDB_EXTENSION.is_file():
        pytest.fail(f"{GDB_EXTENSION} is missing", pytrace=False)


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    """Where this test's recording goes."""
    return tmp_path / "test.memdump"
