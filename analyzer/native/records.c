/* @brief libmemdump_core: reading the records it replays (the events, `t`, `n`), each field
 * checked as replay.py and DumpReader check it; whatever they would read otherwise is left to
 * them (RC_FALLBACK). */
#include <stdlib.h>

#include "core.h"

const char *const OP_NAMES[OP_COUNT] = {
    "malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "custom_alloc", "custom_free", "new", "new[]", "delete",
    "delete[]",
};
static const int OP_NARGS[OP_COUNT] = {1, 2, 2, 3, 1, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1};
/* which ARG is a pointer (PTR), -1: none */
static const int OP_PTR_ARG[OP_COUNT] = {-1, -1, 0, 0, 0, -1, -1, -1, -1, -1, -1, 0, -1, -1, 0,
                                         0};

/* hex digits as the recorders write them: value + 1, 0 for any other byte */
static const uint8_t HEX[256] = {
    ['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6, ['6'] = 7, ['7'] = 8,
    ['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
};

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
int node_record(struct mdc *c, const struct tok *t, int n)
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

/* `+ STACK RESULT SIZE`, `- STACK PTR` and the C++ operators' (2.0, 2.1); (2.5) `+c`, `+r`,
 * `+p`, `+l`, `+m`: `TAG STACK RESULT ARGS`, the ARGS of their operation's `e` record */
static int short_record(struct mdc *c, const struct tok *t, int n, int op, struct event *ev)
{
    int alloc = t[0].p[0] == '+';
    if (op < 0 || c->tid < 0 || n != (alloc ? 3 + OP_NARGS[op] : 3) || !node_ref(c, &t[1], &ev->nid))
        return RC_FALLBACK;
    if (alloc) {
        if (!hex(&t[2], &ev->result))
            return RC_FALLBACK;
        for (int i = 0; i < OP_NARGS[op]; i++) {
            int ok = i == OP_PTR_ARG[op] ? hex(&t[3 + i], &ev->args[i])
                                         : dec(&t[3 + i], &ev->args[i]);
            if (!ok)
                return RC_FALLBACK;
        }
    } else {
        ev->result = 0;
        if (!hex(&t[2], &ev->args[0]))
            return RC_FALLBACK;
    }
    ev->op = op;
    ev->tid = c->tid;
    return RC_OK;
}

int thread_record(struct mdc *c, const struct tok *t, int n)
{
    uint64_t tid;
    if (n != 2 || !dec(&t[1], &tid))
        return RC_FALLBACK;
    c->tid = (int64_t)tid;
    c->io.other++;
    return RC_OK;
}

/* the short records' tags (one letter after `+` or `-`; "": none) and their operations */
static const struct {
    char sign, letter;
    int op;
} SHORT_TAGS[] = {
    {'+', 0, OP_MALLOC}, {'-', 0, OP_FREE}, {'+', 'n', OP_NEW}, {'+', 'a', OP_NEW_ARRAY},
    {'-', 'n', OP_DELETE}, {'-', 'a', OP_DELETE_ARRAY}, {'+', 'c', OP_CALLOC},
    {'+', 'r', OP_REALLOC}, {'+', 'p', OP_POSIX_MEMALIGN}, {'+', 'l', OP_ALIGNED_ALLOC},
    {'+', 'm', OP_MEMALIGN},
};

int short_op(const char *p, uint64_t n)
{
    if (n < 1 || n > 2)
        return -1;
    for (size_t i = 0; i < sizeof SHORT_TAGS / sizeof SHORT_TAGS[0]; i++)
        if (SHORT_TAGS[i].sign == p[0] && (n == 1 ? SHORT_TAGS[i].letter == 0
                                                  : SHORT_TAGS[i].letter == p[1]))
            return SHORT_TAGS[i].op;
    return -1;
}

/* one event line */
int event_line(struct mdc *c, const struct tok *t, int n)
{
    struct event ev = {0};
    int r;
    const struct tok *tag = &t[0];
    if (is(tag, "e"))
        r = e_record(c, t, n, &ev);
    else
        r = short_record(c, t, n, short_op(tag->p, tag->n), &ev);
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
int quick_short(const struct mdc *c, const char *p, struct event *ev, const char **next)
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

/* `t TID` as the recorders write it: 1 with its TID and *next after the line; 0 for anything
 * else (the general path reads it) */
int quick_thread(const char *p, int64_t *tid, const char **next)
{
    uint64_t v;
    int n = dec_run(p + 2, &v);
    if (p[1] != ' ' || n == 0 || n > 16 || (p[2] == '0' && n > 1) || p[2 + n] != '\n')
        return 0;
    *tid = (int64_t)v;
    *next = p + n + 3;
    return 1;
}
