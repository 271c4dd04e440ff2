"""English wording shared by the text outputs: a count with its noun in the right number."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 block`, `2 blocks`, `1,024 bytes`; `many` for a noun whose plural is not WORD + s
    (`plural(n, "entry", "entries")`)."""
    return f"{n:,} {word if abs(n) == 1 else many or word + 's'}"
