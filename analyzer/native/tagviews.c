/* @brief libmemdump_core: `--by-tag`, `--phases` and `--growth` in the views' pass (figures.c),
 * the accumulators of tagphases.py and growth.py, whose semantics they keep exactly: per tag
 * (memdump_api.h's, by its name) what was allocated, the most it held and what is live; per phase
 * what it allocated, freed and what outlived it, by allocation stack, with the phase each such
 * block was freed in; per allocation stack the growth chains (a block replaced by a larger one
 * from its stack: the thread's next operation frees the smaller one, or a realloc grows it).
 * Python names the tags and phases (their strings are the reader's) and builds the rows it prints
 * from the tables this file hands over at the end.
 *
 * Memory: a tag (56 bytes) per tag name, a block (32 bytes) per address live at some point with
 * --by-tag after the first tag pushed, a phase (64 bytes) per phase record, a group (32 bytes and its counter entries) per
 * phase and stack of a block that outlived the phase, a thread (32 bytes) per thread, a chain
 * (32 bytes) per container growing now, a site (64 bytes) per stack that grew one. A block's
 * phase is found from the SEQ it was made live at (struct block's `order`). */
#include <stdlib.h>

#include "core.h"
#include "figures.h"

#define CHAIN_HASH_BITS 14
#define CHAIN_HASHES (1u << CHAIN_HASH_BITS)

/* (mirrored) a tag's figures; `name`: the name's id Python gave (-1: untagged) */
struct tv_tag {
    int64_t name, alloc_bytes, alloc_blocks, live_bytes, live_blocks, peak_bytes, peak_seq;
};

/* (mirrored) a phase's figures: it began at SEQ `seq` with name id `name` */
struct tv_phase {
    int64_t seq, name, alloc_bytes, alloc_blocks, freed_bytes, freed_blocks, outlived_bytes,
        outlived_blocks;
};

/* (mirrored) the blocks of stack `node` that outlived phase `phase` */
struct tv_group {
    int64_t phase, node, bytes, blocks;
};

/* (mirrored) a block live at the end: its tag's index (-1: tags not computed), phase, stack
 * node, size */
struct tv_live {
    int64_t tag, phase, node, size;
};

/* (mirrored) the growth chains of stack `node`: the least and most of their final and largest
 * sizes (-1 before a chain ended) */
struct tv_site {
    int64_t node, containers, regrowths, copied, final_min, final_max, largest_min, largest_max;
};

/* a growth chain: its site, largest and current size; `next`: the free list's */
struct tv_chain {
    int64_t site, largest, size, next;
};

/* a thread: the block its last allocation (not a realloc's) made, until its next operation */
struct tv_thread {
    uint64_t ptr, size;
    int64_t node, valid;
};

struct tagviews {
    unsigned want;
    struct tv_tag *tags;
    uint64_t n_tags, cap_tags;
    struct counter tag_of;      /* name id -> its tag's index + 1 */
    struct counter thread_name; /* TID -> its innermost tag's name id + 2 (0: none) */
    /* a thread has had a tag: from then on block_tag holds each live block's tag; until then
     * every block is untagged (tag `untagged`, -1 before the first allocation) and the table
     * is not kept (most programs push no tag: the table's look-ups and the first touches of
     * its pages were a fifth of --phases's CPU on cppcheck's dump) */
    int tagged;
    int64_t untagged;
    struct btab block_tag; /* address -> its tag's index (`order`), with FIG_TAGS and `tagged` */
    struct tv_phase *phases;
    uint64_t n_phases, cap_phases;
    struct counter group_of; /* (phase, node) -> its group's index + 1 */
    struct tv_group *groups;
    uint64_t n_groups, cap_groups;
    struct counter freed_in; /* (group, name id of the phase that freed blocks) -> blocks */
    struct tv_live *end;
    uint64_t n_end;
    struct counter thread_of; /* TID -> its index + 1 */
    struct tv_thread *threads;
    uint64_t n_threads, cap_threads;
    int64_t last_tid, last_thread; /* the thread asked for last and its index (-1: none) */
    struct btab chain_at; /* address of a chain's current block -> the chain (`order`) */
    /* how many of chain_at's live entries each hash of an address has (a counting filter):
     * most released blocks are no chain's, and this answers so from the caches without a
     * look-up of chain_at, which keeps every address a chain went through (7% of --growth's
     * samples on cppcheck's dump) */
    uint32_t chain_hash[CHAIN_HASHES];
    struct tv_chain *chains;
    uint64_t n_chains, cap_chains;
    int64_t free_chain;    /* the first unused chain, -1: none */
    struct counter site_of; /* node -> its site's index + 1 */
    struct tv_site *sites;
    uint64_t n_sites, cap_sites;
    int resized; /* a realloc's released block until its new block comes: its size, chain */
    int64_t resized_size, resized_chain;
};

/* room for one more of *a's *n elements of `size` bytes; 0 when out of memory */
static int room(void **a, uint64_t n, uint64_t *cap, size_t size)
{
    if (n < *cap)
        return 1;
    uint64_t want = *cap ? 2 * *cap : 64;
    void *p = want < (1ull << 40) / size ? realloc(*a, want * size) : NULL;
    if (p == NULL)
        return 0;
    *a = p;
    *cap = want;
    return 1;
}

#define ROOM(tv, what) room((void **)&(tv)->what, (tv)->n_##what, &(tv)->cap_##what, \
                            sizeof *(tv)->what)

/* the index in *a (*n elements of `size` bytes) that counter `k` gives (a, b), a zeroed element
 * appended when missing (*made set); -1 when out of memory */
static int64_t index_of(struct counter *k, int64_t a, int64_t b, void **arr, uint64_t *n,
                        uint64_t *cap, size_t size, int *made)
{
    int64_t *at = counter_at(k, a, b);
    *made = 0;
    if (at == NULL)
        return -1;
    if (*at == 0) {
        if (!room(arr, *n, cap, size))
            return -1;
        memset((char *)*arr + *n * size, 0, size);
        *at = (int64_t)++*n;
        *made = 1;
    }
    return *at - 1;
}

#define INDEX_OF(tv, k, a, b, what, made) index_of(&(tv)->k, a, b, (void **)&(tv)->what, \
                                                   &(tv)->n_##what, &(tv)->cap_##what, \
                                                   sizeof *(tv)->what, made)

/* ---- tags and phases -------------------------------------------------------------------- */

/* the index of the phase a block made live at `order` belongs to */
static uint64_t phase_of(const struct tagviews *tv, uint64_t order)
{
    uint64_t lo = 0, hi = tv->n_phases; /* the first phase that began at or after it */
    if ((uint64_t)tv->phases[hi - 1].seq < order)
        return hi - 1;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        if ((uint64_t)tv->phases[mid].seq < order)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

/* the index of phase `phase`'s group of stack `node`, made when missing; -1 when out of memory */
static int64_t group(struct tagviews *tv, uint64_t phase, int64_t node)
{
    int made;
    int64_t g = INDEX_OF(tv, group_of, (int64_t)phase, node, groups, &made);
    if (made)
        tv->groups[g] = (struct tv_group){(int64_t)phase, node, 0, 0};
    return g;
}

/* tagphases.py's `_free`: block `addr` of `size` bytes, stack `node`, made live at `order`, is
 * gone; 0 when out of memory */
static int forget(struct tagviews *tv, uint64_t addr, int64_t size, uint64_t order, int64_t node)
{
    if (tv->want & FIG_TAGS) {
        uint64_t tag = (uint64_t)tv->untagged;
        if (tv->tagged) {
            struct block *b = btab_get(&tv->block_tag, addr);
            if (b == NULL || !b->live)
                return 0;
            b->live = 0;
            tag = b->order;
        }
        tv->tags[tag].live_bytes -= size;
        tv->tags[tag].live_blocks--;
    }
    if (!(tv->want & FIG_PHASES))
        return 1;
    uint64_t phase = phase_of(tv, order), now = tv->n_phases - 1;
    if (phase < now) { /* it outlived its phase */
        int64_t g = group(tv, phase, node);
        int64_t *n = g >= 0 ? counter_at(&tv->freed_in, g, tv->phases[now].name) : NULL;
        if (n == NULL)
            return 0;
        ++*n;
    } else {
        tv->phases[now].freed_bytes += size;
        tv->phases[now].freed_blocks++;
    }
    return 1;
}

/* the index of the tag named `ident` (-1: untagged), made when missing; -1 when out of memory */
static int64_t tag_named(struct tagviews *tv, int64_t ident)
{
    int made;
    int64_t tag = INDEX_OF(tv, tag_of, ident, 0, tags, &made);
    if (made)
        tv->tags[tag].name = ident;
    return tag;
}

/* thread `tid`'s innermost tag's index; -1 when out of memory */
static int64_t tag_now(struct tagviews *tv, int64_t tid)
{
    if (!tv->tagged) {
        if (tv->untagged < 0)
            tv->untagged = tag_named(tv, -1);
        return tv->untagged;
    }
    int64_t *name = counter_at(&tv->thread_name, tid, 0);
    if (name == NULL)
        return -1;
    return tag_named(tv, *name >= 2 ? *name - 2 : -1);
}

/* the first tag pushed: the blocks live now, all untagged, go in the table of blocks' tags;
 * 0 when out of memory */
static int start_tagging(struct mdc *c, struct tagviews *tv)
{
    tv->tagged = 1;
    for (uint64_t i = 0; i < c->live.cap; i++) {
        const struct block *live = &c->live.slots[i];
        if (live->addr == 0 || !live->live)
            continue;
        int made;
        struct block *b = btab_put(&tv->block_tag, live->addr, &made);
        if (b == NULL)
            return 0;
        b->live = 1;
        b->order = (uint64_t)tv->untagged;
    }
    return 1;
}

/* the phase that is ending: its blocks still live outlive it; 0 when out of memory */
static int phase_ends(struct mdc *c, struct tagviews *tv)
{
    uint64_t ending = tv->n_phases - 1;
    struct tv_phase *p = &tv->phases[ending];
    for (uint64_t i = 0; i < c->live.cap; i++) {
        const struct block *b = &c->live.slots[i];
        if (b->addr == 0 || !b->live || b->order <= (uint64_t)p->seq)
            continue;
        int64_t g = group(tv, ending, c->fig->st[b->node].node);
        if (g < 0)
            return 0;
        p->outlived_bytes += (int64_t)b->size;
        p->outlived_blocks++;
        tv->groups[g].bytes += (int64_t)b->size;
        tv->groups[g].blocks++;
    }
    return 1;
}

static int new_phase(struct tagviews *tv, int64_t seq, int64_t name)
{
    if (!ROOM(tv, phases))
        return 0;
    tv->phases[tv->n_phases++] = (struct tv_phase){.seq = seq, .name = name};
    return 1;
}

/* ---- growth ----------------------------------------------------------------------------- */

static struct tv_thread *thread(struct tagviews *tv, int64_t tid)
{
    if (tv->last_thread >= 0 && tid == tv->last_tid) /* a thread's events come in runs */
        return &tv->threads[tv->last_thread];
    int made;
    int64_t i = INDEX_OF(tv, thread_of, tid, 0, threads, &made);
    if (i < 0)
        return NULL;
    tv->last_tid = tid;
    tv->last_thread = i;
    return &tv->threads[i];
}

static void fold(int64_t *lo, int64_t *hi, int64_t v)
{
    if (*lo < 0 || v < *lo)
        *lo = v;
    if (v > *hi)
        *hi = v;
}

/* chain `i` ends (its block freed without a regrowth, or gone): its sizes are its site's */
static void chain_ends(struct tagviews *tv, int64_t i)
{
    if (i < 0)
        return;
    struct tv_chain *ch = &tv->chains[i];
    struct tv_site *s = &tv->sites[ch->site];
    fold(&s->final_min, &s->final_max, ch->size);
    fold(&s->largest_min, &s->largest_max, ch->largest);
    ch->next = tv->free_chain;
    tv->free_chain = i;
}

static uint32_t *chain_hash(struct tagviews *tv, uint64_t addr)
{
    return &tv->chain_hash[(addr * 0x9E3779B97F4A7C15ull) >> (64 - CHAIN_HASH_BITS)];
}

/* the chain whose current block is `addr`, taken off it (-1: none) */
static int64_t chain_take(struct tagviews *tv, uint64_t addr)
{
    uint32_t *hashed = chain_hash(tv, addr);
    if (*hashed == 0)
        return -1;
    struct block *b = btab_get(&tv->chain_at, addr);
    if (b == NULL || !b->live)
        return -1;
    b->live = 0;
    --*hashed;
    return (int64_t)b->order;
}

/* chain `i` (-1: none; out of memory) goes on at block `addr` */
static int chain_put(struct tagviews *tv, uint64_t addr, int64_t i)
{
    int made;
    struct block *b = i >= 0 ? btab_put(&tv->chain_at, addr, &made) : NULL;
    if (b == NULL)
        return 0;
    if (!made && b->live)
        chain_ends(tv, (int64_t)b->order);
    else
        ++*chain_hash(tv, addr);
    b->live = 1;
    b->order = (uint64_t)i;
    return 1;
}

/* growth.py's `_regrow`: a block of OLD bytes replaced by one of SIZE bytes made at stack NODE,
 * continuing chain `i` (-1: a new one); the chain, -1 when out of memory */
static int64_t regrow(struct tagviews *tv, int64_t i, int64_t old, int64_t size, int64_t node)
{
    if (i < 0) {
        int made;
        int64_t site = INDEX_OF(tv, site_of, node, 0, sites, &made);
        if (site < 0)
            return -1;
        if (made)
            tv->sites[site] = (struct tv_site){node, 0, 0, 0, -1, -1, -1, -1};
        if (tv->free_chain >= 0) {
            i = tv->free_chain;
            tv->free_chain = tv->chains[i].next;
        } else {
            if (!ROOM(tv, chains))
                return -1;
            i = (int64_t)tv->n_chains++;
        }
        tv->chains[i] = (struct tv_chain){site, old, old, -1};
        tv->sites[site].containers++;
    }
    struct tv_chain *ch = &tv->chains[i];
    struct tv_site *s = &tv->sites[ch->site];
    s->regrowths++;
    s->copied += old;
    ch->size = size;
    if (size > ch->largest)
        ch->largest = size;
    return i;
}

/* GrowthOutput.release: thread `tid` released block `addr` of `size` bytes made at stack `node`,
 * `made`: the block a realloc makes next (0: none), `last`: the block the thread's previous
 * operation made */
static int grow_release(struct tagviews *tv, int64_t tid, uint64_t addr, int64_t size,
                        int64_t node, uint64_t made, uint64_t last)
{
    struct tv_thread *th = thread(tv, tid);
    if (th == NULL)
        return 0;
    struct tv_thread just = *th;
    th->valid = 0;
    int64_t chain = chain_take(tv, addr);
    if (made != 0) {
        tv->resized = 1;
        tv->resized_size = size;
        tv->resized_chain = chain;
    } else if (just.valid && just.ptr == last && just.node == node && (int64_t)just.size > size) {
        return chain_put(tv, just.ptr, regrow(tv, chain, size, (int64_t)just.size, node));
    } else {
        chain_ends(tv, chain);
    }
    return 1;
}

/* GrowthOutput.alloc: thread `tid` made block `addr` of `size` bytes at stack `node`, by a
 * realloc (`resize`) or not */
static int grow_alloc(struct tagviews *tv, int64_t tid, uint64_t addr, int64_t size, int64_t node,
                      int resize)
{
    struct tv_thread *th = thread(tv, tid);
    if (th == NULL)
        return 0;
    if (!resize) {
        *th = (struct tv_thread){addr, (uint64_t)size, node, 1};
        return 1;
    }
    th->valid = 0;
    if (!tv->resized)
        return 1;
    tv->resized = 0;
    if (size > tv->resized_size)
        return chain_put(tv, addr, regrow(tv, tv->resized_chain, tv->resized_size, size, node));
    chain_ends(tv, tv->resized_chain);
    return 1;
}

/* every chain ends (an exec; the end) */
static void chains_end(struct tagviews *tv)
{
    for (uint64_t i = 0; i < tv->chain_at.cap; i++) {
        const struct block *b = &tv->chain_at.slots[i];
        if (b->addr != 0 && b->live)
            chain_ends(tv, (int64_t)b->order);
    }
    btab_clear(&tv->chain_at);
    memset(tv->chain_hash, 0, sizeof tv->chain_hash);
}

/* ---- figures.c's calls ------------------------------------------------------------------ */

int tv_release(struct mdc *c, const struct block *b, uint64_t made)
{
    struct fig *f = c->fig;
    struct tagviews *tv = f->tv;
    int64_t node = f->st[b->node].node;
    if ((tv->want & (FIG_TAGS | FIG_PHASES))
        && !forget(tv, b->addr, (int64_t)b->size, b->order, node))
        return 0;
    return !(tv->want & FIG_GROWTH)
           || grow_release(tv, f->tid, b->addr, (int64_t)b->size, node, made, f->last);
}

int tv_alloc(struct mdc *c, uint64_t p, uint64_t size, int64_t seq, int64_t idx, int resize,
             const struct block *old)
{
    struct fig *f = c->fig;
    struct tagviews *tv = f->tv;
    int64_t node = f->st[idx].node;
    int64_t tag = -1;
    if (tv->want & FIG_TAGS) {
        if ((tag = tag_now(tv, f->tid)) < 0)
            return 0;
        struct tv_tag *t = &tv->tags[tag];
        t->alloc_bytes += (int64_t)size;
        t->alloc_blocks++;
        t->live_bytes += (int64_t)size;
        t->live_blocks++;
        if (t->live_bytes > t->peak_bytes) {
            t->peak_bytes = t->live_bytes;
            t->peak_seq = seq;
        }
    }
    if (tv->want & FIG_PHASES) {
        tv->phases[tv->n_phases - 1].alloc_bytes += (int64_t)size;
        tv->phases[tv->n_phases - 1].alloc_blocks++;
    }
    if (old != NULL && (tv->want & (FIG_TAGS | FIG_PHASES))
        && !forget(tv, old->addr, (int64_t)old->size, old->order, f->st[old->node].node))
        return 0;
    if ((tv->want & FIG_TAGS) && tv->tagged) {
        int made;
        struct block *b = btab_put(&tv->block_tag, p, &made);
        if (b == NULL)
            return 0;
        b->live = 1;
        b->order = (uint64_t)tag;
    }
    return !(tv->want & FIG_GROWTH) || grow_alloc(tv, f->tid, p, (int64_t)size, node, resize);
}

void tv_exec(struct mdc *c)
{
    struct tagviews *tv = c->fig->tv;
    btab_clear(&tv->block_tag);
    chains_end(tv);
}

void tv_free(struct tagviews *tv)
{
    if (tv == NULL)
        return;
    free(tv->tags);
    counter_free(&tv->tag_of);
    counter_free(&tv->thread_name);
    btab_free(&tv->block_tag);
    free(tv->phases);
    counter_free(&tv->group_of);
    free(tv->groups);
    counter_free(&tv->freed_in);
    free(tv->end);
    counter_free(&tv->thread_of);
    free(tv->threads);
    btab_free(&tv->chain_at);
    free(tv->chains);
    counter_free(&tv->site_of);
    free(tv->sites);
    free(tv);
}

/* ---- the API nativepass.py calls ------------------------------------------------------- */

/* the views' pass computes `want` (FIG_TAGS, FIG_PHASES, FIG_GROWTH) too; 0 when out of memory */
EXPORT int mdc_tv_start(struct mdc *c, unsigned want)
{
    struct tagviews *tv = calloc(1, sizeof *tv);
    if (tv == NULL)
        return 0;
    c->fig->tv = tv;
    tv->want = want;
    tv->free_chain = -1;
    tv->untagged = tv->last_thread = -1;
    return new_phase(tv, 0, 0); /* the phase before the first (name 0: Python's first name) */
}

/* thread `tid`'s innermost tag is now the one named `name` (-1: none) */
EXPORT int mdc_tv_thread(struct mdc *c, int64_t tid, int64_t name)
{
    struct tagviews *tv = c->fig->tv;
    int64_t *at = counter_at(&tv->thread_name, tid, 0);
    if (at == NULL)
        return 0;
    *at = name + 2;
    return name < 0 || tv->tagged || !(tv->want & FIG_TAGS) || start_tagging(c, tv);
}

/* a `p SEQ phase NAME` record: phase `name` (an id) begins; 0 when out of memory */
EXPORT int mdc_tv_phase(struct mdc *c, int64_t seq, int64_t name)
{
    struct tagviews *tv = c->fig->tv;
    return !(tv->want & FIG_PHASES) || (phase_ends(c, tv) && new_phase(tv, seq, name));
}

/* the dump's end: the last phase ends, the chains too, and the blocks live at the end are listed;
 * 0 when out of memory */
EXPORT int mdc_tv_end(struct mdc *c)
{
    struct tagviews *tv = c->fig->tv;
    if ((tv->want & FIG_PHASES) && !phase_ends(c, tv))
        return 0;
    chains_end(tv);
    if (!(tv->want & (FIG_TAGS | FIG_PHASES)) || c->live_n == 0)
        return 1;
    tv->end = malloc(c->live_n * sizeof *tv->end);
    if (tv->end == NULL)
        return 0;
    for (uint64_t i = 0; i < c->live.cap; i++) {
        const struct block *b = &c->live.slots[i];
        if (b->addr == 0 || !b->live)
            continue;
        int64_t tag = -1;
        if ((tv->want & FIG_TAGS) && !tv->tagged) {
            tag = tv->untagged;
        } else if (tv->want & FIG_TAGS) {
            const struct block *t = btab_get(&tv->block_tag, b->addr);
            if (t == NULL || !t->live)
                return 0;
            tag = (int64_t)t->order;
        }
        int64_t phase = (tv->want & FIG_PHASES) ? (int64_t)phase_of(tv, b->order) : 0;
        tv->end[tv->n_end++] = (struct tv_live){tag, phase, c->fig->st[b->node].node,
                                                (int64_t)b->size};
    }
    return 1;
}

/* table `which` (0 tags, 1 phases, 2 groups, 3 the groups' frees (struct fig_entry: group, name
 * id, blocks), 4 the blocks live at the end, 5 the growth sites): *out, how many */
EXPORT uint64_t mdc_tv_table(const struct mdc *c, int which, const void **out)
{
    const struct tagviews *tv = c->fig->tv;
    switch (which) {
    case 0: *out = tv->tags; return tv->n_tags;
    case 1: *out = tv->phases; return tv->n_phases;
    case 2: *out = tv->groups; return tv->n_groups;
    case 3: *out = tv->freed_in.e; return tv->freed_in.n;
    case 4: *out = tv->end; return tv->n_end;
    case 5: *out = tv->sites; return tv->n_sites;
    default: *out = NULL; return 0;
    }
}
