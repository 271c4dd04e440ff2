/* Lock contention in known amounts, for `contention` with the in-process recorder
 * (tests/e2e/test_contention_recorder.py).
 *
 *   lock_rounds sites          a waiter thread (contend_at.h) blocks on `site_lock`, held by
 *                              main, 3 times from wait_at_x and twice from wait_at_y: 5
 *                              contended acquisitions from two stacks, 10 in all; then exits
 *   lock_rounds rounds STOP    2 threads take `round_lock` ROUND_LOCKS times each per round, then
 *                              meet main at a barrier, which calls round_done(); until the file
 *                              STOP exists. `acquisitions` counts their locks: between two
 *                              round_done() stops it grows by exactly 2 * ROUND_LOCKS per round.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "contend_at.h"

#define WORKERS 2
#define ROUND_LOCKS 1000

/* -- sites ---------------------------------------------------------------------------------- */

static pthread_mutex_t site_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((noinline)) static void wait_at_x(void)
{
    pthread_mutex_lock(&site_lock);  /* WAIT_AT_X */
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void wait_at_y(void)
{
    pthread_mutex_lock(&site_lock);  /* WAIT_AT_Y */
    __asm__ volatile("" ::: "memory");
}

/* -- rounds --------------------------------------------------------------------------------- */

static pthread_mutex_t round_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t start, end;
static volatile int stopping;
volatile unsigned long acquisitions;

__attribute__((noinline)) void round_done(void)
{
    __asm__ volatile("" ::: "memory");
}

static void *worker(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_barrier_wait(&start);
        if (stopping)
            return NULL;
        for (int i = 0; i < ROUND_LOCKS; ++i) {
            pthread_mutex_lock(&round_lock);
            acquisitions = acquisitions + 1;
            pthread_mutex_unlock(&round_lock);
        }
        pthread_barrier_wait(&end);
    }
}

static int rounds(const char *stop)
{
    pthread_t t[WORKERS];
    pthread_barrier_init(&start, NULL, WORKERS + 1);
    pthread_barrier_init(&end, NULL, WORKERS + 1);
    for (int i = 0; i < WORKERS; ++i)
        pthread_create(&t[i], NULL, worker, NULL);
    for (;;) {
        stopping = access(stop, F_OK) == 0;
        pthread_barrier_wait(&start);
        if (stopping)
            break;
        pthread_barrier_wait(&end);
        round_done();
        usleep(1000);
    }
    for (int i = 0; i < WORKERS; ++i)
        pthread_join(t[i], NULL);
    printf("acquisitions %lu\n", acquisitions);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "sites") == 0) {
        for (int i = 0; i < 3; ++i)
            contend_at(&site_lock, wait_at_x);
        for (int i = 0; i < 2; ++i)
            contend_at(&site_lock, wait_at_y);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "rounds") == 0)
        return rounds(argv[2]);
    fprintf(stderr, "usage: lock_rounds sites | lock_rounds rounds STOPFILE\n");
    return 2;
}
