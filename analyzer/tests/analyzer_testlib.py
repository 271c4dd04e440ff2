"""Helpers of the analyser's tests: a builder of hand-written dumps, and the paths of the repo.

(A module of its own, not conftest.py: the repo's other test directories have their own conftest.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"
ANALYZER = TESTS.parent
REPO = ANALYZER.parent

sys.path.insert(0, str(ANALYZER))

from memdump_analyzer.dumpformat import GRAMMAR_BY_TAG, SHORT_OPS  # noqa: E402

#: heap operation -> its short record's tag (format 2.0, 2.1, 2.5)
SHORT_TAGS = {op: tag for tag, op in SHORT_OPS.items()}
APP = "/src/app"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LIBSTDCXX = "/lib/x86_64-linux-gnu/libstdc++.so.6"
LDSO = "/lib64/ld-linux-x86-64.so.2"


@dataclass(frozen=True)
class F:
    """A frame of a hand-written stack."""

    function: str | None
    file: str | None = None
    line: int = 0
    module: str | None = APP
    pc: int | None = None
    #: the functions this frame's code was inlined into, innermost first: (function, file, line)
    #: each, written as `fi` records after the frame's `f` record
    into: tuple[tuple[str | None, str | None, int], ...] = ()


def main_at(line: int, file: str = "/src/app.c") -> list[F]:
    """The stack of a call made by `main` at `line`, under glibc's start-up frame."""
    return [F("main", file, line), F("__libc_start_call_main", module=LIBC, pc=0x7FFFF7DF018A)]


class Dump:
    """Writes a dump line by line; definitions are made on first use, SEQs are counted.

    `short`: write malloc and free as the in-process recorder does, `+` and `-` records after a
    `t` record naming their thread (format 2.0), the C++ operators as `+n`, `+a`, `-n`, `-a`
    (2.1), calloc and realloc as `+c` and `+r` (2.5): each short record of the header's version
    (a `MEMDUMP 2.0` dump has `+` and `-` only)."""

    def __init__(
        self, *, attached: bool = False, header: str = "MEMDUMP 1.0", short: bool = False
    ) -> None:
        self.lines: list[str] = [header]
        self.short = short
        major, minor = (int(x) for x in header.split()[1].split("."))
        #: the short records of this dump's version: heap operation -> tag
        self.short_tags = {op: tag for op, tag in SHORT_TAGS.items()
                           if GRAMMAR_BY_TAG[tag].since <= (major, minor)}
        self.short_tid: int | None = None
        for key, value in (
            ("program", APP),
            ("pid", "100"),
            ("arch", "x86_64"),
            ("depth", "32"),
            ("attached", "1" if attached else "0"),
            ("start", "2026-11-21T19:40:00Z"),
            ("gdb", "13.1"),
        ):
            self.lines.append(f"i {key} {value}")
        self.strings: dict[str, int] = {}
        self.frames: dict[F, int] = {}
        self.pcs: set[int] = set()
        self.nodes: dict[tuple[int, int], int] = {}
        self.seq = 0

    def string(self, text: str | None) -> int:
        if text is None:
            return 0
        if text not in self.strings:
            self.strings[text] = len(self.strings) + 1
            escaped = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
            self.lines.append(f"s {self.strings[text]} {escaped}")
        return self.strings[text]

    def frame(self, f: F) -> int:
        if f not in self.frames:
            module, function, file = (
                self.string(f.module),
                self.string(f.function),
                self.string(f.file),
            )
            ident = len(self.frames) + 1
            pc = f.pc if f.pc is not None else 0x555555555000 + 0x10 * ident
            assert pc not in self.pcs, "two frames with one PC"
            self.pcs.add(pc)
            self.frames[f] = ident
            self.lines.append(
                f"f {ident} 0x{pc:x} {module} 0x{pc & 0xFFFFF:x} {function} {file} {f.line}"
            )
            for name, path, line in f.into:
                outer, src = self.string(name), self.string(path)
                self.lines.append(f"fi {ident} {outer} {src} {line}")
        return self.frames[f]

    def stack(self, frames: list[F]) -> int:
        """Node id of a stack given innermost first (an empty list: 0)."""
        node = 0
        for f in reversed(frames):
            frame = self.frame(f)
            key = (node, frame)
            if key not in self.nodes:
                self.nodes[key] = len(self.nodes) + 1
                self.lines.append(f"n {self.nodes[key]} {node} {frame}")
            node = self.nodes[key]
        return node

    def e(
        self, op: str, result: str, *args: object, stack: list[F] | int = 0, tid: int = 100
    ) -> int:
        node = stack if isinstance(stack, int) else self.stack(stack)
        self.seq += 1
        fields = " ".join(str(a) for a in args)
        if self.short and op in self.short_tags:
            if tid != self.short_tid:
                self.lines.append(f"t {tid}")
                self.short_tid = tid
            tag = self.short_tags[op]
            if tag.startswith("+"):
                self.lines.append(f"{tag} {node} {result} {fields}")
            else:
                self.lines.append(f"{tag} {node} {fields}")
        else:
            self.lines.append(f"e {self.seq} {tid} {op} {node} {result} {fields}")
        return self.seq

    def malloc(self, ptr: str, size: int, stack: list[F] | int = 0, tid: int = 100) -> int:
        return self.e("malloc", ptr, size, stack=stack, tid=tid)

    def free(self, ptr: str, stack: list[F] | int = 0, tid: int = 100) -> int:
        return self.e("free", "-", ptr, stack=stack, tid=tid)

    def p(self, what: str, detail: str) -> int:
        self.seq += 1
        self.lines.append(f"p {self.seq} {what} {detail}")
        return self.seq

    def end(self, reason: str = "exit", detail: str = "0") -> int:
        self.seq += 1
        self.lines.append(f"end {self.seq} {reason} {detail}")
        return self.seq

    def raw(self, line: str) -> int:
        """Append a line as it is; returns its line number."""
        self.lines.append(line)
        return len(self.lines)

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)

    def write(self, directory: Path, name: str = "test.memdump") -> str:
        path = directory / name
        path.write_text(self.text(), encoding="utf-8", errors="surrogateescape")
        return str(path)


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    """Run `python3 -m memdump_analyzer` as a user would, with PYTHONPATH=analyzer."""
    full_env = dict(os.environ)
    full_env.pop("MEMDUMP_DEBUG", None)
    full_env["PYTHONPATH"] = str(ANALYZER)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "memdump_analyzer", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        check=False,
    )


def analyser_before(version: tuple[int, int], tmp_path: Path) -> Path:
    """The analyser as of the commit before the one that made dump format VERSION, from this
    checkout's history, extracted under TMP_PATH: the directory to put on PYTHONPATH. Skips
    the test without that history."""
    pattern = rf"VERSION: tuple\[int, int\] = \({version[0]}, {version[1]}\)"
    found = subprocess.run(
        ["git", "-C", str(REPO), "log", "--format=%H", "-G", pattern, "--",
         "analyzer/memdump_analyzer/dumpformat.py"], capture_output=True, text=True, check=False)
    commits = found.stdout.split()
    if found.returncode != 0 or not commits:
        pytest.skip(f"needs the git history of this checkout (the commit that made format "
                    f"{version[0]}.{version[1]})")
    out = tmp_path / f"before-{version[0]}.{version[1]}"
    out.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", f"{commits[-1]}^", "analyzer/memdump_analyzer"],
        capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out / "analyzer"


def run_analyser_before(version: tuple[int, int], dump: Path, tmp_path: Path,
                        tag: str, first: str) -> subprocess.CompletedProcess[str]:
    """`memdump-analyze DUMP` run by the analyser that came before dump format VERSION
    (analyser_before), in TMP_PATH: checks that it is the version before, and that it read the
    dump with one warning, for the records of TAG it does not know (the first the line FIRST)."""
    old = analyser_before(version, tmp_path)
    before = (version[0], version[1] - 1)
    assert f"VERSION: tuple[int, int] = {before}" in (
        old / "memdump_analyzer" / "dumpformat.py").read_text()
    result = subprocess.run([sys.executable, "-m", "memdump_analyzer", str(dump)], cwd=tmp_path,
                            env={"PYTHONPATH": str(old)}, capture_output=True, text=True,
                            check=False)
    line = dump.read_text().splitlines().index(first) + 1
    assert result.returncode == 0, result.stderr
    assert result.stderr == (f"memdump-analyze: warning: skipped records with unknown tag "
                             f"'{tag}' (first at line {line}): the dump was written by a newer "
                             "memdump\n")
    return result


def fuzz_clean(tmp_path: Path, *args: str, runs: int) -> None:
    """scripts/fuzz-core.sh with ARGS for RUNS inputs (in TMP_PATH, where a finding's input is
    copied) ran them all with no crash, sanitizer report or leak."""
    if shutil.which("clang") is None:
        pytest.fail("clang is one of the test packages (scripts/setup.sh): it is missing")
    run = subprocess.run([str(REPO / "scripts" / "fuzz-core.sh"), *args, "-r", str(runs)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    assert f"stat::number_of_executed_units: {runs}" in run.stderr
    assert run.stderr.endswith("fuzz-core.sh: no crash, sanitizer report or leak\n")
