"""Fixtures of the memdump end-to-end tests; the helpers are in memdump_e2e.py."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import memdump_e2e
import pytest
from memdump_e2e import GDB_EXTENSION

#: every memdump end-to-end test runs with both recorders (docs/recorder.md): same figures
MODES = ("in-process", "breakpoints")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "memdump" in metafunc.module.__name__ and "memdump_mode" in metafunc.fixturenames:
        one = metafunc.definition.get_closest_marker("one_recorder") is not None
        metafunc.parametrize("memdump_mode", MODES[:1] if one else MODES, indirect=True)


@pytest.fixture(autouse=True)
def memdump_mode(request: pytest.FixtureRequest) -> str:
    """The recorder this test's GDB runs use (memdump_e2e.gdb_argv and memdump_sh read it)."""
    mode = getattr(request, "param", MODES[0])
    memdump_e2e.MODE = mode
    return mode


@pytest.fixture(scope="session", autouse=True)
def _sigint_as_from_a_terminal() -> None:
    """A test run started in the background ignores SIGINT, and so would the programs it starts
    (memdump.sh -p cannot trap a signal ignored when it started): handled here, it is the
    default again in every program the tests execute."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def _text_dumps() -> None:
    """memdump.sh keeps its dumps as text (MEMDUMP_COMPACT=0, as --no-compact): the tests read
    the text records; test_memdump_compact.py runs it without, and GDB with compaction."""
    os.environ["MEMDUMP_COMPACT"] = "0"


@pytest.fixture(autouse=True)
def _own_symbol_cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory,
                      ) -> None:
    """Each test's runs symbolise with a cache of their own (memdump_analyzer/symcache.py)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    monkeypatch.delenv("MEMDUMP_NO_CACHE", raising=False)


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
