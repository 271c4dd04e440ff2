/* @brief The compact encoding of a dump (docs/dump-format.md, "Compact encoding"), encoder and
 * decoder: memdump_analyzer/compact.py is the readable reference, byte for byte; this is the same
 * model at C speed. A compact file comes from users as dumps do: the decoder checks every length,
 * code and reference, and any bad input is one error sentence (fuzz_compact.c fuzzes it). */
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
static const char *const tag_of[] = {"", "", "+", "+n", "+a", "-", "-n", "-a", "n", "+c", "+r",
                                     "+p", "+l", "+m"};
/* each heap kind's operation (memdump_core.h) */
static const int op_of[] = {-1, -1, OP_MALLOC, OP_NEW, OP_NEW_ARRAY, OP_FREE, OP_DELETE,
                            OP_DELETE_ARRAY, -1, OP_CALLOC, OP_REALLOC, OP_POSIX_MEMALIGN,
                            OP_ALIGNED_ALLOC, OP_MEMALIGN};
/* each kind's count of fields after its tag, and which are hex (a bit per field) */
static const int fields_of[] = {0, 0, 3, 3, 3, 2, 2, 2, 3, 4, 4, 5, 4, 4};
static const int hex_of[] = {0, 0, 2, 2, 2, 2, 2, 2, 0, 2, 6, 2, 2, 2};
static const unsigned char magic[8] = {0x89, 'M', 'D', 'Z', '\r', '\n', 0x1a, '\n'};

/* ---- a map of 64-bit keys to up to three 64-bit values (linear probing) ------------------- */

struct slot {
    uint64_t key, v[3];
    int used;
};
struct map {
    struct slot *s;
    uint64_t cap, n; /* cap a power of two */
};

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

static struct slot *map_find(const struct map *m, uint64_t key)
{
    if (m->cap == 0)
        return NULL;
    for (uint64_t i = mix(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->s[i].used)
            return NULL;
        if (m->s[i].key == key)
            return &m->s[i];
    }
}

/* the slot of `key`, added (values 0) when missing; NULL when out of memory */
static struct slot *map_put(struct map *m, uint64_t key)
{
    struct slot *f = map_find(m, key);
    if (f)
        return f;
    if (2 * (m->n + 1) > m->cap) {
        uint64_t cap = m->cap ? 2 * m->cap : 16;
        struct slot *s = calloc(cap, sizeof *s);
        if (!s)
            return NULL;
        for (uint64_t j = 0; j < m->cap; j++) {
            if (!m->s[j].used)
                continue;
            uint64_t i = mix(m->s[j].key) & (cap - 1);
            while (s[i].used)
                i = (i + 1) & (cap - 1);
            s[i] = m->s[j];
        }
        free(m->s);
        m->s = s;
        m->cap = cap;
    }
    uint64_t i = mix(key) & (m->cap - 1);
    while (m->s[i].used)
        i = (i + 1) & (m->cap - 1);
    memset(&m->s[i], 0, sizeof m->s[i]);
    m->s[i].used = 1;
    m->s[i].key = key;
    m->n++;
    return &m->s[i];
}

static void map_del(struct map *m, struct slot *at)
{
    uint64_t i = (uint64_t)(at - m->s), mask = m->cap - 1;
    m->s[i].used = 0;
    m->n--;
    for (uint64_t j = (i + 1) & mask; m->s[j].used; j = (j + 1) & mask) {
        uint64_t home = mix(m->s[j].key) & mask;
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

/* a size class's latest released addresses, newest first by index 0: a ring of LIFO, whose
 * oldest goes when a new one comes to a full one */
struct lifo {
    uint64_t a[LIFO];
    int head, n; /* a[head] the oldest */
};

static uint64_t *lifo_at(struct lifo *l, int k)
{
    return &l->a[(l->head + l->n - 1 - k) & (LIFO - 1)];
}

static void lifo_push(struct lifo *l, uint64_t v)
{
    if (l->n == LIFO)
        l->head = (l->head + 1) & (LIFO - 1), l->n--;
    *lifo_at(l, -1) = v;
    l->n++;
}

/* the address `k` from the newest taken out */
static void lifo_take(struct lifo *l, int k)
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
    struct lifo *lifo[MAX_CLASS / 16 + 1];
};

static uint64_t chunk(uint64_t size)
{
    uint64_t c = (size + 8 + 15) & ~(uint64_t)15;
    return c < 32 ? 32 : c;
}

static void model_free(struct model *m)
{
    free(m->live.s);
    free(m->numbers.s);
    free(m->stacks.s);
    free(m->rows);
    free(m->ring);
    for (size_t i = 0; i < sizeof m->lifo / sizeof m->lifo[0]; i++)
        free(m->lifo[i]);
}

enum { S_NEXT, S_SIZE, S_FREE };

/* the field `which` of `stack` into *out, when it was set (a bit of the slot's `used` says) */
static int stack_get(const struct model *m, uint64_t stack, int which, uint64_t *out)
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

static int stack_set(struct model *m, uint64_t stack, int which, uint64_t v)
{
    if (stack < ROWS_MAX) {
        if (stack >= m->n_rows) {
            uint64_t n = m->n_rows ? m->n_rows : 4096;
            while (n <= stack)
                n *= 2;
            struct stack_row *rows = realloc(m->rows, n * sizeof *rows);
            if (!rows)
                return -1;
            memset(rows + m->n_rows, 0, (n - m->n_rows) * sizeof *rows);
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
 * SIZE; else SIZE) */
static int allocated(struct model *m, uint64_t stack, uint64_t addr, uint64_t size, int reused,
                     uint64_t total)
{
    struct slot *s;
    if (stack_set(m, m->last_astk, S_NEXT, stack) || stack_set(m, stack, S_SIZE, size))
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
                if (!(s = map_put(&m->numbers, r->number_plus1 - 1)))
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
static int release(struct model *m, uint64_t key, uint64_t block[3])
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
        struct lifo **l = &m->lifo[c / 16];
        if (!*l && !(*l = calloc(1, sizeof **l)))
            return -1;
        lifo_push(*l, ptr);
    }
    return 1;
}

static int released(struct model *m, uint64_t stack, uint64_t ptr, const uint64_t *astk)
{
    if (astk) {
        if (stack_set(m, *astk, S_FREE, stack))
            return -1;
    }
    m->last_fstk = stack;
    m->prev = ptr;
    return 0;
}

static uint64_t zigzag(uint64_t d)
{
    return (d << 1) ^ (uint64_t)(-(int64_t)(d >> 63));
}

static uint64_t unzigzag(uint64_t z)
{
    return (z >> 1) ^ (uint64_t)(-(int64_t)(z & 1));
}

/* ---- byte buffers ------------------------------------------------------------------------ */

struct buf {
    unsigned char *p;
    size_t n, cap;
};

static int reserve(struct buf *b, size_t more)
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

static int put(struct buf *b, const void *p, size_t n)
{
    if (n == 0) /* nothing to copy (p may be NULL) */
        return 0;
    if (reserve(b, n))
        return -1;
    memcpy(b->p + b->n, p, n);
    b->n += n;
    return 0;
}

static int varint(struct buf *b, uint64_t v)
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

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

static int write_all(int fd, const void *p, size_t n, char *err, size_t elen)
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

/* ---- the encoder ------------------------------------------------------------------------- */

struct enc {
    struct model m;
    struct buf s[N_STREAMS], payload, packed, xz;
    uint64_t records;
};

/* a field written as the recorder writes it: decimal, or 0x and lower-case hex; 0 when not */
static int number(const char *w, size_t n, int hexa, uint64_t *out)
{
    uint64_t v = 0;
    if (hexa) {
        if (n < 3 || n > 18 || w[0] != '0' || w[1] != 'x' || (w[2] == '0' && n != 3))
            return 0;
        for (size_t i = 2; i < n; i++) {
            int d = w[i] >= '0' && w[i] <= '9' ? w[i] - '0' : w[i] >= 'a' && w[i] <= 'f' ? w[i] - 'a' + 10 : -1;
            if (d < 0)
                return 0;
            v = v << 4 | (uint64_t)d;
        }
    } else {
        if (n < 1 || n > 20 || (w[0] == '0' && n != 1))
            return 0;
        for (size_t i = 0; i < n; i++) {
            if (w[i] < '0' || w[i] > '9')
                return 0;
            uint64_t d = (uint64_t)(w[i] - '0');
            if (v > (UINT64_MAX - d) / 10)
                return 0;
            v = v * 10 + d;
        }
    }
    *out = v;
    return 1;
}

/* the kind and values of a modelled record written canonically (`line` without its newline) */
static int split(const char *line, size_t n, uint64_t v[5])
{
    const char *sp = memchr(line, ' ', n);
    if (!sp)
        return -1;
    size_t tl = (size_t)(sp - line);
    int kind = -1;
    for (int k = ALLOC; k < N_KINDS; k++)
        if (strlen(tag_of[k]) == tl && memcmp(line, tag_of[k], tl) == 0)
            kind = k;
    if (kind < 0)
        return -1;
    int want = fields_of[kind];
    const char *p = sp + 1, *end = line + n;
    for (int i = 0; i < want; i++) {
        const char *q = memchr(p, ' ', (size_t)(end - p));
        if ((q != NULL) != (i < want - 1))
            return -1;
        if (!q)
            q = end;
        if (!number(p, (size_t)(q - p), hex_of[kind] >> i & 1, &v[i]))
            return -1;
        p = q + 1;
    }
    return kind;
}

static int enc_literal(struct enc *e, int kind, const char *p, size_t n)
{
    e->records++;
    unsigned char k = (unsigned char)kind;
    return put(&e->s[OPS], &k, 1) || varint(&e->s[LITS], n) || put(&e->s[LITS], p, n);
}

/* a realloc's PTR: F_NO_PTR for 0x0, else written as a release's (FREF, and DELTA) and released
 * in the model, the last address then PTR; -1 out of memory */
static int enc_resize(struct enc *e, uint64_t ptr)
{
    struct model *m = &e->m;
    uint64_t block[3];
    if (ptr == 0)
        return F_NO_PTR;
    int r = release(m, ptr, block);
    if (r < 0)
        return -1;
    if (r == 0 ? varint(&e->s[FREF], 0) || varint(&e->s[DELTA], zigzag(ptr - m->prev))
               : varint(&e->s[FREF], m->allocs - block[0]))
        return -1;
    m->prev = ptr;
    return 0;
}

static int enc_line(struct enc *e, const char *line, size_t n)
{
    struct model *m = &e->m;
    struct buf *s = e->s;
    uint64_t v[5];
    int kind = n && line[n - 1] == '\n' ? split(line, n - 1, v) : -1;
    if (kind < 0)
        return n && line[n - 1] == '\n' ? enc_literal(e, LIT, line, n - 1) : enc_literal(e, RAW, line, n);
    e->records++;
    unsigned char op = (unsigned char)kind;
    if (kind == NODE) {
        if (v[0] == m->last_nid + 1)
            op |= F_SIZE;
        else if (varint(&s[NID], v[0]))
            return -1;
        if (varint(&s[NPAR], zigzag(v[0] - v[1])) || varint(&s[NFRM], zigzag(v[2] - m->last_frame)))
            return -1;
        m->last_nid = v[0];
        m->last_frame = v[2];
        return put(&s[OPS], &op, 1);
    }
    if (kind <= ALLOC_A || kind >= CALLOC) {
        uint64_t stack = v[0], addr = v[1], size = v[kind >= CALLOC ? 3 : 2], code = LIFO + 1;
        uint64_t p, total = size;
        if (stack_get(m, m->last_astk, S_NEXT, &p) && p == stack)
            op |= F_STACK;
        else if (varint(&s[ASTK], stack))
            return -1;
        if (stack_get(m, stack, S_SIZE, &p) && p == size)
            op |= F_SIZE;
        else if (varint(&s[ASIZE], size))
            return -1;
        if (kind >= CALLOC && kind != REALLOC) { /* the fields after SIZE: NMEMB or ALIGN, RC */
            if (varint(&s[ASIZE], v[2]) || (kind == POSIX_MEMALIGN && varint(&s[ASIZE], v[4])))
                return -1;
            if (kind == CALLOC) /* the block is NMEMB * SIZE bytes */
                total = v[2] * size;
        } else if (kind == REALLOC) { /* PTR released first, as by a `-` record */
            int r = enc_resize(e, v[2]);
            if (r < 0)
                return -1;
            op |= (unsigned char)r;
            if (addr == 0) { /* RESULT 0x0: realloc(p, 0), or it failed */
                op |= F_NO_RESULT;
                return put(&s[OPS], &op, 1) || allocated(m, stack, 0, size, 0, size);
            }
        }
        if (addr && addr == m->top) {
            code = 0;
        } else if (addr && chunk(total) <= MAX_CLASS && m->lifo[chunk(total) / 16]) {
            struct lifo *l = m->lifo[chunk(total) / 16];
            for (int k = 0; k < l->n; k++) {
                if (*lifo_at(l, k) == addr) {
                    lifo_take(l, k);
                    code = 1 + (uint64_t)k;
                    break;
                }
            }
        }
        if (code == LIFO + 1 && varint(&s[DELTA], zigzag(addr - m->prev)))
            return -1;
        if (varint(&s[AADDR], code) || put(&s[OPS], &op, 1))
            return -1;
        return allocated(m, stack, addr, size, code >= 1 && code <= LIFO, total);
    }
    uint64_t stack = v[0], ptr = v[1], block[3], predicted;
    int r = release(m, ptr, block);
    if (r < 0)
        return -1;
    if (r == 0) {
        if (varint(&s[FREF], 0) || varint(&s[DELTA], zigzag(ptr - m->prev)))
            return -1;
        predicted = m->last_fstk;
    } else {
        if (varint(&s[FREF], m->allocs - block[0]))
            return -1;
        if (!stack_get(m, block[2], S_FREE, &predicted))
            predicted = m->last_fstk;
    }
    if (stack == predicted)
        op |= F_STACK;
    else if (varint(&s[FSTK], stack))
        return -1;
    if (put(&s[OPS], &op, 1))
        return -1;
    return released(m, stack, ptr, r ? &block[2] : NULL);
}

/* writes the block of `tlen` bytes of text whose CRC-32 is `crc` */
static int enc_flush(struct enc *e, size_t tlen, uLong crc, int level, int out, uLong *total,
                     char *err, size_t elen)
{
    struct buf *pl = &e->payload;
    pl->n = 0;
    if (varint(pl, e->records))
        goto oom;
    for (int i = 0; i < N_STREAMS; i++)
        if (varint(pl, e->s[i].n))
            goto oom;
    for (int i = 0; i < N_STREAMS; i++) {
        if (put(pl, e->s[i].p, e->s[i].n))
            goto oom;
        e->s[i].n = 0;
    }
    e->records = 0;
    uLongf packed = compressBound((uLong)pl->n);
    e->packed.n = 0;
    if (reserve(&e->packed, packed))
        goto oom;
    int r = compress2(e->packed.p, &packed, pl->p, (uLong)pl->n, level);
    if (r != Z_OK)
        return fail(err, elen, "the deflate encoder failed (%d)", r);
    e->packed.n = packed;
    uint32_t xz = 0;
    if (packed * REPETITIVE < pl->n) { /* a loop's records: xz's repeated matches cost less */
        size_t bound = lzma_stream_buffer_bound(pl->n), made;
        lzma_stream z = LZMA_STREAM_INIT; /* streamed, as Python's lzma.compress: the same bytes */
        if (reserve(&e->xz, bound))
            goto oom;
        if (lzma_easy_encoder(&z, XZ_PRESET, LZMA_CHECK_CRC64) != LZMA_OK)
            return fail(err, elen, "cannot start the xz encoder");
        z.next_in = pl->p;
        z.avail_in = pl->n;
        z.next_out = e->xz.p;
        z.avail_out = bound;
        lzma_ret r = lzma_code(&z, LZMA_FINISH);
        made = bound - z.avail_out;
        lzma_end(&z);
        if (r != LZMA_STREAM_END)
            return fail(err, elen, "the xz encoder failed (%d)", (int)r);
        if (made < e->packed.n) {
            struct buf t = e->packed;
            e->packed = e->xz;
            e->xz = t;
            e->packed.n = made;
            xz = XZ_BLOCK;
        }
    }
    unsigned char head[16];
    put32(head, (uint32_t)tlen);
    *total = crc32_combine(*total, crc, (z_off_t)tlen);
    put32(head + 4, (uint32_t)crc);
    put32(head + 8, (uint32_t)pl->n);
    put32(head + 12, (uint32_t)e->packed.n | xz);
    if (write_all(out, head, 16, err, elen) || write_all(out, e->packed.p, e->packed.n, err, elen))
        return -1;
    return 0;
oom:
    return fail(err, elen, "out of memory");
}

EXPORT int mdz_encode(int in, int out, int level, size_t block_text, char *err, size_t elen)
{
    if (block_text == 0 || block_text > MAX_TEXT - LONG_LINE)
        return fail(err, elen, "a block of %zu bytes of text is not allowed", block_text);
    struct enc *e = calloc(1, sizeof *e);
    struct buf rd = {0};
    int rc = -1;
    uLong total = crc32(0, NULL, 0);
    unsigned char head[10];
    if (!e || reserve(&rd, 4u << 20)) {
        fail(err, elen, "out of memory");
        goto done;
    }
    memcpy(head, magic, 8);
    head[8] = VERSION_MAJOR;
    head[9] = VERSION_MINOR;
    if (write_all(out, head, 10, err, elen))
        goto done;
    size_t start = 0; /* of the unread part of rd */
    /* the block's text is not copied: its CRC is taken over rd from `summed` as rd is consumed */
    size_t summed = 0, tlen = 0;
    uLong crc = crc32(0, NULL, 0);
    for (int eof = 0; !eof || start < rd.n;) {
        unsigned char *nl = start < rd.n ? memchr(rd.p + start, '\n', rd.n - start) : NULL;
        size_t len = nl ? (size_t)(nl - (rd.p + start)) + 1 : rd.n - start;
        if (!nl && !eof && len <= LONG_LINE) { /* more of the line to read */
            crc = crc32(crc, rd.p + summed, (uInt)(start - summed));
            summed = 0;
            memmove(rd.p, rd.p + start, len);
            rd.n = len;
            start = 0;
            ssize_t got;
            do
                got = read(in, rd.p + rd.n, rd.cap - rd.n);
            while (got < 0 && errno == EINTR);
            if (got < 0) {
                fail(err, elen, "cannot read the file (%s)", strerror(errno));
                goto done;
            }
            eof = got == 0;
            rd.n += (size_t)got;
            continue;
        }
        if (len > LONG_LINE)
            len = LONG_LINE;
        const char *line = (const char *)rd.p + start;
        if (enc_line(e, line, len)) {
            fail(err, elen, "out of memory");
            goto done;
        }
        start += len;
        tlen += len;
        if (tlen >= block_text) {
            crc = crc32(crc, rd.p + summed, (uInt)(start - summed));
            summed = start;
            if (enc_flush(e, tlen, crc, level, out, &total, err, elen))
                goto done;
            tlen = 0;
            crc = crc32(0, NULL, 0);
        }
    }
    crc = crc32(crc, rd.p + summed, (uInt)(start - summed));
    if (tlen && enc_flush(e, tlen, crc, level, out, &total, err, elen))
        goto done;
    unsigned char end[16] = {0};
    put32(end + 4, (uint32_t)total);
    rc = write_all(out, end, 16, err, elen);
done:
    if (e) {
        model_free(&e->m);
        for (int i = 0; i < N_STREAMS; i++)
            free(e->s[i].p);
        free(e->payload.p);
        free(e->packed.p);
        free(e->xz.p);
    }
    free(e);
    free(rd.p);
    return rc;
}

/* ---- the decoder ------------------------------------------------------------------------- */

struct src {
    int fd; /* -1: read from p */
    const unsigned char *p;
    size_t n, pos;
};

/* up to `n` bytes; how many were read (fewer at the end), -1 on a read error */
static ssize_t src_read(struct src *s, void *out, size_t n)
{
    if (n == 0)
        return 0;
    if (s->fd < 0) {
        size_t k = s->n - s->pos < n ? s->n - s->pos : n;
        memcpy(out, s->p + s->pos, k);
        s->pos += k;
        return (ssize_t)k;
    }
    size_t got = 0;
    while (got < n) { /* at its own offset: the descriptor's is not the reader's */
        ssize_t r = pread(s->fd, (char *)out + got, n - got, (off_t)s->pos);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
        s->pos += (size_t)r;
    }
    return (ssize_t)got;
}

struct in {
    const unsigned char *p, *end;
};

static int get(struct in *s, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift <= 63; shift += 7) {
        if (s->p >= s->end)
            return -1;
        unsigned char b = *s->p++;
        if (shift == 63 && b > 1)
            return -1; /* more than 64 bits */
        x |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

static int valid_op(unsigned char op)
{
    int kind = op & 0x0f, flags = op & 0xf0;
    if (kind == LIT || kind == RAW)
        return flags == 0;
    if (kind <= ALLOC_A || (kind >= CALLOC && kind < N_KINDS && kind != REALLOC))
        return (flags & ~(F_STACK | F_SIZE)) == 0;
    if (kind <= FREE_A)
        return (flags & ~F_STACK) == 0;
    return kind == REALLOC || (kind == NODE && (flags & ~F_SIZE) == 0);
}

#define BAD(...) return fail(err, elen, __VA_ARGS__)

/* `v` written at `p` in decimal (hex: lower case, after 0x); past its end */
static char *num(char *p, uint64_t v, int hexa)
{
    if (hexa) { /* the digits' count from the highest bit set, written from the last */
        *p++ = '0';
        *p++ = 'x';
        int n = v ? (67 - __builtin_clzll(v)) / 4 : 1;
        for (int i = n - 1; i >= 0; i--, v >>= 4)
            p[i] = "0123456789abcdef"[v & 15];
        return p + n;
    }
    /* the digits' count, then two digits a division from the last, from a table of the pairs */
    static const char pairs[] = "0001020304050607080910111213141516171819"
                                "2021222324252627282930313233343536373839"
                                "4041424344454647484950515253545556575859"
                                "6061626364656667686970717273747576777879"
                                "8081828384858687888990919293949596979899";
    int n = 1;
    for (uint64_t t = v; t >= 10; t /= 10)
        n++;
    char *q = p + n;
    while (v >= 100) {
        const char *d = pairs + 2 * (v % 100);
        v /= 100;
        *--q = d[1];
        *--q = d[0];
    }
    if (v >= 10) {
        *--q = pairs[2 * v + 1];
        *--q = pairs[2 * v];
    } else {
        *--q = (char)('0' + v);
    }
    return p + n;
}

/* a record: its tag, then each value after a space (in hex: those of the bits of `hexes`), and
 * the newline */
static int record(char *line, const char *tag, const uint64_t *v, int n, int hexes)
{
    size_t tl = strlen(tag);
    char *p = line + tl;
    memcpy(line, tag, tl);
    for (int i = 0; i < n; i++) {
        *p++ = ' ';
        p = num(p, v[i], hexes >> i & 1);
    }
    *p++ = '\n';
    return (int)(p - line);
}

/* a release's PTR into *ptr (FREF, and DELTA when 0): 1 when it was a live block's, released in
 * the model (*block: its address, size, stack), 0 when not, -1 on an error (err says it) */
static int dec_ptr(struct model *m, struct in *s, uint64_t *ptr, uint64_t block[3], char *err,
                   size_t elen)
{
    uint64_t ref, z;
    int r;
    if (get(&s[FREF], &ref))
        BAD("a block's streams are cut short or corrupt");
    if (ref == 0) {
        if (get(&s[DELTA], &z))
            BAD("a block's streams are cut short or corrupt");
        *ptr = m->prev + unzigzag(z);
        return 0;
    }
    if (ref > m->allocs || (r = release(m, m->allocs - ref, block)) == 0)
        BAD("a release refers to no live block");
    if (r < 0)
        BAD("out of memory");
    *ptr = block[0];
    return 1;
}

/* where a block's records go: text (`direct` 0), or the direct output (mdz_dec_open): the heap
 * records as packed events (compact.h), the other records as their text; `text` counts the text
 * written, `tail` the bytes after the last line end, `bol` whether the output is at a line's
 * start */
struct sink {
    struct buf *out;
    int direct, bol;
    size_t text, tail;
};

/* a line of the block's text into the sink (kind: LIT, RAW, or the record's); 0, -1 out of
 * memory, 1 the direct output cannot hold it (a NUL byte, or the event mark at a line's start) */
static int sink_text(struct sink *k, const void *p, size_t n, int ends_line)
{
    if (k->direct && n && ((k->bol && *(const unsigned char *)p == MDZ_EVENT) || memchr(p, 0, n)))
        return 1;
    if (put(k->out, p, n))
        return -1;
    k->text += n;
    k->tail = ends_line ? 0 : k->tail + n;
    k->bol = ends_line || (k->bol && n == 0);
    return 0;
}

/* a heap record: its text (`line`, `n` bytes), or its packed event (compact.h); 0, -1 out of
 * memory, 1 the direct output cannot hold it (what the text path would leave to Python: a
 * STACK of 32 bits or more, a decimal field of more than 18 digits) */
static int sink_event(struct sink *k, const char *tag, int op, const uint64_t *v, int nv, int hexes,
                      const char *line, int n)
{
    if (!k->direct)
        return sink_text(k, line, (size_t)n, 1);
    if (v[0] >> 32)
        return 1;
    for (int i = 2; i < nv; i++)
        if (!(hexes >> i & 1) && v[i] >= 1000000000000000000ull)
            return 1;
    int alloc = tag[0] == '+';
    int nargs = alloc ? nv - 2 : 1;
    if (reserve(k->out, 40))
        return -1;
    unsigned char *p = k->out->p + k->out->n;
    uint32_t stack = (uint32_t)v[0];
    uint64_t result = alloc ? v[1] : 0;
    p[0] = MDZ_EVENT;
    p[1] = (unsigned char)op;
    p[2] = (unsigned char)nargs;
    p[3] = 0;
    memcpy(p + 4, &stack, 4);
    memcpy(p + 8, &result, 8);
    memcpy(p + 16, alloc ? v + 2 : v + 1, 8 * (size_t)nargs);
    k->out->n += 8 * (size_t)(2 + nargs);
    k->tail = 0;
    k->bol = 1;
    return 0;
}

static int dec_block(struct model *m, const unsigned char *pl, size_t plen, size_t limit,
                     struct sink *k, char *err, size_t elen)
{
    struct buf *out = k->out;
    struct in hdr = {pl, pl + plen}, s[N_STREAMS];
    uint64_t records, len[N_STREAMS], sum = 0;
    if (get(&hdr, &records))
        BAD("a block's streams are cut short or corrupt");
    for (int i = 0; i < N_STREAMS; i++) {
        if (get(&hdr, &len[i]))
            BAD("a block's streams are cut short or corrupt");
        sum += len[i] > plen ? plen + 1 : len[i];
    }
    if (sum != (uint64_t)(hdr.end - hdr.p))
        BAD("a block's streams do not add up to its payload");
    const unsigned char *p = hdr.p;
    for (int i = 0; i < N_STREAMS; i++) {
        s[i].p = p;
        s[i].end = p + len[i];
        p += len[i];
    }
    if (records != len[OPS])
        BAD("a block's record count is wrong");
    out->n = 0;
    k->text = 0;
    char line[128];
    for (const unsigned char *o = s[OPS].p; o < s[OPS].end; o++) {
        unsigned char op = *o;
        int kind = op & 0x0f, n = 0;
        uint64_t a, b, c, z;
        if (!valid_op(op))
            BAD("unknown record code %d in a block", (int)op);
        if (kind == LIT || kind == RAW) {
            if (get(&s[LITS], &a))
                BAD("a block's streams are cut short or corrupt");
            if (a > (uint64_t)(s[LITS].end - s[LITS].p))
                BAD("a literal record is cut short");
            if (a + (kind == LIT) > limit - k->text)
                BAD("a block decodes to more text than its header says");
            int r = sink_text(k, s[LITS].p, (size_t)a, 0);
            if (r == 0 && kind == LIT)
                r = sink_text(k, "\n", 1, 1);
            if (r)
                return r < 0 ? fail(err, elen, "out of memory") : 1;
            s[LITS].p += a;
            continue;
        }
        if (kind == NODE) {
            if (op & F_SIZE)
                a = m->last_nid + 1;
            else if (get(&s[NID], &a))
                BAD("a block's streams are cut short or corrupt");
            if (get(&s[NPAR], &z) || get(&s[NFRM], &c))
                BAD("a block's streams are cut short or corrupt");
            b = a - unzigzag(z);
            c = m->last_frame + unzigzag(c);
            m->last_nid = a;
            m->last_frame = c;
            n = record(line, "n", (uint64_t[]){a, b, c}, 3, 0);
            if (sink_text(k, line, (size_t)n, 1))
                BAD("out of memory"); /* a record's text holds neither a NUL nor the mark */
        } else if (kind <= ALLOC_A || kind >= CALLOC) {
            uint64_t stack, size, code, addr, total, extra[2] = {0, 0}, ptr = 0;
            if (op & F_STACK) {
                if (!stack_get(m, m->last_astk, S_NEXT, &stack))
                    BAD("a predicted stack has no prediction");
            } else if (get(&s[ASTK], &stack))
                BAD("a block's streams are cut short or corrupt");
            if (op & F_SIZE) {
                if (!stack_get(m, stack, S_SIZE, &size))
                    BAD("a predicted size has no prediction");
            } else if (get(&s[ASIZE], &size))
                BAD("a block's streams are cut short or corrupt");
            total = size;
            if (kind >= CALLOC && kind != REALLOC) { /* NMEMB or ALIGN, then RC */
                if (get(&s[ASIZE], &extra[0])
                    || (kind == POSIX_MEMALIGN && get(&s[ASIZE], &extra[1])))
                    BAD("a block's streams are cut short or corrupt");
                if (kind == CALLOC)
                    total = extra[0] * size;
            } else if (kind == REALLOC && !(op & F_NO_PTR)) { /* enc_resize's PTR */
                uint64_t block[3];
                if (dec_ptr(m, s, &ptr, block, err, elen) < 0)
                    return -1;
                m->prev = ptr;
            }
            code = LIFO + 1;
            addr = 0;
            if (!(op & F_NO_RESULT) && get(&s[AADDR], &code))
                BAD("a block's streams are cut short or corrupt");
            if (op & F_NO_RESULT) {
                /* RESULT 0x0 */
            } else if (code == 0) {
                if (!m->top)
                    BAD("a block from the top chunk before any");
                addr = m->top;
            } else if (code <= LIFO) {
                struct lifo *l = chunk(total) <= MAX_CLASS ? m->lifo[chunk(total) / 16] : NULL;
                if (!l || code > (uint64_t)l->n)
                    BAD("a reused block beyond its size class's");
                int k = (int)code - 1;
                addr = *lifo_at(l, k);
                lifo_take(l, k);
            } else if (code == LIFO + 1) {
                if (get(&s[DELTA], &z))
                    BAD("a block's streams are cut short or corrupt");
                addr = m->prev + unzigzag(z);
            } else {
                BAD("an address code is out of range");
            }
            uint64_t v[5] = {stack, addr, size};
            int nv = 3, hexes = kind == REALLOC ? 6 : 2;
            if (kind == POSIX_MEMALIGN)
                memcpy(v, (uint64_t[]){stack, addr, extra[0], size, extra[1]}, 5 * 8), nv = 5;
            else if (kind >= CALLOC && kind != REALLOC)
                memcpy(v, (uint64_t[]){stack, addr, extra[0], size}, 4 * 8), nv = 4;
            else if (kind == REALLOC)
                memcpy(v, (uint64_t[]){stack, addr, ptr, size}, 4 * 8), nv = 4;
            if (!k->direct)
                n = record(line, tag_of[kind], v, nv, hexes);
            int r = sink_event(k, tag_of[kind], op_of[kind], v, nv, hexes, line, n);
            if (r)
                return r < 0 ? fail(err, elen, "out of memory") : 1;
            if (allocated(m, stack, addr, size, code >= 1 && code <= LIFO, total))
                BAD("out of memory");
        } else {
            uint64_t ptr, stack, predicted, block[3];
            int r = dec_ptr(m, s, &ptr, block, err, elen);
            if (r < 0)
                return -1;
            if (r == 0 || !stack_get(m, block[2], S_FREE, &predicted))
                predicted = m->last_fstk;
            if (op & F_STACK)
                stack = predicted;
            else if (get(&s[FSTK], &stack))
                BAD("a block's streams are cut short or corrupt");
            uint64_t v[2] = {stack, ptr};
            if (!k->direct)
                n = record(line, tag_of[kind], v, 2, 2);
            int rs = sink_event(k, tag_of[kind], op_of[kind], v, 2, 2, line, n);
            if (rs)
                return rs < 0 ? fail(err, elen, "out of memory") : 1;
            if (released(m, stack, ptr, r ? &block[2] : NULL))
                BAD("out of memory");
        }
        if (k->text > limit)
            BAD("a block decodes to more text than its header says");
    }
    for (int i = 0; i < N_STREAMS; i++)
        if (i != OPS && s[i].p != s[i].end)
            BAD("a block's streams hold more than its records");
    return 0;
}

/* The payload of a block into `out`: one xz stream (`xz`: compact encoding 1.x, 2.1's flagged
 * blocks) or one zlib stream (RFC 1950, 2.x). 0, or -1 (out->n SIZE_MAX when out of memory). The output grows as the stream
 * gives it (a header's PAYLOAD_LEN is not trusted with memory), up to one byte more than it. */
static int unpacked(int xz, const unsigned char *p, size_t n, size_t plen, struct buf *out)
{
    lzma_stream lz = LZMA_STREAM_INIT;
    z_stream zs = {0};
    if (xz ? lzma_stream_decoder(&lz, MEMLIMIT, 0) != LZMA_OK : inflateInit(&zs) != Z_OK)
        return -1;
    lz.next_in = zs.next_in = (unsigned char *)p;
    lz.avail_in = zs.avail_in = (uInt)n;
    int more = 1, ended = 0;
    while (more && out->n < plen + 1) {
        size_t room = out->n ? out->n : 65536;
        if (room > plen + 1 - out->n)
            room = plen + 1 - out->n;
        if (reserve(out, room)) {
            ended = -1;
            break;
        }
        size_t left;
        if (xz) {
            lz.next_out = out->p + out->n;
            lz.avail_out = room;
            lzma_ret r = lzma_code(&lz, LZMA_FINISH);
            ended = r == LZMA_STREAM_END;
            more = r == LZMA_OK;
            left = lz.avail_out;
        } else {
            zs.next_out = out->p + out->n;
            zs.avail_out = (uInt)room;
            int r = inflate(&zs, Z_FINISH);
            ended = r == Z_STREAM_END;
            more = r == Z_OK || (r == Z_BUF_ERROR && zs.avail_out == 0); /* wants more room */
            left = zs.avail_out;
        }
        out->n += room - left;
    }
    size_t unread = xz ? lz.avail_in : zs.avail_in;
    if (xz)
        lzma_end(&lz);
    else
        inflateEnd(&zs);
    if (ended < 0)
        out->n = SIZE_MAX;
    return ended == 1 && out->n == plen && unread == 0 ? 0 : -1;
}

/* ---- decoding a whole dump, a block at a time -------------------------------------------- */

struct mdz_dec {
    struct src src;
    struct model m;
    struct buf packed, payload, out;
    struct sink k;
    int xz, state; /* state: 0 reading, 1 ended, -1 failed */
    uLong total;   /* the text's CRC-32 so far (text output) */
    uint64_t read; /* bytes of the compact dump read */
};

static void dec_free(struct mdz_dec *d)
{
    if (!d)
        return;
    model_free(&d->m);
    free(d->packed.p);
    free(d->payload.p);
    free(d->out.p);
    free(d);
}

static ssize_t dec_read(struct mdz_dec *d, void *out, size_t n)
{
    ssize_t got = src_read(&d->src, out, n);
    if (got > 0)
        d->read += (uint64_t)got;
    return got;
}

/* a decoder of the compact dump read from `src` (its signature read and checked); NULL with
 * `err` said */
static struct mdz_dec *dec_open(struct src src, int direct, char *err, size_t elen)
{
    struct mdz_dec *d = calloc(1, sizeof *d);
    unsigned char head[10];
    if (!d) {
        fail(err, elen, "out of memory");
        return NULL;
    }
    d->src = src;
    d->m.decoding = 1;
    d->k = (struct sink){&d->out, direct, 1, 0, 0};
    d->total = crc32(0, NULL, 0);
    ssize_t got = dec_read(d, head, 10);
    if (got < 0)
        fail(err, elen, "cannot read the file (%s)", strerror(errno));
    else if (got < 10 || memcmp(head, magic, 8) != 0)
        fail(err, elen, "not a compact memdump dump");
    else if (head[8] != 1 && head[8] != VERSION_MAJOR)
        fail(err, elen, "compact encoding %d.%d is not supported (reads 1.x and %d.x)", head[8],
             head[9], VERSION_MAJOR);
    else {
        d->xz = head[8] == 1;
        return d;
    }
    dec_free(d);
    return NULL;
}

/* whether a block's header (not the end block's) keeps to the sizes a compact dump's blocks have */
static int block_sane(const unsigned char head[16])
{
    uint32_t tlen = get32(head), plen = get32(head + 8), clen = get32(head + 12) & ~XZ_BLOCK;
    return tlen <= MAX_TEXT && plen <= 2 * (uint64_t)MAX_TEXT + 64
           && clen <= plen + plen / 64 + 4096;
}

/* the next block decoded into d->out: 1; 0 at the end block (checked); -1 with `err` said; 2
 * (direct output) a record the direct output cannot hold: decode the text instead */
static int dec_next(struct mdz_dec *d, char *err, size_t elen)
{
    unsigned char head[16];
    if (d->state)
        return d->state > 0 ? 0 : fail(err, elen, "the decoder failed before");
    d->state = -1;
    ssize_t got = dec_read(d, head, 16);
    if (got < 0)
        return fail(err, elen, "cannot read the file (%s)", strerror(errno));
    if (got < 16)
        return fail(err, elen, "the compact dump is cut short (no end block)");
    uint32_t tlen = get32(head), crc = get32(head + 4), plen = get32(head + 8),
             clen = get32(head + 12) & ~XZ_BLOCK;
    int xz = d->xz || (get32(head + 12) & XZ_BLOCK); /* 1.x: every block; 2.1: those flagged */
    if (tlen == 0) {
        unsigned char extra;
        if (plen || clen)
            return fail(err, elen, "the end block is corrupt");
        if (!d->k.direct && crc != (uint32_t)d->total)
            return fail(err, elen, "the text's checksum does not match");
        if (src_read(&d->src, &extra, 1) != 0)
            return fail(err, elen, "bytes follow the end block");
        d->out.n = 0;
        d->state = 1;
        return 0;
    }
    if (!block_sane(head))
        return fail(err, elen, "a block is larger than a compact dump's blocks");
    d->packed.n = d->payload.n = 0;
    if (reserve(&d->packed, clen))
        return fail(err, elen, "out of memory");
    if ((got = dec_read(d, d->packed.p, clen)) < 0 || (size_t)got < clen)
        return fail(err, elen, "the compact dump is cut short (in a block)");
    if (unpacked(xz, d->packed.p, clen, plen, &d->payload))
        return fail(err, elen, d->payload.n == SIZE_MAX ? "out of memory"
                                                        : "a block's compressed data is corrupt");
    int r = dec_block(&d->m, d->payload.p, plen, tlen, &d->k, err, elen);
    if (r)
        return r > 0 ? 2 : -1;
    if (!d->k.direct) { /* the direct output has no text to check */
        if (d->k.text != tlen || crc32(0, d->out.p, (uInt)d->out.n) != crc)
            return fail(err, elen, "a block's text does not match its checksum");
        d->total = crc32_combine(d->total, crc, (z_off_t)d->out.n);
    }
    d->state = 0;
    return 1;
}

/* decodes the compact dump read from `src` to `out` (a descriptor; -1: nowhere, the fuzzer's) */
static int decode(struct src *src, int out, char *err, size_t elen)
{
    struct mdz_dec *d = dec_open(*src, 0, err, elen);
    int r = d ? 1 : -1;
    while (r == 1 && (r = dec_next(d, err, elen)) == 1)
        if (out >= 0 && write_all(out, d->out.p, d->out.n, err, elen))
            r = -1;
    dec_free(d);
    return r;
}

EXPORT int mdz_decode(int in, int out, char *err, size_t elen)
{
    struct src s = {in, NULL, 0, 0};
    return decode(&s, out, err, elen);
}

/* the fuzzer's entry: decodes `n` bytes in memory, writing nowhere */
int mdz_decode_bytes(const unsigned char *p, size_t n, char *err, size_t elen)
{
    struct src s = {-1, p, n, 0};
    return decode(&s, -1, err, elen);
}

/* the fuzzer's other entry: one block's payload, decoded by a fresh model (direct: into the
 * direct output) */
int mdz_decode_payload(const unsigned char *p, size_t n, int direct, char *err, size_t elen)
{
    struct model *m = calloc(1, sizeof *m);
    struct buf out = {0};
    struct sink k = {&out, direct, 1, 0, 0};
    if (!m)
        return fail(err, elen, "out of memory");
    m->decoding = 1;
    int rc = dec_block(m, p, n, MAX_TEXT, &k, err, elen);
    model_free(m);
    free(m);
    free(out.p);
    return rc;
}

/* ---- the direct output, for the replay (memdump_core.c) --------------------------------- */

struct mdz_dec *mdz_dec_open(int fd, char *err, size_t elen)
{
    return dec_open((struct src){fd, NULL, 0, 0}, 1, err, elen);
}

int mdz_dec_next(struct mdz_dec *d, const unsigned char **p, size_t *n, char *err, size_t elen)
{
    int r = dec_next(d, err, elen);
    *p = d->out.p;
    *n = r == 1 ? d->out.n : 0;
    return r;
}

uint64_t mdz_dec_read(const struct mdz_dec *d)
{
    return d->read;
}

uint64_t mdz_dec_tail(const struct mdz_dec *d)
{
    return d->k.tail;
}

void mdz_dec_close(struct mdz_dec *d)
{
    dec_free(d);
}

/* ---- what a reader needs before the records (dumpio.DumpFile) ---------------------------- */

/* The trailing literal bytes of the block whose payload is `pl`: their length into *tail and
 * whether one is not NUL into *written; 0, or 1 when the block is all literals without a line end
 * (the tail may begin in an earlier block) or malformed (the decoder will say how). */
static int block_tail(const unsigned char *pl, size_t plen, uint64_t *tail, int *written)
{
    struct in hdr = {pl, pl + plen}, ops, lits;
    uint64_t records, len[N_STREAMS], a;
    if (get(&hdr, &records))
        return 1;
    for (int i = 0; i < N_STREAMS; i++)
        if (get(&hdr, &len[i]) || len[i] > (uint64_t)(hdr.end - hdr.p))
            return 1;
    ops = (struct in){hdr.p, hdr.p + len[OPS]};
    lits.p = ops.end; /* the streams follow each other: LITS is the second */
    if (len[LITS] > (uint64_t)(hdr.end - lits.p))
        return 1;
    lits.end = lits.p + len[LITS];
    int ended = 0;
    *tail = 0;
    *written = 0;
    for (const unsigned char *o = ops.p; o < ops.end; o++) {
        int kind = *o & 0x0f;
        if (kind != LIT && kind != RAW) {
            ended = 1, *tail = 0, *written = 0;
            continue;
        }
        if (get(&lits, &a) || a > (uint64_t)(lits.end - lits.p))
            return 1;
        if (kind == LIT) {
            ended = 1, *tail = 0, *written = 0;
        } else {
            *tail += a;
            for (uint64_t i = 0; i < a && !*written; i++)
                *written = lits.p[i] != 0;
        }
        lits.p += a;
    }
    return !ended;
}

/* The payload of the block whose header is `head`, read from the decoder's offset into
 * d->payload; 0, or 1 when it cannot be (the decoder will say why) */
static int block_payload(struct mdz_dec *d, const unsigned char head[16])
{
    uint32_t plen = get32(head + 8), clen = get32(head + 12) & ~XZ_BLOCK;
    int xz = d->xz || (get32(head + 12) & XZ_BLOCK);
    d->packed.n = d->payload.n = 0;
    return !block_sane(head) || reserve(&d->packed, clen)
           || pread(d->src.fd, d->packed.p, clen, (off_t)d->src.pos + 16) != (ssize_t)clen
           || unpacked(xz, d->packed.p, clen, plen, &d->payload);
}

/* the first line, when it is the block's first record and a LIT (as a dump's version line is),
 * into `first` (up to `cap` bytes) and its length into *len; 0, or 1 when it is not */
static int first_line(struct mdz_dec *d, const unsigned char head[16], char *first, size_t cap,
                      uint64_t *len)
{
    struct in hdr;
    uint64_t records, slen[N_STREAMS], n;
    if (block_payload(d, head))
        return 1;
    hdr = (struct in){d->payload.p, d->payload.p + d->payload.n};
    if (get(&hdr, &records))
        return 1;
    for (int i = 0; i < N_STREAMS; i++)
        if (get(&hdr, &slen[i]) || slen[i] > (uint64_t)(hdr.end - hdr.p))
            return 1;
    if (records == 0 || slen[OPS] == 0 || *hdr.p != LIT || slen[LITS] > (uint64_t)(hdr.end - hdr.p)
        || slen[OPS] > (uint64_t)(hdr.end - hdr.p) - slen[LITS])
        return 1;
    struct in lits = {hdr.p + slen[OPS], hdr.p + slen[OPS] + slen[LITS]};
    if (get(&lits, &n) || n > (uint64_t)(lits.end - lits.p) || memchr(lits.p, '\n', n))
        return 1;
    memcpy(first, lits.p, n < cap ? n : cap);
    if (n < cap)
        first[n] = '\n';
    *len = n + 1;
    return 0;
}

/* The first line of the compact dump open as `fd` (up to `cap` bytes into `first`) and the
 * lengths of its text: out[0] the first line's (0: the first block has no line end), out[1] the
 * text's, out[2] up to its last line end, out[3] 1 when what follows that is more than NUL
 * bytes. 0; 1 when it takes decoding the whole dump to say (the file's faults included); -1 when
 * the file cannot be read (err). Reads the blocks' headers, and decodes the first block and the
 * last one's literals. */
EXPORT int mdz_info(int fd, char *first, size_t cap, uint64_t out[4], char *err, size_t elen)
{
    struct mdz_dec *d = dec_open((struct src){fd, NULL, 0, 0}, 0, err, elen);
    if (!d)
        return 1;
    int rc = 1;
    uint64_t text = 0;
    unsigned char last_head[16];
    off_t pos = 10, last_at = -1;
    memset(out, 0, 4 * sizeof *out);
    for (;;) {
        unsigned char head[16];
        ssize_t got = pread(fd, head, 16, pos);
        if (got < 0) {
            rc = fail(err, elen, "cannot read the file (%s)", strerror(errno));
            goto done;
        }
        if (got < 16)
            goto done;
        uint32_t tlen = get32(head), clen = get32(head + 12) & ~XZ_BLOCK;
        if (tlen == 0)
            break;
        if (pos == 10 && (first_line(d, head, first, cap, &out[0]) || out[0] > tlen))
            goto done; /* the first block's first record is not the version line */
        text += tlen;
        last_at = pos;
        memcpy(last_head, head, 16);
        pos += 16 + (off_t)clen;
        d->src.pos = (size_t)pos;
    }
    out[1] = text;
    if (last_at < 0) {
        rc = 0;
        goto done;
    }
    d->src.pos = (size_t)last_at;
    if (block_payload(d, last_head))
        goto done;
    uint64_t tail;
    int written;
    if (block_tail(d->payload.p, d->payload.n, &tail, &written) || tail > text)
        goto done;
    out[2] = text - tail;
    out[3] = (uint64_t)written;
    rc = 0;
done:
    dec_free(d);
    return rc;
}
