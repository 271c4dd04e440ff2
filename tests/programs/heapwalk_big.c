/* @brief A big heap for the heap walk's measurement (docs/benchmarks.md, scripts/bench-heapwalk.py):
 * N blocks of 24 bytes (argv[1], default 1,000,000) held in one array, every tenth freed (into
 * tcache, then fastbins); it prints "READY" and stops itself (SIGSTOP). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void **blocks;

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    blocks = malloc((size_t)n * sizeof *blocks);
    if (blocks == NULL)
        return 1;
    for (long i = 0; i < n; i++)
        blocks[i] = malloc(24);
    for (long i = 0; i < n; i += 10) {
        free(blocks[i]);
        blocks[i] = NULL;
    }
    if (write(1, "READY\n", 6) != 6)
        return 1;
    raise(SIGSTOP);
    return 0;
}
