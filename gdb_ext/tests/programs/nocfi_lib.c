/* A shared library linked without any .eh_frame: only the frame-pointer heuristic can walk it. */
#include <stdlib.h>

volatile int nocfi_sink;

__attribute__((noinline)) static void *inner(size_t n) {
    void *p = malloc(n);
    nocfi_sink++;
    return p;
}

void *nocfi_alloc(size_t n) {
    void *p = inner(n + 1);
    nocfi_sink++;
    return p;
}
