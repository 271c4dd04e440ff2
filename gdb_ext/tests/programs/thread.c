/* malloc from a second thread: its outermost frame is glibc's clone3 child entry. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

volatile int sink;

NOINLINE static void *leaf(size_t n) { void *p = malloc(n); sink++; return p; }
NOINLINE static void *middle(size_t n) { void *p = leaf(n + 8); sink++; return p; }

static void *worker(void *arg) {
    for (int i = 0; i < 3; i++)
        free(middle((size_t)(long)arg + (size_t)i));
    return NULL;
}

int main(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker, (void *)100L) != 0)
        return 1;
    pthread_join(t, NULL);
    free(middle(5));
    return 0;
}
