/* scan_bench MIB [SPREAD [EVERY [LIST]]]: leaves MIB MiB of live blocks full of interior pointers,
 * for the pointer scan's benchmark (scripts/bench-scan.py).
 *
 * Blocks of 32 to 1024 bytes, allocated one after the other; each one's first word points to the
 * start of the next (a list that a global holds: every block is reachable), one word in EVERY
 * (default 1: all) of the others into the middle of another block, the rest small numbers: any
 * block when SPREAD is 0, else one of the SPREAD blocks around it (structures built together sit
 * together). With LIST, writes each block's address and size
 * (two 8-byte words) there, prints "ready" and waits to be killed, the scan's moment; without it,
 * exits (valgrind's run). With LIST, it also maps three pages, the middle one PROT_NONE (which
 * /proc/PID/mem reads and process_vm_readv does not: the scan's tests put blocks there), its
 * first word pointing to the third page. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static void *head;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: scan_bench MIB [SPREAD [EVERY [LIST]]]\n");
        return 2;
    }
    size_t total = (size_t)atol(argv[1]) << 20, spread = argc > 2 ? (size_t)atol(argv[2]) : 0;
    size_t every = argc > 3 && atol(argv[3]) > 0 ? (size_t)atol(argv[3]) : 1;
    size_t cap = total / 32 + 1, n = 0, bytes = 0;
    uint64_t **blocks = malloc(cap * sizeof *blocks);
    size_t *sizes = malloc(cap * sizeof *sizes);
    if (!blocks || !sizes)
        return 1;
    while (bytes < total && n < cap) {
        size_t size = 32 + 8 * (next_random() % 125);
        blocks[n] = malloc(size);
        if (!blocks[n])
            return 1;
        sizes[n++] = size;
        bytes += size;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t *b = blocks[i];
        b[0] = i + 1 < n ? (uint64_t)(uintptr_t)blocks[i + 1] : 0;
        for (size_t w = 1; w < sizes[i] / 8; w++) {
            if ((i + w) % every) {
                b[w] = w;
                continue;
            }
            size_t j = spread ? (i + n - spread / 2 + next_random() % spread) % n
                              : next_random() % n;
            size_t words = sizes[j] / 8;
            b[w] = (uint64_t)(uintptr_t)(blocks[j] + 1 + next_random() % (words - 1));
        }
    }
    head = blocks[0];
    if (argc > 4) {
        FILE *list = fopen(argv[4], "wb");
        if (!list)
            return 1;
        for (size_t i = 0; i < n; i++) {
            uint64_t pair[2] = {(uint64_t)(uintptr_t)blocks[i], sizes[i]};
            fwrite(pair, sizeof pair, 1, list);
        }
        fclose(list);
    }
    free(blocks);
    free(sizes);
    if (argc > 4) {
        long page = sysconf(_SC_PAGESIZE);
        uint8_t *three = mmap(NULL, 3 * (size_t)page, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (three == MAP_FAILED)
            return 1;
        *(uint64_t *)(void *)(three + page) = (uint64_t)(uintptr_t)(three + 2 * page);
        if (mprotect(three + page, (size_t)page, PROT_NONE))
            return 1;
        printf("ready\n");
        fflush(stdout);
        for (;;)
            pause();
    }
    return head != NULL ? 0 : 1;
}
