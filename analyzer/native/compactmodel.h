/* @brief The compact encoding's model and byte buffers, shared by its encoder (compact.c) and its
 * decoder (compactdec.c): the same model on both sides, so that what one predicts the other
 * predicts (memdump_analyzer/compact.py's _Model is the readable reference). Inline: the decoder's
 * hot path calls them for every record. */
#ifndef MEMDUMP_COMPACTMODEL_H
#define MEMDUMP_COMPACTMODEL_H

#include <errno.h>
#include <lzma.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "compact.h"
#include "memdump_core.h"

#define EXPORT __attribute__((visibility("default")))
#define SHARED __attribute__((unused)) /* a table one of the files does not read */

#define LONG_LINE (1u << 20)
#define MAX_TEXT (16u << 20)
#define LIFO 64 /* a power of two */
#define MAX_CLASS (1u << 16)
#define MEMLIMIT (128u << 20)
/* the encoding written: 2.1, blocks under deflate (zlib), the most repetitive under xz (2.0:
 * none); 1.0, every block under xz, still read */
#define VERSION_MAJOR 2
#define VERSION_MINOR 1
/* (2.1) PACKED_LEN's top bit: the block is one xz stream; tried when deflate made the payload
 * REPETITIVE times smaller or more (a loop's records), kept when smaller */
#define XZ_BLOCK 0x80000000u
#define REPETITIVE 16
#define XZ_PRESET 0

/* (2.0) CALLOC to MEMALIGN: the short records of format 2.5, `TAG STACK RESULT ARGS` with SIZE
 * the fourth field */
enum { LIT, RAW, ALLOC, ALLOC_N, ALLOC_A, FREE, FREE_N, FREE_A, NODE, CALLOC, REALLOC,
       POSIX_MEMALIGN, ALIGNED_ALLOC, MEMALIGN, N_KINDS };
enum { F_STACK = 0x10, F_SIZE = 0x20, F_NO_PTR = 0x40, F_NO_RESULT = 0x80 };
enum { OPS, LITS, ASTK, ASIZE, AADDR, DELTA, FREF, FSTK, NID, NPAR, NFRM, N_STREAMS };
SHARED static const char *const tag_of[] = {"", "", "+", "+n", "+a", "-", "-n", "-a", "n",
                                            "+c", "+r", "+p", "+l", "+m"};
/* each heap kind's operation (memdump_core.h) */
SHARED static const int op_of[] = {-1, -1, OP_MALLOC, OP_NEW, OP_NEW_ARRAY, OP_FREE,
                                   OP_DELETE, OP_DELETE_ARRAY, -1, OP_CALLOC, OP_REALLOC,
                                   OP_POSIX_MEMALIGN, OP_ALIGNED_ALLOC, OP_MEMALIGN};
/* each kind's count of fields after its tag, and which are hex (a bit per field) */
SHARED static const int fields_of[] = {0, 0, 3, 3, 3, 2, 2, 2, 3, 4, 4, 5, 4, 4};
SHARED static const int hex_of[] = {0, 0, 2, 2, 2, 2, 2, 2, 0, 2, 6, 2, 2, 2};
static const unsigned char magic[8] = {0x89, 'M', 'D', 'Z', '\r', '\n', 0x1a, '\n'};

/* ---- a map of 64-bit keys to up to three 64-bit values (linear probing) ------------------- */

struct slot {
    uint64_t key, v[3];
    int used;
};
struct map {
    struct slot *s;
    uint64_t cap, n; /* cap a power of two */
    /* the keys come in runs of consecutive numbers (the decoder's blocks by number, moved to the
     * map in the order they were made): eight consecutive keys in consecutive slots, so that a
     * run's puts and look-ups share cache lines, where each key hashed alone missed the caches */
    int runs;
};

static inline uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

/* where `key`'s probe starts in `m`, of `mask` + 1 slots */
static inline uint64_t map_home(const struct map *m, uint64_t key, uint64_t mask)
{
    return (m->runs ? mix(key >> 3) << 3 | (key & 7) : mix(key)) & mask;
}

static inline struct slot *map_find(const struct map *m, uint64_t key)
{
    if (m->cap == 0)
        return NULL;
    for (uint64_t i = map_home(m, key, m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->s[i].used)
            return NULL;
        if (m->s[i].key == key)
            return &m->s[i];
    }
}

/* the slot of `key`, which is not in `m`, added (values 0); NULL when out of memory */
static inline struct slot *map_add(struct map *m, uint64_t key)
{
    if (2 * (m->n + 1) > m->cap) {
        uint64_t cap = m->cap ? 2 * m->cap : 16;
        struct slot *s = calloc(cap, sizeof *s);
        if (!s)
            return NULL;
        for (uint64_t j = 0; j < m->cap; j++) {
            if (!m->s[j].used)
                continue;
            uint64_t i = map_home(m, m->s[j].key, cap - 1);
            while (s[i].used)
                i = (i + 1) & (cap - 1);
            s[i] = m->s[j];
        }
        free(m->s);
        m->s = s;
        m->cap = cap;
    }
    uint64_t i = map_home(m, key, m->cap - 1);
    while (m->s[i].used)
        i = (i + 1) & (m->cap - 1);
    memset(&m->s[i], 0, sizeof m->s[i]);
    m->s[i].used = 1;
    m->s[i].key = key;
    m->n++;
    return &m->s[i];
}

/* the slot of `key`, added (values 0) when missing; NULL when out of memory */
static inline struct slot *map_put(struct map *m, uint64_t key)
{
    struct slot *f = map_find(m, key);
    return f ? f : map_add(m, key);
}

static inline void map_del(struct map *m, struct slot *at)
{
    uint64_t i = (uint64_t)(at - m->s), mask = m->cap - 1;
    m->s[i].used = 0;
    m->n--;
    for (uint64_t j = (i + 1) & mask; m->s[j].used; j = (j + 1) & mask) {
        uint64_t home = map_home(m, m->s[j].key, mask);
        /* move j back to i when its home is not in (i, j] (cyclically) */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            m->s[i] = m->s[j];
            m->s[j].used = 0;
            i = j;
        }
    }
}

/* ---- the model, the same in the encoder and the decoder (compact.py's _Model) -------------- */

struct stack_row {
    uint64_t v[3];
    unsigned used; /* a bit per field set: 2 << S_NEXT, ... */
};
#define ROWS_MAX (1u << 20) /* the table's most stacks; larger ids are hashed */

/* a size class's latest released addresses, newest first by index 0: a ring of LIFO (`a`,
 * allocated at the class's first release), whose oldest goes when a new one comes to a full one.
 * The model holds the rings' positions (16 bytes a class) and their addresses apart: a look-up
 * reads the class's entry, then the one address, where a ring holding its positions after its
 * addresses was a line more to wait for */
struct lifo {
    uint64_t *a;
    int head, n; /* a[head] the oldest */
};

static inline uint64_t *lifo_at(const struct lifo *l, int k)
{
    return &l->a[(l->head + l->n - 1 - k) & (LIFO - 1)];
}

static inline void lifo_push(struct lifo *l, uint64_t v)
{
    if (l->n == LIFO)
        l->head = (l->head + 1) & (LIFO - 1), l->n--;
    *lifo_at(l, -1) = v;
    l->n++;
}

/* the address `k` from the newest taken out */
static inline void lifo_take(struct lifo *l, int k)
{
    for (; k > 0; k--)
        *lifo_at(l, k) = *lifo_at(l, k - 1);
    l->n--;
}
#define RING 65536
struct ring {
    uint64_t addr, size, stack, number_plus1; /* 0: no live block */
};
struct model {
    uint64_t prev, top, allocs, last_astk, last_fstk, last_nid, last_frame;
    struct map live;       /* the encoder's live blocks: addr -> (number, size, stack) */
    /* the decoder's: number -> (addr, size, stack), the latest RING allocations in `ring` (most
     * releases are of a recent block: no hashing, few cache misses), older ones in `numbers` */
    struct ring *ring;
    struct map numbers;
    int decoding;
    /* allocation stack -> the stack that followed it, its last size, its block's last release's
     * stack (S_NEXT, S_SIZE, S_FREE; compact.py's three dicts), in one slot: one look-up */
    struct map stacks;
    struct stack_row *rows; /* the same, for the stacks below n_rows (node ids are small and
                               dense): one index, no hashing */
    uint64_t n_rows;
    struct lifo lifo[MAX_CLASS / 16 + 1];
};

static inline uint64_t chunk(uint64_t size)
{
    uint64_t c = (size + 8 + 15) & ~(uint64_t)15;
    return c < 32 ? 32 : c;
}

static inline void model_free(struct model *m)
{
    free(m->live.s);
    free(m->numbers.s);
    free(m->stacks.s);
    free(m->rows);
    free(m->ring);
    for (size_t i = 0; i < sizeof m->lifo / sizeof m->lifo[0]; i++)
        free(m->lifo[i].a);
}

enum { S_NEXT, S_SIZE, S_FREE };

/* the field `which` of `stack` into *out, when it was set (a bit of the slot's `used` says) */
static inline int stack_get(const struct model *m, uint64_t stack, int which, uint64_t *out)
{
    if (stack < m->n_rows) {
        if (!(m->rows[stack].used & (2u << which)))
            return 0;
        *out = m->rows[stack].v[which];
        return 1;
    }
    struct slot *s = stack < ROWS_MAX ? NULL : map_find(&m->stacks, stack);
    if (!s || !(s->used & (2 << which)))
        return 0;
    *out = s->v[which];
    return 1;
}

static inline int stack_set(struct model *m, uint64_t stack, int which, uint64_t v)
{
    if (stack < ROWS_MAX) {
        if (stack >= m->n_rows) {
            /* 4,096 rows, then all of them: a fresh calloc'd mapping whose pages are zeroed as
             * the ids reach them (they are dense from 1), where doubling copied the table and
             * touched twice its size */
            uint64_t n = stack < 4096 ? 4096 : ROWS_MAX;
            struct stack_row *rows = calloc(n, sizeof *rows);
            if (!rows)
                return -1;
            if (m->n_rows)
                memcpy(rows, m->rows, m->n_rows * sizeof *rows);
            free(m->rows);
            m->rows = rows;
            m->n_rows = n;
        }
        m->rows[stack].used |= 2u << which;
        m->rows[stack].v[which] = v;
        return 0;
    }
    struct slot *s = map_put(&m->stacks, stack);
    if (!s)
        return -1;
    s->used |= 2 << which;
    s->v[which] = v;
    return 0;
}

/* SIZE: the record's, the stack's prediction; the block's bytes are TOTAL (calloc: NMEMB *
 * SIZE; else SIZE). `known`: F_STACK, F_SIZE when the record's stack, size was the model's
 * prediction, which it holds already (not written again) */
static inline int allocated(struct model *m, uint64_t stack, uint64_t addr, uint64_t size,
                            int reused, uint64_t total, unsigned known)
{
    struct slot *s;
    if ((!(known & F_STACK) && stack_set(m, m->last_astk, S_NEXT, stack))
        || (!(known & F_SIZE) && stack_set(m, stack, S_SIZE, size)))
        return -1;
    size = total;
    m->last_astk = stack;
    m->prev = addr;
    if (addr) {
        /* the encoder's live blocks by address, the decoder's by number (compact.py's _Model) */
        if (m->decoding) {
            if (!m->ring && !(m->ring = calloc(RING, sizeof *m->ring)))
                return -1;
            struct ring *r = &m->ring[m->allocs % RING];
            if (r->number_plus1) { /* a block still live, RING allocations old: to the map */
                if (!(s = map_add(&m->numbers, r->number_plus1 - 1))) /* (numbered once) */
                    return -1;
                s->v[0] = r->addr;
                s->v[1] = r->size;
                s->v[2] = r->stack;
            }
            *r = (struct ring){addr, size, stack, m->allocs + 1};
        } else {
            if (!(s = map_put(&m->live, addr)))
                return -1;
            s->v[0] = m->allocs;
            s->v[1] = size;
            s->v[2] = stack;
        }
        m->allocs++;
        if (!reused)
            m->top = addr + chunk(size);
    }
    return 0;
}

/* the live block of `key` (the encoder's: its address; the decoder's: its number) released:
 * *block its (number or address, size, stack), and it is the latest of its size class; 0 when
 * there is none, 1 released, -1 out of memory */
static inline __attribute__((always_inline)) int release(struct model *m, uint64_t key,
                                                        uint64_t block[3])
{
    if (m->decoding && m->allocs - key <= RING) { /* key < allocs: the caller's */
        struct ring *r = m->ring ? &m->ring[key % RING] : NULL;
        if (!r || r->number_plus1 != key + 1)
            return 0;
        block[0] = r->addr;
        block[1] = r->size;
        block[2] = r->stack;
        r->number_plus1 = 0;
    } else {
        struct map *live = m->decoding ? &m->numbers : &m->live;
        struct slot *s = map_find(live, key);
        if (!s)
            return 0;
        memcpy(block, s->v, sizeof s->v);
        map_del(live, s);
    }
    uint64_t ptr = m->decoding ? block[0] : key;
    uint64_t c = chunk(block[1]);
    if (c <= MAX_CLASS) {
        struct lifo *l = &m->lifo[c / 16];
        if (!l->a && !(l->a = calloc(LIFO, sizeof *l->a)))
            return -1;
        lifo_push(l, ptr);
    }
    return 1;
}

static inline int released(struct model *m, uint64_t stack, uint64_t ptr, const uint64_t *astk)
{
    if (astk) {
        if (stack_set(m, *astk, S_FREE, stack))
            return -1;
    }
    m->last_fstk = stack;
    m->prev = ptr;
    return 0;
}

static inline uint64_t zigzag(uint64_t d)
{
    return (d << 1) ^ (uint64_t)(-(int64_t)(d >> 63));
}

static inline uint64_t unzigzag(uint64_t z)
{
    return (z >> 1) ^ (uint64_t)(-(int64_t)(z & 1));
}

/* ---- byte buffers ------------------------------------------------------------------------ */

struct buf {
    unsigned char *p;
    size_t n, cap;
};

static inline int reserve(struct buf *b, size_t more)
{
    if (b->n + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + more)
        cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int put(struct buf *b, const void *p, size_t n)
{
    if (n == 0) /* nothing to copy (p may be NULL) */
        return 0;
    if (reserve(b, n))
        return -1;
    memcpy(b->p + b->n, p, n);
    b->n += n;
    return 0;
}

static inline int varint(struct buf *b, uint64_t v)
{
    if (reserve(b, 10))
        return -1;
    while (v >= 0x80) {
        b->p[b->n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    b->p[b->n++] = (unsigned char)v;
    return 0;
}

static inline void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline int fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

static inline int write_all(int fd, const void *p, size_t n, char *err, size_t elen)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return fail(err, elen, "cannot write the file (%s)", strerror(w < 0 ? errno : ENOSPC));
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

#endif
