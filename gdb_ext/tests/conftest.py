"""Shared fixtures: compile the test programs once per session and make dbgkit importable."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
GDB_EXT_DIR = TESTS_DIR.parent
PROGRAMS_DIR = TESTS_DIR / "programs"

for _path in (GDB_EXT_DIR, GDB_EXT_DIR.parent / "analyzer"):  # as gdb_ext/memdump.py does
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

# name -> (compiler, source files, flags)
BUILDS: dict[str, tuple[str, list[str], list[str]]] = {
    "chain_O0": ("gcc", ["chain.c"], ["-O0", "-g", "-rdynamic"]),
    "chain_O2": ("gcc", ["chain.c"], ["-O2", "-g", "-fomit-frame-pointer", "-rdynamic"]),
    "vector_cpp": ("g++", ["vector.cpp"], ["-O2", "-g", "-rdynamic"]),
    "signal": ("gcc", ["signal.c"], ["-O2", "-g", "-fomit-frame-pointer"]),
    "thread": ("gcc", ["thread.c"], ["-O2", "-g", "-pthread"]),
}


@dataclass
class Programs:
    """Paths of the compiled test programs; `missing` says why an optional one was not built."""

    dir: Path
    paths: dict[str, Path] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> Path:
        """The program's path, or skip the test with the reason it could not be built."""
        if name not in self.paths:
            pytest.skip(self.missing.get(name, f"{name} was not built"))
        return self.paths[name]


def _compile(cmd: list[str]) -> str | None:
    """Run a compiler command; return its error text on failure."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return None if proc.returncode == 0 else (proc.stderr or proc.stdout).strip()


@pytest.fixture(scope="session")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Programs:
    """Build every test program into a temporary directory (once per session)."""
    if shutil.which("gcc") is None or shutil.which("g++") is None:
        pytest.skip("gcc/g++ are not installed")
    out = Programs(tmp_path_factory.mktemp("programs"))
    for name, (cc, sources, flags) in BUILDS.items():
        dest = out.dir / name
        err = _compile([cc, *flags, *(str(PROGRAMS_DIR / s) for s in sources), "-o", str(dest)])
        if err is not None:
            raise RuntimeError(f"building {name} failed:\n{err}")
        out.paths[name] = dest
    # A statically linked build needs libc.a (Debian: libc6-dev ships it, but it may be absent).
    dest = out.dir / "chain_static"
    err = _compile(["gcc", "-static", "-O2", str(PROGRAMS_DIR / "chain.c"), "-o", str(dest)])
    if err is None:
        out.paths["chain_static"] = dest
    else:
        out.missing["chain_static"] = f"static linking is unavailable (no static libc?): {err}"
    # A library with no .eh_frame contents at all (no unwind tables, no start files, no -g so
    # that GDB has no .debug_frame either), and a program calling into it.
    lib = out.dir / "libnocfi.so"
    err = _compile(["gcc", "-O0", "-shared", "-fPIC", "-fno-omit-frame-pointer",
                    "-fno-asynchronous-unwind-tables", "-fno-unwind-tables", "-nostartfiles",
                    "-Wl,--no-eh-frame-hdr", str(PROGRAMS_DIR / "nocfi_lib.c"), "-o", str(lib)])
    if err is None:
        dest = out.dir / "nocfi"
        err = _compile(["gcc", "-O2", "-g", str(PROGRAMS_DIR / "nocfi_main.c"), str(lib),
                        f"-Wl,-rpath,{out.dir}", "-o", str(dest)])
    if err is None:
        out.paths["nocfi"] = dest
        out.paths["libnocfi"] = lib
    else:
        out.missing["nocfi"] = f"could not build the no-CFI library: {err}"
    return out


def _gdb_available() -> bool:
    """True when a gdb with Python support is installed."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return False
    proc = subprocess.run([gdb, "-nx", "-batch", "-ex", "python print(1)"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "HOME": "/nonexistent"})
    return proc.returncode == 0 and proc.stdout.strip() == "1"


@pytest.fixture(scope="session")
def gdb_path() -> str:
    """The gdb executable; skips the test when gdb (with Python) is not installed."""
    if not _gdb_available():
        pytest.skip("gdb with Python support is not installed")
    return shutil.which("gdb") or "gdb"


@pytest.fixture(scope="session")
def gdb_ext_dir() -> Path:
    """The directory that holds the dbgkit package."""
    return GDB_EXT_DIR


@pytest.fixture(autouse=True)
def _own_symbol_cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory,
                      ) -> None:
    """Each test's runs symbolise with a cache of their own (memdump_analyzer/symcache.py)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    monkeypatch.delenv("MEMDUMP_NO_CACHE", raising=False)
