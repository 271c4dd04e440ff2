/* @brief Lock contention counters: the pthread mutex and rwlock calls, interposed
 * (docs/contention.md, "The in-process recorder's lock counts").
 *
 * mutrace's method: a lock call first tries the lock; when that fails the acquisition is
 * contended, and the blocking call is timed with CLOCK_MONOTONIC (the vDSO: no system call).
 * Each lock's counters live in a table in the recorder's own memory (mdr_map: never the
 * program's heap, and left out of the pointer scan's roots), found by the lock's address with
 * linear probing; a slot is claimed with one compare-and-swap and its counters are atomic adds,
 * so a hook takes no lock (no deadlock with the recorder's own lock, which these hooks never
 * touch) and allocates nothing. GDB reads the table at any stop (`contention`) through the
 * exported header `memdump_recorder_locks`.
 *
 * By call stack: a contended acquisition (the first try failed, the thread is about to block)
 * walks its caller's stack with the recorder's unwinder (unwind.c, MDR_LOCK_STACK_DEPTH return
 * addresses) before it blocks, and counts into a second table of the same kind, keyed by a hash
 * of the lock and the stack: contended acquisitions, total and longest wait per (lock, stack).
 * An uncontended acquisition never walks.
 *
 * The real functions are glibc's exported `__pthread_*` aliases (the same code, no dlsym, no
 * lazy binding); those without one (timedlock, the clock and timed rwlock forms) are looked up
 * once with dlsym(RTLD_NEXT). Counting is on while the header's `enabled` is non-zero: GDB
 * writes it when the recorder configures itself (`set memdump locks on`: off by default, as it
 * adds 15 to 25 ns to an acquisition); otherwise each hook is one load and a call of the real
 * function. It needs nothing else of the recorder, so a forked child, whose recorder is off,
 * keeps counting into its own copy of the table (which no one reads). In a process the recorder
 * was loaded into after it started, got.c redirects the modules' calls of these functions here.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "locks.h"
#include "recorder.h"

#define EXPORT __attribute__((visibility("default")))
EXPORT struct mdr_locks memdump_recorder_locks = {
    .magic = MDR_LOCKS_MAGIC,
    .version = 2,
    .capacity = MDR_LOCKS_CAPACITY,
    .entry_words = MDR_LOCK_WORDS,
    .enabled = 0,  /* GDB writes `set memdump locks` here when the recorder configures itself */
    .stack_capacity = MDR_LOCKS_STACKS_CAPACITY,
    .stack_words = MDR_LOCK_STACK_WORDS,
};
_Static_assert(sizeof(struct mdr_lock_entry) == 8 * MDR_LOCK_WORDS, "lock entry words");
_Static_assert(sizeof(struct mdr_lock_stack) == 8 * MDR_LOCK_STACK_WORDS, "stack entry words");
#define L (memdump_recorder_locks)

/* glibc 2.34 moved libpthread into libc and kept the old `__pthread_*` names as compat symbols
 * of version GLIBC_2.2.5 (x86-64's first): the linker binds to them only by that version. */
#define MDR_LIBC(name, ret, args) \
    extern ret mdr_libc_##name args; __asm__(".symver mdr_libc_" #name ", __" #name "@GLIBC_2.2.5")
MDR_LIBC(pthread_mutex_lock, int, (pthread_mutex_t *m));
MDR_LIBC(pthread_mutex_trylock, int, (pthread_mutex_t *m));
MDR_LIBC(pthread_rwlock_rdlock, int, (pthread_rwlock_t *l));
MDR_LIBC(pthread_rwlock_wrlock, int, (pthread_rwlock_t *l));
MDR_LIBC(pthread_rwlock_tryrdlock, int, (pthread_rwlock_t *l));
MDR_LIBC(pthread_rwlock_trywrlock, int, (pthread_rwlock_t *l));
#define __pthread_mutex_lock mdr_libc_pthread_mutex_lock
#define __pthread_mutex_trylock mdr_libc_pthread_mutex_trylock
#define __pthread_rwlock_rdlock mdr_libc_pthread_rwlock_rdlock
#define __pthread_rwlock_wrlock mdr_libc_pthread_rwlock_wrlock
#define __pthread_rwlock_tryrdlock mdr_libc_pthread_rwlock_tryrdlock
#define __pthread_rwlock_trywrlock mdr_libc_pthread_rwlock_trywrlock

static inline int counting(void)
{
    return MDR_UNLIKELY(__atomic_load_n(&L.enabled, __ATOMIC_RELAXED) != 0);
}

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Who acquires: pthread_self() (one load of %fs), unique among live threads. Not the kernel tid:
 * caching that needs thread-local storage, and a TLS block in the recorder would grow every
 * thread's dtv, which glibc allocates on the heap the recorder reports. */
static inline uint64_t owner_id(void) { return (uint64_t)pthread_self(); }

/* The table whose address the header keeps at *SLOT, mapped at its first use. */
static void *table_at(uint64_t *slot, size_t bytes)
{
    void *t = (void *)(uintptr_t)__atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (MDR_LIKELY(t != NULL))
        return t;
    void *fresh = mdr_map(bytes);
    if (fresh == NULL)
        return NULL;
    uint64_t expected = 0;
    if (__atomic_compare_exchange_n(slot, &expected, (uint64_t)(uintptr_t)fresh, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return fresh;
    mdr_unmap(fresh, bytes);  /* another thread published its table first */
    return (void *)(uintptr_t)expected;
}

static inline struct mdr_lock_entry *table(void)
{
    return table_at(&L.table, MDR_LOCKS_CAPACITY * sizeof(struct mdr_lock_entry));
}

static inline uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static struct mdr_lock_entry *entry_of(const void *lock, uint64_t kind)
{
    struct mdr_lock_entry *t = table();
    if (t == NULL)
        return NULL;
    const uint64_t key = (uint64_t)(uintptr_t)lock;
    uint64_t h = key ^ (key >> 29);
    h *= 0x9e3779b97f4a7c15ull;
    for (uint64_t n = 0, i = h >> 52; n < MDR_LOCKS_CAPACITY; ++n, ++i) {
        struct mdr_lock_entry *e = &t[i & (MDR_LOCKS_CAPACITY - 1)];
        uint64_t k = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
        if (k == key)
            return e;
        if (k == 0) {
            if (__atomic_compare_exchange_n(&e->key, &k, key, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                __atomic_store_n(&e->kind, kind, __ATOMIC_RELAXED);
                __atomic_fetch_add(&L.used, 1, __ATOMIC_RELAXED);
                return e;
            }
            if (k == key)
                return e;
        }
    }
    __atomic_fetch_add(&L.dropped, 1, __ATOMIC_RELAXED);
    return NULL;
}

/* One more contended acquisition that waited WAITED ns: the count, the sum, the maximum. */
static void add_wait(uint64_t *contended, uint64_t *total, uint64_t *max_ns, uint64_t waited)
{
    __atomic_fetch_add(contended, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(total, waited, __ATOMIC_RELAXED);
    uint64_t max = __atomic_load_n(max_ns, __ATOMIC_RELAXED);
    while (waited > max && !__atomic_compare_exchange_n(max_ns, &max, waited, 1,
                                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* -- the waiting stacks --------------------------------------------------------------------- */

extern void *__libc_stack_end;  /* the loader's: the main thread's stack pointer at _start */

/* The walk reads only the thread's stack: its bounds as its allocations' walks know them
 * (recorder.c, from pthread_getattr_np: exact, with its signal stack), else, for a thread that
 * made no heap call yet, the stack below its descriptor (glibc puts struct pthread at the top of
 * the stack it allocates, and of a stack the program gives pthread_attr_setstack) or, for the
 * main thread, below __libc_stack_end. A stack pointer elsewhere (a coroutine's stack) gives
 * the caller's return address alone. */
#define MAX_STACK_SPAN (UINT64_C(1) << 30)

struct capture {
    int n, partial;
    uintptr_t pcs[MDR_LOCK_STACK_DEPTH];
};

/* The stack of the hook whose frame pointer is FRAME (hooks keep rbp): its caller's return
 * address first. Not inlined: an uncontended acquisition never pays for it. */
static __attribute__((noinline)) void capture(struct capture *c, const void *frame)
{
    const uintptr_t *f = frame;
    const uintptr_t pc = f[1], sp = (uintptr_t)(f + 2), fp = f[0];
    const uintptr_t self = (uintptr_t)pthread_self(), top = (uintptr_t)__libc_stack_end;
    struct mdr_stack_bounds b = {sp, sp, 0, 0};
    if (!mdr_thread_bounds(&b)) {
        if (sp < self && self - sp <= MAX_STACK_SPAN)
            b.hi = self;
        else if (sp < top && top - sp <= MAX_STACK_SPAN)
            b.hi = top;
    }
    c->partial = 0;
    c->n = mdr_unwind(c->pcs, MDR_LOCK_STACK_DEPTH, pc, sp, fp, &b, NULL, &c->partial);
    if (c->n == MDR_LOCK_STACK_DEPTH)
        c->partial = 1;  /* deeper frames were left out */
}

/* Count a contended acquisition of LOCK from the stack C that waited WAITED ns. */
static __attribute__((noinline)) void waited_from(const void *lock, const struct capture *c,
                                                  uint64_t waited)
{
    if (c->n <= 0)
        return;
    struct mdr_lock_stack *t =
        table_at(&L.stacks, MDR_LOCKS_STACKS_CAPACITY * sizeof(struct mdr_lock_stack));
    if (t == NULL) {
        __atomic_fetch_add(&L.stacks_dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    uint64_t key = mix(0, (uint64_t)(uintptr_t)lock);
    for (int i = 0; i < c->n; ++i)
        key = mix(key, c->pcs[i]);
    key += key == 0;
    for (uint64_t n = 0, i = key >> 52; n < MDR_LOCKS_STACKS_CAPACITY; ++n, ++i) {
        struct mdr_lock_stack *e = &t[i & (MDR_LOCKS_STACKS_CAPACITY - 1)];
        uint64_t k = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
        if (k == 0) {
            if (__atomic_compare_exchange_n(&e->key, &k, key, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                e->lock = (uint64_t)(uintptr_t)lock;
                e->partial = (uint64_t)c->partial;
                for (int j = 0; j < c->n; ++j)
                    e->pcs[j] = c->pcs[j];
                __atomic_store_n(&e->npcs, (uint64_t)c->n, __ATOMIC_RELEASE);
                __atomic_fetch_add(&L.stacks_used, 1, __ATOMIC_RELAXED);
                k = key;
            }
        }
        if (k == key) {
            add_wait(&e->contended, &e->wait_ns, &e->max_wait_ns, waited);
            return;
        }
    }
    __atomic_fetch_add(&L.stacks_dropped, 1, __ATOMIC_RELAXED);
}

/* The calling thread has the lock (READ: shared); WAITED ns when it was contended. */
static void acquired(const void *lock, uint64_t kind, int read, int contended, uint64_t waited)
{
    struct mdr_lock_entry *e = entry_of(lock, kind);
    if (e == NULL)
        return;
    __atomic_fetch_add(&e->locked, 1, __ATOMIC_RELAXED);
    if (read) {
        __atomic_fetch_add(&e->read_locked, 1, __ATOMIC_RELAXED);
    } else {
        const uint64_t me = owner_id();
        if (__atomic_load_n(&e->last_owner, __ATOMIC_RELAXED) != me) {
            __atomic_store_n(&e->last_owner, me, __ATOMIC_RELAXED);
            __atomic_fetch_add(&e->owner_changes, 1, __ATOMIC_RELAXED);
        }
    }
    if (!contended)
        return;
    add_wait(&e->contended, &e->wait_ns, &e->max_wait_ns, waited);
}

static void busy(const void *lock, uint64_t kind)
{
    struct mdr_lock_entry *e = entry_of(lock, kind);
    if (e != NULL)
        __atomic_fetch_add(&e->try_busy, 1, __ATOMIC_RELAXED);
}

/* An acquisition the mutex's or rwlock's blocking call made: r == 0, or EOWNERDEAD (a robust
 * mutex whose holder died: the caller has it). */
static inline int got(int r) { return r == 0 || r == EOWNERDEAD; }

/* Try first; on EBUSY count a contended acquisition: walk the caller's stack, then time the
 * blocking call BLOCK. */
#define COUNTED_LOCK(lock, kind, read, try_call, block_call)                           \
    do {                                                                                \
        if (!counting())                                                                \
            return block_call;                                                          \
        int r_ = try_call;                                                              \
        if (r_ != EBUSY) {                                                              \
            if (got(r_))                                                                \
                acquired(lock, kind, read, 0, 0);                                       \
            else                                                                        \
                r_ = block_call; /* EAGAIN (too many readers), EDEADLK: its own answer */ \
            return r_;                                                                  \
        }                                                                               \
        struct capture c_;                                                              \
        capture(&c_, __builtin_frame_address(0));                                       \
        const uint64_t t0_ = now_ns();                                                  \
        r_ = block_call;                                                                \
        const uint64_t waited_ = now_ns() - t0_;                                        \
        if (got(r_)) {                                                                  \
            acquired(lock, kind, read, 1, waited_);                                     \
            waited_from(lock, &c_, waited_);                                            \
        }                                                                               \
        return r_;                                                                      \
    } while (0)

/* A trylock: count the acquisition, or the lock found taken. */
#define COUNTED_TRY(lock, kind, read, try_call)                                        \
    do {                                                                                \
        int r_ = try_call;                                                              \
        if (counting()) {                                                               \
            if (got(r_))                                                                \
                acquired(lock, kind, read, 0, 0);                                       \
            else if (r_ == EBUSY)                                                       \
                busy(lock, kind);                                                       \
        }                                                                               \
        return r_;                                                                      \
    } while (0)

EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
    COUNTED_LOCK(m, MDR_LOCK_MUTEX, 0, __pthread_mutex_trylock(m), __pthread_mutex_lock(m));
}

EXPORT int pthread_mutex_trylock(pthread_mutex_t *m)
{
    COUNTED_TRY(m, MDR_LOCK_MUTEX, 0, __pthread_mutex_trylock(m));
}

/* The real function NAME of type FN, looked up once (glibc exports no `__` alias of it); a
 * glibc without it answers ENOSYS. */
#define REAL(fn, name)                                                                  \
    static fn real_;                                                                    \
    fn f_ = __atomic_load_n(&real_, __ATOMIC_ACQUIRE);                                  \
    if (MDR_UNLIKELY(f_ == NULL)) {                                                     \
        f_ = (fn)dlsym(RTLD_NEXT, name);                                                \
        if (f_ == NULL)                                                                 \
            return ENOSYS;                                                              \
        __atomic_store_n(&real_, f_, __ATOMIC_RELEASE);                                 \
    }

typedef int (*timedlock_fn)(pthread_mutex_t *, const struct timespec *);
typedef int (*clocklock_fn)(pthread_mutex_t *, clockid_t, const struct timespec *);
typedef int (*rw_timed_fn)(pthread_rwlock_t *, const struct timespec *);
typedef int (*rw_clock_fn)(pthread_rwlock_t *, clockid_t, const struct timespec *);

static int real_timedlock(pthread_mutex_t *m, const struct timespec *abstime)
{
    REAL(timedlock_fn, "pthread_mutex_timedlock");
    return f_(m, abstime);
}

static int real_clocklock(pthread_mutex_t *m, clockid_t clock, const struct timespec *abstime)
{
    REAL(clocklock_fn, "pthread_mutex_clocklock");
    return f_(m, clock, abstime);
}

static int real_rw_timed(int write, pthread_rwlock_t *l, const struct timespec *abstime)
{
    if (write) {
        REAL(rw_timed_fn, "pthread_rwlock_timedwrlock");
        return f_(l, abstime);
    }
    REAL(rw_timed_fn, "pthread_rwlock_timedrdlock");
    return f_(l, abstime);
}

static int real_rw_clock(int write, pthread_rwlock_t *l, clockid_t clock,
                         const struct timespec *abstime)
{
    if (write) {
        REAL(rw_clock_fn, "pthread_rwlock_clockwrlock");
        return f_(l, clock, abstime);
    }
    REAL(rw_clock_fn, "pthread_rwlock_clockrdlock");
    return f_(l, clock, abstime);
}

EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime)
{
    COUNTED_LOCK(m, MDR_LOCK_MUTEX, 0, __pthread_mutex_trylock(m), real_timedlock(m, abstime));
}

EXPORT int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clock,
                                   const struct timespec *abstime)
{
    COUNTED_LOCK(m, MDR_LOCK_MUTEX, 0, __pthread_mutex_trylock(m),
                 real_clocklock(m, clock, abstime));
}

EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t *l, const struct timespec *abstime)
{
    COUNTED_LOCK(l, MDR_LOCK_RWLOCK, 1, __pthread_rwlock_tryrdlock(l),
                 real_rw_timed(0, l, abstime));
}

EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t *l, const struct timespec *abstime)
{
    COUNTED_LOCK(l, MDR_LOCK_RWLOCK, 0, __pthread_rwlock_trywrlock(l),
                 real_rw_timed(1, l, abstime));
}

EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t *l, clockid_t clock,
                                      const struct timespec *abstime)
{
    COUNTED_LOCK(l, MDR_LOCK_RWLOCK, 1, __pthread_rwlock_tryrdlock(l),
                 real_rw_clock(0, l, clock, abstime));
}

EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t *l, clockid_t clock,
                                      const struct timespec *abstime)
{
    COUNTED_LOCK(l, MDR_LOCK_RWLOCK, 0, __pthread_rwlock_trywrlock(l),
                 real_rw_clock(1, l, clock, abstime));
}

EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
    COUNTED_LOCK(l, MDR_LOCK_RWLOCK, 1, __pthread_rwlock_tryrdlock(l),
                 __pthread_rwlock_rdlock(l));
}

EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
    COUNTED_LOCK(l, MDR_LOCK_RWLOCK, 0, __pthread_rwlock_trywrlock(l),
                 __pthread_rwlock_wrlock(l));
}

EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t *l)
{
    COUNTED_TRY(l, MDR_LOCK_RWLOCK, 1, __pthread_rwlock_tryrdlock(l));
}

EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t *l)
{
    COUNTED_TRY(l, MDR_LOCK_RWLOCK, 0, __pthread_rwlock_trywrlock(l));
}

/* The hooks' own addresses, for got.c (a process the recorder was loaded into after it
 * started): hidden aliases, since a reference to `pthread_mutex_lock` here would resolve to the
 * C library's when the recorder is loaded RTLD_LOCAL. */
#define LOCK_HOOK(name)                                                                    \
    extern __typeof(name) mdr_lock_hook_##name                                             \
        __attribute__((alias(#name), copy(name), visibility("hidden")))
LOCK_HOOK(pthread_mutex_lock);
LOCK_HOOK(pthread_mutex_trylock);
LOCK_HOOK(pthread_mutex_timedlock);
LOCK_HOOK(pthread_mutex_clocklock);
LOCK_HOOK(pthread_rwlock_rdlock);
LOCK_HOOK(pthread_rwlock_wrlock);
LOCK_HOOK(pthread_rwlock_tryrdlock);
LOCK_HOOK(pthread_rwlock_trywrlock);
LOCK_HOOK(pthread_rwlock_timedrdlock);
LOCK_HOOK(pthread_rwlock_timedwrlock);
LOCK_HOOK(pthread_rwlock_clockrdlock);
LOCK_HOOK(pthread_rwlock_clockwrlock);

#define LOCK_ENTRY(name) {#name, (const void *)mdr_lock_hook_##name}
MDR_HIDDEN const struct mdr_hook mdr_lock_hooks[] = {
    LOCK_ENTRY(pthread_mutex_lock), LOCK_ENTRY(pthread_mutex_trylock),
    LOCK_ENTRY(pthread_mutex_timedlock), LOCK_ENTRY(pthread_mutex_clocklock),
    LOCK_ENTRY(pthread_rwlock_rdlock), LOCK_ENTRY(pthread_rwlock_wrlock),
    LOCK_ENTRY(pthread_rwlock_tryrdlock), LOCK_ENTRY(pthread_rwlock_trywrlock),
    LOCK_ENTRY(pthread_rwlock_timedrdlock), LOCK_ENTRY(pthread_rwlock_timedwrlock),
    LOCK_ENTRY(pthread_rwlock_clockrdlock), LOCK_ENTRY(pthread_rwlock_clockwrlock),
};
MDR_HIDDEN const int mdr_lock_hook_count = (int)(sizeof mdr_lock_hooks / sizeof mdr_lock_hooks[0]);
