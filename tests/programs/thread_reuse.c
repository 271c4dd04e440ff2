// @brief Threads started one after another, each joined before the next starts: glibc gives each
// new thread the descriptor and stack the last one left (its cache of joined threads' stacks).
// Each thread allocates blocks of sizes of its own and prints its kernel thread id and its
// pthread_self(); the first exits with a tag still pushed, so a thread that inherited its
// recorder state would have its blocks tagged too.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memdump_api.h"

#define THREADS 4

static void *worker(void *arg)
{
    int i = (int)(intptr_t)arg;
    if (i == 0)
        memdump_tag_push("first");  // never popped: the thread exits inside its tag
    void *p = malloc(1000 + i);
    void *q = malloc(2000 + i);
    free(p);
    free(q);
    char line[96];  // written without stdio: the thread's only allocations are the two above
    int n = snprintf(line, sizeof line, "thread %d tid %ld self %#lx\n", i, (long)gettid(),
                     (unsigned long)pthread_self());
    if (write(STDOUT_FILENO, line, (size_t)n) != n)
        abort();
    return NULL;
}

int main(void)
{
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
