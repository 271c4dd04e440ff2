"""The worked examples of the docs/ pages, for tests that compare them with the code's output."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def doc_block(page: str, heading: str, lang: str = "") -> str:
    """The first fenced block (```LANG) after HEADING in docs/PAGE; AssertionError if none."""
    text = (DOCS / page).read_text(encoding="utf-8")
    assert heading in text, f"docs/{page} has no {heading!r}"
    m = re.search(rf"```{lang}\n(.*?)```", text.split(heading, 1)[1], re.S)
    assert m is not None, f"docs/{page}: no ```{lang} block after {heading!r}"
    return m.group(1)
