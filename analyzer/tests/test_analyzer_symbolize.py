"""Frames the dump left without symbols (no `fs` record) are symbolised from their modules with
addr2line: programs compiled here with gcc, whose lines are known."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from analyzer_testlib import run_cli
from memdump_analyzer import analyze, render_json, render_text
from memdump_analyzer.symbolize import (
    Level,
    _parse,
    addr2line,
    bfd_target,
    sized_symbols,
    symbol_tables,
)

# the line numbers below are the tests' expectations: keep them in step with the sources
MAKE_BLOCK = """\
#include <stdlib.h>
#include <stdio.h>

void *keep;

{inline}void *make_block(size_t n)
{{
    void *p = malloc(n);
    return p;
}}

int main(void)
{{
    keep = make_block(24);
    printf("%p\\n", keep);
    return 0;
}}
"""
MALLOC_LINE = 8
CALL_LINE = 14
NOTE = (
    "note: the dump has no symbols for {n} frames (the recording did not finish): symbolised "
    "from the modules with addr2line"
)


def _tool(name: str) -> str:
    path = shutil.which(name)
    assert path is not None, f"{name} is needed (binutils / gcc)"
    return path


def build(tmp_path: Path, opt: str, inline: bool) -> tuple[Path, Path]:
    src = tmp_path / f"prog{opt}.c"
    src.write_text(
        MAKE_BLOCK.format(inline="static inline __attribute__((always_inline)) " if inline else "")
    )
    binary = tmp_path / f"prog{opt}"
    subprocess.run([_tool("gcc"), "-g", opt, "-o", str(binary), str(src)], check=True)
    return src, binary


def return_address(binary: Path, function: str, callee: str) -> int:
    """The address after `function`'s call of `callee` (objdump), a frame's return address."""
    out = subprocess.run(
        [_tool("objdump"), "-d", "--no-show-raw-insn", str(binary)],
        check=True, capture_output=True, text=True,
    ).stdout
    body = out.split(f"<{function}>:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    for i, line in enumerate(body):
        if re.search(rf"call\s.*<{re.escape(callee)}>", line):
            return int(body[i + 1].split(":")[0], 16)
    raise AssertionError(f"no call of {callee} in {function}")


def dump(frames: list[tuple[str, int]], tail: str = "") -> str:
    """A dump of the in-process recorder: one malloc(24) whose stack is `frames` (module,
    offset), innermost first, in `f` records without symbols."""
    lines = ["MEMDUMP 1.3", "i program /tmp/prog", "i pid 7", "i recorder in-process"]
    modules: dict[str, int] = {}
    node = 0
    for ident, (module, offset) in enumerate(reversed(frames), 1):
        if module not in modules:
            modules[module] = len(modules) + 1
            lines.append(f"s {modules[module]} {module}")
        pc = 0x555555554000 + offset
        lines.append(f"f {ident} 0x{pc:x} {modules[module]} 0x{offset:x} 0 0 0")
        lines.append(f"n {ident} {node} {ident}")
        node = ident
    lines.append(f"e 1 7 malloc {node} 0x4052a0 24")
    return "\n".join(lines) + "\n" + tail


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "t.memdump"
    path.write_text(text)
    return str(path)


def test_o0_frames_get_function_file_and_line(tmp_path: Path) -> None:
    src, binary = build(tmp_path, "-O0", inline=False)
    inner = return_address(binary, "make_block", "malloc@plt")
    outer = return_address(binary, "main", "make_block")
    path = write(tmp_path, dump([(str(binary), inner), (str(binary), outer)]))
    a = analyze(path)
    assert a.symbolized_frames == 2
    text = render_text(a)
    assert NOTE.format(n=2) in text.splitlines()
    assert (
        f"    at make_block ({src.name}:{MALLOC_LINE})\n    by main ({src.name}:{CALL_LINE})\n"
        in text
    )
    report = render_json(a)
    assert report["symbolized_frames"] == 2
    stack = report["leaks"][0]["stack"]
    assert [(f["function"], f["file"], f["line"], f["inlined"]) for f in stack] == [
        ("make_block", str(src), MALLOC_LINE, False),
        ("main", str(src), CALL_LINE, False),
    ]
    assert report["warnings"] == ["the dump has no end record: the recording stopped early (GDB or "
                                  "the machine died); everything up to the last complete record "
                                  "(event 1) was analysed"]


def test_o2_inlined_function_gives_the_inlined_chain(tmp_path: Path) -> None:
    src, binary = build(tmp_path, "-O2", inline=True)
    pc = return_address(binary, "main", "malloc@plt")
    a = analyze(write(tmp_path, dump([(str(binary), pc)])))
    assert a.symbolized_frames == 1
    text = render_text(a)
    assert NOTE.format(n=1).replace("1 frames", "1 frame") in text.splitlines()
    assert (
        f"    at make_block ({src.name}:{MALLOC_LINE}) (inlined)\n"
        f"    by main ({src.name}:{CALL_LINE})\n" in text
    )


def test_frames_with_fs_records_are_not_symbolised_again(tmp_path: Path) -> None:
    src, binary = build(tmp_path, "-O0", inline=False)
    inner = return_address(binary, "make_block", "malloc@plt")
    outer = return_address(binary, "main", "make_block")
    # frame 1 (main's) has its symbols: an `fs` record naming another function and line
    tail = "s 2 from_gdb\ns 3 /src/elsewhere.c\nfs 1 2 3 99\n"
    a = analyze(write(tmp_path, dump([(str(binary), inner), (str(binary), outer)], tail)))
    assert a.symbolized_frames == 1
    text = render_text(a)
    assert (
        f"    at make_block ({src.name}:{MALLOC_LINE})\n    by from_gdb (elsewhere.c:99)\n"
        in text
    )


def test_a_module_that_no_longer_exists(tmp_path: Path) -> None:
    a = analyze(write(tmp_path, dump([("/nonexistent/libgone.so", 0x1160)])))
    assert a.symbolized_frames == 0
    text = render_text(a)
    assert "    at 0x555555555160 (libgone.so+0x1160)\n" in text
    assert (
        "note: 1 frame without symbols in /nonexistent/libgone.so, which no longer exists: "
        "shown by module and offset" in text.splitlines()
    )
    assert "symbolised from the modules" not in text


def test_no_addr2line(tmp_path: Path) -> None:
    src, binary = build(tmp_path, "-O0", inline=False)
    inner = return_address(binary, "make_block", "malloc@plt")
    path = write(tmp_path, dump([(str(binary), inner)]))
    empty = tmp_path / "bin"
    empty.mkdir()
    result = run_cli("--format", "json", path, env={"PATH": str(empty)})
    assert result.returncode == 0
    report = json.loads(result.stdout)
    assert report["symbolized_frames"] == 0
    assert report["leaks"][0]["stack"][0]["function"] is None
    warning = (
        "the dump has no symbols for 1 frame (the recording did not finish) and addr2line "
        "(binutils) is not installed: they are shown by module and offset"
    )
    assert warning in report["warnings"]
    assert f"memdump-analyze: warning: {warning}\n" in result.stderr


def test_the_views_without_stacks_symbolise_nothing(tmp_path: Path) -> None:
    """`timeline` and `sizes` show no stack: they look no frame up, so a missing addr2line is
    no warning of theirs, where `peak`, which shows the stack, says it."""
    src, binary = build(tmp_path, "-O0", inline=False)
    inner = return_address(binary, "make_block", "malloc@plt")
    path = write(tmp_path, dump([(str(binary), inner)]))
    empty = tmp_path / "bin"
    empty.mkdir()
    warning = "addr2line (binutils) is not installed"
    peak = run_cli("peak", path, env={"PATH": str(empty)})
    assert peak.returncode == 0 and warning in peak.stderr
    for view in ("timeline", "sizes"):
        result = run_cli(view, path, env={"PATH": str(empty)})
        assert result.returncode == 0 and result.stderr == "", (view, result.stderr)
        assert result.stdout == run_cli(view, path).stdout


def test_no_symbolize_option(tmp_path: Path) -> None:
    src, binary = build(tmp_path, "-O0", inline=False)
    inner = return_address(binary, "make_block", "malloc@plt")
    path = write(tmp_path, dump([(str(binary), inner)]))
    result = run_cli("--no-symbolize", path)
    assert result.returncode == 0
    assert f"    at 0x{0x555555554000 + inner:x} ({binary.name}+0x{inner:x})\n" in result.stdout
    assert "symbolised" not in result.stdout
    assert f"    at make_block ({src.name}:{MALLOC_LINE})\n" in run_cli(path).stdout


def test_only_the_frames_a_report_uses_are_symbolised(tmp_path: Path) -> None:
    src, binary = build(tmp_path, "-O0", inline=False)
    inner = return_address(binary, "make_block", "malloc@plt")
    outer = return_address(binary, "main", "make_block")
    # the block is freed: no stack is printed but the peak's, which has both frames;
    # a third frame no event uses is not looked up
    text = dump([(str(binary), inner), (str(binary), outer)])
    text += f"s 9 {binary}\nf 9 0x1 9 0x{inner + 1:x} 0 0 0\ne 2 7 free 0 - 0x4052a0\n"
    a = analyze(write(tmp_path, text))
    assert a.symbolized_frames == 2
    assert a.peak_stack[0].function == "make_block"


HIDDEN = """\
#include <stdlib.h>

void *kept;

void exported(void) {}

static __attribute__((noinline)) void *hidden_alloc(size_t n)
{
    kept = malloc(n);
    return kept;
}

void *entry(size_t n) { return hidden_alloc(n); }
"""


@pytest.mark.parametrize("strip", [False, True])
def test_a_name_past_the_symbols_end_is_not_taken(tmp_path: Path, strip: bool) -> None:
    """A static function of a stripped library is in no symbol table: addr2line would name it
    after `exported`, the dynamic symbol below it; the frame keeps its module and offset."""
    src = tmp_path / "hidden.c"
    src.write_text(HIDDEN)
    lib = tmp_path / "libhidden.so"
    subprocess.run([_tool("gcc"), "-O0", "-fPIC", "-shared", "-o", str(lib), str(src)],
                   check=True)
    inner = return_address(lib, "hidden_alloc", "malloc@plt")
    if strip:
        subprocess.run([_tool("strip"), "--strip-all", str(lib)], check=True)
    # the entry frame has GDB's symbols: the other had none from GDB
    tail = "s 2 entry\nfs 1 2 0 0\n"
    path = write(tmp_path, dump([(str(lib), inner), (str(lib), inner + 0x100)], tail))
    # nm behind a script that logs its runs: asked when addr2line names a function without a
    # file (stripped); the symbol cache keeps its verdict, so the second run, all of whose
    # answers are cached, starts none and says the same
    bin_dir, log = tmp_path / "bin", tmp_path / "nm.log"
    bin_dir.mkdir()
    (bin_dir / "nm").write_text(f'#!/bin/sh\necho run >> "{log}"\nexec "{_tool("nm")}" "$@"\n')
    (bin_dir / "nm").chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    text = run_cli(path, env=env).stdout
    assert log.exists() == strip
    log.unlink(missing_ok=True)
    assert run_cli(path, env=env).stdout == text
    assert not log.exists()
    if strip:
        assert f"    at 0x{0x555555554000 + inner:x} (libhidden.so+0x{inner:x})\n" in text
        assert "symbolised" not in text
    else:
        assert f"    at hidden_alloc (libhidden.so+0x{inner:x})\n" in text
        assert ("note: the dump has no symbols for 1 frame (GDB found none for them): "
                "symbolised from the modules with addr2line") in text
    cached = [json.loads(f.read_text()) for f in (Path(os.environ["XDG_CACHE_HOME"]) / "dbgkit"
                                                  / "symbols").iterdir()]
    assert [doc.get("inside") for doc in cached] == [{f"{inner - 1:x}": False} if strip else None]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["0x0000000000001160", "f", "/a.c:8", "0x0000000000001178", "main", "/a.c:14"],
         {0x1160: [("f", "/a.c", 8)], 0x1178: [("main", "/a.c", 14)]}),
        (["0x0000000000001160", "??", "??:0", "0x0000000000001178", "g", "/a.c:3 (discriminator 2)",
          "main", "/a.c:?"],
         {0x1160: [(None, None, None)], 0x1178: [("g", "/a.c", 3), ("main", "/a.c", None)]}),
    ],
)
def test_parse(lines: list[str], expected: dict[int, list[Level]]) -> None:
    assert _parse(lines, sorted(expected)) == expected


def _elf_header(cls: int, data: int, machine: int) -> bytes:
    order = "little" if data == 1 else "big"
    return b"\x7fELF" + bytes([cls, data, 1]) + bytes(9) + (3).to_bytes(2, order) + \
        machine.to_bytes(2, order)


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (_elf_header(2, 1, 62), ["--target=elf64-x86-64"]),
        (_elf_header(1, 1, 3), ["--target=elf32-i386"]),
        (_elf_header(1, 1, 62), ["--target=elf32-x86-64"]),
        (_elf_header(2, 1, 183), ["--target=elf64-little"]),  # aarch64: binutils' generic ELF
        (_elf_header(1, 2, 8), ["--target=elf32-big"]),  # MIPS
        (_elf_header(3, 1, 62), []),  # no such class
        (b"#!/bin/sh\necho not an object file\n", []),
        (b"\x7fELF", []),  # cut short
    ],
)
def test_binutils_are_told_the_object_format(tmp_path: Path, head: bytes,
                                             expected: list[str]) -> None:
    """nm and addr2line are given the module's format, so that binutils does not try the linker
    plugins of its bfd-plugins directory on it (LLVM's costs 20 ms a run)."""
    module = tmp_path / "module"
    module.write_bytes(head)
    assert bfd_target(str(module)) == expected
    assert bfd_target(str(tmp_path / "missing")) == []


def _elf_with_sections(cls: int, data: int, types: list[int]) -> bytes:
    """An ELF header of class `cls` and byte order `data` and a section header of each type."""
    end = "<" if data == 1 else ">"
    size, entsize = (64, 64) if cls == 2 else (52, 40)
    head = bytearray(_elf_header(cls, data, 62).ljust(size, b"\0"))
    if cls == 2:
        struct.pack_into(end + "Q", head, 0x28, size)
        struct.pack_into(end + "HH", head, 0x3A, entsize, len(types))
    else:
        struct.pack_into(end + "I", head, 0x20, size)
        struct.pack_into(end + "HH", head, 0x2E, entsize, len(types))
    table = bytearray(entsize * len(types))
    for i, kind in enumerate(types):
        struct.pack_into(end + "I", table, i * entsize + 4, kind)
    return bytes(head + table)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (_elf_with_sections(2, 1, [0, 11, 3, 2, 3]), [[], ["-D"]]),
        (_elf_with_sections(2, 1, [0, 11, 3]), [["-D"]]),  # stripped
        (_elf_with_sections(2, 2, [0, 2]), [[]]),  # a static executable, big-endian
        (_elf_with_sections(1, 1, [0, 11, 3]), [["-D"]]),
        (_elf_with_sections(1, 2, [0, 3]), []),  # no symbols at all
        (_elf_with_sections(2, 1, [0, 11])[:-8], [[], ["-D"]]),  # cut short
        (_elf_with_sections(2, 1, []), [[], ["-D"]]),  # no section headers
        (b"#!/bin/sh\n", [[], ["-D"]]),
    ],
)
def test_nm_reads_the_symbol_tables_a_module_has(tmp_path: Path, content: bytes,
                                                 expected: list[list[str]]) -> None:
    """nm is asked for the tables the module's section headers name (SHT_SYMTAB 2, SHT_DYNSYM
    11), both when they cannot be read."""
    module = tmp_path / "module"
    module.write_bytes(content)
    assert symbol_tables(str(module)) == expected
    assert symbol_tables(str(tmp_path / "missing")) == [[], ["-D"]]


def _dynamic_functions(module: str) -> set[str]:
    """The sized functions of `module`'s dynamic symbols, as nm gives them of itself."""
    plain = subprocess.run(["nm", "-S", "-D", "--defined-only", module], capture_output=True,
                           check=True, text=True).stdout
    return {line.split()[3] for line in plain.splitlines()
            if len(line.split()) == 4 and line.split()[2] in "TtWwi"}


def test_a_stripped_module_is_read_from_its_dynamic_symbols(tmp_path: Path) -> None:
    """A library compiled here: its symbol table while it has one, its dynamic one once stripped
    (nm not asked for the table it no longer has), the same symbols nm -D gives."""
    src = tmp_path / "hidden.c"
    src.write_text(HIDDEN)
    lib = tmp_path / "libhidden.so"
    subprocess.run([_tool("gcc"), "-O0", "-fPIC", "-shared", "-o", str(lib), str(src)],
                   check=True)
    assert symbol_tables(str(lib)) == [[], ["-D"]]
    assert "hidden_alloc" in {name for _, _, name in sized_symbols(str(lib), "TtWwi")}
    subprocess.run([_tool("strip"), "--strip-all", str(lib)], check=True)
    assert symbol_tables(str(lib)) == [["-D"]]
    names = {name for _, _, name in sized_symbols(str(lib), "TtWwi")}
    assert names == _dynamic_functions(str(lib)) == {"entry", "exported"}


def test_nm_reads_a_module_as_its_format() -> None:
    """The sized function symbols of the C library, as nm gives them with its format named."""
    libc = next(p for p in ("/lib/x86_64-linux-gnu/libc.so.6",
                            "/usr/lib/x86_64-linux-gnu/libc.so.6") if Path(p).exists())
    names = _dynamic_functions(libc)
    assert {name for _, _, name in sized_symbols(libc, "TtWwi", demangle=False)} == names


def _memdump_symbolize() -> str:
    """memdump-symbolize (gdb_ext/symbolize/) of $MEMDUMP_BUILD_DIR, else of the checkout's
    build/."""
    root = Path(__file__).resolve().parents[2]
    for build in (os.environ.get("MEMDUMP_BUILD_DIR", ""), str(root / "build")):
        path = Path(build, "gdb_ext", "symbolize", "memdump-symbolize")
        if build and os.access(path, os.X_OK):
            return str(path)
    pytest.skip("memdump-symbolize not built (libdw-dev; or set MEMDUMP_BUILD_DIR), as "
                "tests/e2e/test_late_debug_files.py")


@pytest.mark.parametrize(("opt", "inline"), [("-O0", False), ("-O2", True)])
def test_addr2line_and_memdump_symbolize_agree(tmp_path: Path, opt: str, inline: bool) -> None:
    """The two symbolisers of frames GDB did not name (docs/architecture.md, "Two of a kind"): the
    analyser's addr2line, for a dump whose recording did not finish, and memdump-symbolize (libdw),
    for the modules whose debug files memdump.sh told GDB not to read, speak one protocol and
    name a program's frames alike, inlined calls and all."""
    src, binary = build(tmp_path, opt, inline)
    if inline:
        offsets = [return_address(binary, "main", "malloc@plt")]
        want = [[("make_block", str(src), MALLOC_LINE), ("main", str(src), CALL_LINE)]]
    else:
        offsets = [return_address(binary, "make_block", "malloc@plt"),
                   return_address(binary, "main", "make_block")]
        want = [[("make_block", str(src), MALLOC_LINE)], [("main", str(src), CALL_LINE)]]
    offsets = [o - 1 for o in offsets]  # inside the call, as both callers look a return address up
    by_binutils = addr2line(_tool("addr2line"), str(binary), offsets)
    by_libdw = addr2line(_memdump_symbolize(), str(binary), offsets)
    assert by_libdw == by_binutils == dict(zip(offsets, want, strict=True))
