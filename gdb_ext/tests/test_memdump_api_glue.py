"""GDB's side of memdump_api.h, without GDB: the hooks found in .symtab and .dynsym, and the
in-process recorder's live-block table split into malloc'd and custom blocks."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from dbgkit.core.elf import ElfFile
from dbgkit.core.recorder import CUSTOM_KEY, OPS, live_blocks

REPO = Path(__file__).resolve().parents[2]
HEADER_DIR = REPO / "gdb_ext" / "recorder" / "include"
NAMES = frozenset(("memdump_api_alloc", "memdump_api_free", "memdump_api_alloc_hook",
                   "memdump_api_free_hook"))
SOURCE = """#include <memdump_api.h>
static char pool[64];
int main(void) { MEMDUMP_ALLOC(pool + 16, 16); MEMDUMP_FREE(pool + 16); return 0; }
"""


def _build(tmp_path: Path, *flags: str) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("no C compiler (scripts/setup.sh installs gcc)", pytrace=False)
    src = tmp_path / "api.c"
    src.write_text(SOURCE)
    out = tmp_path / ("api" + "".join(f.replace("-", "_") for f in flags))
    subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", f"-I{HEADER_DIR}", *flags,
                    str(src), "-o", str(out)], check=True)
    return out


def test_the_hooks_of_an_executable_are_in_its_symtab(tmp_path: Path) -> None:
    elf = ElfFile.open(str(_build(tmp_path)))
    # without -rdynamic an executable exports nothing: its hooks are in .symtab only
    assert "memdump_api_alloc_hook" not in elf.dynamic_symbols()
    found = elf.symtab_functions(NAMES)
    assert set(found) == {"memdump_api_alloc_hook", "memdump_api_free_hook"}
    assert found["memdump_api_alloc_hook"] != found["memdump_api_free_hook"]


def test_rdynamic_exports_the_hooks(tmp_path: Path) -> None:
    elf = ElfFile.open(str(_build(tmp_path, "-rdynamic")))
    symbols = elf.dynamic_symbols()
    assert symbols["memdump_api_alloc_hook"] == elf.symtab_functions(NAMES)[
        "memdump_api_alloc_hook"]


def test_symtab_functions_is_empty_without_the_names(tmp_path: Path) -> None:
    elf = ElfFile.open(str(_build(tmp_path, "-s")))  # stripped: no .symtab
    assert elf.symtab_functions(NAMES) == {}
    libc = Path("/lib/x86_64-linux-gnu/libc.so.6")
    if libc.exists():
        assert ElfFile.open(str(libc)).symtab_functions(NAMES) == {}


def test_the_ops_are_control_h_s() -> None:
    text = (REPO / "gdb_ext" / "recorder" / "control.h").read_text()
    enum = text[text.index("enum mdr_op {"):text.index("MDR_OP_COUNT")]
    names = [word[4:].lower() for word in enum.replace(",", " ").split() if word.startswith("MDR_")]
    # MDR_NEW_ARRAY is `new[]` (2.1)
    assert tuple(n.replace("_array", "[]") for n in names) == OPS
    assert "(UINT64_C(1) << 63)" in text and CUSTOM_KEY == 1 << 63


def test_live_blocks_split_custom_blocks() -> None:
    entries = [(0x5000, 384, 1), (0, 0, 0), (0x5000 | CUSTOM_KEY, 48, 2), (1, 0, 0),
               (0x5030 | CUSTOM_KEY, 48, 3), (0x9000, 10, 4)]
    raw = b"".join(struct.pack("<3Q", *e) for e in entries)
    base = 0x10000

    def read(addr: int, size: int) -> bytes:
        return raw[addr - base:addr - base + size]

    custom: dict[int, int] = {}
    assert live_blocks(read, base, len(entries), custom) == {0x5000: 384, 0x9000: 10}
    assert custom == {0x5000: 48, 0x5030: 48}
    # without a dict for them, custom blocks are left out
    assert live_blocks(read, base, len(entries)) == {0x5000: 384, 0x9000: 10}
