"""Fixtures of the analyser's tests (the helpers are in analyzer_testlib.py)."""

from __future__ import annotations

import pytest
from analyzer_testlib import Dump


@pytest.fixture
def dump() -> Dump:
    return Dump()
