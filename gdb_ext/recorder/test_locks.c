/* @brief locks.c's counters, exact, with threads: each lock call of this program goes through
 * the recorder's hooks (linked before libc), counting turned on as GDB turns it on; the
 * waiting stacks, exact, from two call sites made to contend a known number of times. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "contend_at.h"  /* tests/programs */
#include "locks.h"

#define THREADS 4
#define ROUNDS 10000

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rwlock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static int failures;

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "test_locks:%d: %s: ", __LINE__, #cond);              \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
            ++failures;                                                           \
        }                                                                         \
    } while (0)

static const struct mdr_lock_entry *entry(const void *lock)
{
    const struct mdr_lock_entry *t =
        (const struct mdr_lock_entry *)(uintptr_t)memdump_recorder_locks.table;
    for (uint64_t i = 0; t != NULL && i < memdump_recorder_locks.capacity; ++i)
        if (t[i].key == (uint64_t)(uintptr_t)lock)
            return &t[i];
    return NULL;
}

static void *mutex_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; ++i) {
        pthread_mutex_lock(&mutex);
        pthread_mutex_unlock(&mutex);
    }
    return NULL;
}

static void *rw_worker(void *arg)
{
    const int writer = arg != NULL;
    for (int i = 0; i < ROUNDS; ++i) {
        if (writer)
            pthread_rwlock_wrlock(&rwlock);
        else
            pthread_rwlock_rdlock(&rwlock);
        pthread_rwlock_unlock(&rwlock);
    }
    return NULL;
}

static void *try_held(void *arg)
{
    (void)arg;
    int r = pthread_mutex_trylock(&held);
    CHECK(r == EBUSY, "trylock of a held mutex returned %d", r);
    return NULL;
}

/* -- waiting stacks: a waiter blocks from site_x or site_y while main holds `contended` -- */

static pthread_mutex_t contended = PTHREAD_MUTEX_INITIALIZER;

/* Exported (the program is linked -rdynamic) so that dladdr names them. */
__attribute__((noinline)) void site_x(void)
{
    pthread_mutex_lock(&contended);
    __asm__ volatile("" ::: "memory");  /* the call is not a tail call */
}

__attribute__((noinline)) void site_y(void)
{
    pthread_mutex_lock(&contended);
    __asm__ volatile("" ::: "memory");
}

static const char *function_of(uint64_t pc)
{
    Dl_info info;
    return dladdr((void *)(uintptr_t)(pc - 1), &info) && info.dli_sname ? info.dli_sname : "?";
}

static void check_stacks(void)
{
    for (int i = 0; i < 3; ++i)
        contend_at(&contended, site_x);
    for (int i = 0; i < 2; ++i)
        contend_at(&contended, site_y);
    const struct mdr_lock_entry *e = entry(&contended);
    CHECK(e != NULL && e->locked == 10 && e->contended == 5,
          "contended: locked %lu contended %lu", e ? (unsigned long)e->locked : 0,
          e ? (unsigned long)e->contended : 0);
    const struct mdr_lock_stack *t =
        (const struct mdr_lock_stack *)(uintptr_t)memdump_recorder_locks.stacks;
    CHECK(t != NULL, "no stack table");
    int x = 0, y = 0;
    uint64_t wait = 0;
    for (uint64_t i = 0; t != NULL && i < memdump_recorder_locks.stack_capacity; ++i) {
        if (t[i].key == 0 || t[i].lock != (uint64_t)(uintptr_t)&contended)
            continue;
        CHECK(t[i].npcs >= 2, "stack of %lu frames", (unsigned long)t[i].npcs);
        const char *inner = function_of(t[i].pcs[0]), *outer = function_of(t[i].pcs[1]);
        CHECK(strcmp(outer, "contend_waiter") == 0, "site called from %s", outer);
        CHECK(t[i].max_wait_ns > 0 && t[i].max_wait_ns <= t[i].wait_ns, "wait %lu max %lu",
              (unsigned long)t[i].wait_ns, (unsigned long)t[i].max_wait_ns);
        wait += t[i].wait_ns;
        if (strcmp(inner, "site_x") == 0) {
            ++x;
            CHECK(t[i].contended == 3, "site_x contended %lu", (unsigned long)t[i].contended);
        } else if (strcmp(inner, "site_y") == 0) {
            ++y;
            CHECK(t[i].contended == 2, "site_y contended %lu", (unsigned long)t[i].contended);
        } else {
            CHECK(0, "a waiting stack in %s", inner);
        }
    }
    CHECK(x == 1 && y == 1, "stacks: %d at site_x, %d at site_y", x, y);
    CHECK(e == NULL || wait == e->wait_ns, "stacks waited %lu, the lock %lu",
          (unsigned long)wait, e ? (unsigned long)e->wait_ns : 0);
}

static void run(void *(*fn)(void *), void *arg, int n)
{
    pthread_t t[THREADS];
    for (int i = 0; i < n; ++i)
        pthread_create(&t[i], NULL, fn, arg);
    for (int i = 0; i < n; ++i)
        pthread_join(t[i], NULL);
}

int main(void)
{
    CHECK(memcmp(memdump_recorder_locks.magic, "MDLOCK01", 8) == 0, "bad magic");
    CHECK(memdump_recorder_locks.enabled == 0, "counting is on before GDB asks");
    pthread_mutex_lock(&mutex);
    pthread_mutex_unlock(&mutex);
    CHECK(entry(&mutex) == NULL, "counted while off");

    memdump_recorder_locks.enabled = 1;  /* what `set memdump locks on` writes */
    run(mutex_worker, NULL, THREADS);
    const struct mdr_lock_entry *e = entry(&mutex);
    CHECK(e != NULL, "no entry for the mutex");
    if (e != NULL) {
        CHECK(e->kind == MDR_LOCK_MUTEX, "kind %lu", (unsigned long)e->kind);
        CHECK(e->locked == THREADS * ROUNDS, "locked %lu", (unsigned long)e->locked);
        CHECK(e->read_locked == 0, "read_locked %lu", (unsigned long)e->read_locked);
        CHECK(e->owner_changes >= 1 && e->owner_changes <= e->locked, "owner changes %lu",
              (unsigned long)e->owner_changes);
        CHECK(e->contended <= e->locked, "contended %lu", (unsigned long)e->contended);
        CHECK(e->max_wait_ns <= e->wait_ns, "max wait %lu > total %lu",
              (unsigned long)e->max_wait_ns, (unsigned long)e->wait_ns);
        CHECK(e->contended > 0 || e->wait_ns == 0, "waited without contention");
    }

    /* trylock: a held mutex is one try_busy; a free one is an acquisition */
    pthread_mutex_lock(&held);
    run(try_held, NULL, 1);
    pthread_mutex_unlock(&held);
    CHECK(pthread_mutex_trylock(&held) == 0, "trylock of a free mutex failed");
    pthread_mutex_unlock(&held);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    CHECK(pthread_mutex_timedlock(&held, &deadline) == 0, "timedlock failed");
    pthread_mutex_unlock(&held);
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += 5;
    CHECK(pthread_mutex_clocklock(&held, CLOCK_MONOTONIC, &deadline) == 0, "clocklock failed");
    pthread_mutex_unlock(&held);
    e = entry(&held);
    CHECK(e != NULL && e->locked == 4 && e->try_busy == 1 && e->contended == 0,
          "held: locked %lu try_busy %lu contended %lu", e ? (unsigned long)e->locked : 0,
          e ? (unsigned long)e->try_busy : 0, e ? (unsigned long)e->contended : 0);

    /* rwlock: 3 readers and 1 writer */
    run(rw_worker, NULL, THREADS - 1);
    run(rw_worker, &rwlock, 1);
    CHECK(pthread_rwlock_tryrdlock(&rwlock) == 0, "tryrdlock failed");
    pthread_rwlock_unlock(&rwlock);
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += 5;
    CHECK(pthread_rwlock_clockrdlock(&rwlock, CLOCK_MONOTONIC, &deadline) == 0, "clockrdlock");
    pthread_rwlock_unlock(&rwlock);
    CHECK(pthread_rwlock_clockwrlock(&rwlock, CLOCK_MONOTONIC, &deadline) == 0, "clockwrlock");
    pthread_rwlock_unlock(&rwlock);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    CHECK(pthread_rwlock_timedrdlock(&rwlock, &deadline) == 0, "timedrdlock");
    pthread_rwlock_unlock(&rwlock);
    CHECK(pthread_rwlock_timedwrlock(&rwlock, &deadline) == 0, "timedwrlock");
    pthread_rwlock_unlock(&rwlock);
    e = entry(&rwlock);
    CHECK(e != NULL && e->kind == MDR_LOCK_RWLOCK, "no rwlock entry");
    if (e != NULL) {
        CHECK(e->locked == THREADS * ROUNDS + 5, "rwlock locked %lu", (unsigned long)e->locked);
        CHECK(e->read_locked == (THREADS - 1) * ROUNDS + 3, "read_locked %lu",
              (unsigned long)e->read_locked);
        /* the writer thread, then main's clockwrlock (the writer thread's pthread_self() may
         * be main's next thread's, never main's) */
        CHECK(e->owner_changes == 2, "writer owner changes %lu", (unsigned long)e->owner_changes);
    }
    check_stacks();

    /* off again: nothing more is counted */
    memdump_recorder_locks.enabled = 0;
    const uint64_t before = entry(&mutex) ? entry(&mutex)->locked : 0;
    mutex_worker(NULL);
    CHECK(entry(&mutex) == NULL || entry(&mutex)->locked == before, "counted after off");
    CHECK(memdump_recorder_locks.used == 4, "used %lu", (unsigned long)memdump_recorder_locks.used);
    CHECK(memdump_recorder_locks.dropped == 0, "dropped");
    CHECK(memdump_recorder_locks.stacks_dropped == 0, "stacks dropped %lu",
          (unsigned long)memdump_recorder_locks.stacks_dropped);
    /* every contended acquisition is in one waiting stack of its lock (the workers' contention
     * above depends on the scheduler: not its count, this sum) */
    const struct mdr_lock_stack *t =
        (const struct mdr_lock_stack *)(uintptr_t)memdump_recorder_locks.stacks;
    const void *locks[] = {&mutex, &held, &rwlock, &contended};
    uint64_t entries = 0;
    for (uint64_t i = 0; t != NULL && i < memdump_recorder_locks.stack_capacity; ++i)
        entries += t[i].key != 0;
    CHECK(entries == memdump_recorder_locks.stacks_used, "%lu stack entries, used %lu",
          (unsigned long)entries, (unsigned long)memdump_recorder_locks.stacks_used);
    for (size_t l = 0; l < sizeof locks / sizeof locks[0]; ++l) {
        uint64_t sum = 0;
        for (uint64_t i = 0; t != NULL && i < memdump_recorder_locks.stack_capacity; ++i)
            if (t[i].key != 0 && t[i].lock == (uint64_t)(uintptr_t)locks[l])
                sum += t[i].contended;
        e = entry(locks[l]);
        CHECK(e != NULL && sum == e->contended, "lock %zu: contended %lu, by stack %lu", l,
              e ? (unsigned long)e->contended : 0, (unsigned long)sum);
    }
    if (failures == 0)
        printf("test_locks: ok\n");
    return failures != 0;
}
