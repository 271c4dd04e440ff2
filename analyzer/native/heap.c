/* @brief libmemdump_core: what each heap event does to the live and freed blocks, the counts,
 * the peak and the errors (replay.py's `_Replayer`, docs/dump-format.md "Heap operations"). */
#include <stdlib.h>

#include "core.h"

static void error(struct mdc *c, int kind, const struct event *ev, uint64_t ptr,
                  const struct block *freed, const struct block *alloc)
{
    c->k.error_count++;
    if ((uint64_t)c->k.n_errors >= c->max_errors)
        return;
    struct mdc_error *e = &c->errors[c->k.n_errors++];
    e->kind = kind;
    e->seq = c->io.seq;
    e->tid = ev->tid;
    e->op = ev->op;
    e->ptr = ptr;
    e->node = ev->nid;
    e->has_freed = freed != NULL;
    e->freed_node = freed != NULL ? freed->node : 0;
    e->freed_seq = freed != NULL ? (int64_t)freed->order : 0;
    e->alloc_size = alloc != NULL ? (int64_t)alloc->size : 0;
    e->alloc_node = alloc != NULL ? alloc->node : 0;
    e->alloc_family = alloc != NULL ? alloc->family : -1;
}

/* the live block at `p` in `t`, or NULL */
static inline struct block *live_at(const struct btab *t, uint64_t p)
{
    struct block *b = btab_get(t, p);
    return b != NULL && b->live ? b : NULL;
}

/* the freed block at `p` in `t` (the STACK that freed it last), or NULL */
static inline struct block *freed_at(const struct btab *t, uint64_t p)
{
    struct block *b = btab_get(t, p);
    return b != NULL && !b->live ? b : NULL;
}

/* `ptr`, not live, noted as freed by `nid` at event `seq` (a block from before an attached
 * recording) */
static int note_freed(struct btab *t, uint64_t ptr, int64_t nid, int64_t seq)
{
    int made;
    struct block *f = btab_put(t, ptr, &made);
    if (f == NULL)
        return 0;
    f->node = (int32_t)nid;
    f->order = (uint64_t)seq;
    return 1;
}

static inline uint64_t abs_id(int64_t nid)
{
    return (uint64_t)(nid < 0 ? -nid : nid);
}

/* replay._Replayer._bad_pointer: a release of `ptr`, which is not live. RC_ASK, before anything
 * is done, when whether the stack is the runtime's alone is not known yet (node 0 is not: its
 * stack is empty) */
static int bad_pointer(struct mdc *c, int kind, const struct event *ev, uint64_t ptr)
{
    int is_free = ev->op == OP_FREE;
    uint64_t id = abs_id(ev->nid);
    if (id != 0 && !(c->nodes.flags[id] & RT_KNOWN)) {
        c->io.ask_node = (int64_t)id;
        return RC_ASK;
    }
    if (id != 0 && (c->nodes.flags[id] & RT_YES)) {
        c->k.runtime_internal_frees++;
        c->k.free_runtime += is_free;
        return RC_OK;
    }
    struct block *prev = freed_at(&c->live, ptr);
    if (prev != NULL) {
        error(c, kind == E_INVALID_FREE ? E_DOUBLE_FREE : kind, ev, ptr, prev, NULL);
    } else if (c->io.attached) {
        c->k.untracked_frees++;
        c->k.free_untracked += is_free;
        return note_freed(&c->live, ptr, ev->nid, c->io.seq) ? RC_OK : RC_FALLBACK;
    } else {
        error(c, kind, ev, ptr, NULL, NULL);
    }
    c->k.free_errors += is_free;
    return RC_OK;
}

/* an allocation of `size` bytes at node `id` counted in its row (made at its first); 0 when out
 * of memory */
static int count_alloc(struct mdc *c, uint64_t id, uint64_t size)
{
    if (id >= c->cap_alloc_of) {
        uint64_t cap = c->cap_alloc_of ? c->cap_alloc_of : 1024;
        while (cap <= id)
            cap *= 2;
        int32_t *of = realloc(c->alloc_of, cap * sizeof *of);
        if (of == NULL)
            return 0;
        memset(of + c->cap_alloc_of, 0, (cap - c->cap_alloc_of) * sizeof *of);
        c->alloc_of = of;
        c->cap_alloc_of = cap;
    }
    if (c->alloc_of[id] == 0) {
        if (c->n_alloc_rows == c->cap_alloc_rows) {
            uint64_t cap = c->cap_alloc_rows ? 2 * c->cap_alloc_rows : 1024;
            int64_t *rows = cap < INT32_MAX ? realloc(c->alloc_rows, 3 * cap * sizeof *rows) : NULL;
            if (rows == NULL)
                return 0;
            c->alloc_rows = rows;
            c->cap_alloc_rows = cap;
        }
        int64_t *row = &c->alloc_rows[3 * c->n_alloc_rows];
        row[0] = (int64_t)id;
        row[1] = row[2] = 0;
        c->alloc_of[id] = (int32_t)++c->n_alloc_rows;
    }
    int64_t *row = &c->alloc_rows[3 * (c->alloc_of[id] - 1)];
    row[1]++;
    row[2] += (int64_t)size;
    return 1;
}

/* peak_note's log kept (the test inline: the leak report keeps none) */
static void peak_log(struct mdc *c, int64_t nid, uint64_t size, int released, uint64_t order)
{
    if (c->n_peak_log == c->peak_log_limit) {
        c->peak_log_over = 1;
        return;
    }
    if (c->n_peak_log == c->cap_peak_log) {
        uint64_t cap = c->cap_peak_log ? 2 * c->cap_peak_log : 1024;
        cap = cap < c->peak_log_limit ? cap : c->peak_log_limit;
        int64_t *log = realloc(c->peak_log, PEAK_NOTE * cap * sizeof *log);
        if (log == NULL) {
            c->peak_log_over = 1;
            return;
        }
        c->peak_log = log;
        c->cap_peak_log = cap;
    }
    int64_t *note = &c->peak_log[PEAK_NOTE * c->n_peak_log++];
    note[0] = (int64_t)(abs_id(nid) << 1 | (uint64_t)released);
    note[1] = (int64_t)size;
    note[2] = (int64_t)order;
}

/* a block of `size` bytes of node `nid`, made live `order`th, made live or `released` after the
 * peak, noted */
static inline void peak_note(struct mdc *c, int64_t nid, uint64_t size, int released,
                             uint64_t order)
{
    if (c->keep_allocs && !c->peak_log_over)
        peak_log(c, nid, size, released, order);
}

void peak_note_exec(struct mdc *c)
{
    for (uint64_t i = 0; i < c->live.cap && !c->peak_log_over; i++) {
        const struct block *b = &c->live.slots[i];
        if (b->addr != 0 && b->live)
            peak_note(c, b->node, b->size, 1, b->order);
    }
}

static int make_live(struct mdc *c, uint64_t p, uint64_t size, int64_t nid, int family)
{
    if (size >= MAX_SIZE || c->k.allocated_bytes >= (1ll << 62)
        || (c->keep_allocs && !count_alloc(c, abs_id(nid), size)))
        return 0;
    int made;
    struct block *b = btab_put(&c->live, p, &made);
    if (b == NULL)
        return 0;
    if (made || !b->live) {
        b->order = c->order++;
        b->live = 1;
        c->live_n++;
    } else {
        c->k.live_bytes -= (int64_t)b->size;
        c->k.reused_live++;
        peak_note(c, b->node, b->size, 1, b->order);
        snaps_reused(c);
    }
    peak_note(c, nid, size, 0, b->order);
    b->size = size;
    b->node = (int32_t)nid;
    b->family = (uint8_t)family;
    c->k.allocations++;
    c->k.allocated_bytes += (int64_t)size;
    c->k.live_bytes += (int64_t)size;
    if (c->k.live_bytes > c->k.peak_bytes) {
        c->k.peak_bytes = c->k.live_bytes;
        c->k.peak_blocks = (int64_t)c->live_n;
        c->k.peak_seq = c->io.seq;
        c->k.peak_node = nid;
        c->peak_order = c->order;
        c->peak_allocated = c->k.allocated_bytes;
        c->n_peak_log = 0;
        c->peak_log_over = 0;
    }
    return 1;
}

/* releases live block `b` by event `ev` */
static void release(struct mdc *c, struct block *b, const struct event *ev)
{
    c->k.frees++;
    c->k.live_bytes -= (int64_t)b->size;
    peak_note(c, b->node, b->size, 1, b->order);
    b->live = 0;
    b->node = (int32_t)ev->nid;
    b->order = (uint64_t)c->io.seq; /* for a double free's "freed at" */
    c->live_n--;
}

static int apply(struct mdc *c, const struct event *ev)
{
    uint64_t size, ptr = ev->args[0];
    int op = ev->op;
    c->k.calls[op]++;
    if (!event_size(ev, &size))
        return RC_FALLBACK;
    switch (op) {
    case OP_MALLOC: case OP_VALLOC: case OP_PVALLOC: case OP_NEW: case OP_NEW_ARRAY:
    case OP_CALLOC: case OP_ALIGNED_ALLOC: case OP_MEMALIGN:
        break;
    case OP_POSIX_MEMALIGN:
        if (ev->args[2] != 0)
            return RC_OK; /* failed: RESULT means nothing */
        break;
    case OP_FREE: case OP_DELETE: case OP_DELETE_ARRAY: {
        if (op == OP_FREE && ev->nid < 0) { /* the C library's own (a marked stack) */
            c->k.runtime_internal_frees++;
            c->k.free_runtime++;
            return RC_OK;
        }
        if (ptr == 0) {
            c->k.free_null += op == OP_FREE;
            return RC_OK;
        }
        struct block *b = live_at(&c->live, ptr);
        if (b == NULL)
            return bad_pointer(c, E_INVALID_FREE, ev, ptr);
        int expect = op == OP_FREE ? FAM_MALLOC : op == OP_DELETE ? FAM_NEW : FAM_NEW_ARRAY;
        if (b->family != expect)
            error(c, E_MISMATCHED, ev, ptr, NULL, b);
        c->k.delete_frees += op != OP_FREE;
        release(c, b, ev);
        return RC_OK;
    }
    case OP_REALLOC: case OP_REALLOCARRAY: {
        struct block *b = ptr != 0 ? live_at(&c->live, ptr) : NULL;
        if (ptr != 0 && b == NULL) {
            int r = bad_pointer(c, E_INVALID_REALLOC, ev, ptr);
            if (r != RC_OK)
                return r;
        }
        /* dumpformat.effect: a NULL PTR allocates; size 0 frees (and may return a block); a
         * failed call (RESULT 0) leaves PTR live */
        int releases = b != NULL && (size == 0 || ev->result != 0);
        if (releases) {
            if (b->family != FAM_MALLOC)
                error(c, E_MISMATCHED, ev, ptr, NULL, b);
            release(c, b, ev);
        }
        if (ev->result == 0)
            return RC_OK;
        return make_live(c, ev->result, size, ev->nid, FAM_MALLOC) ? RC_OK : RC_FALLBACK;
    }
    case OP_CUSTOM_ALLOC: {
        if (ev->result == 0)
            return RC_OK;
        if (ev->args[0] >= MAX_SIZE)
            return RC_FALLBACK;
        int made;
        struct block *b = btab_put(&c->custom, ev->result, &made);
        if (b == NULL)
            return RC_FALLBACK;
        if (made || !b->live) {
            b->order = c->order++;
            b->live = 1;
            c->custom_n++;
        } else {
            c->k.reused_live++;
        }
        b->size = ev->args[0];
        b->node = (int32_t)ev->nid;
        c->k.custom_allocations++;
        return RC_OK;
    }
    case OP_CUSTOM_FREE: {
        struct block *b = live_at(&c->custom, ptr);
        if (b != NULL) {
            b->live = 0;
            b->node = (int32_t)ev->nid;
            b->order = (uint64_t)c->io.seq;
            c->custom_n--;
            c->k.custom_frees++;
            return RC_OK;
        }
        if (ptr != 0) {
            struct block *prev = freed_at(&c->custom, ptr);
            error(c, prev != NULL ? E_DOUBLE_FREE : E_INVALID_FREE, ev, ptr, prev, NULL);
        }
        return RC_OK;
    }
    default:
        return RC_FALLBACK;
    }
    if (ev->result == 0)
        return RC_OK;
    int family = op == OP_NEW ? FAM_NEW : op == OP_NEW_ARRAY ? FAM_NEW_ARRAY : FAM_MALLOC;
    return make_live(c, ev->result, size, ev->nid, family) ? RC_OK : RC_FALLBACK;
}

/* do_event's replay, beside the views' pass or not, or heaptrack's events */
int replay_event(struct mdc *c, const struct event *ev)
{
    if (c->ht != NULL) {
        c->io.seq++;
        return ht_event(c, ev);
    }
    if (c->both)
        swap_tables(c);
    /* the snapshots due after the records before this one */
    int r = c->io.seq >= c->snap_next && !snaps_due(c) ? RC_FALLBACK : RC_OK;
    if (r == RC_OK) {
        c->io.seq++;
        r = apply(c, ev);
        if (r == RC_ASK) { /* nothing else was done: the line is read again after the answer */
            c->io.seq--;
            c->k.calls[ev->op]--;
        }
    }
    if (c->both)
        swap_tables(c);
    return r == RC_OK && c->both ? fig_event(c, ev) : r;
}
