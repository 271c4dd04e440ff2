/* @brief calloc, realloc and the aligned allocations from two threads, ROUNDS times each: a
 * zeroed block grown, moved, then released by realloc(p, 0), a realloc(NULL, n), a
 * posix_memalign, an aligned_alloc and a memalign freed; each thread leaks the block it makes
 * last (calloc'd, then grown by realloc), which main forgets. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 50

static void *leaked[2];

static void *resize(void *arg)
{
    size_t step = (size_t)(uintptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        char *p = calloc(4, step);
        p = realloc(p, 8 * step);
        p[0] = 1;
        p = realloc(p, 4096 + step);
        char *q = realloc(NULL, step);
        free(q);
        char *volatile gone = realloc(p, 0);
        (void)gone;
        void *a = NULL;
        if (posix_memalign(&a, 64, step) == 0)
            free(a);
        free(aligned_alloc(64, 4 * step));
        free(memalign(128, step));
    }
    char *keep = calloc(3, step);
    keep = realloc(keep, 5 * step);  // LEAK: kept
    leaked[step == 16] = keep;
    return NULL;
}

int main(void)
{
    pthread_t t[2];
    pthread_create(&t[0], NULL, resize, (void *)(uintptr_t)16);
    pthread_create(&t[1], NULL, resize, (void *)(uintptr_t)24);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    memset(leaked, 0, sizeof leaked);
    return leaked[0] != NULL;
}
