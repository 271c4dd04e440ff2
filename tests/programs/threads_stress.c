/* @brief 32 threads allocate at once, released together by a barrier: each makes ROUNDS
 * malloc/free pairs (argv[1], default 2000) and leaks one 48-byte block. memdump must record
 * every one of them. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 32
static pthread_barrier_t start;
static int rounds = 2000;

static void *worker(void *arg) {
    (void)arg;
    pthread_barrier_wait(&start);
    for (int i = 0; i < rounds; i++) {
        char *p = malloc(16 + (size_t)(i % 7));  // FREE: round
        memset(p, i, 16);
        free(p);
    }
    char *kept = malloc(48);  // LEAK: per_thread
    kept[0] = 1;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        rounds = atoi(argv[1]);
    }
    pthread_t threads[THREADS];
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        if (pthread_create(&threads[i], NULL, worker, NULL) != 0) {
            return 1;
        }
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
    }
    return 0;
}
