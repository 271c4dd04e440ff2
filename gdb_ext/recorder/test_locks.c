/* @brief locks.c's counters, exact, with threads: each lock call of this program goes through
 * the recorder's hooks (linked before libc), counting turned on as GDB turns it on. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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
    e = entry(&held);
    CHECK(e != NULL && e->locked == 3 && e->try_busy == 1 && e->contended == 0,
          "held: locked %lu try_busy %lu contended %lu", e ? (unsigned long)e->locked : 0,
          e ? (unsigned long)e->try_busy : 0, e ? (unsigned long)e->contended : 0);

    /* rwlock: 3 readers and 1 writer */
    run(rw_worker, NULL, THREADS - 1);
    run(rw_worker, &rwlock, 1);
    CHECK(pthread_rwlock_tryrdlock(&rwlock) == 0, "tryrdlock failed");
    pthread_rwlock_unlock(&rwlock);
    e = entry(&rwlock);
    CHECK(e != NULL && e->kind == MDR_LOCK_RWLOCK, "no rwlock entry");
    if (e != NULL) {
        CHECK(e->locked == THREADS * ROUNDS + 1, "rwlock locked %lu", (unsigned long)e->locked);
        CHECK(e->read_locked == (THREADS - 1) * ROUNDS + 1, "read_locked %lu",
              (unsigned long)e->read_locked);
        CHECK(e->owner_changes == 1, "writer owner changes %lu", (unsigned long)e->owner_changes);
    }

    /* off again: nothing more is counted */
    memdump_recorder_locks.enabled = 0;
    const uint64_t before = entry(&mutex) ? entry(&mutex)->locked : 0;
    mutex_worker(NULL);
    CHECK(entry(&mutex) == NULL || entry(&mutex)->locked == before, "counted after off");
    CHECK(memdump_recorder_locks.used == 3, "used %lu", (unsigned long)memdump_recorder_locks.used);
    CHECK(memdump_recorder_locks.dropped == 0, "dropped");
    if (failures == 0)
        printf("test_locks: ok\n");
    return failures != 0;
}
