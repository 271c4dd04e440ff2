/* A 20-frame stack at malloc for bench_unwind.py: 16 distinct frames, main and 3 glibc frames. */
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

volatile int sink;
void *volatile kept;

#define LINK(name, next)                                                                           \
    NOINLINE void name(int n) {                                                                    \
        volatile char pad[16 + 8 * (n & 3)];                                                       \
        pad[0] = (char)n;                                                                          \
        next(n + pad[0]);                                                                          \
        sink++;                                                                                    \
    }

NOINLINE void b15(int n) { kept = malloc((size_t)n + 1); sink++; }
LINK(b14, b15) LINK(b13, b14) LINK(b12, b13) LINK(b11, b12) LINK(b10, b11) LINK(b9, b10)
LINK(b8, b9) LINK(b7, b8) LINK(b6, b7) LINK(b5, b6) LINK(b4, b5) LINK(b3, b4) LINK(b2, b3)
LINK(b1, b2) LINK(b0, b1)

int main(void) {
    b0(1);
    free(kept);
    return 0;
}
