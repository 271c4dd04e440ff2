/* @brief `churn_leak N [PROGRAM ARGS...]`: N iterations of one malloc and one free (2N heap events),
 * then one block of 77 bytes leaked, then, when a PROGRAM is named, executes it (the block goes with
 * the image): the program a wrapper script executes (tests/e2e/test_memdump_exec.py) and the exec
 * benchmark's (docs/benchmarks.md). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* A volatile sink: the compiler must perform every malloc whose result goes here. */
static void *volatile sink;

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 0;
    for (long i = 0; i < n; i++) {
        sink = malloc(16 + (size_t)(i % 64));  // FREE: churn
        free(sink);
    }
    char *lost = malloc(77);  // LEAK: after-exec
    lost[0] = 'x';
    sink = NULL;
    if (argc > 2) {
        execv(argv[2], argv + 2);
        perror("execv");
        return 127;
    }
    return 0;
}
