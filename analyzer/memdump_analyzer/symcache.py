"""The symbolised frames of each module build, kept on disk between runs (docs/recorder.md, "The
symbol cache").

Symbolising glibc's frames from libc6-dbg costs memdump-symbolize 50 ms a run, most of it libdw
inflating the debug file's compressed sections, for the same answers every time: `addr2line` (in
symbolize.py) looks each address up here first and runs the symboliser on the others only.

One file per module build and symboliser, `$XDG_CACHE_HOME/dbgkit/symbols/BUILDID-TOOL[-C].json`
(`~/.cache` without XDG_CACHE_HOME; directories 0700, files 0600), holding its key and the
answers by address. The key is what the answers depend on beyond the build id: the symboliser (its
real path, size and modification time: its version), demangling, the module's size (a stripped
copy keeps its build id) and the separate debug files the symbolisers read (size and modification
time of `/usr/lib/debug/.build-id/xx/rest.debug` and of `/usr/lib/debug` + the module's path,
present or not): a file whose key differs is recomputed and replaced without a word. A module
without a build id is not cached. A file is written whole under a name of its own in the same
directory and renamed over the old one: a concurrent reader sees the old file or the new one, and
two runs that add frames at once keep one run's (the other's are looked up again later). A file
holds at most MAX_FILE_BYTES and the directory MAX_DIR_BYTES: past that, the files least recently
used (hits touch their time) are removed. A file that is not a cache file (unreadable, not JSON,
not this user's, malformed) is ignored with one warning per process, and replaced by the next
write. `MEMDUMP_NO_CACHE=1` turns the cache off (nothing is read or written).

Standard library only; no GDB.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field

from .buildid import build_id

__all__ = ["ENV_OFF", "FORMAT", "MAX_DIR_BYTES", "MAX_FILE_BYTES", "Entry", "directory", "entry"]

#: the files' format; a file of another format is replaced, as a key that differs
FORMAT = "dbgkit-symbols 1"
#: set to anything but "" or "0": no cache
ENV_OFF = "MEMDUMP_NO_CACHE"
#: the largest file written or read (a module's answers beyond it are not kept)
MAX_FILE_BYTES = 4 << 20
#: the directory's size after a write (least recently used files removed)
MAX_DIR_BYTES = 32 << 20
#: where separate debug files are (symbols.DEBUG_ROOT, addr2line's and libdw's default)
DEBUG_ROOT = "/usr/lib/debug"

#: one level of a frame's symbols: (function, file, line) (symbolize.Level)
Level = tuple[str | None, str | None, int | None]

_warned = False


def _warn(message: str) -> None:
    """One warning per process on standard error: a cache problem never fails a run."""
    global _warned
    if not _warned:
        _warned = True
        sys.stderr.write(f"dbgkit: warning: {message}: symbolised without the cache\n")


def directory() -> str | None:
    """Where the cache files are; None when the cache is off, or without XDG_CACHE_HOME when the
    home directory is not one (a daemon's `/nonexistent`: a cache never makes a home)."""
    if os.environ.get(ENV_OFF, "") not in ("", "0"):
        return None
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG rule: a relative path is ignored
        home = os.path.expanduser("~")
        if not os.path.isabs(home) or not os.path.isdir(home):  # never made: HOME=/nonexistent
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "dbgkit", "symbols")


@dataclass
class Entry:
    """One module build's answers from one symboliser: those on disk, and what the run adds."""

    path: str
    key: dict[str, object]
    frames: dict[int, list[Level]]
    #: whether each address asked lies inside a sized function symbol (`nm -S`: the analyser's
    #: test of an answer that names a function without a file, symbolize.py): the module's
    #: symbol table decides it, as the build id and size in the key do
    inside: dict[int, bool] = field(default_factory=dict)

    def save(self, fresh: dict[int, list[Level]], inside: dict[int, bool] | None = None) -> None:
        """Add FRESH (answers just computed) and INSIDE (verdicts just computed) to the file,
        written atomically; a failure to write is one warning."""
        inside = inside or {}
        if all(self.frames.get(k) == v for k, v in fresh.items()) and all(
                self.inside.get(k) == v for k, v in inside.items()):
            return
        for frames, verdicts in (({**self.frames, **fresh}, {**self.inside, **inside}),
                                 (fresh, inside)):  # too large merged: this run's alone
            doc: dict[str, object] = {"key": self.key, "frames": {
                f"{o:x}": frames[o] for o in sorted(frames)}}
            if verdicts:
                doc["inside"] = {f"{o:x}": verdicts[o] for o in sorted(verdicts)}
            text = json.dumps(doc, separators=(",", ":")).encode()
            if len(text) <= MAX_FILE_BYTES:
                break
        else:
            return
        where = os.path.dirname(self.path)
        tmp = None
        try:
            _make_directory(where)
            tmp = os.path.join(where, f".{os.getpid()}-{os.urandom(6).hex()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(text)
            os.replace(tmp, self.path)
            tmp = None
            _prune(where)
        except OSError as e:
            _warn(f"the symbol cache {where} cannot be written ({e.strerror or e})")
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

    def used(self) -> None:
        """Mark the file used now (the least recently used go first)."""
        try:
            os.utime(self.path)
        except OSError:
            pass


def entry(program: str, module: str, *, demangle: bool) -> Entry | None:
    """The cache of MODULE's answers from PROGRAM (a symboliser in addr2line's protocol), read;
    None when the cache is off, MODULE has no build id, or either file cannot be read."""
    where = directory()
    if where is None:
        return None
    ident = build_id(module)
    if ident is None:
        return None
    try:
        tool, size = os.stat(program), os.stat(module).st_size
    except OSError:
        return None
    key: dict[str, object] = {
        "format": FORMAT,
        "symbolizer": [os.path.realpath(program), tool.st_size, tool.st_mtime_ns],
        "demangle": demangle,
        "module_size": size,
        "debug_files": [_stamp(os.path.join(DEBUG_ROOT, ".build-id", ident[:2],
                                            ident[2:] + ".debug")),
                        _stamp(DEBUG_ROOT + os.path.realpath(module))],
    }
    name = f"{ident}-{os.path.basename(program)}{'-C' if demangle else ''}.json"
    path = os.path.join(where, name)
    return Entry(path, key, *_read(path, key))


def _stamp(path: str) -> list[int] | None:
    """[size, modification time] of the file at PATH, None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _read(path: str, key: dict[str, object]) -> tuple[dict[int, list[Level]], dict[int, bool]]:
    """The answers and the verdicts of the file at PATH if its key is KEY, else none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return {}, {}
    except OSError as e:
        _warn(f"{path}: {e.strerror or e}")
        return {}, {}
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_uid != os.getuid() or st.st_size > MAX_FILE_BYTES:
            _warn(f"{path}: not a symbol cache file of this user")
            return {}, {}
        data = f.read()
    try:
        doc = json.loads(data)
        if not isinstance(doc, dict) or not isinstance(doc.get("key"), dict):
            raise ValueError
        if doc["key"] != key:  # another symboliser, debug file or format: replaced
            return {}, {}
        return _frames(doc.get("frames")), _inside(doc.get("inside", {}))
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError too
        _warn(f"{path}: not a symbol cache file")
        return {}, {}


def _frames(table: object) -> dict[int, list[Level]]:
    """The answers of a file's `frames` object, checked; ValueError when malformed."""
    if not isinstance(table, dict):
        raise ValueError
    out: dict[int, list[Level]] = {}
    for address, chain in table.items():
        if not isinstance(chain, list):
            raise ValueError
        levels: list[Level] = []
        for level in chain:
            if not (isinstance(level, list) and len(level) == 3
                    and all(v is None or isinstance(v, str) for v in level[:2])
                    and (level[2] is None or type(level[2]) is int)):
                raise ValueError
            levels.append((level[0], level[1], level[2]))
        out[int(address, 16)] = levels
    return out


def _inside(table: object) -> dict[int, bool]:
    """The verdicts of a file's `inside` object (address -> true or false), checked; ValueError
    when malformed."""
    if not isinstance(table, dict) or not all(type(v) is bool for v in table.values()):
        raise ValueError
    return {int(address, 16): verdict for address, verdict in table.items()}


def _make_directory(where: str) -> None:
    """WHERE and its parent `dbgkit` made 0700 if missing; OSError when WHERE is not this
    user's or others can reach it."""
    parent = os.path.dirname(where)
    os.makedirs(os.path.dirname(parent), exist_ok=True)
    for path in (parent, where):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    st = os.stat(where, follow_symlinks=False)
    if st.st_uid != os.getuid() or not os.path.isdir(where) or os.path.islink(where):
        raise OSError(f"{where} is not this user's directory")
    if st.st_mode & 0o077:
        os.chmod(where, 0o700)


def _prune(where: str) -> None:
    """Remove the least recently used files of WHERE until it holds MAX_DIR_BYTES or less."""
    files = []
    with os.scandir(where) as found:
        for item in found:
            if item.is_file(follow_symlinks=False):
                st = item.stat(follow_symlinks=False)
                files.append((st.st_mtime_ns, st.st_size, item.path))
    total = sum(size for _, size, _ in files)
    for _, size, path in sorted(files):
        if total <= MAX_DIR_BYTES:
            break
        try:
            os.unlink(path)
        except OSError:
            continue
        total -= size
