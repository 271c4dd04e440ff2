/* @brief libmemdump_core.so: the replay of a dump's heap events (memdump_core.h; the semantics
 * are memdump_analyzer/replay.py's, which is the reference: docs/dump-format.md, "Heap
 * operations"). */
#include "memdump_core.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tables.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_TOKENS 10
#define MAX_ID (1u << 27)        /* larger ids (never written by the recorders): Python */
#define MAX_SIZE (1ull << 52)    /* larger sizes: Python, whose integers do not overflow */
#define LINE_BATCH 512
#define BUFFER (1u << 22)
#define SLACK 32 /* zeroed bytes after the buffer's data: quick_short reads 16 at a time */

/* node and frame flags */
#define DEFINED 1u
#define MARKED 2u
#define USED 4u        /* frames: a node refers to it */
#define RT_KNOWN 8u    /* nodes: whether its stack is the runtime's alone is known */
#define RT_YES 16u

enum { FAM_MALLOC, FAM_NEW, FAM_NEW_ARRAY };
enum { E_INVALID_FREE, E_DOUBLE_FREE, E_INVALID_REALLOC, E_MISMATCHED };
enum { RC_OK, RC_ASK, RC_FALLBACK };

static const char *const OP_NAMES[OP_COUNT] = {
    "malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "custom_alloc", "custom_free", "new", "new[]", "delete",
    "delete[]",
};
static const int OP_NARGS[OP_COUNT] = {1, 2, 2, 3, 1, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1};
/* which ARG is a pointer (PTR), -1: none */
static const int OP_PTR_ARG[OP_COUNT] = {-1, -1, 0, 0, 0, -1, -1, -1, -1, -1, -1, 0, -1, -1, 0,
                                         0};

struct tok {
    const char *p;
    uint64_t n;
};

struct event {
    int op;
    int64_t nid;
    uint64_t result;
    uint64_t args[3];
    int64_t tid;
};

struct mdc {
    struct mdc_io io;
    int fd;
    char *buf;                  /* the file's bytes [buf_off, buf_off + buf_len) */
    uint64_t buf_cap, buf_off, buf_len;
    uint64_t pos, end, reported; /* file offsets: reached, the end, given to the progress bar */
    uint64_t *runs; /* (start, end) of each run of NUL bytes read (padding, format 1.3) */
    uint64_t n_runs, cap_runs, run_i; /* run_i: the first at or after `pos` */
    uint64_t *lines;
    uint64_t max_errors;
    struct mdc_counts k;
    struct btab live, custom; /* live and freed blocks; live_n, custom_n: the live ones */
    uint64_t live_n, custom_n;
    uint64_t order;
    struct idtab nodes, frames;
    uint32_t *node_order; /* node ids in the order they were defined */
    uint64_t n_nodes, cap_nodes;
    uint32_t *used; /* frame ids in the order nodes first used them */
    uint64_t n_used, cap_used, used_synced;
    struct mdc_error *errors;
    int64_t tid;
};

/* bytes.split()'s whitespace */
static const uint8_t WS[256] = {[' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1, ['\v'] = 1,
                                 ['\f'] = 1};
/* hex digits as the recorders write them: value + 1, 0 for any other byte */
static const uint8_t HEX[256] = {
    ['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6, ['6'] = 7, ['7'] = 8,
    ['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
};

static inline int is_ws(unsigned char c)
{
    return WS[c];
}

/* the fields of [p, e) as bytes.split() finds them; returns how many (stores MAX_TOKENS) */
static inline __attribute__((always_inline)) int split(const char *p, const char *e, struct tok *t)
{
    int n = 0;
    while (p < e) {
        while (p < e && is_ws((unsigned char)*p))
            p++;
        if (p == e)
            break;
        const char *s = p;
        while (p < e && !is_ws((unsigned char)*p))
            p++;
        if (n < MAX_TOKENS) {
            t[n].p = s;
            t[n].n = (uint64_t)(p - s);
        }
        n++;
    }
    return n;
}

static inline int is(const struct tok *t, const char *s)
{
    uint64_t n = strlen(s);
    return t->n == n && memcmp(t->p, s, n) == 0;
}

/* a decimal number as str(int) writes it (no sign, no leading zero) */
static inline __attribute__((always_inline)) int dec(const struct tok *t, uint64_t *v)
{
    if (t->n == 0 || t->n > 18 || (t->p[0] == '0' && t->n > 1))
        return 0;
    uint64_t x = 0;
    for (uint64_t i = 0; i < t->n; i++) {
        unsigned d = (unsigned char)t->p[i] - '0';
        if (d > 9)
            return 0;
        x = x * 10 + d;
    }
    *v = x;
    return 1;
}

/* a pointer as the recorders write it ("%#x" of Python, "0x0" for NULL): pointers are
 * compared as written, so any other spelling is Python's */
static inline __attribute__((always_inline)) int hex(const struct tok *t, uint64_t *v)
{
    if (t->n < 3 || t->n > 18 || t->p[0] != '0' || t->p[1] != 'x' || (t->p[2] == '0' && t->n > 3))
        return 0;
    uint64_t x = 0;
    for (uint64_t i = 2; i < t->n; i++) {
        unsigned d = HEX[(unsigned char)t->p[i]];
        if (d == 0)
            return 0;
        x = x << 4 | (d - 1);
    }
    *v = x;
    return 1;
}

/* STACK: a node id as written in node_ids, defined; its id (negated when marked) */
static int node_ref(struct mdc *c, const struct tok *t, int64_t *nid)
{
    uint64_t id;
    if (!dec(t, &id))
        return 0;
    if (id == 0) {
        *nid = 0;
        return 1;
    }
    if (id >= c->nodes.cap || !(c->nodes.flags[id] & DEFINED))
        return 0;
    *nid = c->nodes.flags[id] & MARKED ? -(int64_t)id : (int64_t)id;
    return 1;
}

/* ---- the records ------------------------------------------------------------------------ */

static int push_u32(uint32_t **a, uint64_t *n, uint64_t *cap, uint32_t v)
{
    if (*n == *cap) {
        uint64_t ncap = *cap ? *cap * 2 : 4096;
        uint32_t *na = realloc(*a, ncap * sizeof *na);
        if (na == NULL)
            return 0;
        *a = na;
        *cap = ncap;
    }
    (*a)[(*n)++] = v;
    return 1;
}

/* `n ID PARENT FRAME`: DumpReader._node's checks; anything it would refuse is Python's */
static int node_record(struct mdc *c, const struct tok *t, int n)
{
    uint64_t id, parent, frame;
    if (n != 4 || !dec(&t[1], &id) || !dec(&t[2], &parent) || !dec(&t[3], &frame))
        return RC_FALLBACK;
    if (id == 0 || id >= MAX_ID || frame == 0 || frame >= c->frames.cap
        || !(c->frames.flags[frame] & DEFINED))
        return RC_FALLBACK;
    if (!idtab_reserve(&c->nodes, id, 1) || (c->nodes.flags[id] & DEFINED))
        return RC_FALLBACK;
    if (parent != 0 && (parent >= c->nodes.cap || !(c->nodes.flags[parent] & DEFINED)))
        return RC_FALLBACK;
    if (!push_u32(&c->node_order, &c->n_nodes, &c->cap_nodes, (uint32_t)id))
        return RC_FALLBACK;
    uint8_t *ff = &c->frames.flags[frame];
    if (!(*ff & USED)) {
        if (!push_u32(&c->used, &c->n_used, &c->cap_used, (uint32_t)frame))
            return RC_FALLBACK;
        *ff |= USED;
    }
    int marked = (*ff & MARKED) || (parent != 0 && (c->nodes.flags[parent] & MARKED));
    c->nodes.flags[id] = DEFINED | (marked ? MARKED : 0);
    c->nodes.a[id] = (int32_t)parent;
    c->nodes.b[id] = (int32_t)frame;
    c->io.other++;
    c->io.node_read = 1;
    return RC_OK;
}

static int op_of(const struct tok *t)
{
    for (int i = 0; i < OP_COUNT; i++)
        if (is(t, OP_NAMES[i]))
            return i;
    return -1;
}

/* `e SEQ TID OP STACK RESULT ARGS...`, every field checked as replay._event does */
static int e_record(struct mdc *c, const struct tok *t, int n, struct event *ev)
{
    uint64_t seq, tid;
    if (n < 7 || !dec(&t[1], &seq) || seq != (uint64_t)c->io.seq + 1 || !dec(&t[2], &tid))
        return RC_FALLBACK;
    int op = op_of(&t[3]);
    if (op < 0 || n != 6 + OP_NARGS[op] || !node_ref(c, &t[4], &ev->nid))
        return RC_FALLBACK;
    int no_result = op == OP_FREE || op == OP_CUSTOM_FREE || op == OP_DELETE
                    || op == OP_DELETE_ARRAY;
    if (no_result) {
        if (!is(&t[5], "-"))
            return RC_FALLBACK;
        ev->result = 0;
    } else if (!hex(&t[5], &ev->result)) {
        return RC_FALLBACK;
    }
    for (int i = 0; i < OP_NARGS[op]; i++) {
        int ok = i == OP_PTR_ARG[op] ? hex(&t[6 + i], &ev->args[i]) : dec(&t[6 + i], &ev->args[i]);
        if (!ok)
            return RC_FALLBACK;
    }
    ev->op = op;
    ev->tid = (int64_t)tid;
    return RC_OK;
}

/* `+ STACK RESULT SIZE`, `- STACK PTR` and the C++ operators' (2.0, 2.1) */
static int short_record(struct mdc *c, const struct tok *t, int n, int op, struct event *ev)
{
    int alloc = t[0].p[0] == '+';
    if (c->tid < 0 || n != (alloc ? 4 : 3) || !node_ref(c, &t[1], &ev->nid))
        return RC_FALLBACK;
    if (alloc) {
        if (!hex(&t[2], &ev->result) || !dec(&t[3], &ev->args[0]))
            return RC_FALLBACK;
    } else {
        ev->result = 0;
        if (!hex(&t[2], &ev->args[0]))
            return RC_FALLBACK;
    }
    ev->op = op;
    ev->tid = c->tid;
    return RC_OK;
}

/* ---- the heap ------------------------------------------------------------------------- */

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

/* `ptr`, not live, noted as freed by `nid` (a block from before an attached recording) */
static int note_freed(struct btab *t, uint64_t ptr, int64_t nid)
{
    int made;
    struct block *f = btab_put(t, ptr, &made);
    if (f == NULL)
        return 0;
    f->node = (int32_t)nid;
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
        return note_freed(&c->live, ptr, ev->nid) ? RC_OK : RC_FALLBACK;
    } else {
        error(c, kind, ev, ptr, NULL, NULL);
    }
    c->k.free_errors += is_free;
    return RC_OK;
}

static int make_live(struct mdc *c, uint64_t p, uint64_t size, int64_t nid, int family)
{
    if (size >= MAX_SIZE || c->k.allocated_bytes >= (1ll << 62))
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
    }
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
    }
    return 1;
}

/* releases live block `b` by event `ev` */
static void release(struct mdc *c, struct block *b, const struct event *ev)
{
    c->k.frees++;
    c->k.live_bytes -= (int64_t)b->size;
    b->live = 0;
    b->node = (int32_t)ev->nid;
    c->live_n--;
}

static int apply(struct mdc *c, const struct event *ev)
{
    uint64_t size = 0, ptr = ev->args[0];
    int op = ev->op;
    c->k.calls[op]++;
    switch (op) {
    case OP_MALLOC: case OP_VALLOC: case OP_PVALLOC: case OP_NEW: case OP_NEW_ARRAY:
        size = ev->args[0];
        break;
    case OP_CALLOC:
        if (__builtin_mul_overflow(ev->args[0], ev->args[1], &size))
            return RC_FALLBACK;
        break;
    case OP_POSIX_MEMALIGN:
        if (ev->args[2] != 0)
            return RC_OK; /* failed: RESULT means nothing */
        size = ev->args[1];
        break;
    case OP_ALIGNED_ALLOC: case OP_MEMALIGN:
        size = ev->args[1];
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
        if (op == OP_REALLOC)
            size = ev->args[1];
        else if (__builtin_mul_overflow(ev->args[1], ev->args[2], &size))
            return RC_FALLBACK;
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

/* event `ev`: RC_ASK (nothing done) when a bad pointer's stack must be judged first */
static int do_event(struct mdc *c, const struct event *ev)
{
    c->io.seq++;
    int r = apply(c, ev);
    if (r == RC_ASK) { /* nothing else was done: the line is read again after the answer */
        c->io.seq--;
        c->k.calls[ev->op]--;
    }
    return r;
}

/* one event line */
static int event_line(struct mdc *c, const struct tok *t, int n)
{
    struct event ev = {0};
    int r;
    const struct tok *tag = &t[0];
    if (is(tag, "e"))
        r = e_record(c, t, n, &ev);
    else if (is(tag, "+"))
        r = short_record(c, t, n, OP_MALLOC, &ev);
    else if (is(tag, "-"))
        r = short_record(c, t, n, OP_FREE, &ev);
    else if (is(tag, "+n"))
        r = short_record(c, t, n, OP_NEW, &ev);
    else if (is(tag, "+a"))
        r = short_record(c, t, n, OP_NEW_ARRAY, &ev);
    else if (is(tag, "-n"))
        r = short_record(c, t, n, OP_DELETE, &ev);
    else
        r = short_record(c, t, n, OP_DELETE_ARRAY, &ev);
    return r == RC_OK ? do_event(c, &ev) : r;
}

/* ---- numbers eight bytes at a time (the event records' hot path) -------------------------- */

#define ONES 0x0101010101010101ull
#define HIGH 0x8080808080808080ull

static inline uint64_t load64(const char *p)
{
    uint64_t x;
    memcpy(&x, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    return x; /* the first byte is the lowest */
}

/* 0x80 in each byte from lo to hi, exact up to the first byte of 0x80 or more (its carry only
 * reaches the bytes after it) */
static inline uint64_t in_range(uint64_t x, unsigned lo, unsigned hi)
{
    return (x + ONES * (0x80 - lo)) & ~(x + ONES * (0x7f - hi)) & HIGH;
}

/* eight hex digit values, the first in the lowest byte, as one number */
static inline uint64_t pack_hex8(uint64_t n)
{
    n = ((n & 0x000f000f000f000full) << 4) | ((n >> 8) & 0x000f000f000f000full);
    n = ((n & 0x000000ff000000ffull) << 8) | ((n >> 16) & 0x000000ff000000ffull);
    return ((n & 0xffffull) << 16) | ((n >> 32) & 0xffffull);
}

/* eight decimal digits as bytes, the first in the lowest byte, as one number */
static inline uint64_t pack_dec8(uint64_t x)
{
    x = ((x & 0x0f0f0f0f0f0f0f0full) * 2561) >> 8;
    x = ((x & 0x00ff00ff00ff00ffull) * 6553601) >> 16;
    return ((x & 0x0000ffff0000ffffull) * 42949672960001ull) >> 32;
}

/* the run of lowercase hex digits at p: its length (17: longer than 16) and value. Reads 16
 * bytes: the buffer has room past its end. */
static inline int hex_run(const char *p, uint64_t *v)
{
    uint64_t x = load64(p);
    uint64_t letters = in_range(x, 'a', 'f');
    uint64_t stop = ~(in_range(x, '0', '9') | letters) & HIGH;
    uint64_t nibbles = (x & (ONES * 0x0f)) + (letters >> 7) * 9;
    if (stop != 0) {
        int n = __builtin_ctzll(stop) >> 3;
        *v = n != 0 ? pack_hex8(nibbles << (8 * (8 - n))) : 0;
        return n;
    }
    uint64_t first = pack_hex8(nibbles);
    x = load64(p + 8);
    letters = in_range(x, 'a', 'f');
    stop = ~(in_range(x, '0', '9') | letters) & HIGH;
    if (stop == 0)
        return 17;
    nibbles = (x & (ONES * 0x0f)) + (letters >> 7) * 9;
    int n = __builtin_ctzll(stop) >> 3;
    *v = n != 0 ? first << (4 * n) | pack_hex8(nibbles << (8 * (8 - n))) : first;
    return 8 + n;
}

/* the run of decimal digits at p: its length (17: longer than 16) and value */
static inline int dec_run(const char *p, uint64_t *v)
{
    static const uint64_t POW10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
                                      100000000};
    uint64_t x = load64(p);
    uint64_t stop = ~in_range(x, '0', '9') & HIGH;
    if (stop != 0) {
        int n = __builtin_ctzll(stop) >> 3;
        *v = n != 0 ? pack_dec8(x << (8 * (8 - n))) : 0;
        return n;
    }
    uint64_t first = pack_dec8(x);
    x = load64(p + 8);
    stop = ~in_range(x, '0', '9') & HIGH;
    if (stop == 0)
        return 17;
    int n = __builtin_ctzll(stop) >> 3;
    *v = n != 0 ? first * POW10[n] + pack_dec8(x << (8 * (8 - n))) : first;
    return 8 + n;
}

/* `+ STACK RESULT SIZE` and the like, written as the recorders write them (one space between
 * fields, the line's end right after): the event, and *next after the line; 0 for anything else
 * (the general path reads it). The buffer ends with a NUL byte, so no read passes its end. */
static inline int quick_short(const struct mdc *c, const char *p, struct event *ev,
                              const char **next)
{
    int alloc = *p++ == '+';
    int op = alloc ? OP_MALLOC : OP_FREE;
    if (*p == 'n' || *p == 'a') {
        op = *p == 'n' ? (alloc ? OP_NEW : OP_DELETE) : (alloc ? OP_NEW_ARRAY : OP_DELETE_ARRAY);
        p++;
    }
    if (*p++ != ' ' || c->tid < 0)
        return 0;
    uint64_t id, v;
    int n = dec_run(p, &id);
    if (n == 0 || n > 9 || (*p == '0' && n > 1) || p[n] != ' ')
        return 0;
    p += n + 1;
    if (id != 0 && (id >= c->nodes.cap || !(c->nodes.flags[id] & DEFINED)))
        return 0;
    ev->nid = id != 0 && (c->nodes.flags[id] & MARKED) ? -(int64_t)id : (int64_t)id;
    if (p[0] != '0' || p[1] != 'x')
        return 0;
    p += 2;
    n = hex_run(p, &v);
    if (n == 0 || n > 16 || (*p == '0' && n > 1))
        return 0;
    p += n;
    if (alloc) {
        if (*p++ != ' ')
            return 0;
        uint64_t size;
        n = dec_run(p, &size);
        if (n == 0 || n > 16 || (*p == '0' && n > 1))
            return 0;
        p += n;
        ev->result = v;
        ev->args[0] = size;
    } else {
        ev->result = 0;
        ev->args[0] = v;
    }
    if (*p != '\n')
        return 0;
    ev->op = op;
    ev->tid = c->tid;
    *next = p + 1;
    return 1;
}

/* ---- the loop ----------------------------------------------------------------------------- */

enum { L_EVENT, L_THREAD, L_NODE, L_COMMENT, L_PYTHON };

static int kind_of(const char *rec, const struct tok *t, int n)
{
    if (rec[0] == '#')
        return L_COMMENT;
    if (n == 0)
        return L_PYTHON;
    const char *p = t[0].p;
    if (t[0].n == 1) {
        switch (p[0]) {
        case 'e': case '+': case '-': return L_EVENT;
        case 't': return L_THREAD;
        case 'n': return L_NODE;
        default: return L_PYTHON;
        }
    }
    if (t[0].n == 2 && (p[0] == '+' || p[0] == '-') && (p[1] == 'n' || p[1] == 'a'))
        return L_EVENT;
    return L_PYTHON;
}

static int thread_record(struct mdc *c, const struct tok *t, int n)
{
    uint64_t tid;
    if (n != 2 || !dec(&t[1], &tid))
        return RC_FALLBACK;
    c->tid = (int64_t)tid;
    c->io.other++;
    return RC_OK;
}

/* the bytes since the last report, for the progress bar */
static void report(struct mdc *c)
{
    c->io.chunk = (uint64_t)(uintptr_t)(c->buf + (c->reported - c->buf_off));
    c->io.chunk_len = c->pos - c->reported;
    c->reported = c->pos;
}

/* the runs of NUL bytes in the buffer from index `from` on, noted (a run the last read ended in
 * goes on); 0 when out of memory */
static int find_nuls(struct mdc *c, uint64_t from)
{
    const char *end = c->buf + c->buf_len;
    for (const char *p = c->buf + from; (p = memchr(p, 0, (size_t)(end - p))) != NULL;) {
        const char *q = p;
        while (q < end && *q == 0)
            q++;
        uint64_t start = c->buf_off + (uint64_t)(p - c->buf);
        uint64_t stop = c->buf_off + (uint64_t)(q - c->buf);
        if (c->n_runs != 0 && c->runs[2 * c->n_runs - 1] == start) {
            c->runs[2 * c->n_runs - 1] = stop;
        } else {
            if (c->n_runs == c->cap_runs) {
                uint64_t cap = c->cap_runs ? 2 * c->cap_runs : 64;
                uint64_t *runs = realloc(c->runs, 2 * cap * sizeof *runs);
                if (runs == NULL)
                    return 0;
                c->runs = runs;
                c->cap_runs = cap;
            }
            c->runs[2 * c->n_runs] = start;
            c->runs[2 * c->n_runs + 1] = stop;
            c->n_runs++;
        }
        p = q;
    }
    return 1;
}

/* whether the line [pos, pos + len) holds NUL bytes */
static inline int has_nul(const struct mdc *c, uint64_t len)
{
    return c->run_i < c->n_runs && c->runs[2 * c->run_i] < c->pos + len;
}

/* the buffer from `pos` on, with more of the file; 0 when the file cannot be read */
static int refill(struct mdc *c)
{
    uint64_t keep = c->buf_off + c->buf_len - c->pos;
    if (keep == c->buf_cap) { /* a line longer than the buffer */
        char *bigger = realloc(c->buf, 2 * c->buf_cap + SLACK);
        if (bigger == NULL)
            return 0;
        c->buf = bigger;
        c->buf_cap *= 2;
    } else {
        memmove(c->buf, c->buf + (c->pos - c->buf_off), keep);
        c->buf_off = c->pos;
        c->buf_len = keep;
    }
    uint64_t want = c->buf_cap - c->buf_len;
    uint64_t left = c->end - (c->buf_off + c->buf_len);
    ssize_t got = pread(c->fd, c->buf + c->buf_len, want < left ? want : left,
                        (off_t)(c->buf_off + c->buf_len));
    if (got <= 0)
        return 0;
    uint64_t from = c->buf_len;
    c->buf_len += (uint64_t)got;
    memset(c->buf + c->buf_len, 0, SLACK); /* quick_short stops there, reading no further */
    return find_nuls(c, from);
}

EXPORT int mdc_run(struct mdc *c)
{
    struct tok t[MAX_TOKENS];
    int status = MDC_DONE;
    c->io.n_lines = 0;
    while (c->pos < c->end) {
        char *line = c->buf + (c->pos - c->buf_off);
        const char *next;
        struct event ev;
        while (c->run_i < c->n_runs && c->runs[2 * c->run_i] < c->pos)
            c->run_i++;
        if ((*line == '+' || *line == '-') && c->io.n_lines == 0
            && quick_short(c, line, &ev, &next) && !has_nul(c, (uint64_t)(next - line))) {
            int r = do_event(c, &ev);
            if (r == RC_OK) {
                c->pos += (uint64_t)(next - line);
                continue;
            }
            if (r == RC_ASK) {
                status = MDC_ASK;
                break;
            }
            c->io.fallback_pos = c->pos;
            return MDC_FALLBACK;
        }
        uint64_t avail = c->buf_off + c->buf_len - c->pos;
        const char *nl = memchr(line, '\n', avail);
        if (nl == NULL) { /* the next line is not all in the buffer */
            if (c->io.n_lines != 0 || (c->io.progress && c->reported < c->pos)) {
                status = MDC_LINES; /* Python's lines, or the progress bar, first */
                break;
            }
            if (!refill(c)) {
                c->io.fallback_pos = c->pos;
                return MDC_FALLBACK;
            }
            continue;
        }
        uint64_t len = (uint64_t)(nl - line) + 1;
        const char *rec = line;
        int padded = has_nul(c, len);
        int blank = 0;
        if (padded) { /* dumpio: the record is what follows the line's last NUL byte */
            rec = (const char *)memrchr(line, '\0', len) + 1;
            blank = 1;
            for (const char *q = rec; q < line + len; q++)
                blank &= is_ws((unsigned char)*q);
        }
        int n = blank ? 0 : split(rec, line + len, t);
        int kind = blank ? L_COMMENT : kind_of(rec, t, n);
        if (kind == L_PYTHON) {
            c->lines[2 * c->io.n_lines] = (uint64_t)(uintptr_t)rec;
            c->lines[2 * c->io.n_lines + 1] = (uint64_t)(line + len - rec);
            c->io.n_lines++;
            c->pos += len;
            if (c->io.n_lines == LINE_BATCH) {
                status = MDC_LINES;
                break;
            }
            continue;
        }
        if (c->io.n_lines != 0) {
            status = MDC_LINES;
            break;
        }
        int r = RC_OK;
        if (kind == L_COMMENT)
            c->io.other++;
        else if (kind == L_THREAD)
            r = thread_record(c, t, n);
        else if (kind == L_NODE)
            r = node_record(c, t, n);
        else
            r = event_line(c, t, n);
        if (r == RC_ASK) {
            status = MDC_ASK;
            break;
        }
        if (r == RC_FALLBACK) {
            c->io.fallback_pos = c->pos;
            return MDC_FALLBACK;
        }
        c->pos += len;
    }
    c->io.pos = c->pos;
    if (c->io.progress)
        report(c);
    return status == MDC_DONE && c->io.n_lines != 0 ? MDC_LINES : status;
}

/* ---- set-up, Python's answers, the results ---------------------------------------------- */

EXPORT uint64_t mdc_abi(void)
{
    return (uint64_t)MDC_ABI << 32 | sizeof(struct mdc_io);
}

EXPORT const char *mdc_op_name(int op)
{
    return op >= 0 && op < OP_COUNT ? OP_NAMES[op] : NULL;
}

/* `fd`'s bytes [start, end) are read (dumpio.DumpFile: after the first line, up to the last
 * newline) */
EXPORT struct mdc *mdc_open(int fd, uint64_t start, uint64_t end, uint64_t max_errors)
{
    struct mdc *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->fd = fd;
    c->pos = c->buf_off = c->reported = start;
    c->end = end;
    c->tid = -1;
    c->max_errors = max_errors;
    c->buf_cap = BUFFER;
    c->buf = calloc(1, c->buf_cap + SLACK); /* empty, for quick_short */
    c->lines = malloc(2 * LINE_BATCH * sizeof *c->lines);
    c->errors = calloc(max_errors ? max_errors : 1, sizeof *c->errors);
    if (c->buf == NULL || c->lines == NULL || c->errors == NULL) {
        free(c->buf);
        free(c->lines);
        free(c->errors);
        free(c);
        return NULL;
    }
    c->io.lines = (uint64_t)(uintptr_t)c->lines;
    return c;
}

EXPORT struct mdc_io *mdc_io(struct mdc *c)
{
    return &c->io;
}

EXPORT void mdc_finish(struct mdc *c);

EXPORT void mdc_close(struct mdc *c)
{
    if (c == NULL)
        return;
    mdc_finish(c);
    idtab_free(&c->nodes);
    free(c->node_order);
    free(c);
}

/* frames defined (marked: their function is one of DumpReader's mark_functions); 0: no memory
 * or an id too large */
EXPORT int mdc_frames(struct mdc *c, const uint64_t *ids, uint64_t n, int marked)
{
    for (uint64_t i = 0; i < n; i++) {
        if (ids[i] >= MAX_ID || !idtab_reserve(&c->frames, ids[i], 0))
            return 0;
        c->frames.flags[ids[i]] |= marked ? MARKED : DEFINED;
    }
    return 1;
}

/* the answer to MDC_ASK for node `id` */
EXPORT void mdc_runtime(struct mdc *c, uint64_t id, int yes)
{
    if (id < c->nodes.cap)
        c->nodes.flags[id] |= RT_KNOWN | (yes ? RT_YES : 0);
}

/* `p exec`: the image is gone, and its blocks */
EXPORT void mdc_exec(struct mdc *c)
{
    btab_clear(&c->live);
    btab_clear(&c->custom);
    c->live_n = c->custom_n = 0;
    c->k.live_bytes = 0;
}

/* node `id`'s (parent, frame); 0 when it is not defined */
EXPORT int mdc_node(const struct mdc *c, uint64_t id, int64_t *out)
{
    if (id == 0 || id >= c->nodes.cap || !(c->nodes.flags[id] & DEFINED))
        return 0;
    out[0] = c->nodes.a[id];
    out[1] = c->nodes.b[id];
    return 1;
}

/* frames used by nodes since the last call: up to `cap` ids into `out`, how many */
EXPORT uint64_t mdc_used(struct mdc *c, uint64_t *out, uint64_t cap)
{
    uint64_t n = 0;
    while (c->used_synced < c->n_used && n < cap)
        out[n++] = c->used[c->used_synced++];
    return n;
}

EXPORT void mdc_counts(struct mdc *c, struct mdc_counts *out)
{
    c->k.n_live = (int64_t)c->live_n;
    c->k.n_custom = (int64_t)c->custom_n;
    c->k.n_nodes = (int64_t)c->n_nodes;
    c->k.tid = c->tid;
    *out = c->k;
}

static int by_order(const void *a, const void *b)
{
    const struct block *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* the live blocks (custom: the custom ones) in the order they were made live: n entries of
 * (address, size, node) */
EXPORT int mdc_blocks(struct mdc *c, int custom, uint64_t *out, uint64_t n)
{
    const struct btab *t = custom ? &c->custom : &c->live;
    uint64_t live = custom ? c->custom_n : c->live_n;
    struct block *all = malloc((live ? live : 1) * sizeof *all);
    if (all == NULL || n != live) {
        free(all);
        return 0;
    }
    uint64_t k = 0;
    for (uint64_t i = 0; i < t->cap; i++)
        if (t->slots[i].addr != 0 && t->slots[i].live)
            all[k++] = t->slots[i];
    qsort(all, k, sizeof *all, by_order);
    for (uint64_t i = 0; i < k; i++) {
        out[3 * i] = all[i].addr;
        out[3 * i + 1] = all[i].size;
        out[3 * i + 2] = (uint64_t)(int64_t)all[i].node;
    }
    free(all);
    return 1;
}

/* the stack node tables, read by Python after the run (they stay until mdc_close): the flags,
 * parents and frames by id (out[0], [1], [2], ids below out[3]), and the ids in the order they
 * were defined (out[4], out[5] of them) */
EXPORT void mdc_nodes(const struct mdc *c, uint64_t *out)
{
    out[0] = (uint64_t)(uintptr_t)c->nodes.flags;
    out[1] = (uint64_t)(uintptr_t)c->nodes.a;
    out[2] = (uint64_t)(uintptr_t)c->nodes.b;
    out[3] = c->nodes.cap;
    out[4] = (uint64_t)(uintptr_t)c->node_order;
    out[5] = c->n_nodes;
}

/* the run is over and its results read: what only it needed is freed */
EXPORT void mdc_finish(struct mdc *c)
{
    btab_free(&c->live);
    btab_free(&c->custom);
    idtab_free(&c->frames);
    free(c->used);
    free(c->buf);
    free(c->lines);
    free(c->errors);
    free(c->runs);
    c->used = NULL;
    c->buf = NULL;
    c->lines = NULL;
    c->errors = NULL;
    c->runs = NULL;
}

/* the runs of NUL bytes read: *out their (start, end) pairs; how many */
EXPORT uint64_t mdc_nul_runs(const struct mdc *c, const uint64_t **out)
{
    *out = c->runs;
    return c->n_runs;
}

EXPORT const struct mdc_error *mdc_errors(const struct mdc *c)
{
    return c->errors;
}
