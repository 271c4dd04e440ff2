/* @brief The guard pages' benchmark of many live blocks (scripts/bench-wholerun.py --guard):
 * `live_churn LIVE N` keeps LIVE blocks live and replaces one, chosen at random, N times.
 *
 * It allocates LIVE blocks, then N times frees the block at a random index and allocates another
 * in its place (a free and a malloc each: 2 N + LIVE events, then LIVE frees at the end). The
 * index and the size (16 to 527 bytes, as alloc_bench's) come from an xorshift64 generator of a
 * fixed seed: every run makes the same calls. Each new block is written (its first and last
 * bytes), as a program uses what it allocates. With `--guard all`, the pool's 4,096 slots are
 * full after the first blocks, and a block is guarded only when it takes a slot a guarded
 * block's free returned: what a guard page per block costs on a program of many live blocks.
 * It prints nothing and exits 0; a usage error or a failed malloc exits 2.
 */
#include <stdio.h>
#include <stdlib.h>

static unsigned long long state = 0x9e3779b97f4a7c15ull;

static unsigned long long next(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static char *made(void)
{
    size_t size = 16 + (size_t)((next() >> 40) % 512);
    char *p = malloc(size);
    if (p == NULL) {
        fputs("live_churn: out of memory\n", stderr);
        exit(2);
    }
    p[0] = 1;
    p[size - 1] = 1;
    return p;
}

int main(int argc, char **argv)
{
    char *end1, *end2;
    long live = argc == 3 ? strtol(argv[1], &end1, 10) : 0;
    long n = argc == 3 ? strtol(argv[2], &end2, 10) : -1;
    if (argc != 3 || *end1 != '\0' || *end2 != '\0' || live < 1 || n < 0) {
        fputs("usage: live_churn LIVE N (LIVE >= 1 blocks kept live, N >= 0 replacements)\n",
              stderr);
        return 2;
    }
    char **blocks = malloc((size_t)live * sizeof *blocks);
    if (blocks == NULL)
        return 2;
    for (long i = 0; i < live; i++)
        blocks[i] = made();
    for (long i = 0; i < n; i++) {
        size_t at = (size_t)(next() % (unsigned long long)live);
        free(blocks[at]);
        blocks[at] = made();
    }
    for (long i = 0; i < live; i++)
        free(blocks[i]);
    free(blocks);
    return 0;
}
