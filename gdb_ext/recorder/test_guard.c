/* @brief guard.c against its spec: SPEC's terms and its errors; the pool's placement (the block's
 * end on the guard page, or its start), real faults one byte past and before a block and after
 * its free, the FIFO reuse, a full pool, and what an address in the pool is. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "guard.h"

static int failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "test_guard:%d: %s: ", __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            failures++;                                                        \
        }                                                                      \
    } while (0)

static void parses(const char *text, uint32_t ppm, int all, uint64_t lo, uint64_t hi,
                   int under, int align16)
{
    struct mdr_guard_spec s;
    char err[160] = "";
    int rc = mdr_guard_parse(text, &s, err, sizeof err);
    CHECK(rc == 0, "'%s': %s", text, err);
    if (rc == 0)
        CHECK(s.ppm == ppm && s.all == all && s.size_min == lo && s.size_max == hi &&
              s.under == under && s.align16 == align16,
              "'%s': %u ppm all=%d %llu-%llu under=%d align16=%d", text, s.ppm, s.all,
              (unsigned long long)s.size_min, (unsigned long long)s.size_max, s.under,
              s.align16);
}

static void refuses(const char *text, const char *message)
{
    struct mdr_guard_spec s;
    char err[160] = "";
    CHECK(mdr_guard_parse(text, &s, err, sizeof err) == -1, "'%s' accepted", text);
    CHECK(strcmp(err, message) == 0, "'%s': got \"%s\", not \"%s\"", text, err, message);
}

static sigjmp_buf back;
static volatile uintptr_t fault_at;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    fault_at = (uintptr_t)si->si_addr;
    siglongjmp(back, 1);
}

/* Whether a write of one byte at P faults (at P) */
static int faults(volatile char *p)
{
    fault_at = 0;
    if (sigsetjmp(back, 1) == 0) {
        *p = 1;
        return 0;
    }
    return fault_at == (uintptr_t)p;
}

static void hit_is(uintptr_t addr, uintptr_t block, uint64_t size, uint64_t offset,
                   const char *relation, const char *state)
{
    struct mdr_guard_hit h;
    int ok = mdr_guard_classify(addr, &h);
    CHECK(ok, "%#lx: no block", (unsigned long)addr);
    if (ok)
        CHECK(h.block == block && h.size == size && h.offset == offset &&
              strcmp(h.relation, relation) == 0 && strcmp(h.state, state) == 0,
              "%#lx: %#lx %llu %llu %s %s", (unsigned long)addr, (unsigned long)h.block,
              (unsigned long long)h.size, (unsigned long long)h.offset, h.relation, h.state);
}

/* the number of the process's memory mappings (lines of /proc/self/maps) */
static int map_count(void)
{
    /* the mappings that hold part of the pool: the process's others (and whether the kernel
     * merges the pool's ends with a neighbour) depend on the machine, not on the pool */
    uintptr_t base = 0;
    size_t bytes = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    int n = 0;
    if (f == NULL || !mdr_guard_region(&base, &bytes)) {
        if (f != NULL)
            fclose(f);
        return -1;
    }
    unsigned long lo, hi;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo < base + bytes && hi > base)
            n++;
    fclose(f);
    return n;
}

/* the LEN bytes at P are all zero */
static int zero_page(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != 0)
            return 0;
    return 1;
}

/* The sampler draws at its rate (within 5 standard deviations of 10M draws), a seeded stream
 * per state: two states of one seed draw apart, a reset one again from the start */
static void samples_at_its_rate(void)
{
    static const uint32_t rates[] = {1, 200, 10000, 50000, 500000, 999999};
    for (size_t r = 0; r < sizeof rates / sizeof *rates; r++) {
        struct mdr_guard_sampler s = {0};
        const double n = 10e6, p = rates[r] / 1e6;
        double hits = 0;
        for (long i = 0; i < (long)n; i++)
            hits += mdr_guard_sample(&s, rates[r], 42);
        double off = hits - n * p;  /* within 5 standard deviations: off^2 <= 25 n p (1 - p) */
        CHECK(off * off <= 25 * n * p * (1 - p) + 1,
              "%u ppm: %.0f of 10M draws chosen, not %.0f", rates[r], hits, n * p);
    }
    struct mdr_guard_sampler a = {0}, b = {0};
    uint64_t first = 0, other = 0, again = 0;
    for (int i = 0; i < 64; i++) {
        first = first << 1 | (uint64_t)mdr_guard_sample(&a, 500000, 7);
        other = other << 1 | (uint64_t)mdr_guard_sample(&b, 500000, 7);
    }
    a.x = 0;
    for (int i = 0; i < 64; i++)
        again = again << 1 | (uint64_t)mdr_guard_sample(&a, 500000, 7);
    CHECK(first != other && first == again, "streams %llx %llx %llx", (unsigned long long)first,
          (unsigned long long)other, (unsigned long long)again);
    struct mdr_guard_sampler z = {0};
    int none = 1;
    for (int i = 0; i < 100000; i++)
        none &= !mdr_guard_sample(&z, 0, 1);
    CHECK(none, "0 ppm chose a block");
}

int main(void)
{
    parses("all", 1000000, 1, 0, UINT64_MAX, 0, 0);
    parses("5%", 50000, 0, 0, UINT64_MAX, 0, 0);
    parses("all,under", 1000000, 1, 0, UINT64_MAX, 1, 0);
    parses("5%,16-256", 50000, 0, 16, 256, 0, 0);
    parses("16-256", 1000000, 1, 16, 256, 0, 0);
    parses("over,100%,align16", 1000000, 0, 0, UINT64_MAX, 0, 1);
    parses("0.02%", 200, 0, 0, UINT64_MAX, 0, 0);    /* GWP-ASan's default, 1 in 5,000 */
    parses("0.0001%", 1, 0, 0, UINT64_MAX, 0, 0);
    parses("2.5%", 25000, 0, 0, UINT64_MAX, 0, 0);
    parses("100.0000%", 1000000, 0, 0, UINT64_MAX, 0, 0);
    parses("100.0%", 1000000, 0, 0, UINT64_MAX, 0, 0);
    refuses("", "empty guard SPEC");
    refuses("most", "bad guard SPEC term 'most': not all, N%, MIN-MAX, under, over, align16, "
                    "tag:NAME or fn:NAME");
    refuses("fn:", "bad guard SPEC term 'fn:': fn:NAME needs a name");
    refuses("fn:a,fn:b", "bad guard SPEC term 'fn:b': a second function");
    {
        struct mdr_guard_spec s;
        char err[160] = "";
        CHECK(mdr_guard_parse("fn:parse_row,under", &s, err, sizeof err) == 0, "%s", err);
        CHECK(strcmp(s.fn, "parse_row") == 0 && s.under && s.all, "fn '%s'", s.fn);
        CHECK(mdr_guard_parse("5%,fn:a-b%", &s, err, sizeof err) == 0, "%s", err);
        CHECK(strcmp(s.fn, "a-b%") == 0 && s.ppm == 50000, "fn '%s' %u ppm", s.fn, s.ppm);
        /* NAME's code at [0x1000, 0x1040): a return address one past a call inside it */
        s.fn_lo = 0x1000;
        s.fn_hi = 0x1040;
        uintptr_t inside[] = {0x5000, 0x1040, 0x9000};  /* the call's last byte: 0x103f */
        uintptr_t outside[] = {0x5000, 0x1000, 0x1041};  /* 0xfff before, 0x1040 after it */
        CHECK(mdr_guard_fn_on_stack(&s, inside, 3), "0x1040 returns into [0x1000, 0x1040)");
        CHECK(!mdr_guard_fn_on_stack(&s, outside, 3), "none of 0x1000, 0x1041 returns into it");
        CHECK(!mdr_guard_fn_on_stack(&s, inside, 1), "one frame: only 0x5000");
        s.fn[0] = '\0';
        CHECK(mdr_guard_fn_on_stack(&s, outside, 0), "no fn: term: every block");
    }
    refuses("tag:", "bad guard SPEC term 'tag:': tag:NAME needs a name");
    refuses("tag:a,tag:b", "bad guard SPEC term 'tag:b': a second tag");
    {
        struct mdr_guard_spec t;
        char err[160] = "";
        /* FNV-1a of "a-b": a tag's name may hold a dash */
        CHECK(mdr_guard_parse("5%,tag:a-b", &t, err, sizeof err) == 0 && t.ppm == 50000 &&
              t.tag == ((((0xcbf29ce484222325ull ^ 'a') * 0x100000001b3ull ^ '-') *
                         0x100000001b3ull ^ 'b') * 0x100000001b3ull) && t.size_max == UINT64_MAX,
              "tag:a-b: %s", err);
    }
    refuses("0%", "bad guard SPEC term '0%': a share is 0.0001% to 100%, at most 4 decimals");
    refuses("101%", "bad guard SPEC term '101%': a share is 0.0001% to 100%, at most 4 decimals");
    refuses("0.00001%", "bad guard SPEC term '0.00001%': a share is 0.0001% to 100%, at most 4 decimals");
    refuses("100.0001%", "bad guard SPEC term '100.0001%': a share is 0.0001% to 100%, at most 4 decimals");
    refuses(".5%", "bad guard SPEC term '.5%': a share is 0.0001% to 100%, at most 4 decimals");
    refuses("5.%", "bad guard SPEC term '5.%': a share is 0.0001% to 100%, at most 4 decimals");
    refuses("1.2.3%", "bad guard SPEC term '1.2.3%': a share is 0.0001% to 100%, at most 4 decimals");
    refuses("0.0000%", "bad guard SPEC term '0.0000%': a share is 0.0001% to 100%, at most 4 decimals");
    refuses("all,5%", "bad guard SPEC term '5%': a second share (all or N%)");
    refuses("256-16", "bad guard SPEC term '256-16': MIN is larger than MAX");
    refuses("16-", "bad guard SPEC term '16-': a size range is MIN-MAX, in bytes");
    refuses("under,over", "bad guard SPEC term 'over': a second side (under or over)");
    refuses("all,", "bad guard SPEC term '': empty term");
    refuses("all,,under", "bad guard SPEC term '': empty term");

    samples_at_its_rate();

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);

    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    struct mdr_guard_spec over = {.ppm = 1000000, .all = 1, .size_max = UINT64_MAX};
    CHECK(mdr_guard_pool_init(&over, 4, 1), "no pool");
    /* exact placement: the end on the guard page, the start aligned to the size's lowest bit */
    char *a = mdr_guard_alloc(40, 0);
    CHECK(a != NULL && ((uintptr_t)a + 40) % page == 0, "40 bytes at %p", (void *)a);
    CHECK(!faults(a) && !faults(a + 39), "inside the block");
    CHECK(faults(a + 40), "one past the end");
    CHECK(mdr_guard_size(a) == 40 && mdr_guard_owns(a) && !mdr_guard_owns(&failures), "size");
    hit_is((uintptr_t)a + 40, (uintptr_t)a, 40, 0, "after", "allocated");
    hit_is((uintptr_t)a + 45, (uintptr_t)a, 40, 5, "after", "allocated");
    char *odd = mdr_guard_alloc(13, 0);
    CHECK(odd != NULL && faults(odd + 13) && !faults(odd + 12), "13 bytes: one past faults");
    char *al = mdr_guard_alloc(20, 64);
    CHECK(al != NULL && (uintptr_t)al % 64 == 0 && ((uintptr_t)al + 64) % page == 0,
          "aligned 64: %p", (void *)al);
    CHECK(mdr_guard_alloc(page + 1, 0) == NULL, "a block larger than a slot");
    char *last = mdr_guard_alloc(8, 0);
    CHECK(last != NULL && mdr_guard_alloc(8, 0) == NULL, "four slots, then the pool is full");
    memset(a + 40 - page, 0x5a, page);  /* the whole slot dirtied: its reuse must read zero */
    /* free: the pages inaccessible, a second free refused, the slot reused last */
    CHECK(mdr_guard_release(a) == 1 && faults(a + 8), "use after free");
    hit_is((uintptr_t)a + 8, (uintptr_t)a, 40, 8, "inside", "freed");
    CHECK(mdr_guard_release(a) == 0 && mdr_guard_release(odd + 1) == 0, "double, interior free");
    CHECK(mdr_guard_release(odd) == 1, "odd freed");
    char *again = mdr_guard_alloc(16, 0);
    CHECK(again != NULL && ((uintptr_t)again & ~(page - 1)) == ((uintptr_t)a & ~(page - 1)),
          "the first slot freed is the first reused");
    CHECK(again != NULL && zero_page(again + 16 - page, page), "a reused slot is zero");
    /* a slot of two pages gives them back at the free (MADV_DONTNEED), zero when reused too */
    CHECK(mdr_guard_pool_init(&over, 1, 2), "no pool");
    char *big = mdr_guard_alloc(2 * page, 0);
    CHECK(big != NULL, "two pages");
    if (big != NULL) {
        memset(big, 0x5a, 2 * page);
        CHECK(mdr_guard_release(big) == 1 && faults(big), "two pages: use after free");
        char *big2 = mdr_guard_alloc(2 * page, 0);
        CHECK(big2 == big && zero_page(big2, 2 * page), "two pages: reused, zero");
    }

    /* a slot's mappings are kept apart once used: its free and its reuse change one mapping's
     * protection, neither merging it back into the pool's nor splitting it again */
    CHECK(mdr_guard_pool_init(&over, 3, 1), "no pool");
    char *m1 = mdr_guard_alloc(8, 0);
    int live = map_count();
    CHECK(live == 4, "one slot used: %d mappings in the pool", live);
    CHECK(m1 != NULL && mdr_guard_release(m1) == 1 && map_count() == live,
          "the map count after the free: %d, live: %d", map_count(), live);
    for (int k = 0; k < 6; k++)  /* every slot used, twice */
        CHECK(mdr_guard_release(mdr_guard_alloc(8, 0)) == 1, "cycle %d", k);
    /* the pool's 2 * 3 + 1 mappings, 4 of them (guard, data, guard, the rest) with one slot */
    CHECK(map_count() == live + 3, "three slots used: %d entries, one slot: %d", map_count(),
          live);

    /* underflow placement, and 16-byte alignment's slack */
    struct mdr_guard_spec under = {.ppm = 1000000, .all = 1, .size_max = UINT64_MAX, .under = 1};
    CHECK(mdr_guard_pool_init(&under, 2, 1), "no pool");
    char *u = mdr_guard_alloc(32, 0);
    CHECK(u != NULL && (uintptr_t)u % page == 0 && faults(u - 4) && !faults(u), "underflow");
    hit_is((uintptr_t)u - 4, (uintptr_t)u, 32, 4, "before", "allocated");
    struct mdr_guard_spec a16 = {.ppm = 1000000, .all = 1, .size_max = UINT64_MAX, .align16 = 1};
    CHECK(mdr_guard_pool_init(&a16, 2, 1), "no pool");
    char *s = mdr_guard_alloc(20, 0);
    CHECK(s != NULL && (uintptr_t)s % 16 == 0 && ((uintptr_t)s + 32) % page == 0, "align16");
    CHECK(!faults(s + 20) && faults(s + 32), "align16: 12 bytes of slack are not checked");
    if (failures == 0)
        puts("test_guard: ok");
    return failures != 0;
}
