"""docs/architecture.md names every source module of the project (issue 26): a new module, or one
moved to another folder, fails here until the map says where it is and what it holds."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "architecture.md"

#: the folders whose modules the map names, and the suffixes of the modules counted there
SOURCES = (
    ("gdb_ext", (".py",)),
    ("analyzer/memdump_analyzer", (".py",)),
    ("gdb_ext/recorder", (".c", ".h")),
    ("gdb_ext/scan", (".c", ".h")),
    ("gdb_ext/symbolize", (".c", ".h")),
    ("analyzer/native", (".c", ".h")),
    ("pretty_exception/include", (".h", ".hpp")),
)

#: what the map need not name, and why:
#: - the test suites (`tests/` folders, `test_*` files): each says what it holds itself, and the map
#:   names the one that ties a pair of designs where it matters ("Two of a kind");
#: - a package's `__init__.py`: the map names the package by its folder, which this test checks
#:   (what an `__init__.py` registers, `FORMATS` or `VIEWS`, is named where a new one goes).
def _exempt(rel: Path) -> bool:
    return "tests" in rel.parts[:-1] or rel.name.startswith("test_") or rel.name == "__init__.py"


def _modules() -> list[Path]:
    found: set[Path] = set()
    for folder, suffixes in SOURCES:
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in suffixes and path.is_file() and "__pycache__" not in path.parts:
                found.add(path.relative_to(ROOT))
    for path in (ROOT / "scripts").iterdir():
        if path.suffix in (".py", ".sh") and path.is_file():
            found.add(path.relative_to(ROOT))
    return sorted(found)


_WORD = r"[\w.+-]"


def _suffixes(folder: Path) -> list[str]:
    """`gdb_ext/dbgkit/core` as `core/`, `dbgkit/core/`, `gdb_ext/dbgkit/core/`."""
    parts = folder.parts
    return ["/".join(parts[i:]) + "/" for i in range(len(parts))]


def _folder_named(line: str, folder: Path) -> bool:
    """Whether a line names the folder itself (`core/`, `gdb_ext/dbgkit/core/elf.py`), not one
    below it (`gdb_ext/dbgkit/` in `gdb_ext/dbgkit/core/`)."""
    return any(
        re.search(rf"(?<![\w/.-]){re.escape(s)}(?:{_WORD}+)?(?![\w/.-])", line)
        for s in _suffixes(folder)
    )


def _named(module: Path, lines: list[str]) -> bool:
    """A module is named by a path that ends with its folder and its name (`core/elf.py`), or by
    its bare name (`elf.py`) on a line of the map (a row of its tables, an item) that names its
    folder. A module moved to another folder is then unnamed until the map follows it."""
    name = re.escape(module.name)
    folder = module.parent
    by_path = [
        re.compile(rf"(?<![\w/.-]){re.escape(s)}{name}(?![\w.-])") for s in _suffixes(folder)
    ]
    bare = re.compile(rf"(?<![\w/.-]){name}(?![\w/.-])")
    for line in lines:
        if any(p.search(line) for p in by_path):
            return True
        if bare.search(line) and _folder_named(line, folder):
            return True
    return False


def test_the_map_names_every_module():
    lines = MAP.read_text().splitlines()
    unnamed = [str(m) for m in _modules() if not _exempt(m) and not _named(m, lines)]
    assert not unnamed, "docs/architecture.md does not name: " + ", ".join(unnamed)


def test_the_map_names_every_package():
    """An exempt `__init__.py` is named by its folder."""
    lines = MAP.read_text().splitlines()
    packages = [m.parent for m in _modules() if m.name == "__init__.py" and not _exempt(m.parent)]
    unnamed = [str(p) for p in packages if not any(_folder_named(line, p) for line in lines)]
    assert not unnamed, "docs/architecture.md does not name the packages: " + ", ".join(unnamed)


def test_the_map_test_sees_a_module_moved():
    """The test itself: a name counts only beside its own folder."""
    lines = ["| x | `gdb_ext/dbgkit/core/`: `elf.py` (ELF) |", "`views/cli.py`"]
    assert _named(Path("gdb_ext/dbgkit/core/elf.py"), lines)
    assert not _named(Path("gdb_ext/dbgkit/locks/elf.py"), lines)
    assert not _named(Path("gdb_ext/dbgkit/elf.py"), lines)
    assert _named(Path("analyzer/memdump_analyzer/views/cli.py"), lines)
    assert not _named(Path("analyzer/memdump_analyzer/cli.py"), lines)
