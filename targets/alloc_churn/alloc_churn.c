/**
 * @brief Allocation churn: a working set of blocks replaced at random, reached through a few frames.
 *
 * `alloc_churn N` performs N iterations; each frees one block of a 64-entry working set and allocates
 * a new one of a pseudo-random size, so N iterations make N mallocs and N frees (plus 64 at start and
 * end). Built -O2 without frame pointers, like most production code: the unwinder must use CFI.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORKING_SET 64

static unsigned long long rng_state = 88172645463325252ULL;

static unsigned long long next_random(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

__attribute__((noinline)) static void *make_block(size_t size) {
    void *p = malloc(size);
    if (p != NULL) {
        memset(p, 0xab, size < 64 ? size : 64);
    }
    return p;
}

__attribute__((noinline)) static void *make_record(unsigned kind) {
    return make_block(16 + (kind % 8) * 32);
}

__attribute__((noinline)) static void churn(void **set, long iterations) {
    for (long i = 0; i < iterations; ++i) {
        unsigned slot = (unsigned)(next_random() % WORKING_SET);
        free(set[slot]);
        set[slot] = make_record((unsigned)next_random());
    }
}

int main(int argc, char **argv) {
    long iterations = 1000;
    if (argc > 2 || (argc == 2 && (iterations = strtol(argv[1], NULL, 10)) < 0)) {
        fprintf(stderr, "usage: alloc_churn [ITERATIONS]\n");
        return 2;
    }
    void *set[WORKING_SET];
    for (int i = 0; i < WORKING_SET; ++i) {
        set[i] = make_record((unsigned)i);
    }
    churn(set, iterations);
    for (int i = 0; i < WORKING_SET; ++i) {
        free(set[i]);
    }
    return 0;
}
