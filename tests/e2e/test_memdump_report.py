"""The report of a real recording: the demo (targets/memdump_demo) under scripts/memdump.sh.

Its three bugs: two rejected orders leak with their client names (definitely lost, each leading
one indirectly lost name), the names of the orders kept are never freed, and a worker thread's
buffer is lost. The report folds the C/C++ runtime's frames that started the worker thread,
shows each order with the name it leads (valgrind's `N (D direct, I indirect) bytes`), lists
valgrind's default kinds, limits groups with --top, and says why the free calls outnumber frees.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from memdump_e2e import REPO, analyze, analyze_raw, build_dir

DEMO_SOURCE = REPO / "targets" / "memdump_demo" / "memdump_demo.cpp"


def _line(text: str) -> int:
    """The line of the demo's source that contains `text`."""
    for number, line in enumerate(DEMO_SOURCE.read_text().splitlines(), 1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} is not in {DEMO_SOURCE}")


_DEMO_DUMPS: dict[str, Path] = {}


@pytest.fixture
def demo_dump(tmp_path_factory: pytest.TempPathFactory, memdump_mode: str) -> Path:
    """The demo recorded once per recorder, by scripts/memdump.sh."""
    if memdump_mode in _DEMO_DUMPS:
        return _DEMO_DUMPS[memdump_mode]
    program = build_dir() / "targets" / "memdump_demo" / "memdump_demo"
    if not program.is_file():
        pytest.fail(f"{program} is not built (cmake --build build -- targets/memdump_demo/all)",
                    pytrace=False)
    dump = tmp_path_factory.mktemp("demo") / "demo.memdump"
    mode = ["--breakpoints"] if memdump_mode == "breakpoints" else []
    proc = subprocess.run([str(REPO / "scripts" / "memdump.sh"), *mode, "-o", str(dump), "--",
                           str(program)], capture_output=True, text=True, timeout=300,
                          check=False, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and dump.is_file(), proc.stderr
    _DEMO_DUMPS[memdump_mode] = dump
    return dump


def test_worker_threads_runtime_frames_are_folded(demo_dump: Path) -> None:
    report = analyze(demo_dump)
    [worker] = [g for g in report.groups("leak")
                if g["stack"][0]["function"] == "demo::worker(int)"]
    folded = worker["runtime_frames"]
    outer = [f["function"] or "" for f in worker["stack"][len(worker["stack"]) - folded:]]
    # std::thread's internals compiled into the demo, libstdc++'s, then glibc's thread start
    assert outer[-2:] == ["start_thread", "clone3"], outer
    assert any(name.startswith("std::thread::_State_impl<") for name in outer), outer
    assert len(worker["stack"]) - folded == 1, worker  # the worker itself, alone
    text = analyze_raw(demo_dump).stdout
    worker_line = _line("std::malloc(256 + n)")
    assert (
        "LEAK 1 of 5: 257 bytes in 1 block, definitely lost\n"
        f"    at demo::worker(int) (memdump_demo.cpp:{worker_line})\n"
        f"    ... {folded} frames of the C/C++ runtime (--show-runtime-frames)\n\n"
    ) in text
    assert "by start_thread" not in text and "by main() (memdump_demo.cpp:" in text
    shown = analyze_raw(demo_dump, "--show-runtime-frames").stdout
    assert "of the C/C++ runtime" not in shown
    assert re.search(r"\n    by std::thread::_State_impl<.*\n", shown), shown
    assert "\n    by start_thread (" in shown and "\n    by clone3 (" in shown


def test_orders_show_the_names_they_lead_and_valgrinds_default_kinds(demo_dump: Path) -> None:
    text = analyze_raw(demo_dump).stdout
    add = _line("auto *order = new Order")
    for rank, (total, name_bytes, call) in enumerate(
        ((37, 5, "book.add(4, 0.0"), (36, 4, "book.add(2, -1.0")), 2
    ):
        assert (
            f"LEAK {rank} of 5: {total} (32 direct, {name_bytes} indirect) bytes in 1 block, "
            "definitely lost\n"
            f"    at demo::OrderBook::add(int, double, char const*) (memdump_demo.cpp:{add})\n"
            f"    by main() (memdump_demo.cpp:{_line(call)})\n"
        ) in text, text
    assert ("\n... and 2 leak groups indirectly lost (9 bytes in 2 blocks) not shown "
            "(--show-leak-kinds all lists them)\n") in text
    assert "    definitely lost: 333 bytes in 5 blocks\n" in text
    assert "    indirectly lost: 9 bytes in 2 blocks\n" in text
    every = analyze_raw(demo_dump, "--show-leak-kinds", "all").stdout
    assert "LEAK 7 of 7: 4 bytes in 1 block, indirectly lost\n" in every
    assert analyze_raw(demo_dump, "--fail-on-leak").returncode == 1
    assert analyze_raw(demo_dump, "--fail-on-leak", "--leak-kinds", "reachable").returncode == 0


def test_top_lists_the_largest_groups_in_text_and_json(demo_dump: Path) -> None:
    text = analyze_raw(demo_dump, "--top", "2").stdout
    titles = [line for line in text.splitlines() if line.startswith("LEAK")]
    assert titles == ["LEAK 1 of 5: 257 bytes in 1 block, definitely lost",
                      "LEAK 2 of 5: 37 (32 direct, 5 indirect) bytes in 1 block, definitely lost"]
    assert "... and 3 more leak groups (44 bytes in 3 blocks) not shown (--top)\n" in text
    report = json.loads(analyze_raw(demo_dump, "--format", "json", "--top", "2").stdout)
    assert [(g["bytes"], g["indirect_bytes"]) for g in report["leaks"]] == [(257, 0), (32, 5)]
    assert report["not_shown"] == {"groups": 5, "bytes": 53, "blocks": 5}


def test_the_free_calls_that_released_no_block_are_explained(demo_dump: Path,
                                                              memdump_mode: str) -> None:
    """As the worker thread exits, glibc's __libc_thread_freeres calls free(NULL) twice: 2 free
    calls, neither of which released a block: the demo's 4 blocks are released by delete (dump
    format 2.1). glibc also empties the thread's cache (tcache_thread_shutdown) with two direct
    calls to __libc_free, inside glibc: the in-process recorder (which sees calls through the
    dynamic symbol, as heaptrack does) does not see them, and the breakpoint design leaves them
    out too (memdump.breakpoints.internal_call): both recorders count the same calls."""
    summary = analyze(demo_dump).summary
    runtime = 0
    calls = 2
    assert summary["calls"]["free"] == calls and summary["frees"] == 4
    assert (summary["calls"]["new"], summary["calls"]["delete"]) == (6, 4)
    assert summary["free_calls"] == {"released": 0, "null": 2, "runtime": runtime, "errors": 0,
                                     "untracked": 0}
    text = analyze_raw(demo_dump).stdout
    assert f"    calls:           malloc 7, calloc 1, free {calls}, new 6, delete 4\n" in text
    explained = "2 freed NULL, 2 freed the C/C++ runtime's own memory" if runtime else \
        "2 freed NULL"
    assert (f"    frees:           4 blocks (0 of the {calls} free calls released blocks; "
            f"{explained}; 4 by delete)\n") in text, text


def test_the_readmes_excerpt_is_the_demos_report(demo_dump: Path) -> None:
    """The report the README shows for `make demo`'s program is what the analyser prints, line
    for line and in order (its `...` stands for lines left out)."""
    readme = (REPO / "README.md").read_text()
    start = readme.index("What `memdump --report` prints for `make demo`'s program")
    block = readme[readme.index("```\n", start) + 4:]
    excerpt = block[:block.index("```")].splitlines()
    lines = analyze_raw(demo_dump).stdout.splitlines()
    at = 0
    for line in excerpt:
        if line == "...":
            continue
        assert line in lines[at:], (line, lines)
        at = lines.index(line, at) + 1
    assert len([line for line in excerpt if line.startswith("LEAK ")]) == 2
