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
 * The real functions are glibc's exported `__pthread_*` aliases (the same code, no dlsym, no
 * lazy binding); pthread_mutex_timedlock has none and is looked up once with dlsym(RTLD_NEXT).
 * Counting is on while the header's `enabled` is non-zero: GDB writes it when the recorder
 * configures itself (`set memdump locks on`: off by default, as it adds 15 to 25 ns to an
 * acquisition); otherwise each hook is one load and a call of the real function. It needs
 * nothing else of the recorder, so a forked child, whose recorder is off, keeps counting into
 * its own copy of the table (which no one reads).
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
    .version = 1,
    .capacity = MDR_LOCKS_CAPACITY,
    .entry_words = MDR_LOCK_WORDS,
    .enabled = 0,  /* GDB writes `set memdump locks` here when the recorder configures itself */
};
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

static struct mdr_lock_entry *table(void)
{
    struct mdr_lock_entry *t =
        (struct mdr_lock_entry *)(uintptr_t)__atomic_load_n(&L.table, __ATOMIC_ACQUIRE);
    if (MDR_LIKELY(t != NULL))
        return t;
    const size_t bytes = MDR_LOCKS_CAPACITY * sizeof(struct mdr_lock_entry);
    struct mdr_lock_entry *fresh = mdr_map(bytes);
    if (fresh == NULL)
        return NULL;
    uint64_t expected = 0;
    if (__atomic_compare_exchange_n(&L.table, &expected, (uint64_t)(uintptr_t)fresh, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return fresh;
    mdr_unmap(fresh, bytes);  /* another thread published its table first */
    return (struct mdr_lock_entry *)(uintptr_t)expected;
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
    __atomic_fetch_add(&e->contended, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&e->wait_ns, waited, __ATOMIC_RELAXED);
    uint64_t max = __atomic_load_n(&e->max_wait_ns, __ATOMIC_RELAXED);
    while (waited > max && !__atomic_compare_exchange_n(&e->max_wait_ns, &max, waited, 1,
                                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
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

/* Try first; on EBUSY count a contended acquisition and time the blocking call BLOCK. */
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
        const uint64_t t0_ = now_ns();                                                  \
        r_ = block_call;                                                                \
        const uint64_t waited_ = now_ns() - t0_;                                        \
        if (got(r_))                                                                    \
            acquired(lock, kind, read, 1, waited_);                                     \
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

typedef int (*timedlock_fn)(pthread_mutex_t *, const struct timespec *);

static int real_timedlock(pthread_mutex_t *m, const struct timespec *abstime)
{
    static timedlock_fn fn;
    timedlock_fn f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
    if (MDR_UNLIKELY(f == NULL)) {
        f = (timedlock_fn)dlsym(RTLD_NEXT, "pthread_mutex_timedlock");
        if (f == NULL)
            return ENOSYS;
        __atomic_store_n(&fn, f, __ATOMIC_RELEASE);
    }
    return f(m, abstime);
}

EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime)
{
    COUNTED_LOCK(m, MDR_LOCK_MUTEX, 0, __pthread_mutex_trylock(m), real_timedlock(m, abstime));
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
