/* @brief One contended enqueue on a targets/shmemq queue, made deterministic, for `contention`
 * with the in-process recorder (tests/e2e/test_contention_recorder.py).
 *
 *   shmemq_contend normal|adaptive
 *
 * The main thread opens a queue of that lock kind (process-shared, robust: the library's
 * defaults) and holds its mutex (shmemq_testing_lock); a thread enqueues one message and, the
 * mutex being held, ends up asleep on it in futex(2); only then does the main thread let it go.
 * So the enqueue's lock is contended exactly once whatever the scheduler does. On the way the
 * normal kind tries the mutex once (one trylock found it busy); the adaptive kind spins on
 * trylock first, 10 times at its first contention (shmemq.c's queue_lock: min(100, 2 x the
 * estimate + 10), the estimate starting at 0), so 11 tries find it busy. Then the main thread
 * dequeues the message, and the queue is destroyed. Exit status 0 when all of that worked.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "in_futex.h"
#include "shmemq.h"
#include "shmemq_testing.h"

struct enqueuer {
    shmemq_t* queue;
    volatile pid_t tid;
    int ok;
};

static void* enqueue_one(void* arg)
{
    struct enqueuer* e = arg;
    char message[] = "contended";
    e->tid = (pid_t)syscall(SYS_gettid);
    e->ok = shmemq_try_enqueue(e->queue, message, (int)sizeof message); /* ENQUEUE */
    return NULL;
}

int main(int argc, char** argv)
{
    const char* kind = argc > 1 ? argv[1] : "";
    if (strcmp(kind, "normal") != 0 && strcmp(kind, "adaptive") != 0) {
        fprintf(stderr, "usage: shmemq_contend normal|adaptive\n");
        return 2;
    }
    char name[64];
    snprintf(name, sizeof name, "/dbgkit-contend-%d", (int)getpid());
    shmemq_options options;
    shmemq_options_init(&options);
    options.lock = kind[0] == 'n' ? SHMEMQ_LOCK_NORMAL : SHMEMQ_LOCK_ADAPTIVE;
    shmemq_t* queue = shmemq_open(name, 4, 16, &options);
    if (queue == NULL) {
        fprintf(stderr, "shmemq_contend: %s\n", shmemq_last_error());
        return 1;
    }
    struct enqueuer e = {queue, 0, 0};
    pthread_t thread;
    if (shmemq_testing_lock(queue) != 0 || pthread_create(&thread, NULL, enqueue_one, &e) != 0) {
        fprintf(stderr, "shmemq_contend: cannot lock the queue or start the thread\n");
        return 1;
    }
    while (e.tid == 0 || !in_futex(e.tid)) {
        sched_yield();
    }
    shmemq_testing_unlock(queue);
    pthread_join(thread, NULL);
    char got[16];
    int len = 0;
    const int ok = e.ok && shmemq_try_dequeue_len(queue, got, (int)sizeof got, &len) &&
                   strcmp(got, "contended") == 0;
    shmemq_destroy(queue, 1);
    printf("shmemq_contend %s: %s\n", kind, ok ? "enqueued and dequeued" : "failed");
    return ok ? 0 : 1;
}
