// @brief glibc lock variables in known states, with the value each prints (gdb_ext/dbgkit/printers/glibc_locks.py's tests).
//
// A PRINT marker (NAME = VALUE) says what `print NAME` shows at the BREAK marker; {pid} stands
// for the process id (the main thread's LWP, which holds the locks).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "in_futex.h"

pthread_mutex_t plain = PTHREAD_MUTEX_INITIALIZER;  // PRINT: plain = pthread_mutex_t: unlocked, normal
pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;  // PRINT: held = pthread_mutex_t: locked by LWP {pid}, normal
pthread_mutex_t contended = PTHREAD_MUTEX_INITIALIZER;  // PRINT: contended = pthread_mutex_t: locked by LWP {pid}, normal, waiters
pthread_mutex_t twice;  // PRINT: twice = pthread_mutex_t: locked by LWP {pid}, recursive, count 2
pthread_mutex_t robust;  // PRINT: robust = pthread_mutex_t: locked by LWP {pid}, errorcheck, robust
pthread_mutex_t broken;  // PRINT: broken = pthread_mutex_t <corrupt: lock word 0x9 is none of 0, 1, 2>
pthread_rwlock_t rw_free = PTHREAD_RWLOCK_INITIALIZER;  // PRINT: rw_free = pthread_rwlock_t: unlocked, prefer readers
pthread_rwlock_t rw_read = PTHREAD_RWLOCK_INITIALIZER;  // PRINT: rw_read = pthread_rwlock_t: 2 readers, prefer readers
pthread_rwlock_t rw_write;  // PRINT: rw_write = pthread_rwlock_t: write-locked by LWP {pid}, prefer writers nonrecursive
typedef pthread_mutex_t app_lock_t;
struct account {
    app_lock_t lock;  // PRINT: savings.lock = pthread_mutex_t: locked by LWP {pid}, normal
    long balance;
} savings = {PTHREAD_MUTEX_INITIALIZER, 0};

static pid_t waiter_tid;

static void* waiter(void* arg) {
    (void)arg;
    waiter_tid = (pid_t)syscall(SYS_gettid);
    pthread_mutex_lock(&contended);
    return NULL;
}

int main(void) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&twice, &attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&robust, &attr);
    pthread_mutex_init(&broken, NULL);
    broken.__data.__lock = 9;
    pthread_rwlockattr_t rwattr;
    pthread_rwlockattr_init(&rwattr);
    pthread_rwlockattr_setkind_np(&rwattr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&rw_write, &rwattr);

    pthread_mutex_lock(&held);
    pthread_mutex_lock(&contended);
    pthread_mutex_lock(&twice);
    pthread_mutex_lock(&twice);
    pthread_mutex_lock(&robust);
    pthread_mutex_lock(&savings.lock);
    pthread_rwlock_rdlock(&rw_read);
    pthread_rwlock_rdlock(&rw_read);
    pthread_rwlock_wrlock(&rw_write);
    pthread_t thread;
    pthread_create(&thread, NULL, waiter, NULL);
    while (waiter_tid == 0 || !in_futex(waiter_tid)) {
        usleep(1000);
    }
    puts("locks in place");  // BREAK: here
    return 0;
}
