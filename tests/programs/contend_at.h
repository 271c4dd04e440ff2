// @brief contend_at(): one contended acquisition of a mutex from a given call site, made
// deterministic: the caller holds the mutex until a waiter thread sleeps on it (in futex(2):
// its first try failed), then lets it go. For the lock counts' tests (gdb_ext/recorder/
// test_locks.c, tests/programs/lock_rounds.c).
#pragma once

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "in_futex.h"

struct contend_at_call {
    pthread_mutex_t* mutex;
    void (*site)(void);  // takes the mutex (the call site counted)
    volatile int tid;
};

// The waiter: SITE takes the mutex, then it gives it back. Not static, so that a program
// linked -rdynamic has it in its dynamic symbols (dladdr).
__attribute__((noinline)) void* contend_waiter(void* arg) {
    struct contend_at_call* c = (struct contend_at_call*)arg;
    c->tid = (int)syscall(SYS_gettid);
    c->site(); /* WAITER_CALL */
    pthread_mutex_unlock(c->mutex);
    return NULL;
}

static inline void contend_at(pthread_mutex_t* mutex, void (*site)(void)) {
    struct contend_at_call c = {mutex, site, 0};
    pthread_t t;
    pthread_mutex_lock(mutex);
    pthread_create(&t, NULL, contend_waiter, &c);
    while (c.tid == 0 || !in_futex(c.tid)) {
        sched_yield();
    }
    pthread_mutex_unlock(mutex);
    pthread_join(t, NULL);
}
