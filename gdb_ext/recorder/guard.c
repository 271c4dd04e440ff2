/* @brief Guard pages: the guarded pool and its SPEC (docs/heap-errors.md, "Guard pages").
 *
 * GWP-ASan's design: one mapping reserved at start of SLOTS slots, each PAGES data pages between
 * two PROT_NONE guard pages (a guard page is shared by the slots on either side of it):
 *
 *     G [D..D] G [D..D] G ... G
 *
 * A guarded block gets a slot: its pages made accessible, the block placed so that its end
 * touches the guard page after it (overflows) or its start the guard page before it
 * (underflows, `under`). Overflow placement is exact by default: the block starts at the page's
 * end minus its size, aligned to the largest power of two dividing the size, which is what any
 * object of that size needs (sizeof is a multiple of alignof); `align16` aligns the start to
 * 16 as malloc does, and then the 1 to 15 bytes of slack between a block whose size is no
 * multiple of 16 and its guard page are not checked (GWP-ASan's default).
 *
 * A released block's pages go back to PROT_NONE. A one-page slot keeps its page (resident, at
 * most a page per slot: 16 MiB for 4,096) and is zeroed when it is reused: a memset of 4 KiB
 * costs less than the madvise(MADV_DONTNEED) at the free plus the zero-fill fault at the reuse
 * (5.2 against 8.2 us a guarded pair, docs/heap-errors.md "Cost"). A slot of more pages (a
 * `MIN-MAX` SPEC) gives them back to the kernel at the free (MADV_DONTNEED: zero when reused),
 * which bounds the pool's memory by its live blocks. Either way a reused slot reads zero. The
 * freed slot goes to the end of a FIFO of free slots: it is reused
 * only once every other free slot was, so a use after free faults for as long as possible. The
 * pool holds at most SLOTS live blocks; an allocation that finds no free slot goes to the C
 * library (mdr_guard_alloc returns NULL). A slot once used costs two memory mappings (its data,
 * and its guard page kept apart from the neighbouring free slots': mdr_guard_alloc): 2 * SLOTS + 1
 * at most, against vm.max_map_count.
 *
 * The free-slot queue is under a spin lock; the system calls (mprotect, madvise) are made
 * outside it, on a slot its thread owns.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guard.h"

enum { SLOT_NEVER = 0, SLOT_LIVE = 1, SLOT_FREED = 2, SLOT_BUSY = 3 };

struct slot {
    uintptr_t block;
    uint64_t size;
    int state;
};

static struct {
    char *base;           /* the first guard page */
    size_t bytes;         /* the whole mapping */
    size_t page, data;    /* page size; data bytes a slot */
    size_t stride;        /* data + one guard page */
    size_t count;
    struct slot *slots;
    uint32_t *queue;      /* free slots, FIFO: queue[head % count] ... */
    size_t head, tail;    /* tail - head slots queued */
    volatile int lock;
    int under, align16;
} P;

/* -- SPEC ---------------------------------------------------------------------------------- */

static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    if (n == 0 || n > 18)
        return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 1;
}

/* `N%` (N with at most 4 decimals: `5%`, `0.02%`) in parts per million; 0 when it is not one */
static uint32_t parse_share(const char *s, size_t n)
{
    const char *dot = memchr(s, '.', n);
    size_t whole = dot != NULL ? (size_t)(dot - s) : n, decimals = dot != NULL ? n - whole - 1 : 0;
    uint64_t a, f = 0;
    if (!parse_u64(s, whole, &a))
        return 0;
    if (dot != NULL && (decimals > 4 || !parse_u64(dot + 1, decimals, &f)))
        return 0;
    for (size_t i = decimals; i < 4; i++)
        f *= 10;
    return a > 100 || a * 10000 + f > 1000000 ? 0 : (uint32_t)(a * 10000 + f);
}

static int bad(char *err, size_t len, const char *term, size_t n, const char *why)
{
    snprintf(err, len, "bad guard SPEC term '%.*s': %s", (int)n, term, why);
    return -1;
}

int mdr_guard_parse(const char *spec, struct mdr_guard_spec *out, char *err, size_t len)
{
    struct mdr_guard_spec s = {.ppm = 1000000, .size_max = UINT64_MAX};
    int sampled = 0, sized = 0, sided = 0, tagged = 0, fns = 0;
    if (spec == NULL || *spec == '\0') {
        snprintf(err, len, "empty guard SPEC");
        return -1;
    }
    for (const char *t = spec; *t != '\0';) {
        size_t n = strcspn(t, ",");
        const char *dash = memchr(t, '-', n);
        uint64_t a, b;
        if (n == 0)
            return bad(err, len, t, n, "empty term");
        if (n >= 3 && memcmp(t, "fn:", 3) == 0) {
            if (fns++)
                return bad(err, len, t, n, "a second function");
            if (n == 3)
                return bad(err, len, t, n, "fn:NAME needs a name");
            if (n - 3 >= sizeof s.fn)
                return bad(err, len, t, n, "the function's name is too long");
            memcpy(s.fn, t + 3, n - 3);
            s.fn[n - 3] = '\0';
        } else if (n == 3 && memcmp(t, "all", 3) == 0) {
            if (sampled++)
                return bad(err, len, t, n, "a second share (all or N%)");
            s.all = 1;
        } else if (t[n - 1] == '%') {
            if (sampled++)
                return bad(err, len, t, n, "a second share (all or N%)");
            if ((s.ppm = parse_share(t, n - 1)) == 0)
                return bad(err, len, t, n, "a share is 0.0001% to 100%, at most 4 decimals");
        } else if (dash != NULL && !(n >= 4 && memcmp(t, "tag:", 4) == 0)) {
            if (sized++)
                return bad(err, len, t, n, "a second size range");
            size_t k = (size_t)(dash - t);
            if (!parse_u64(t, k, &a) || !parse_u64(dash + 1, n - k - 1, &b))
                return bad(err, len, t, n, "a size range is MIN-MAX, in bytes");
            if (a > b)
                return bad(err, len, t, n, "MIN is larger than MAX");
            s.size_min = a;
            s.size_max = b;
        } else if ((n == 5 && memcmp(t, "under", 5) == 0) || (n == 4 && memcmp(t, "over", 4) == 0)) {
            if (sided++)
                return bad(err, len, t, n, "a second side (under or over)");
            s.under = n == 5;
        } else if (n == 7 && memcmp(t, "align16", 7) == 0) {
            s.align16 = 1;
        } else if (n >= 4 && memcmp(t, "tag:", 4) == 0) {
            if (tagged++)
                return bad(err, len, t, n, "a second tag");
            if (n == 4)
                return bad(err, len, t, n, "tag:NAME needs a name");
            uint64_t h = 0xcbf29ce484222325ull;  /* FNV-1a, as recorder.c hashes a pushed tag */
            for (size_t i = 4; i < n; i++)
                h = (h ^ (unsigned char)t[i]) * 0x100000001b3ull;
            s.tag = h;
        } else {
            return bad(err, len, t, n,
                       "not all, N%, MIN-MAX, under, over, align16, tag:NAME or fn:NAME");
        }
        t += n;
        if (*t == ',') {
            t++;
            if (*t == '\0')
                return bad(err, len, t, 0, "empty term");
        }
    }
    if (!sampled)
        s.all = 1;  /* `under`, `16-256` alone: every such block */
    *out = s;
    return 0;
}

int mdr_guard_fn_on_stack(const struct mdr_guard_spec *spec, const uintptr_t *pcs, int n)
{
    if (spec->fn[0] == '\0')
        return 1;
    for (int i = 0; i < n; i++)
        if (pcs[i] - 1 >= spec->fn_lo && pcs[i] - 1 < spec->fn_hi)
            return 1;
    return 0;
}

/* splitmix64's finaliser: a well-mixed seed from a poor one */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int mdr_guard_sample(struct mdr_guard_sampler *s, uint32_t ppm, uint64_t seed)
{
    uint64_t x = s->x;
    if (x == 0)
        x = mix(seed ^ (uintptr_t)s) | 1;  /* xorshift64's state is never 0 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s->x = x;
    /* the draw's top 32 bits scaled to [0, 1,000,000): exact to 1 ppm, no division */
    return ((x >> 32) * 1000000u >> 32) < ppm;
}

/* -- the pool ------------------------------------------------------------------------------ */

static void take(void)
{
    for (unsigned spins = 0; __atomic_exchange_n(&P.lock, 1, __ATOMIC_ACQUIRE); spins++)
        if (spins > 64)
            sched_yield();
}

static void give(void)
{
    __atomic_store_n(&P.lock, 0, __ATOMIC_RELEASE);
}

void mdr_guard_atfork(int phase)
{
    if (P.base == NULL)
        return;
    if (phase == 0)
        take();
    else
        give();
}

int mdr_guard_pool_init(const struct mdr_guard_spec *spec, size_t slots, size_t pages)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t stride = (pages + 1) * page;
    size_t meta = slots * (sizeof(struct slot) + sizeof(uint32_t));
    meta = (meta + page - 1) & ~(page - 1);
    size_t bytes = page + slots * stride;
    char *base = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        return 0;
    char *m = mmap(NULL, meta, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        munmap(base, bytes);
        return 0;
    }
    P.slots = (struct slot *)m;
    P.queue = (uint32_t *)(m + slots * sizeof(struct slot));
    for (size_t i = 0; i < slots; i++)
        P.queue[i] = (uint32_t)i;
    P.head = 0;
    P.tail = slots;
    P.page = page;
    P.data = pages * page;
    P.stride = stride;
    P.count = slots;
    P.under = spec->under;
    P.align16 = spec->align16;
    P.bytes = bytes;
    __atomic_store_n(&P.base, base, __ATOMIC_RELEASE);
    return 1;
}

int mdr_guard_region(uintptr_t *base, size_t *bytes)
{
    *base = (uintptr_t)P.base;
    *bytes = P.bytes;
    return P.base != NULL;
}

int mdr_guard_owns(const void *p)
{
    return P.base != NULL && (uintptr_t)p - (uintptr_t)P.base < P.bytes;
}

static char *slot_data(size_t i)
{
    return P.base + P.page + i * P.stride;
}

void *mdr_guard_alloc(size_t size, size_t align)
{
    if (P.base == NULL || size > P.data || align > P.page)
        return NULL;
    take();
    if (P.head == P.tail) {
        give();
        return NULL;
    }
    size_t i = P.queue[P.head++ % P.count];
    give();
    struct slot *s = &P.slots[i];
    char *data = slot_data(i);
    if (s->state == SLOT_NEVER) {
        /* the slot's guard pages flagged apart from its data (left out of a core dump: they
         * hold nothing; every kernel has the flag), so the kernel never merges them: each
         * mprotect then changes one mapping's protection instead of splitting the pool's
         * mapping and merging it back (2.2 against 5.2 us a guarded pair). Failing
         * (vm.max_map_count), the mprotects split and merge as before. */
        madvise(data - P.page, P.page, MADV_DONTDUMP);
        madvise(data + P.data, P.page, MADV_DONTDUMP);
    }
    if (mprotect(data, P.data, PROT_READ | PROT_WRITE) != 0) {  /* vm.max_map_count: ENOMEM */
        take();
        P.queue[P.tail++ % P.count] = (uint32_t)i;
        give();
        return NULL;
    }
    if (P.data == P.page && s->state == SLOT_FREED)
        memset(data, 0, P.data);  /* its page kept at the free (mdr_guard_release) */
    uintptr_t at;
    if (P.under) {
        at = (uintptr_t)data;
    } else {
        /* malloc(0) gets a block whose end is the guard page too: any access faults */
        at = (uintptr_t)data + P.data - size;
        if (P.align16)
            at &= ~(uintptr_t)15;
        if (align > 1)
            at &= ~(uintptr_t)(align - 1);
    }
    s->block = at;
    s->size = size;
    __atomic_store_n(&s->state, SLOT_LIVE, __ATOMIC_RELEASE);
    return (void *)at;
}

/* P's slot, when P is the start of one of the pool's blocks (live or not) */
static struct slot *slot_of(const void *p, size_t *index)
{
    if (!mdr_guard_owns(p) || (uintptr_t)p < (uintptr_t)P.base + P.page)
        return NULL;
    size_t i = ((uintptr_t)p - (uintptr_t)P.base - P.page) / P.stride;
    if (i >= P.count || P.slots[i].block != (uintptr_t)p)
        return NULL;
    if (index != NULL)
        *index = i;
    return &P.slots[i];
}

size_t mdr_guard_size(const void *p)
{
    struct slot *s = slot_of(p, NULL);
    return s != NULL && s->state == SLOT_LIVE ? s->size : 0;
}

int mdr_guard_release(void *p)
{
    size_t i;
    struct slot *s = slot_of(p, &i);
    int expected = SLOT_LIVE;
    if (s == NULL || !__atomic_compare_exchange_n(&s->state, &expected, SLOT_BUSY, 0,
                                                  __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return 0;
    char *data = slot_data(i);
    mprotect(data, P.data, PROT_NONE);
    if (P.data > P.page)  /* a one-page slot keeps its page, zeroed when reused */
        madvise(data, P.data, MADV_DONTNEED);
    __atomic_store_n(&s->state, SLOT_FREED, __ATOMIC_RELEASE);
    take();
    P.queue[P.tail++ % P.count] = (uint32_t)i;
    give();
    return 1;
}

/* -- what a faulting address is ------------------------------------------------------------- */

/* ADDR against slot I's block: its distance in bytes (0 inside), the relation in *HIT */
static uint64_t against(size_t i, uintptr_t addr, struct mdr_guard_hit *hit)
{
    const struct slot *s = &P.slots[i];
    hit->block = s->block;
    hit->size = s->size;
    hit->state = s->state == SLOT_LIVE ? "allocated" : "freed";
    if (addr < s->block) {
        hit->relation = "before";
        hit->offset = s->block - addr;
        return hit->offset;
    }
    if (addr >= s->block + s->size) {
        hit->relation = "after";
        hit->offset = addr - (s->block + s->size);
        return hit->offset + 1;
    }
    hit->relation = "inside";
    hit->offset = addr - s->block;
    return 0;
}

int mdr_guard_classify(uintptr_t addr, struct mdr_guard_hit *out)
{
    if (!mdr_guard_owns((const void *)addr))
        return 0;
    /* the slot whose data holds ADDR, or the two beside the guard page that does */
    intptr_t rel = (intptr_t)(addr - (uintptr_t)P.base) - (intptr_t)P.page;
    intptr_t i = rel < 0 ? -1 : rel / (intptr_t)P.stride;
    size_t into = rel < 0 ? 0 : (size_t)rel % P.stride;
    intptr_t cand[2] = {i, -1};
    if (rel < 0 || into >= P.data)
        cand[1] = i + 1;  /* a guard page: the slot before it (i) and the one after */
    uint64_t best = UINT64_MAX;
    int found = 0;
    for (int k = 0; k < 2; k++) {
        if (cand[k] < 0 || (size_t)cand[k] >= P.count)
            continue;
        int st = __atomic_load_n(&P.slots[cand[k]].state, __ATOMIC_ACQUIRE);
        if (st == SLOT_NEVER)
            continue;
        struct mdr_guard_hit h;
        uint64_t d = against((size_t)cand[k], addr, &h);
        if (d < best) {
            best = d;
            *out = h;
            found = 1;
        }
    }
    return found;
}
