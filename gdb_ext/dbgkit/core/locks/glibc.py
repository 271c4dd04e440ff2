"""glibc's lock objects as bytes: field layouts (from debug info, or glibc 2.36's x86-64 table),
their decoded states, and the functions a thread calls to take, wait on or release them.

The layouts are those of glibc's public headers (bits/struct_mutex.h, bits/struct_rwlock.h,
bits/thread-shared-types.h) and of nptl's sem_t (`struct new_sem`, sysdeps/nptl/internaltypes.h);
the bits are those of nptl/pthread_rwlock_common.c (READERS_SHIFT, PTHREAD_RWLOCK_WRLOCKED...),
nptl/pthreadP.h (PTHREAD_MUTEX_ROBUST_NORMAL_NP, PTHREAD_MUTEX_PSHARED_BIT) and linux/futex.h.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

# The structures and fields the command reads, by (structure, field).
FIELDS: dict[str, tuple[str, ...]] = {
    "mutex": ("__lock", "__count", "__owner", "__nusers", "__kind"),
    "rwlock": ("__readers", "__writers", "__wrphase_futex", "__writers_futex", "__cur_writer",
               "__shared", "__flags"),
    "cond": ("__g_refs", "__g_size", "__g1_orig_size", "__wrefs", "__g_signals"),
    "sem": ("data", "private"),
}
SIZES_236 = {"mutex": 40, "rwlock": 56, "cond": 48, "sem": 32}


@dataclass(frozen=True)
class Layout:
    """Byte offsets of the lock fields, and where they came from ("debug info" or "table")."""

    source: str
    offsets: dict[str, dict[str, int]]
    sizes: dict[str, int]

    def offset(self, kind: str, name: str) -> int:
        return self.offsets[kind][name]


# glibc 2.36, x86-64: checked against its debug info by tests/e2e/test_deadlocks.py
# (test_the_table_matches_glibcs_debug_info).
TABLE_236 = Layout(
    "table",
    {
        "mutex": {"__lock": 0, "__count": 4, "__owner": 8, "__nusers": 12, "__kind": 16},
        "rwlock": {"__readers": 0, "__writers": 4, "__wrphase_futex": 8, "__writers_futex": 12,
                   "__cur_writer": 24, "__shared": 28, "__flags": 48},
        "cond": {"__g_refs": 16, "__g_size": 24, "__g1_orig_size": 32, "__wrefs": 36,
                 "__g_signals": 40},
        "sem": {"data": 0, "private": 8},
    },
    SIZES_236,
)
TABLES: dict[str, Layout] = {"2.36": TABLE_236}


class LayoutError(Exception):
    """No layout for this glibc: the text says why, in one line."""


_RELEASE = re.compile(rb"release version (\d+\.\d+)")
_SONAME = re.compile(r"libc-(\d+\.\d+)\.so$")


def glibc_version(path: str) -> str | None:
    """glibc's version from its file name (libc-2.31.so) or the banner in its read-only data
    ("... release version 2.36."), which gnu_get_libc_version() returns; None if neither."""
    found = _SONAME.search(path)
    if found:
        return found.group(1)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    match = _RELEASE.search(data)
    return match.group(1).decode() if match else None


def table_for(version: str | None, machine: str) -> Layout:
    """The fallback table for this glibc version on this machine, or LayoutError."""
    if machine != "x86_64":
        raise LayoutError(f"no glibc layout table for {machine} (only x86-64): install libc6-dbg")
    if version is None:
        raise LayoutError("cannot tell the glibc version of the process: install libc6-dbg")
    if version not in TABLES:
        raise LayoutError(f"no layout table for glibc {version} (the table has "
                          f"{', '.join(sorted(TABLES))}): install its debug info (libc6-dbg)")
    return TABLES[version]


# -- states ------------------------------------------------------------------------------------

FUTEX_WAITERS = 0x80000000
FUTEX_OWNER_DIED = 0x40000000
FUTEX_TID_MASK = 0x3FFFFFFF
MUTEX_KINDS = {0: "normal", 1: "recursive", 2: "errorcheck", 3: "adaptive"}
MUTEX_ROBUST = 16
MUTEX_PRIO_INHERIT = 32
MUTEX_PRIO_PROTECT = 64
MUTEX_PSHARED = 128
RWLOCK_WRPHASE = 1
RWLOCK_WRLOCKED = 2
RWLOCK_READERS_SHIFT = 3
RWLOCK_PREFER = {0: "prefer readers", 1: "prefer writers", 2: "prefer writers nonrecursive"}


def _u32(data: bytes, offset: int) -> int:
    return int(struct.unpack_from("<I", data, offset)[0])


def _i32(data: bytes, offset: int) -> int:
    return int(struct.unpack_from("<i", data, offset)[0])


@dataclass(frozen=True)
class MutexState:
    """A pthread_mutex_t: who owns it, its kind, whether threads wait, and what is wrong with it."""

    lock: int
    count: int
    owner: int
    nusers: int
    kind_bits: int

    @property
    def kind(self) -> str:
        words = [MUTEX_KINDS.get(self.kind_bits & 3, f"kind {self.kind_bits & 3}")]
        for bit, word in ((MUTEX_ROBUST, "robust"), (MUTEX_PRIO_INHERIT, "priority-inherit"),
                          (MUTEX_PRIO_PROTECT, "priority-protect")):
            if self.kind_bits & bit:
                words.append(word)
        # glibc sets the shared-futex bit for every robust mutex too (pthread_mutex_init.c):
        # only without robust does it say the mutex is process-shared
        if self.kind_bits & MUTEX_PSHARED and not self.kind_bits & MUTEX_ROBUST:
            words.append("process-shared")
        return ", ".join(words)

    @property
    def robust_or_pi(self) -> bool:
        return bool(self.kind_bits & (MUTEX_ROBUST | MUTEX_PRIO_INHERIT))

    @property
    def locked(self) -> bool:
        return self.lock != 0

    @property
    def waiters(self) -> bool:
        """Threads sleep on it: lock word 2 (normal), or FUTEX_WAITERS (robust, PI)."""
        if self.robust_or_pi:
            return bool(self.lock & FUTEX_WAITERS)
        return self.lock == 2

    @property
    def owner_died(self) -> bool:
        return self.robust_or_pi and bool(self.lock & FUTEX_OWNER_DIED)

    def problem(self) -> str | None:
        """Why this lock word cannot be a glibc mutex's, or None when it can."""
        if self.robust_or_pi:
            if self.lock & FUTEX_TID_MASK not in (0, self.owner & FUTEX_TID_MASK):
                return (f"lock word {self.lock:#x} names thread {self.lock & FUTEX_TID_MASK}, "
                        f"the owner field {self.owner}")
        elif self.lock not in (0, 1, 2):
            return f"lock word {self.lock:#x} is none of 0, 1, 2"
        if self.lock == 0 and self.owner not in (0, -1):
            return f"unlocked but owner field {self.owner}"
        if self.owner < -1 or self.owner > FUTEX_TID_MASK:
            return f"owner field {self.owner} is no thread id"
        return None


def decode_mutex(data: bytes, layout: Layout) -> MutexState:
    o = layout.offsets["mutex"]
    return MutexState(_u32(data, o["__lock"]), _u32(data, o["__count"]), _i32(data, o["__owner"]),
                      _u32(data, o["__nusers"]), _i32(data, o["__kind"]))


@dataclass(frozen=True)
class RwlockState:
    """A pthread_rwlock_t: readers holding it (a count only: glibc keeps no list), writer owner."""

    readers_word: int
    writers: int
    cur_writer: int
    shared: int
    flags: int

    @property
    def readers(self) -> int:
        """Readers holding it. In a write phase the count is of the readers that registered and
        wait for the phase to end (nptl/pthread_rwlock_common.c), who hold nothing."""
        return 0 if self.write_phase else self.readers_word >> RWLOCK_READERS_SHIFT

    @property
    def waiting_readers(self) -> int:
        """Readers registered in a write phase, waiting for it to end."""
        return self.readers_word >> RWLOCK_READERS_SHIFT if self.write_phase else 0

    @property
    def write_locked(self) -> bool:
        return bool(self.readers_word & RWLOCK_WRLOCKED)

    @property
    def write_phase(self) -> bool:
        return bool(self.readers_word & RWLOCK_WRPHASE)

    @property
    def preference(self) -> str:
        return RWLOCK_PREFER.get(self.flags, f"flags {self.flags}")

    def problem(self) -> str | None:
        if self.flags not in RWLOCK_PREFER:
            return f"flags field {self.flags} is none of 0, 1, 2"
        if self.shared not in (0, 1):
            return f"shared field {self.shared} is neither 0 nor 1"
        return None


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def rwlock_words(s: RwlockState) -> list[str]:
    """An rwlock's state in words: readers, waiting readers, the writer, the preference."""
    words = []
    if s.readers:
        words.append(_count(s.readers, "reader"))
    if s.waiting_readers:
        words.append(_count(s.waiting_readers, "reader") + " waiting")
    if s.write_locked:
        words.append(f"write-locked by LWP {s.cur_writer}" if s.cur_writer else
                     "a writer waits for the readers")
    if not words:
        words.append("unlocked")
    words.append(s.preference)
    if s.shared:
        words.append("process-shared")
    return words


def decode_rwlock(data: bytes, layout: Layout) -> RwlockState:
    o = layout.offsets["rwlock"]
    return RwlockState(_u32(data, o["__readers"]), _u32(data, o["__writers"]),
                       _i32(data, o["__cur_writer"]), _i32(data, o["__shared"]),
                       _u32(data, o["__flags"]))


@dataclass(frozen=True)
class SemState:
    """A sem_t (64-bit `struct new_sem`): value in the low 32 bits of data, waiters in the high."""

    value: int
    waiters: int


def decode_sem(data: bytes, layout: Layout) -> SemState:
    word = int(struct.unpack_from("<Q", data, layout.offsets["sem"]["data"])[0])
    return SemState(word & 0xFFFFFFFF, word >> 32)


@dataclass(frozen=True)
class CondState:
    """A pthread_cond_t: the number of waiters (__wrefs >> 3, nptl/pthread_cond_wait.c)."""

    waiters: int


def decode_cond(data: bytes, layout: Layout) -> CondState:
    return CondState(_u32(data, layout.offsets["cond"]["__wrefs"]) >> 3)


# -- the functions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LockCall:
    """What calling a function does to a lock: OP is acquire, release or wait; MODE read/write
    for rwlocks; the lock is the argument in register ARG, or the first word of the object
    there when DEREF (a std::lock_guard's destructor gets the guard, which holds the mutex)."""

    op: str
    kind: str
    mode: str = ""
    arg: str = "rdi"
    deref: bool = False


def _guards(guard: str, mutex: str, kind: str, mode: str) -> dict[str, LockCall]:
    """The names of a libstdc++ lock guard's constructor and destructor on MUTEX, demangled, and
    of its lock() and unlock() (unique_lock and shared_lock have them); the guard's first word
    points to the mutex."""
    cls = f"std::{guard}<{mutex}>"
    calls = {f"{cls}::{guard}": LockCall("acquire", kind, mode, "rsi"),
             f"{cls}::~{guard}": LockCall("release", kind, mode, deref=True)}
    if guard != "lock_guard":
        calls[f"{cls}::lock"] = LockCall("acquire", kind, mode, deref=True)
        calls[f"{cls}::unlock"] = LockCall("release", kind, mode, deref=True)
    return calls


CALLS: dict[str, LockCall] = {
    "pthread_mutex_lock": LockCall("acquire", "mutex"),
    "pthread_mutex_timedlock": LockCall("acquire", "mutex"),
    "pthread_mutex_clocklock": LockCall("acquire", "mutex"),
    "pthread_mutex_unlock": LockCall("release", "mutex"),
    "pthread_rwlock_rdlock": LockCall("acquire", "rwlock", "read"),
    "pthread_rwlock_timedrdlock": LockCall("acquire", "rwlock", "read"),
    "pthread_rwlock_clockrdlock": LockCall("acquire", "rwlock", "read"),
    "pthread_rwlock_wrlock": LockCall("acquire", "rwlock", "write"),
    "pthread_rwlock_timedwrlock": LockCall("acquire", "rwlock", "write"),
    "pthread_rwlock_clockwrlock": LockCall("acquire", "rwlock", "write"),
    "pthread_rwlock_unlock": LockCall("release", "rwlock"),
    "sem_wait": LockCall("acquire", "sem"),
    "sem_timedwait": LockCall("acquire", "sem"),
    "sem_clockwait": LockCall("acquire", "sem"),
    "sem_post": LockCall("release", "sem"),
    "pthread_cond_wait": LockCall("wait", "cond"),
    "pthread_cond_timedwait": LockCall("wait", "cond"),
    "pthread_cond_clockwait": LockCall("wait", "cond"),
    "std::mutex::lock": LockCall("acquire", "mutex"),
    "std::mutex::unlock": LockCall("release", "mutex"),
    "std::shared_mutex::lock": LockCall("acquire", "rwlock", "write"),
    "std::shared_mutex::lock_shared": LockCall("acquire", "rwlock", "read"),
    "std::shared_mutex::unlock": LockCall("release", "rwlock"),
    "std::shared_mutex::unlock_shared": LockCall("release", "rwlock"),
    **_guards("lock_guard", "std::mutex", "mutex", ""),
    **_guards("unique_lock", "std::mutex", "mutex", ""),
    **_guards("lock_guard", "std::shared_mutex", "rwlock", "write"),
    **_guards("unique_lock", "std::shared_mutex", "rwlock", "write"),
    **_guards("shared_lock", "std::shared_mutex", "rwlock", "read"),
    # a join waits for a thread, not a lock: the argument is the thread's pthread_t, and
    # std::thread::join's `this` holds it in its first word
    "pthread_join": LockCall("join", "thread"),
    "pthread_timedjoin_np": LockCall("join", "thread"),
    "pthread_clockjoin_np": LockCall("join", "thread"),
    "std::thread::join": LockCall("join", "thread", deref=True),
}

# glibc's entry points (public names and, with libc6-dbg, the internal ones frames show), with
# the lock kind and mode a thread blocked under them waits for; kind "thread" is a join, which
# waits for a thread to exit (its futex word is the thread's `tid`, which the kernel clears).
WAIT_FRAMES: dict[str, tuple[str, str]] = {
    **{n: ("mutex", "") for n in (
        "pthread_mutex_lock", "___pthread_mutex_lock", "__pthread_mutex_lock",
        "__pthread_mutex_lock_full", "pthread_mutex_timedlock", "pthread_mutex_clocklock",
        "__pthread_mutex_clocklock_common", "___pthread_mutex_clocklock64",
        "___pthread_mutex_timedlock64", "__pthread_mutex_cond_lock",
        "__pthread_mutex_cond_lock_full")},
    **{n: ("rwlock", "read") for n in (
        "pthread_rwlock_rdlock", "___pthread_rwlock_rdlock", "__pthread_rwlock_rdlock",
        "__pthread_rwlock_rdlock_full64", "pthread_rwlock_timedrdlock",
        "pthread_rwlock_clockrdlock", "___pthread_rwlock_timedrdlock64",
        "___pthread_rwlock_clockrdlock64")},
    **{n: ("rwlock", "write") for n in (
        "pthread_rwlock_wrlock", "___pthread_rwlock_wrlock", "__pthread_rwlock_wrlock",
        "__pthread_rwlock_wrlock_full64", "pthread_rwlock_timedwrlock",
        "pthread_rwlock_clockwrlock", "___pthread_rwlock_timedwrlock64",
        "___pthread_rwlock_clockwrlock64")},
    **{n: ("cond", "") for n in (
        "pthread_cond_wait", "___pthread_cond_wait", "__pthread_cond_wait",
        "__pthread_cond_wait_common", "pthread_cond_timedwait", "pthread_cond_clockwait",
        "___pthread_cond_timedwait64", "___pthread_cond_clockwait64")},
    **{n: ("sem", "") for n in (
        "sem_wait", "__new_sem_wait", "__new_sem_wait_slow64", "sem_timedwait", "sem_clockwait",
        "__sem_timedwait", "___sem_timedwait64", "__sem_clockwait64")},
    **{n: ("thread", "") for n in (
        "pthread_join", "___pthread_join", "__pthread_join", "__pthread_clockjoin_ex",
        "pthread_timedjoin_np", "___pthread_timedjoin_np64", "__pthread_timedjoin_np64",
        "pthread_clockjoin_np", "___pthread_clockjoin_np64", "__pthread_clockjoin_np64")},
}
# The debug-info argument name of each kind's object in those frames.
ARGUMENT = {"mutex": "mutex", "rwlock": "rwlock", "cond": "cond", "sem": "sem"}
# Where a waiter's futex word sits in each kind (the futex address a sleeping thread passed to
# futex(2) minus one of these is the object): nptl's futex_wait calls.
FUTEX_FIELDS = {"mutex": (("mutex", "__lock"),), "sem": (("sem", "data"),),
                "rwlock": (("rwlock", "__wrphase_futex"), ("rwlock", "__writers_futex")),
                "cond": (("cond", "__g_signals"), ("cond", "__g_signals"))}


def futex_candidates(kind: str, futex: int, layout: Layout) -> list[int]:
    """The addresses the KIND object can start at for a thread asleep on FUTEX (a cond's second
    group signal word is 4 bytes after the first)."""
    out = []
    for i, (struct_name, name) in enumerate(FUTEX_FIELDS[kind]):
        extra = 4 * i if kind == "cond" else 0
        base = futex - layout.offsets[struct_name][name] - extra
        if base not in out:
            out.append(base)
    return out


@dataclass
class LockInfo:
    """One lock seen in the process: address, kind, decoded state, name and C/C++ type."""

    address: int
    kind: str
    state: MutexState | RwlockState | SemState | CondState | None = None
    name: str = ""
    type_name: str = ""
    notes: list[str] = field(default_factory=list)


def normalize_function(name: str) -> str:
    """A symbol as disassembly or a frame shows it, reduced to the names CALLS and WAIT_FRAMES use:
    no `@plt`, no `+OFFSET`, no parameter list, no GLIBC version suffix."""
    name = name.strip()
    name = re.sub(r"\+\d+$", "", name)
    name = name.split("@", 1)[0]
    depth = 0
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0 and i > 0:
            return name[:i]
    return name
