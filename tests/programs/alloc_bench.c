/* @brief The allocation benchmark of scripts/bench-recorder.py: N heap events through deep call chains.
 *
 * `alloc_bench N` makes N/2 iterations of one malloc and one free (N events). Each malloc is reached
 * through a chain 11 frames deep counting main (main, level1 ... level9, one of 4 leaves chosen by
 * i % 4), so a recorder walks 11 frames per allocation; built -O2 -fomit-frame-pointer -g, the walk
 * needs the CFI. Every function of the chain does work after its call (it writes into the block), so
 * none can become a tail call, and noipa keeps GCC from inlining, cloning or merging them. Sizes vary
 * from 16 to 527 bytes. At the end it leaks exactly ALLOC_BENCH_LEAK_BLOCKS blocks, 16 + 32 + 64 =
 * ALLOC_BENCH_LEAK_BYTES bytes, from one site (leak_site), their pointers dropped.
 * N = 0 starts and exits (no event but the leaks: the start-up cost).
 *
 * It prints nothing, unless ALLOC_BENCH_RSS is set in the environment: then it writes
 * `alloc_bench: peak_rss_kb K` (VmHWM of /proc/self/status) to stderr at the end, without allocating.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__GNUC__) && !defined(__clang__)
#define CHAIN __attribute__((noipa))
#else
#define CHAIN __attribute__((noinline))
#endif

/* Kept in step with scripts/bench-recorder.py (LEAK_BLOCKS, LEAK_BYTES). */
#define ALLOC_BENCH_LEAK_BLOCKS 3
#define ALLOC_BENCH_LEAK_BYTES (16 + 32 + 64)

/* A volatile sink: the compiler must perform every malloc whose result goes here. */
static void *volatile sink;

static size_t size_of(long i) { return 16 + (size_t)((i * 7919) % 512); }

CHAIN static char *leaf0(long i) { char *p = malloc(size_of(i)); if (p) p[0] = 0; return p; }
CHAIN static char *leaf1(long i) { char *p = malloc(size_of(i)); if (p) p[0] = 1; return p; }
CHAIN static char *leaf2(long i) { char *p = malloc(size_of(i)); if (p) p[0] = 2; return p; }
CHAIN static char *leaf3(long i) { char *p = malloc(size_of(i)); if (p) p[0] = 3; return p; }

/* Each level calls the next and then writes into the block: the call is not in tail position. */
#define LEVEL(name, next, k)                 \
    CHAIN static char *name(long i) {        \
        char *p = next(i);                   \
        if (p) p[1] = (char)(p[1] + (k));    \
        return p;                            \
    }

CHAIN static char *level9(long i) {
    char *p;
    switch (i % 4) {
    case 0: p = leaf0(i); break;
    case 1: p = leaf1(i); break;
    case 2: p = leaf2(i); break;
    default: p = leaf3(i); break;
    }
    if (p) p[1] = 9;
    return p;
}
LEVEL(level8, level9, 8)
LEVEL(level7, level8, 7)
LEVEL(level6, level7, 6)
LEVEL(level5, level6, 5)
LEVEL(level4, level5, 4)
LEVEL(level3, level4, 3)
LEVEL(level2, level3, 2)
LEVEL(level1, level2, 1)

/* The known leak: one site, pointers dropped. */
CHAIN static void leak_site(size_t n) {
    sink = malloc(n);
    sink = NULL;
}

/* VmHWM to stderr with read(2) and write(2): no allocation, so no event. */
static void print_peak_rss(void) {
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY);
    if (fd < 0) return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return;
    buf[n] = '\0';
    const char *line = strstr(buf, "VmHWM:");
    if (!line) return;
    long kb = strtol(line + strlen("VmHWM:"), NULL, 10);
    char out[64];
    int len = snprintf(out, sizeof out, "alloc_bench: peak_rss_kb %ld\n", kb);
    if (len > 0 && write(2, out, (size_t)len) < 0) return;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: alloc_bench EVENTS\n");
        return 2;
    }
    char *end;
    long events = strtol(argv[1], &end, 10);
    if (*end != '\0' || events < 0) {
        fprintf(stderr, "alloc_bench: EVENTS must be a non-negative integer: %s\n", argv[1]);
        return 2;
    }
    long sum = 0;
    for (long i = 0; i < events / 2; i++) {
        char *p = level1(i);
        if (!p) return 1;
        sum += p[0];
        free(p);
    }
    leak_site(16);
    leak_site(32);
    leak_site(64);
    if (getenv("ALLOC_BENCH_RSS")) print_peak_rss();
    return sum < 0;  /* never: uses sum so that the loop's reads stay */
}
