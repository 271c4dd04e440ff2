/* @brief tables.c's table of blocks against a reference: random puts, deletions (btab_del's
 * backward shift, across the table's wrap-around and through its growths) and look-ups, on
 * addresses that collide in few slots, give the blocks a plain array of the same addresses
 * holds. Run by CTest, and so in the sanitizer builds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tables.h"

#define N_ADDR 3000

static uint64_t rng = 1;

/* splitmix64 */
static uint64_t next(void)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int fail(const char *what, uint64_t addr)
{
    fprintf(stderr, "test_tables: %s (address %#llx)\n", what, (unsigned long long)addr);
    return 1;
}

int main(void)
{
    /* the addresses: the first half's probes start in the last 8 and first 4 slots of a table of
     * 1024 (their runs wrap around its end), the rest anywhere */
    static uint64_t addrs[N_ADDR];
    for (uint64_t a = 1, k = 0; k < N_ADDR; a++) {
        uint64_t home = btab_slot(a, 1023);
        if (k >= N_ADDR / 2 || home >= 1016 || home < 4)
            addrs[k++] = a;
    }
    static uint64_t size[N_ADDR]; /* the reference: addrs[i]'s size, 0 when absent */
    struct btab t = {0};
    uint64_t present = 0;
    for (int round = 0; round < 400000; round++) {
        /* first 700 addresses of both halves (a table of 1024 slots: long probe runs, wrapped
         * ones), then all of them (its growths) */
        uint64_t i = round < 200000 ? (next() % 2) * (N_ADDR / 2) + next() % 350 : next() % N_ADDR;
        uint64_t addr = addrs[i];
        if (next() % 8 != 0) { /* 7 of 8: the table near its 3/4 */
            int made;
            struct block *b = btab_put(&t, addr, &made);
            if (b == NULL)
                return fail("out of memory", addr);
            if (made != (size[i] == 0))
                return fail("btab_put made a block that was there, or found one that was not",
                            addr);
            present += made;
            b->size = size[i] = 1 + next() % 1000;
        } else {
            struct block *b = btab_get(&t, addr);
            if ((b == NULL) != (size[i] == 0))
                return fail("btab_get found a deleted block, or lost one", addr);
            if (b != NULL) {
                btab_del(&t, b);
                size[i] = 0;
                present--;
            }
        }
        if (round % 997 == 0) { /* every address as the reference has it */
            for (uint64_t j = 0; j < N_ADDR; j++) {
                const struct block *b = btab_get(&t, addrs[j]);
                if ((b == NULL) != (size[j] == 0) || (b != NULL && b->size != size[j]))
                    return fail("a block differs from the reference", addrs[j]);
            }
            if (t.n != present)
                return fail("the table's count differs from the reference's", 0);
        }
    }
    btab_free(&t);
    return 0;
}
