/* @brief The live-block table (recorder.h's inline look-ups, intern.c's growth) against a plain array:
 * four million random allocations, reallocations of a live address and releases (some of
 * addresses never allocated) over a pool of addresses that keeps runs long, the table wrapping
 * around its end and doubling. After every ten thousand operations the table must hold exactly
 * the array's blocks with their sizes and stacks, the control block's counts must be the
 * array's, and every entry must be reachable from its home without crossing an empty one (what a
 * wrong backward shift breaks first). Exit 1 at the first difference (printed), 0 when all
 * agree. Built with intern.c and fmt.c alone: the rest of the recorder is stubbed below. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recorder.h"

struct mdr_control memdump_recorder_control;
struct mdr_window mdr_out_window;
char *mdr_out_grow(size_t bytes) { (void)bytes; return NULL; }
int mdr_module_of(uintptr_t pc, const char **path, uintptr_t *bias)
{
    (void)pc, (void)path, (void)bias;
    return 0;
}

#define POOL 120000 /* addresses: the table holds up to 2^17 of them at half load */
static uint64_t size_of[POOL], stack_of[POOL];
static int live_at[POOL];

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)  /* Knuth's MMIX LCG, its high bits */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return rng >> 16 | rng << 48;
}

static uint64_t addr_of(size_t i) { return 0x7f0000001000ull + 32 * (uint64_t)i; }

static int check(long step)
{
    uint64_t count = 0, bytes = 0;
    for (size_t i = 0; i < POOL; i++) {
        if (!live_at[i])
            continue;
        count++;
        bytes += size_of[i];
        const uint64_t *e = mdr_live_probe(addr_of(i));
        if (e[0] != addr_of(i) || e[1] != size_of[i] || (e[2] & 0xffffffffu) != stack_of[i]) {
            printf("step %ld: block %#" PRIx64 " not found as allocated\n", step, addr_of(i));
            return 1;
        }
    }
    uint64_t entries = 0, mask = mdr_live_cap - 1;
    for (size_t j = 0; j < mdr_live_cap; j++) {
        uint64_t a = mdr_live[3 * j];
        if (a == 0)
            continue;
        entries++;
        size_t i = (size_t)((a - addr_of(0)) / 32);
        if (a < addr_of(0) || i >= POOL || !live_at[i]) {
            printf("step %ld: entry %zu holds %#" PRIx64 ", which is not live\n", step, j, a);
            return 1;
        }
        for (size_t k = mdr_live_home(a); k != j; k = (k + 1) & mask)
            if (mdr_live[3 * k] == 0) {
                printf("step %ld: entry %zu (%#" PRIx64 ") is past an empty entry from its home\n",
                       step, j, a);
                return 1;
            }
    }
    const struct mdr_control *c = &memdump_recorder_control;
    if (entries != count || c->live_count != count || c->live_bytes != bytes) {
        printf("step %ld: %" PRIu64 " entries, live_count %" PRIu64 ", live_bytes %" PRIu64
               "; the array: %" PRIu64 " blocks, %" PRIu64 " bytes\n",
               step, entries, c->live_count, c->live_bytes, count, bytes);
        return 1;
    }
    return 0;
}

int main(void)
{
    if (!mdr_intern_init()) {
        printf("no memory for the recorder's tables\n");
        return 1;
    }
    for (long step = 1; step <= 4000000; step++) {
        uint64_t r = next();
        /* the live share drifts from a quarter of the pool to nearly all of it and back */
        long phase = (step / 400000) % 2 ? 3 : 8;
        size_t i = (size_t)(r >> 20) % POOL;
        if (r % 10 < (uint64_t)phase) {  /* an allocation, or a new size for a live address */
            size_of[i] = (r >> 8) % 4096;
            stack_of[i] = 1 + (r >> 40) % 1000;
            live_at[i] = 1;
            mdr_live_add(addr_of(i), size_of[i], stack_of[i]);
        } else {  /* a release: of nothing, when the address is not live */
            int was = live_at[i];
            live_at[i] = 0;
            if (mdr_live_remove(addr_of(i)) != was) {
                printf("step %ld: removing %#" PRIx64 " returned %d\n", step, addr_of(i), !was);
                return 1;
            }
        }
        if (step % 10000 == 0 && check(step))
            return 1;
    }
    printf("live table: %" PRIu64 " blocks at the end, %zu entries\n",
           memdump_recorder_control.live_count, mdr_live_cap);
    return 0;
}
