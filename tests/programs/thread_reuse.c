// @brief Threads started one after another, each joined before the next starts: glibc gives each
// new thread the descriptor and stack the last one left (its cache of joined threads' stacks).
// Each thread prints its kernel thread id and its pthread_self(). Thread 0 makes no call of its
// own to the heap (glibc's only, as it exits); thread I > 0 allocates blocks of sizes 1000 + I and
// 2000 + I and frees them: thread 1 with a tag pushed that it never pops (a thread that inherited
// its recorder state would have its blocks tagged too), the last through the C library alone
// (strdup's malloc is the first call of the thread).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memdump_api.h"

#define THREADS 5

static char text[2100];

static void *worker(void *arg)
{
    int i = (int)(intptr_t)arg;
    if (i == 1)
        memdump_tag_push("first");  // never popped: the thread exits inside its tag
    if (i == THREADS - 1) {
        void *p = strdup(text + sizeof text - 1 - (999 + i));  // malloc(1000 + i) in strdup
        void *q = strdup(text + sizeof text - 1 - (1999 + i));
        free(p);
        free(q);
    } else if (i > 0) {
        void *p = malloc(1000 + i);
        void *q = malloc(2000 + i);
        free(p);
        free(q);
    }
    char line[96];  // written without stdio: the thread's only allocations are the two above
    int n = snprintf(line, sizeof line, "thread %d tid %ld self %#lx\n", i, (long)gettid(),
                     (unsigned long)pthread_self());
    if (write(STDOUT_FILENO, line, (size_t)n) != n)
        abort();
    return NULL;
}

int main(void)
{
    memset(text, 'x', sizeof text - 1);
    for (int i = 0; i < THREADS; i++) {
        pthread_t t;
        int rc = pthread_create(&t, NULL, worker, (void *)(intptr_t)i);
        if (rc == 0)
            rc = pthread_join(t, NULL);
        if (rc != 0) {
            fprintf(stderr, "thread %d: %s\n", i, strerror(rc));
            return 1;
        }
    }
    return 0;
}
