"""The installed toolkit (packaging/, docs/install.md): `cmake --install` into a prefix and the
Debian package. What is installed works from anywhere, refers to nothing of the source tree, and
its man pages name the options the commands take."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from memdump_e2e import REPO, build_dir, program

BIN = {"memdump", "memdump-analyze"}
LIBS = {"libmemdump_recorder.so", "libmemdump_scan.so", "libmemdump_core.so", "memdump-symbolize"}


def _python_files(top: Path) -> set[str]:
    return {str(p.relative_to(top)) for p in top.rglob("*.py") if "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plain build installed (stripped, as a package is) into a fresh prefix."""
    root = tmp_path_factory.mktemp("install") / "usr"
    subprocess.run(["cmake", "--install", str(build_dir()), "--prefix", str(root), "--strip"],
                   check=True, capture_output=True, timeout=120)
    return root


def test_the_files_are_where_valgrind_and_heaptrack_put_theirs(prefix: Path) -> None:
    assert {p.name for p in (prefix / "bin").iterdir()} == BIN
    if not (build_dir() / "gdb_ext" / "symbolize" / "memdump-symbolize").exists():
        LIBS.discard("memdump-symbolize")  # built only with libdw-dev
    assert {p.name for p in (prefix / "lib" / "dbgkit").iterdir()} == LIBS
    gdb = prefix / "share" / "dbgkit" / "gdb"
    assert _python_files(gdb) == {"dbgkit.py", "memdump.py"} | {
        f"dbgkit/{name}" for name in _python_files(REPO / "gdb_ext" / "dbgkit")}
    assert _python_files(prefix / "share" / "dbgkit" / "analyzer") == {
        f"memdump_analyzer/{name}"
        for name in _python_files(REPO / "analyzer" / "memdump_analyzer")}
    # byte-compiled for GDB's Python, naming the installed paths
    modules = {p.with_suffix("") for p in (prefix / "share" / "dbgkit").rglob("*.py")}
    compiled = (prefix / "share" / "dbgkit").rglob("__pycache__/*.cpython-311.pyc")
    assert {p.parent.parent / p.name.split(".")[0] for p in compiled} == modules
    assert {p.name for p in (prefix / "share" / "man" / "man1").iterdir()} == {
        "memdump.1", "memdump-analyze.1"}
    assert (prefix / "include" / "memdump_api.h").read_bytes() == \
        (REPO / "gdb_ext" / "recorder" / "include" / "memdump_api.h").read_bytes()
    assert (prefix / "include" / "pretty_exception.h").is_file()
    assert list(prefix.glob("lib/**/pkgconfig/pretty_exception.pc"))
    assert list(prefix.glob("lib/**/cmake/pretty_exception/pretty_exceptionConfig.cmake"))


def test_nothing_installed_names_the_source_tree(prefix: Path) -> None:
    tree = str(REPO).encode()
    named = [str(p) for p in prefix.rglob("*") if p.is_file() and tree in p.read_bytes()]
    assert named == []


def _hidden_tree(tmp_path: Path) -> list[str]:
    """A command prefix that runs its command with the source tree hidden under an empty tmpfs
    (a private mount namespace), or [] where this user may not make one."""
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           capture_output=True, timeout=30)
    if probe.returncode != 0 or shutil.which("unshare") is None:
        return []
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs tmpfs "$0" && exec "$@"', str(REPO)]


def test_the_installed_memdump_records_and_reports_without_the_source_tree(
        prefix: Path, tmp_path: Path) -> None:
    """From another directory, with a copy of the program and the source tree hidden: the
    recording, the leak report and the analyser run on the installed files alone."""
    hide = _hidden_tree(tmp_path)
    if not hide:
        pytest.skip("needs a private mount namespace (unshare --mount: root)")
    prog = tmp_path / "leak_malloc"
    shutil.copy(program("leak_malloc"), prog)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    run = subprocess.run([*hide, str(prefix / "bin" / "memdump"), "--report", "-o",
                          "leak.memdump", "./leak_malloc"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    assert "definitely lost: 24 bytes in 1 block" in run.stderr, run.stderr
    report = subprocess.run([*hide, str(prefix / "bin" / "memdump-analyze"), "--format", "json",
                             "leak.memdump"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=60, env=env)
    assert report.returncode == 0 and '"bytes": 24' in report.stdout, report.stderr


def test_gdb_loads_the_commands_with_one_line(prefix: Path, tmp_path: Path) -> None:
    """docs/install.md's line, `source P/share/dbgkit/gdb/dbgkit.py`, gives every command, and
    the README's one-liner records with the installed recorder (the source tree hidden where
    this user may hide it)."""
    run = subprocess.run(["gdb", "-batch", "-nx", "-ex",
                          f"source {prefix}/share/dbgkit/gdb/dbgkit.py",
                          "-ex", "help memdump", "-ex", "help deadlocks", "-ex", "help contention"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert run.stdout.startswith("memdump: record every heap operation of the program"), \
        run.stdout[:200]
    assert "\nusage: deadlocks [-h]" in run.stdout and "\nusage: contention [-h]" in run.stdout
    # the messages name the installed commands
    assert re.search(r"analyse\s+it\s+with\s+memdump-analyze\.", run.stdout), run.stdout[:600]
    assert "scripts/" not in run.stdout
    shutil.copy(program("leak_malloc"), tmp_path / "leak_malloc")
    run = subprocess.run([*_hidden_tree(tmp_path), "gdb", "-batch", "-nx", "-ex",
                          f"source {prefix}/share/dbgkit/gdb/memdump.py", "-ex",
                          "memdump -o one.memdump", "-ex", "run", "./leak_malloc"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert f"{prefix}/lib/dbgkit/libmemdump_recorder.so is preloaded" in run.stdout, run.stdout
    assert "; report: memdump-analyze one.memdump\n" in run.stdout, run.stdout
    report = subprocess.run([str(prefix / "bin" / "memdump-analyze"), "one.memdump"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "    definitely lost: 24 bytes in 1 block\n" in report.stdout, report.stdout


def _options(help_text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", help_text))


@pytest.mark.parametrize("command", ["memdump", "memdump-analyze"])
def test_the_man_pages_name_every_option_of_the_help(prefix: Path, command: str) -> None:
    shown = subprocess.run([str(prefix / "bin" / command), "--help"], capture_output=True,
                           text=True, timeout=60).stdout
    page = (REPO / "packaging" / "man" / f"{command}.1").read_text().replace("\\-", "-")
    usage = shown[shown.index("options:"):] if "options:" in shown else shown
    usage = usage.split("\n\n`memdump-analyze diff")[0]
    missing = {o for o in _options(usage) if o not in page}
    assert missing == set()
    if shutil.which("groff"):
        warned = subprocess.run(["groff", "-man", "-ww", "-z",
                                 str(REPO / "packaging" / "man" / f"{command}.1")],
                                capture_output=True, text=True, timeout=60)
        assert warned.stderr == ""


@pytest.mark.skipif(shutil.which("dpkg-deb") is None or shutil.which("cpack") is None,
                    reason="needs dpkg-deb and cpack")
def test_the_debian_package_loads_the_commands_into_every_gdb(tmp_path: Path) -> None:
    """The package's build (DBGKIT_TOOLS_ONLY, prefix /usr): its files, its dependencies, the
    system gdbinit file, and its tree run where it is unpacked."""
    build = tmp_path / "build-deb"
    subprocess.run(["cmake", "-S", str(REPO), "-B", str(build), "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DDBGKIT_TOOLS_ONLY=ON",
                    "-DCMAKE_INSTALL_PREFIX=/usr",
                    "-DDBGKIT_INSTALL_GDBINIT_DIR=/etc/gdb/gdbinit.d"],
                   check=True, capture_output=True, timeout=300)
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True, timeout=600)
    subprocess.run(["cpack", "-G", "DEB"], cwd=build, check=True, capture_output=True, timeout=300)
    (deb,) = build.glob("dbgkit_*.deb")
    info = subprocess.run(["dpkg-deb", "-f", str(deb), "Package", "Depends"], check=True,
                          capture_output=True, text=True).stdout
    assert info.startswith("Package: dbgkit\nDepends: gdb (>= 12), python3 (>= 3.9), "), info
    assert "libdw1" in info
    unpacked = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
    gdbinit = (unpacked / "etc" / "gdb" / "gdbinit.d" / "dbgkit.gdb").read_text()
    assert gdbinit.splitlines()[-1] == "source /usr/share/dbgkit/gdb/dbgkit.py"
    assert {p.name for p in (unpacked / "usr" / "bin").iterdir()} == BIN
    prog = tmp_path / "leak_malloc"
    shutil.copy(program("leak_malloc"), prog)
    run = subprocess.run([str(unpacked / "usr" / "bin" / "memdump"), "--report", "-o",
                          str(tmp_path / "d.memdump"), str(prog)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "definitely lost: 24 bytes in 1 block" in run.stderr, \
        run.stderr
