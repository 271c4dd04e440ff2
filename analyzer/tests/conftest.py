"""Fixtures of the analyser's tests (the helpers are in analyzer_testlib.py)."""

from __future__ import annotations

import pytest
from analyzer_testlib import Dump


@pytest.fixture
def dump() -> Dump:
    return Dump()


@pytest.fixture(autouse=True)
def _own_symbol_cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory,
                      ) -> None:
    """Each test symbolises with a cache of its own (symcache.py), never the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    monkeypatch.delenv("MEMDUMP_NO_CACHE", raising=False)
