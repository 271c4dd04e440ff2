/* @brief Two threads leak at once (a barrier lines them up): 5 x 111 bytes in one, 3 x 222 in the other. */
#include <pthread.h>
#include <stdlib.h>

static pthread_barrier_t barrier;

static void *worker_a(void *arg) {
    void **out = arg;
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < 5; i++) {
        out[i] = malloc(111);  // LEAK: thread-a
    }
    return NULL;
}

static void *worker_b(void *arg) {
    void **out = arg;
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < 3; i++) {
        out[i] = malloc(222);  // LEAK: thread-b
    }
    return NULL;
}

static void *kept_a[5];
static void *kept_b[3];

int main(void) {
    pthread_t a, b;
    pthread_barrier_init(&barrier, NULL, 2);
    pthread_create(&a, NULL, worker_a, kept_a);
    pthread_create(&b, NULL, worker_b, kept_b);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_barrier_destroy(&barrier);
    return 0;
}
