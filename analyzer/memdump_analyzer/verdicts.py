"""The exit status of a report or a difference (cli.py): what `--fail-on-leak` and
`--fail-on-error` count in an analysis, and which verdict wins when both fail.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .wording import plural

if TYPE_CHECKING:
    from .model import Analysis

__all__ = ["EXIT_BAD_INPUT", "EXIT_CUT", "EXIT_HEAP_ERROR", "EXIT_LEAK", "EXIT_OK",
           "failing_blocks", "heap_errors", "verdict"]

EXIT_OK = 0
EXIT_LEAK = 1
EXIT_BAD_INPUT = 2
EXIT_CUT = 3
EXIT_HEAP_ERROR = 4


def failing_blocks(analysis: Analysis, kinds: frozenset[str]) -> int:
    """The leaked blocks that --fail-on-leak counts: those of `kinds`, every leaked block whose
    kind is unknown (no scan, or allocated after it), and the blocks of `kinds` allocated before
    a late attach's recording began (the `ob` records: found by the walk at its end)."""
    older = sum(1 for b in analysis.older if b.kind in kinds)
    if analysis.leak_kinds is None:
        return analysis.leaked_blocks + older
    return older + sum(n for kind, (_, n) in analysis.leak_kinds.items()
                       if kind in kinds or kind == "unknown")


def heap_errors(analysis: Analysis) -> int:
    """The heap errors --fail-on-error counts: invalid, double and mismatched frees, access errors
    guard pages caught, heap corruption red zones found."""
    return analysis.error_count + len(analysis.access_errors) + len(analysis.heap_corruption)


def verdict(fail_on_leak: bool, failing: bool, *analyses: Analysis,
            fail_on_error: bool = False, say: Callable[[str], None]) -> int:
    """The exit status of a report or diff: `EXIT_HEAP_ERROR` when --fail-on-error found heap
    errors (before a leak: the error is the graver finding); `EXIT_LEAK` when --fail-on-leak
    found what it counts; `EXIT_CUT` when they found nothing but a dump was cut (no end record:
    the program ran on, unseen), said in one line; `EXIT_OK` otherwise."""
    if fail_on_error and any(heap_errors(a) for a in analyses):
        return EXIT_HEAP_ERROR
    if fail_on_leak and failing:
        return EXIT_LEAK
    if not (fail_on_leak or fail_on_error):
        return EXIT_OK
    option = " and ".join(name for name, on in (("--fail-on-leak", fail_on_leak),
                                                 ("--fail-on-error", fail_on_error)) if on)
    for analysis in analyses:
        if not analysis.complete:
            what = ("before its first event" if analysis.events == 0
                    else f"after {plural(analysis.events, 'event')}")
            say(f"{analysis.path}: the recording was cut {what} (no end record): "
                 f"{option} {'have' if fail_on_leak and fail_on_error else 'has'} no verdict "
                 f"(exit status {EXIT_CUT})")
            return EXIT_CUT
    return EXIT_OK
