/* @brief libmemdump_core: the views' pass (heappass.py's loop, whose semantics it keeps exactly:
 * the C library's own releases do nothing, nor a release of a block that is not live, custom
 * blocks are left out, a realloc is a release and an allocation, an exec drops every block). The
 * records are read by records.c and the blocks kept in the replay's table (tables.c); Python is
 * handed tables (per stack, per counter key) at the end, not a call per event.
 *
 * Memory: a stack's figures (88 bytes, and 128 of lifetime keys with `lifetimes`) per distinct
 * allocating stack, a block (32 bytes) per address live at some point (a released block's slot
 * stays, as in the replay), per distinct size an entry (24 bytes) and 16 to 32 bytes of its
 * table, per distinct lifetime key of a stack (its lifetime buckets, the stacks that freed its
 * blocks) beyond its first ones 32 to 64 bytes of the stack's table of them, 16 bytes per
 * clock sample. */
#include <stddef.h>
#include <stdlib.h>

#include "core.h"
#include "figures.h"
#include "moments.h"

static inline uint64_t mix(int64_t a, int64_t b)
{
    uint64_t h = (uint64_t)a * 0x9E3779B97F4A7C15ull ^ (uint64_t)b * 0xC2B2AE3D27D4EB4Full;
    return h ^ (h >> 29);
}

/* a slot: the entry's index + 1 (0: empty) below, the top 32 bits of its key's hash above, so
 * that a probe reads an entry only when its hash matches */
#define SLOT(h, i) ((h) >> 32 << 32 | (uint64_t)(i))

static int counter_grow(struct counter *k)
{
    uint64_t cap = k->cap ? 2 * k->cap : 256;
    uint64_t *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return 0;
    for (uint64_t i = 0; i < k->n; i++) {
        uint64_t h = mix(k->e[i].a, k->e[i].b), j = h & (cap - 1);
        while (slots[j] != 0)
            j = (j + 1) & (cap - 1);
        slots[j] = SLOT(h, i + 1);
    }
    free(k->slots);
    k->slots = slots;
    k->cap = cap;
    return 1;
}

/* the count of (a, b), made 0 when missing; NULL when out of memory. The table is at most half
 * full: most probes end at their first slot. */
int64_t *counter_at(struct counter *k, int64_t a, int64_t b)
{
    if ((k->n + 1) * 2 > k->cap && (k->n >= UINT32_MAX - 1 || !counter_grow(k)))
        return NULL;
    uint64_t mask = k->cap - 1, h = mix(a, b), tag = h >> 32 << 32;
    uint64_t j = h & mask;
    for (; k->slots[j] != 0; j = (j + 1) & mask) {
        if ((k->slots[j] & ~(uint64_t)UINT32_MAX) != tag)
            continue;
        struct fig_entry *e = &k->e[(uint32_t)k->slots[j] - 1];
        if (e->a == a && e->b == b)
            return &e->n;
    }
    if (k->n == k->cap_e) {
        uint64_t cap = k->cap_e ? 2 * k->cap_e : 256;
        struct fig_entry *e = realloc(k->e, cap * sizeof *e);
        if (e == NULL)
            return NULL;
        k->e = e;
        k->cap_e = cap;
    }
    k->e[k->n] = (struct fig_entry){a, b, 0};
    k->slots[j] = SLOT(h, ++k->n);
    return &k->e[k->n - 1].n;
}

static inline int count(struct counter *k, int64_t a, int64_t b)
{
    int64_t *n = counter_at(k, a, b);
    if (n == NULL)
        return 0;
    ++*n;
    return 1;
}

/* the lifetime counters' keys are kept by stack (struct fig_keys) with their counts: a counter
 * has hundreds of thousands of keys, and one table of them all (a slot, then the entry it names)
 * missed the caches at nearly every free, where a stack's first keys share two cache lines with
 * its tables of the others. Python reads the keys of the stacks a view shows
 * (mdc_lifetimes_keys), or all of them (mdc_lifetimes_entries), made entries then: a table of
 * every key written as it was first counted, its counts added at the end, was 9 MB on
 * cppcheck's dump (12 with its room) that no view reads whole. */

/* the lifetime counters: FIG_LIFE, FIG_LIFE_MS, FIG_FREED_BY */
#define LIFE_COUNTERS (FIG_FREED_BY + 1)

/* the slots of counter `c` in struct fig_keys: [KEYS_FROM[c], KEYS_FROM[c + 1]) */
static const int KEYS_FROM[4] = {0, 3, 4, 5};

/* key slot `s` (key (a, b)) of lifetime counter `c` counted once more; 0 when out of memory. A
 * count that reaches UINT32_MAX is carried into f->k[c] (by (a, b)), which holds nothing else */
static inline int bump(struct fig *f, int c, int64_t a, struct fig_key *s)
{
    if (__builtin_expect(s->n == UINT32_MAX, 0)) {
        int64_t *carried = counter_at(&f->k[c], a, s->b);
        if (carried == NULL)
            return 0;
        *carried += s->n;
        s->n = 0;
    }
    s->n++;
    return 1;
}

/* the slot for `b` in a table of 1 << `log` keys (empty when it has none) */
static inline struct fig_key *more_slot(struct fig_key *t, int log, int64_t b)
{
    uint64_t mask = ((uint64_t)1 << log) - 1, j = mix(b, 0) & mask;
    while (t[j].at != 0 && t[j].b != b)
        j = (j + 1) & mask;
    return &t[j];
}

/* count (a, b) in lifetime counter `c`, b not among stack a's first keys (`ks`); 0 when out of
 * memory */
static int count_more(struct fig *f, int c, int64_t a, int64_t b, struct fig_keys *ks)
{
    if (ks->more[c] != NULL) {
        struct fig_key *s = more_slot(ks->more[c], ks->log[c], b);
        if (s->at != 0)
            return bump(f, c, a, s);
    }
    uint64_t cap = ks->more[c] != NULL ? (uint64_t)1 << ks->log[c] : 0;
    if (((uint64_t)ks->n_more[c] + 1) * 2 > cap) {
        int log = cap ? ks->log[c] + 1 : 3;
        struct fig_key *t = log < 32 ? calloc((uint64_t)1 << log, sizeof *t) : NULL;
        if (t == NULL)
            return 0;
        for (uint64_t i = 0; i < cap; i++)
            if (ks->more[c][i].at != 0)
                *more_slot(t, log, ks->more[c][i].b) = ks->more[c][i];
        free(ks->more[c]);
        ks->more[c] = t;
        ks->log[c] = (uint8_t)log;
    }
    /* its rank: after the first keys (all taken), and the others before it */
    uint32_t rank = (uint32_t)(KEYS_FROM[c + 1] - KEYS_FROM[c]) + ++ks->n_more[c];
    *more_slot(ks->more[c], ks->log[c], b) = (struct fig_key){b, rank, 1};
    return 1;
}

/* count() of (a, b) in lifetime counter `c` (a: a stack's index) */
static inline int count_keyed(struct fig *f, int c, int64_t a, int64_t b)
{
    struct fig_keys *ks = &f->keys[a];
    for (int i = KEYS_FROM[c]; i < KEYS_FROM[c + 1]; i++) {
        if (ks->in[i].at == 0) {
            ks->in[i] = (struct fig_key){b, (uint32_t)(i - KEYS_FROM[c] + 1), 1};
            return 1;
        }
        if (ks->in[i].b == b)
            return bump(f, c, a, &ks->in[i]);
    }
    return count_more(f, c, a, b, ks);
}

/* the keys of `n` stacks freed, their tables of further keys too */
static void keys_free(struct fig_keys *keys, uint64_t n)
{
    for (uint64_t i = 0; keys != NULL && i < n; i++)
        for (int c = 0; c < LIFE_COUNTERS; c++)
            free(keys[i].more[c]);
    free(keys);
}

/* room for `cap` stacks' keys (FIG_LIFETIMES); 0 when out of memory */
static int keys_reserve(struct fig *f, uint64_t cap)
{
    struct fig_keys *keys = aligned_alloc(64, cap * sizeof *keys);
    if (keys == NULL)
        return 0;
    if (f->n_st != 0)
        memcpy(keys, f->keys, f->n_st * sizeof *keys);
    free(f->keys);
    f->keys = keys;
    return 1;
}

void counter_clear(struct counter *k)
{
    if (k->slots != NULL)
        memset(k->slots, 0, k->cap * sizeof *k->slots);
    k->n = 0;
}

void counter_free(struct counter *k)
{
    free(k->e);
    free(k->slots);
    memset(k, 0, sizeof *k);
}

/* passapi.bucket: a lifetime's histogram key (6 significant bits from LIFE_EXACT = 64 on) */
static inline int64_t bucket(int64_t v)
{
    if (v < 64)
        return v;
    int shift = 64 - __builtin_clzll((uint64_t)v) - 6;
    return (v >> shift) << shift;
}

/* the ms of the events after `seq` (0 before the first clock sample). Most blocks end before the
 * next sample: made after the last one, they take its ms without a search (unless a sample's SEQ
 * went back, where the search's answer is kept). */
static inline int64_t ms_at(const struct fig *f, int64_t seq)
{
    uint64_t lo = 0, hi = f->n_clock; /* the first sample at or after seq */
    if (hi != 0 && (int64_t)f->clock[2 * (hi - 1)] < seq && !f->clock_back)
        return (int64_t)f->clock[2 * hi - 1];
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        if ((int64_t)f->clock[2 * mid] < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? 0 : (int64_t)f->clock[2 * (lo - 1) + 1];
}

/* a stack's figures are about to change at `seq`: copied first if they are the peak's */
static inline void touch(const struct fig *f, struct fig_stack *s, int64_t seq)
{
    if (s->changed <= f->t.peak_seq) {
        s->peak = s->cur;
        s->peak_n = s->cur_n;
    }
    s->changed = seq;
}

/* the index of node `id`'s figures, made; -1 when out of memory */
static int64_t new_stack(struct fig *f, uint64_t id)
{
    if (id >= f->cap_of) {
        uint64_t cap = f->cap_of ? f->cap_of : 1024;
        while (cap <= id)
            cap *= 2;
        int32_t *of = realloc(f->st_of, cap * sizeof *of);
        if (of == NULL)
            return -1;
        memset(of + f->cap_of, 0, (cap - f->cap_of) * sizeof *of);
        f->st_of = of;
        f->cap_of = cap;
    }
    if (f->st_of[id] != 0)
        return f->st_of[id] - 1;
    if (f->n_st == f->cap_st) {
        uint64_t cap = f->cap_st ? 2 * f->cap_st : 1024;
        struct fig_stack *st = cap < INT32_MAX ? realloc(f->st, cap * sizeof *st) : NULL;
        if (st == NULL)
            return -1;
        f->st = st;
        if ((f->want & FIG_LIFETIMES) && !keys_reserve(f, cap))
            return -1;
        f->cap_st = cap;
    }
    if (f->want & FIG_LIFETIMES)
        f->keys[f->n_st] = (struct fig_keys){0};
    f->st[f->n_st] = (struct fig_stack){.node = (int64_t)id};
    f->st_of[id] = (int32_t)++f->n_st;
    return (int64_t)f->n_st - 1;
}

/* the index of node `id`'s figures, made when missing; -1 when out of memory */
static inline int64_t stack_of(struct fig *f, uint64_t id)
{
    return id < f->cap_of && f->st_of[id] != 0 ? f->st_of[id] - 1 : new_stack(f, id);
}

/* the end of a block (made live by stack index `idx`) not counted yet in the lifetime counters:
 * its lifetime's bucket in events and in ms (with END_MS) and the stack that freed it (with
 * END_FREED). The ends are counted LIFE_BATCH at a time, each stack's keys asked of the memory
 * a few ends before they are counted: counted at each free, a stack's keys (and its table of
 * further keys) missed the caches at nearly every one, a wait the step could not hide. */
struct life_end {
    int64_t life, ms, nid;
    int64_t idx;
    unsigned what;
};
#define END_MS 1u
#define END_FREED 2u
#define LIFE_BATCH 256
#define KEYS_AHEAD 16 /* ends before its counting that a stack's keys are asked for */
#define MORE_AHEAD 8 /* and the slot of its table of further lifetimes */

/* the slot of end `e`'s lifetime in its stack's table of further ones, asked of the memory */
static inline void more_ahead(const struct fig *f, const struct life_end *e)
{
    const struct fig_keys *ks = &f->keys[e->idx];
    const struct fig_key *t = ks->more[FIG_LIFE];
    if (t != NULL)
        __builtin_prefetch(&t[mix(e->life, 0) & (((uint64_t)1 << ks->log[FIG_LIFE]) - 1)]);
}

/* the ends not counted yet, counted; 0 when out of memory */
static int count_ends(struct fig *f)
{
    const struct life_end *e = f->ends;
    uint32_t n = f->n_ends;
    f->n_ends = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (i + KEYS_AHEAD < n) {
            const char *ks = (const char *)&f->keys[e[i + KEYS_AHEAD].idx];
            __builtin_prefetch(ks);
            __builtin_prefetch(ks + 64);
        }
        if (i + MORE_AHEAD < n)
            more_ahead(f, &e[i + MORE_AHEAD]);
        if (!count_keyed(f, FIG_LIFE, e[i].idx, e[i].life)
            || ((e[i].what & END_MS) && !count_keyed(f, FIG_LIFE_MS, e[i].idx, e[i].ms))
            || ((e[i].what & END_FREED) && !count_keyed(f, FIG_FREED_BY, e[i].idx, e[i].nid)))
            return 0;
    }
    return 1;
}

/* a block made live at `aseq` (its stack's index `idx`) ends at `seq`: its lifetimes (in ms too
 * when `with_ms`), and when `freed` the stack `nid` that freed it, to be counted; 0 when out of
 * memory */
static inline int lifetime_to(struct fig *f, int64_t idx, int64_t aseq, int64_t seq, int with_ms,
                              int freed, int64_t nid)
{
    if (f->ends == NULL && (f->ends = malloc(LIFE_BATCH * sizeof *f->ends)) == NULL)
        return 0;
    struct life_end *e = &f->ends[f->n_ends++];
    e->idx = idx;
    e->life = bucket(seq - aseq);
    e->what = (with_ms ? END_MS : 0) | (freed ? END_FREED : 0);
    if (with_ms)
        e->ms = bucket(f->t.ms - ms_at(f, aseq));
    e->nid = nid;
    return f->n_ends < LIFE_BATCH || count_ends(f);
}

/* what an event's step does besides the stacks' figures and the peak (struct fig's `has`): the
 * parts asked for (FIG_TEMPORARY, FIG_LIFETIMES, FIG_SIZES) and these. The step is made for
 * none of them (`peak`, `hotspots`), for the lifetimes alone, for the moments alone (the heap
 * map) and once for any, each test of `has` a constant in the first three (ALWAYS_INLINE): a
 * test per part, several per event, was a tenth of `peak`'s step. */
#define HAS_SERIES 0x100u  /* f->series */
#define HAS_MOMENTS 0x200u /* f->mom */
#define HAS_VIEWS 0x400u   /* f->tv */
#define HAS_PARTS (FIG_TEMPORARY | FIG_LIFETIMES | FIG_SIZES)
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* live block `b` released by event `seq` of stack `nid` (`made`: the block the same realloc
 * makes next, 0: none) */
static ALWAYS_INLINE int release(struct mdc *c, struct fig *f, struct block *b, int64_t seq,
                                 int64_t nid, uint64_t made, unsigned has)
{
    int64_t size = (int64_t)b->size;
    struct fig_stack *s = &f->st[b->node];
    if ((has & HAS_MOMENTS) && !moments_gone(c, b))
        return 0;
    touch(f, s, seq);
    s->cur -= size;
    s->cur_n--;
    f->t.cur -= size;
    if ((has & HAS_SERIES) && f->series->tagging)
        series_add(f->series, b->tag, -size, seq);
    if ((has & FIG_TEMPORARY) && b->addr == f->last) {
        s->temp++;
        s->temp_bytes += size;
        f->t.temporary++;
        f->t.temporary_bytes += size;
    }
    if ((has & FIG_LIFETIMES)
        && !lifetime_to(f, b->node, (int64_t)b->order, seq, (int)f->t.clocked, 1, nid))
        return 0;
    if ((has & HAS_VIEWS) && !tv_release(c, b, made))
        return 0;
    /* the slot stays, marked free (as in the replay): the next block at the address takes it
     * back, and a deletion's shifting of the probe chain costs more than the slots it frees */
    b->live = 0;
    c->live_n--;
    return 1;
}

/* block `p` of `size` bytes made live by event `seq` of stack `nid` */
static ALWAYS_INLINE int alloc(struct mdc *c, struct fig *f, uint64_t p, uint64_t size,
                               int64_t seq, int64_t nid, int resize, unsigned has)
{
    if (size >= MAX_SIZE || f->allocated >= (1ll << 62))
        return 0;
    int64_t idx = stack_of(f, (uint64_t)(nid < 0 ? -nid : nid));
    if (idx < 0)
        return 0;
    struct fig_stack *s = &f->st[idx];
    touch(f, s, seq);
    int made;
    struct block *b = btab_put(&c->live, p, &made);
    if (b == NULL)
        return 0;
    struct block was; /* (tagviews.c's, when replaced) */
    const struct block *replaced = NULL;
    if (!made && b->live) { /* its free was not recorded: replaced (the replay's reused_live) */
        int64_t old = (int64_t)b->size;
        was = *b;
        replaced = &was;
        if ((has & HAS_MOMENTS) && !moments_gone(c, &was))
            return 0;
        struct fig_stack *os = &f->st[b->node];
        f->t.cur -= old;
        touch(f, os, seq);
        os->cur -= old;
        os->cur_n--;
        os->gone++;
        f->dropped += old;
        if ((has & FIG_LIFETIMES) && !lifetime_to(f, b->node, (int64_t)b->order, seq, 0, 0, 0))
            return 0;
        if ((has & HAS_SERIES) && f->series->tagging)
            series_add(f->series, b->tag, -old, seq);
    } else {
        b->live = 1;
        c->live_n++;
    }
    b->size = size;
    b->node = (int32_t)idx;
    b->order = (uint64_t)seq;
    f->last = p;
    s->cur += (int64_t)size;
    s->cur_n++;
    s->allocs++;
    s->alloc_bytes += (int64_t)size;
    f->allocated += (int64_t)size;
    if ((has & FIG_SIZES) && !count(&f->k[FIG_SIZES_BY], (int64_t)size, 0))
        return 0;
    f->t.cur += (int64_t)size;
    b->tag = 0;
    if (has & HAS_SERIES) {
        struct series *sr = f->series;
        if (sr->tagging) {
            int64_t row = series_row(sr, f->tid, seq);
            if (row < 0)
                return 0;
            series_add(sr, row, (int64_t)size, seq);
            b->tag = (uint16_t)row;
        }
        if (!series_event(sr, 1, seq, f->t.cur, f->t.ms, f->rss))
            return 0;
    } else if ((has & HAS_MOMENTS) && !moments_tag(f->mom, f->tid, &b->tag)) {
        return 0;
    }
    if ((has & HAS_VIEWS) && !tv_alloc(c, p, size, seq, idx, resize, replaced))
        return 0;
    if (f->t.cur > f->t.peak) {
        f->t.peak = f->t.cur;
        f->t.peak_seq = seq;
        f->t.peak_blocks = (int64_t)c->live_n;
        f->t.peak_ms = f->t.ms;
        if (has & HAS_MOMENTS)
            moments_peak(c);
    }
    return 1;
}

/* event `ev` (SEQ io.seq) in the views' pass, doing what `has` says: RC_OK or RC_FALLBACK */
static ALWAYS_INLINE int apply(struct mdc *c, const struct event *ev, unsigned has)
{
    struct fig *f = c->fig;
    int64_t seq = c->io.seq;
    if (ev->tid != f->tid) { /* the thread's last operation, for `temporary` */
        if (has & FIG_TEMPORARY) {
            int64_t *mine = counter_at(&f->threads, f->tid, 0);
            int64_t *theirs = mine != NULL ? counter_at(&f->threads, ev->tid, 0) : NULL;
            if (theirs == NULL)
                return RC_FALLBACK;
            mine = counter_at(&f->threads, f->tid, 0); /* the entries may have moved */
            *mine = (int64_t)f->last;
            f->last = (uint64_t)*theirs;
        }
        f->tid = ev->tid;
    }
    uint64_t p = ev->result, size = ev->args[0], rel = 0;
    int releases = 0, frees = 0;
    switch (ev->op) { /* the size as event_size has it, in the same switch */
    case OP_MALLOC: case OP_VALLOC: case OP_PVALLOC: case OP_NEW: case OP_NEW_ARRAY:
        break;
    case OP_CALLOC:
        if (__builtin_mul_overflow(ev->args[0], ev->args[1], &size))
            return RC_FALLBACK;
        break;
    case OP_ALIGNED_ALLOC: case OP_MEMALIGN:
        size = ev->args[1];
        break;
    case OP_POSIX_MEMALIGN:
        size = ev->args[1];
        p = ev->args[2] == 0 ? p : 0; /* failed: RESULT means nothing */
        break;
    case OP_FREE: case OP_DELETE: case OP_DELETE_ARRAY:
        releases = frees = 1;
        rel = ev->args[0];
        break;
    case OP_REALLOC: case OP_REALLOCARRAY:
        if (ev->op == OP_REALLOC)
            size = ev->args[1];
        else if (__builtin_mul_overflow(ev->args[1], ev->args[2], &size))
            return RC_FALLBACK;
        rel = ev->args[0];
        /* dumpformat.effect: a NULL PTR allocates; a failed call (RESULT 0, SIZE not 0)
         * leaves PTR live */
        releases = rel != 0 && !(p == 0 && size != 0);
        break;
    default: /* custom blocks are not heap blocks */
        return RC_OK;
    }
    if (releases) {
        if (ev->nid < 0 && ev->op == OP_FREE) { /* the C library's own (tcache_thread_shutdown) */
            f->last = 0;
            return RC_OK;
        }
        struct block *b = rel != 0 ? btab_get(&c->live, rel) : NULL;
        if (b != NULL && b->live && !release(c, f, b, seq, ev->nid, frees ? 0 : p, has))
            return RC_FALLBACK;
        if (frees) {
            f->last = 0;
            return !(has & HAS_SERIES)
                           || series_event(f->series, 0, seq, f->t.cur, f->t.ms, f->rss)
                       ? RC_OK : RC_FALLBACK;
        }
    }
    if (p == 0) { /* an operation that made no block */
        f->last = 0;
        return RC_OK;
    }
    int resize = ev->op == OP_REALLOC || ev->op == OP_REALLOCARRAY;
    return alloc(c, f, p, size, seq, ev->nid, resize, has) ? RC_OK : RC_FALLBACK;
}

/* heappass.py takes its moments (the fragmentation samples) at the start of each line, after
 * the records before it */
EXPORT int fig_line(struct mdc *c)
{
    struct series *s = c->fig->series;
    return (s == NULL || !series_due(s, c->io.seq) || series_sample(c, s, c->io.seq, 0))
           && moments_due(c, c->io.seq);
}

void fig_run(struct mdc *c)
{
    struct fig *f = c->fig;
    f->has = (f->want & HAS_PARTS) | (f->series != NULL ? HAS_SERIES : 0)
             | (f->mom != NULL ? HAS_MOMENTS : 0) | (f->tv != NULL ? HAS_VIEWS : 0);
}

/* the step of a pass that keeps the stacks' figures alone */
static __attribute__((noinline)) int apply_plain(struct mdc *c, const struct event *ev)
{
    return apply(c, ev, 0);
}

/* the step of a pass that does more (`has`), a sample or a moment taken first where one is due */
static ALWAYS_INLINE int apply_due(struct mdc *c, const struct event *ev, unsigned has)
{
    /* do_event counted the event: the line's start is after the record before */
    if (has & HAS_SERIES) { /* a sample or a moment may be due */
        c->io.seq--;
        int ok = fig_line(c);
        c->io.seq++;
        if (!ok)
            return RC_FALLBACK;
    } else if ((has & HAS_MOMENTS) && c->io.seq - 1 >= c->fig->mom_due) { /* a moment is due */
        c->io.seq--;
        int ok = moments_due(c, c->io.seq);
        c->io.seq++;
        if (!ok)
            return RC_FALLBACK;
    }
    return apply(c, ev, has);
}

static __attribute__((noinline)) int apply_any(struct mdc *c, const struct event *ev,
                                               unsigned has)
{
    return apply_due(c, ev, has);
}

/* the step of `lifetimes` (its histograms alone): apply_any's with its parts known, its tests
 * of the others gone at compile time */
static __attribute__((noinline)) int apply_lifetimes(struct mdc *c, const struct event *ev)
{
    return apply(c, ev, FIG_LIFETIMES);
}

/* the step of a pass that takes moments alone (the heap map, `--at`) */
static __attribute__((noinline)) int apply_moments(struct mdc *c, const struct event *ev)
{
    return apply_due(c, ev, HAS_MOMENTS);
}

int fig_event(struct mdc *c, const struct event *ev)
{
    unsigned has = c->fig->has;
    switch (has) {
    case 0:
        return apply_plain(c, ev);
    case FIG_LIFETIMES:
        return apply_lifetimes(c, ev);
    case HAS_MOMENTS:
        return apply_moments(c, ev);
    default:
        return apply_any(c, ev, has);
    }
}

/* the steps as packed_loop (core.h) calls them: the event counted (do_event's), then the step;
 * a plain pass's inline in its loop, the others' their own functions as fig_event calls them */
static ALWAYS_INLINE int step_plain(struct mdc *c, const struct event *ev)
{
    c->io.seq++;
    return apply(c, ev, 0);
}

static ALWAYS_INLINE int step_lifetimes(struct mdc *c, const struct event *ev)
{
    c->io.seq++;
    return apply_lifetimes(c, ev);
}

static ALWAYS_INLINE int step_moments(struct mdc *c, const struct event *ev)
{
    c->io.seq++;
    return apply_moments(c, ev);
}

static ALWAYS_INLINE int step_any(struct mdc *c, const struct event *ev)
{
    c->io.seq++;
    return apply_any(c, ev, c->fig->has);
}

static __attribute__((noinline)) int packed_plain(struct mdc *c, struct packed_run *run)
{
    return packed_loop(c, run, step_plain);
}

int fig_packed(struct mdc *c, struct packed_run *run)
{
    switch (c->fig->has) {
    case 0:
        return packed_plain(c, run);
    case FIG_LIFETIMES:
        return packed_loop(c, run, step_lifetimes);
    case HAS_MOMENTS:
        return packed_loop(c, run, step_moments);
    default:
        return packed_loop(c, run, step_any);
    }
}

/* ---- the API nativepass.py calls ------------------------------------------------------- */

/* the context computes the views' figures (`want`: FIG_ flags; with FIG_TIMELINE, at most
 * `limit` spans and samples: 2 x points) instead of the replay's; 0 when out of memory */
EXPORT int mdc_figures(struct mdc *c, unsigned want, int64_t limit)
{
    c->fig = calloc(1, sizeof *c->fig);
    if (c->fig == NULL)
        return 0;
    c->fig->want = want;
    c->fig->tid = -1;
    if (want & FIG_TIMELINE)
        return (c->fig->series = series_new(limit, limit)) != NULL;
    return 1;
}

/* a `c` record after event `seq`: the events after it happened at `ms`, with `rss` bytes
 * resident; 0 when out of memory */
EXPORT int mdc_fig_clock(struct mdc *c, int64_t seq, int64_t ms, int64_t rss)
{
    struct fig *f = c->fig;
    f->t.clocked = 1;
    f->t.ms = ms;
    f->rss = rss;
    if (f->n_clock != 0 && (int64_t)f->clock[2 * (f->n_clock - 1)] > seq)
        f->clock_back = 1;
    if (f->n_clock != 0 && f->clock[2 * (f->n_clock - 1)] == (uint64_t)seq) {
        f->clock[2 * (f->n_clock - 1) + 1] = (uint64_t)ms;
        return 1;
    }
    return push_pair(&f->clock, &f->n_clock, &f->cap_clock, (uint64_t)seq, (uint64_t)ms);
}

/* the live blocks end at `seq` without a release (an exec, `drop`; or the dump's end): their
 * lifetimes, counted with those not counted yet; 0 when out of memory */
static int end_blocks(struct mdc *c, int64_t seq)
{
    struct fig *f = c->fig;
    if (!(f->want & FIG_LIFETIMES))
        return 1;
    for (uint64_t i = 0; i < c->live.cap; i++) {
        const struct block *b = &c->live.slots[i];
        if (b->addr != 0 && b->live
            && !lifetime_to(f, b->node, (int64_t)b->order, seq, (int)f->t.clocked, 0, 0))
            return 0;
    }
    return count_ends(f);
}

/* `p exec` at `seq`: the image is gone, and its blocks; 0 when out of memory */
static int exec(struct mdc *c, int64_t seq)
{
    struct fig *f = c->fig;
    for (uint64_t i = 0; i < f->n_st; i++) {
        struct fig_stack *s = &f->st[i];
        if (s->cur_n != 0) {
            touch(f, s, seq);
            s->gone += s->cur_n;
            s->cur = s->cur_n = 0;
        }
    }
    if (!end_blocks(c, seq))
        return 0;
    for (uint64_t i = 0; f->mom != NULL && i < c->live.cap; i++) {
        const struct block *b = &c->live.slots[i];
        if (b->addr != 0 && b->live && !moments_gone(c, b))
            return 0;
    }
    btab_clear(&c->live);
    if (f->tv != NULL)
        tv_exec(c);
    c->live_n = 0;
    f->t.cur = 0;
    f->last = 0;
    counter_clear(&f->threads);
    return f->series == NULL || series_exec(f->series, seq, f->t.ms, f->rss);
}

/* a `p` or `end` record, SEQ `seq` (`is_exec`: `p exec`); 0 when out of memory */
EXPORT int mdc_fig_record(struct mdc *c, int64_t seq, int is_exec)
{
    return !is_exec || exec(c, seq);
}

/* the dump's end at `seq`: the lifetimes of the blocks never freed, and the totals into `out`;
 * 0 when out of memory */
EXPORT int mdc_fig_end(struct mdc *c, int64_t seq, struct fig_totals *out)
{
    struct fig *f = c->fig;
    if (!moments_end(c, seq) || !end_blocks(c, seq))
        return 0;
    f->t.live_n = (int64_t)c->live_n;
    f->t.n_stacks = (int64_t)f->n_st;
    *out = f->t;
    return 1;
}

/* the stacks' figures (n_stacks of them, in the order of their first allocation) */
EXPORT const struct fig_stack *mdc_fig_stacks(const struct mdc *c)
{
    return c->fig->st;
}

/* counter `which`'s entries (FIG_SIZES_BY; the lifetime counters are read from
 * mdc_fig_lifetimes): *out, how many */
EXPORT uint64_t mdc_fig_counter(const struct mdc *c, int which, const struct fig_entry **out)
{
    const struct counter *k = &c->fig->k[which];
    if (which < LIFE_COUNTERS) {
        *out = NULL;
        return 0;
    }
    *out = k->e;
    return k->n;
}

/* the lifetime counters after the pass, taken from it (mdc_fig_lifetimes) for Python to read
 * while it needs them: each stack's keys, and what bump() carried */
struct fig_lifetimes {
    struct fig_keys *keys;
    uint64_t n_st;
    struct counter carried[LIFE_COUNTERS];
};

/* the count of key slot `s` of stack `a` in lifetime counter `which`: its own, and what bump()
 * carried (no entry is made) */
static uint64_t key_count(const struct fig_lifetimes *l, int which, int64_t a,
                          const struct fig_key *s)
{
    const struct counter *k = &l->carried[which];
    uint64_t n = s->n;
    if (k->n == 0)
        return n;
    uint64_t mask = k->cap - 1, h = mix(a, s->b), tag = h >> 32 << 32;
    for (uint64_t j = h & mask; k->slots[j] != 0; j = (j + 1) & mask) {
        const struct fig_entry *e = &k->e[(uint32_t)k->slots[j] - 1];
        if ((k->slots[j] & ~(uint64_t)UINT32_MAX) == tag && e->a == a && e->b == s->b)
            return n + (uint64_t)e->n;
    }
    return n;
}

/* how many keys stack `stack` has in lifetime counter `which` */
static uint64_t n_keys(const struct fig_lifetimes *l, int which, uint64_t stack)
{
    const struct fig_keys *ks = &l->keys[stack];
    uint64_t n = ks->n_more[which];
    for (int i = KEYS_FROM[which]; i < KEYS_FROM[which + 1] && ks->in[i].at != 0; i++)
        n++;
    return n;
}

/* key slot `s` (if taken) of stack `stack` in lifetime counter `which`, into `out` at its rank,
 * `width` int64 a key: (key, count), or with `width` 3 (stack, key, count) */
static void put_key(const struct fig_lifetimes *l, int which, uint64_t stack,
                    const struct fig_key *s, int64_t *out, int width)
{
    if (s->at == 0)
        return;
    int64_t *at = &out[width * (s->at - 1)];
    if (width == 3)
        *at++ = (int64_t)stack;
    at[0] = s->b;
    at[1] = (int64_t)key_count(l, which, (int64_t)stack, s);
}

/* stack `stack`'s keys in lifetime counter `which`, in the order they were first counted, into
 * `out` (put_key's `width`) */
static void put_keys(const struct fig_lifetimes *l, int which, uint64_t stack, int64_t *out,
                     int width)
{
    const struct fig_keys *ks = &l->keys[stack];
    for (int i = KEYS_FROM[which]; i < KEYS_FROM[which + 1]; i++)
        put_key(l, which, stack, &ks->in[i], out, width);
    uint64_t size = ks->more[which] != NULL ? (uint64_t)1 << ks->log[which] : 0;
    for (uint64_t j = 0; j < size; j++)
        put_key(l, which, stack, &ks->more[which][j], out, width);
}

/* the lifetime counters, taken from the pass after mdc_fig_end (they outlive its context, and
 * are freed with mdc_lifetimes_free); NULL when out of memory */
EXPORT struct fig_lifetimes *mdc_fig_lifetimes(struct mdc *c)
{
    struct fig *f = c->fig;
    struct fig_lifetimes *l = calloc(1, sizeof *l);
    if (l == NULL)
        return NULL;
    if (f->keys != NULL) {
        l->keys = f->keys;
        l->n_st = f->n_st;
        f->keys = NULL;
    }
    for (int i = 0; i < LIFE_COUNTERS; i++) {
        l->carried[i] = f->k[i];
        f->k[i] = (struct counter){0};
    }
    return l;
}

EXPORT void mdc_lifetimes_free(struct fig_lifetimes *l)
{
    if (l == NULL)
        return;
    keys_free(l->keys, l->n_st);
    for (int i = 0; i < LIFE_COUNTERS; i++)
        counter_free(&l->carried[i]);
    free(l);
}

/* stack `stack`'s keys in lifetime counter `which` (FIG_LIFE, FIG_LIFE_MS, FIG_FREED_BY) in the
 * order they were first counted, as (key, count) pairs into `out` when they are at most `cap`:
 * how many they are (0 for a stack out of range) */
EXPORT uint64_t mdc_lifetimes_keys(const struct fig_lifetimes *l, int which, uint64_t stack,
                                   int64_t *out, uint64_t cap)
{
    if (stack >= l->n_st || which < 0 || which >= LIFE_COUNTERS)
        return 0;
    uint64_t n = n_keys(l, which, stack);
    if (n <= cap)
        put_keys(l, which, stack, out, 2);
    return n;
}

/* every key of lifetime counter `which`, as (stack, key, count) triples into `out` when they are
 * at most `cap`, by stack and then in the order each stack's were first counted: how many */
EXPORT uint64_t mdc_lifetimes_entries(const struct fig_lifetimes *l, int which, int64_t *out,
                                      uint64_t cap)
{
    if (which < 0 || which >= LIFE_COUNTERS)
        return 0;
    uint64_t n = 0;
    for (uint64_t i = 0; i < l->n_st; i++)
        n += n_keys(l, which, i);
    for (uint64_t i = 0, at = 0; n != 0 && n <= cap && i < l->n_st; i++) {
        put_keys(l, which, i, &out[3 * at], 3);
        at += n_keys(l, which, i);
    }
    return n;
}

/* the live blocks in the order they were allocated: n entries of (address, size, stack index,
 * SEQ allocated); 0 when n is not their number or out of memory */
struct live_block {
    uint64_t addr, size, stack, seq;
};

static int by_seq(const void *a, const void *b)
{
    const struct live_block *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

EXPORT int mdc_fig_blocks(struct mdc *c, uint64_t *out, uint64_t n)
{
    if (n != c->live_n)
        return 0;
    struct live_block *all = (struct live_block *)out;
    uint64_t k = 0;
    for (uint64_t i = 0; i < c->live.cap; i++) {
        const struct block *b = &c->live.slots[i];
        if (b->addr != 0 && b->live)
            all[k++] = (struct live_block){b->addr, b->size, (uint64_t)b->node, b->order};
    }
    if (k > 1) /* (`out` may be NULL when there are none) */
        qsort(all, k, sizeof *all, by_seq);
    return 1;
}

void fig_free(struct mdc *c)
{
    struct fig *f = c->fig;
    if (f == NULL)
        return;
    free(f->st);
    free(f->st_of);
    keys_free(f->keys, f->n_st);
    free(f->ends);
    free(f->clock);
    counter_free(&f->threads);
    series_free(f->series);
    tv_free(f->tv);
    moments_free(f->mom);
    for (int i = 0; i < FIG_COUNTERS; i++)
        counter_free(&f->k[i]);
    free(f);
    c->fig = NULL;
}
