"""The dump's clock samples (`c MILLIS RSS`, format 2.2) in both recorders: the resident set
follows the program's three 16 MiB steps, the milliseconds its 60 ms pauses."""

from __future__ import annotations

from pathlib import Path

import memdump_e2e
from memdump_e2e import analyze_raw, record

STEP = 16 << 20


def _samples(dump: Path) -> list[tuple[int, int, int]]:
    """(line number, MILLIS, RSS) of each `c` record, and the line of the `scan` record last."""
    out = []
    for n, line in enumerate(dump.read_text(errors="replace").splitlines(), 1):
        if line.startswith("c "):
            _, millis, rss = line.split()
            out.append((n, int(millis), int(rss)))
        elif line.startswith("scan "):
            out.append((n, -1, -1))
    return out


def test_the_clock_samples_follow_the_resident_set(dump: Path) -> None:
    record("rss_steps", dump=dump)
    samples = _samples(dump)
    scan_line = next(n for n, millis, _ in samples if millis < 0)
    clock = [(n, millis, rss) for n, millis, rss in samples if millis >= 0]
    assert len(clock) >= 4, clock
    # in the order of time, at least 10 ms apart but the one GDB takes at exit, just before the
    # scan record
    times = [millis for _, millis, _ in clock]
    assert times == sorted(times)
    assert all(b - a >= 10 for a, b in zip(times[:-2], times[1:-1], strict=True)), times
    assert clock[-1][0] == scan_line - 1
    # the three pauses: the program runs 180 ms at least
    assert times[-1] >= 180, times
    # the resident set: each step adds 16 MiB, seen as a rise between two samples (the first
    # sample may come after the first step: the in-process recorder takes it at the 64th event);
    # by the exit the steps are freed (unmapped) and it fell by three
    rss = [r for _, _, r in clock]
    slack = 1 << 20
    rises = [b - a for a, b in zip(rss, rss[1:], strict=False) if b - a >= STEP - slack]
    assert len(rises) >= 2 and all(r < STEP + slack for r in rises), clock
    assert max(rss) - rss[-1] >= 3 * STEP - slack, clock
    assert all(r > 0 for r in rss)
    # the timeline says whose memory the RSS is: the in-process recorder's is in it
    said = {"in-process": "RSS is the whole process's, memdump's in-process recorder included "
                          "(its window of the dump, its tables)",
            "breakpoints": "RSS is the whole process's; the breakpoint recorder adds nothing to "
                           "it"}[memdump_e2e.MODE]
    text = analyze_raw(dump, "timeline").stdout
    assert f" ms; {said}\n" in text, text
