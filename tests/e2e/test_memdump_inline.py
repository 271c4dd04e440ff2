"""memdump end to end: frames of inlined code, at -O2 and -O3, built by GCC and by Clang.

tests/programs/inline_frames.cpp allocates twice in `open_session`, a `static inline` function that
the compiler inlines into `run` (noinline), which `main` calls: a `new Session` (32 bytes) and the
buffer of `std::vector::reserve` (128 bytes), whose libstdc++ frames are inlined there too. One
return address then stands for several frames. memdump must list them all, innermost first, each
function with its line (the code's line for the innermost, the inlined call's for the others), in
both unwinders, in the dump's records, in the reports and in `memdump leaks`, exactly as GDB's `bt`
shows them and, for GCC's builds, as valgrind does.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from memdump_e2e import (
    Site,
    analyze,
    base_name,
    frame_site,
    gdb_argv,
    marker,
    program,
    read_dump,
    record,
    run_gdb,
)

SRC = "inline_frames.cpp"
GCC_BUILDS = ["inline_frames_gcc_O2", "inline_frames_gcc_O3"]
CLANG_BUILDS = ["inline_frames_clang_O2", "inline_frames_clang_O3"]
BUILDS = GCC_BUILDS + CLANG_BUILDS

#: std::vector<int>::reserve's allocation, inlined from libstdc++'s headers: (name, header), the
#: name being the last component of the qualified one (lines depend on the libstdc++ version)
RESERVE_LIBSTDCXX = [
    ("allocate", "new_allocator.h"),  # std::__new_allocator<int>::allocate
    ("allocate", "alloc_traits.h"),  # std::allocator_traits<std::allocator<int> >::allocate
    ("_M_allocate", "stl_vector.h"),  # std::_Vector_base<int, std::allocator<int> >::_M_allocate
    ("reserve", "vector.tcc"),  # std::vector<int, std::allocator<int> >::reserve
]

Frame = tuple[str, Site | None, bool]  # (base name, file:line, inlined)


def _user_frames(site: str) -> list[Frame]:
    """open_session's line SITE, inlined into run at its call, called by main."""
    return [
        ("open_session", marker(SRC, site), True),
        ("run", marker(SRC, "open_session", "CALL"), False),
        ("main", marker(SRC, "run", "CALL"), False),
    ]


def _short(name: str | None) -> str:
    """`std::vector<int, std::allocator<int> >::reserve(unsigned long)` -> `reserve`."""
    return re.sub(r"<[^<>]*>", "", re.sub(r"<[^<>]*>", "", base_name(name))).rsplit("::", 1)[-1]


def _json_frames(stack: list[dict]) -> list[Frame]:  # type: ignore[type-arg]
    return [(base_name(f["function"]), frame_site(f), f["inlined"]) for f in stack]


def _check_reserve(frames: list[Frame], what: str) -> None:
    """libstdc++'s four inlined frames by name and header, then the user's frames exactly."""
    assert [(_short(name), site.file if site else None, inlined)
            for name, site, inlined in frames[:4]] == [
        (name, header, True) for name, header in RESERVE_LIBSTDCXX], what
    assert frames[4:] == _user_frames("reserve"), what


def _groups_by_size(report_data: dict) -> dict[int, list[dict]]:  # type: ignore[type-arg]
    groups = [g for g in report_data["leaks"] if g["kind"] == "leak"]
    by_size = {g["bytes"]: g["stack"] for g in groups}
    assert sorted(by_size) == [32, 128] and len(groups) == 2, report_data
    return by_size


@pytest.mark.parametrize("unwinder", ["auto", "gdb"])
@pytest.mark.parametrize("build", BUILDS)
def test_inlined_frames_in_the_dump_and_the_report(build: str, unwinder: str,
                                                   dump: Path) -> None:
    run = record(build, dump=dump, before=[f"set memdump unwinder {unwinder}"])
    report = analyze(dump)
    what = f"{build}, unwinder {unwinder}\n{report.dumps()}\n{run.describe()}"
    assert report.data["version"] == "1.9"
    stacks = _groups_by_size(report.data)
    assert _json_frames(stacks[32]) == _user_frames("session"), what
    _check_reserve(_json_frames(stacks[128]), what)
    assert report.leaked == (160, 2), what

    # The dump's own records: `f` then `fi` records, under the allocator's frames.
    facts = read_dump(dump)
    assert facts.version == "2.7"
    for size, check in ((32, "session"), (128, "reserve")):
        [event] = [e for e in facts.events if e[3] == "new" and e[-1] == str(size)]
        frames = facts.stack(int(event[4]))
        names = [base_name(f.function) for f in frames]
        first = names.index("open_session")
        assert [(base_name(f.function), f.file, f.line, f.inlined)
                for f in frames[first:first + 3]] == [
            ("open_session", SRC, marker(SRC, check).line, True),
            ("run", SRC, marker(SRC, "open_session", "CALL").line, False),
            ("main", SRC, marker(SRC, "run", "CALL").line, False)], frames
        # a `new` event (format 2.1): its stack starts at operator new's caller
        assert not any("operator new" in (f.function or "") for f in frames), frames


def _bt_stacks(output: str) -> set[tuple[Frame, ...]]:
    """The stacks of GDB's `bt` at each stop in operator new, from its caller to main.

    `bt` prints an address (`#2  0x... in f (...) at file:line`) for a frame that is not the
    continuation of an inlined call; a frame printed without one has the program counter of the
    frame before it, whose function was inlined into it. The in-process recorder defines operator
    new too (its hooks in gdb_ext/recorder/recorder.c, the other cases in cxx.c), so GDB's
    breakpoint stops there as well: the recorder's frames are left out, the program's are the
    same."""
    stacks: set[tuple[Frame, ...]] = set()
    for trace in re.split(r"^(?=#0 )", output, flags=re.M)[1:]:
        rows = re.findall(r"^#\d+\s+(0x[0-9a-f]+ in )?(.+?) \(.*\) at (\S+):(\d+)$", trace, re.M)
        frames: list[Frame] = []
        for i, (_address, name, path, line) in enumerate(rows):
            inlined = i + 1 < len(rows) and not rows[i + 1][0]
            if Path(path).parent.name == "recorder" and Path(path).parent.parent.name == "gdb_ext":
                continue
            frames.append((base_name(name), Site(Path(path).name, int(line)), inlined))
            if name == "main":
                break
        stacks.add(tuple(frames))
    return stacks


@pytest.mark.parametrize("build", BUILDS)
def test_frames_are_gdbs_backtrace(build: str, dump: Path, tmp_path: Path) -> None:
    """The same run stops in operator new and prints `bt`: its frames are memdump's."""
    script = tmp_path / "bt.gdb"
    script.write_text("set breakpoint pending on\nbreak operator new(unsigned long)\ncommands\n"
                      "silent\nbt\ncontinue\nend\n")
    run = run_gdb(gdb_argv([f"source {script}", f"memdump -o {dump}", "run"], [program(build)]),
                  dump)
    bt = _bt_stacks(run.stdout)
    report = analyze(dump)
    mine = {tuple(_json_frames(stack)) for stack in _groups_by_size(report.data).values()}
    assert bt == mine, f"{bt}\n{mine}\n{run.describe()}"


_VALGRIND_FRAME = re.compile(r"^==\d+==\s+(?:at|by) (0x[0-9A-F]+): (.+?) \((\S+):(\d+)\)$", re.M)


@pytest.mark.parametrize("build", GCC_BUILDS)
def test_frames_are_valgrinds(build: str, dump: Path) -> None:
    """valgrind memcheck names the same frames at the same lines (one address repeated for the
    frames of inlined code). Clang's builds are left out: valgrind 3.19 does not read the
    inlined calls of Clang 14's DWARF 5 (it names only `run(int)` there, at open_session's line);
    test_frames_are_gdbs_backtrace covers them."""
    if shutil.which("valgrind") is None:
        pytest.fail("valgrind is missing: scripts/setup.sh installs it", pytrace=False)
    proc = subprocess.run(["valgrind", "--leak-check=full", "--show-leak-kinds=all",
                           "--num-callers=40", str(program(build))], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300, check=False)
    theirs = set()
    for record_text in re.split(r"are \w+ lost in loss record", proc.stderr)[1:]:
        rows = _VALGRIND_FRAME.findall(record_text.split("\n\n", 1)[0])
        frames = []
        for i, (address, name, file, line) in enumerate(rows):
            inlined = i + 1 < len(rows) and rows[i + 1][0] == address
            frames.append((_short(name), Site(file, int(line)), inlined))
        theirs.add(tuple(frames))
    record(build, dump=dump)
    mine = {tuple((_short(name), site, inlined) for name, site, inlined in _json_frames(stack))
            for stack in _groups_by_size(analyze(dump).data).values()}
    assert mine == theirs, f"{mine}\n{theirs}\n{proc.stderr}"


@pytest.mark.parametrize("build", ["inline_frames_gcc_O2", "inline_frames_clang_O2"])
def test_memdump_leaks_prints_the_inlined_frames(build: str, dump: Path) -> None:
    """`memdump leaks` at _exit, the program still recorded: the live command's text report."""
    run = record(build, dump=dump, before=["set breakpoint pending on", "break _exit"],
                 after=["memdump leaks", "continue"])
    text = run.stdout
    session = re.escape(str(marker(SRC, "session")))
    reserve = re.escape(str(marker(SRC, "reserve")))
    call_open = re.escape(str(marker(SRC, "open_session", "CALL")))
    call_run = re.escape(str(marker(SRC, "run", "CALL")))
    tail = (rf"    by run\(int\) \({call_open}\)\n"
            rf"    by main\(int, char\*\*\) \({call_run}\)\n")
    # The scan at _exit has run (memdump stops there first): a definitely lost session shows
    # the vector's storage it leads; GCC -O2 leaves a stale copy of the pointer on the stack.
    # (each with its kind: memdump leaks at _exit shows the scan made there)
    assert re.search(rf"^LIVE \d of 2: (32|160 \(32 direct, 128 indirect\)) bytes in 1 block"
                     rf"(, [a-z ]+)?\n"
                     rf"    at open_session(\(int\))? \({session}\) \(inlined\)\n{tail}",
                     text, re.M), run.describe()
    assert re.search(rf"^LIVE \d of 2: 128 bytes in 1 block(, [a-z ]+)?\n"
                     rf"    at std::__new_allocator<int>::allocate\(.*\) \(new_allocator\.h:\d+\) "
                     rf"\(inlined\)\n(    by .* \(inlined\)\n){{3}}"
                     rf"    by open_session(\(int\))? \({reserve}\) \(inlined\)\n{tail}",
                     text, re.M), run.describe()
