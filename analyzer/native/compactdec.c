/* @brief The compact encoding of a dump (docs/dump-format.md, "Compact encoding"), its decoder:
 * to the text (memdump-analyze --text, the Python readers), to the direct output the C replay reads
 * (compact.h), and what a reader needs before the records (mdz_info). A compact file comes from
 * users as dumps do: the decoder checks every length, code and reference, and any bad input is one
 * error sentence (fuzz_compact.c fuzzes it). compact.py is the readable reference. */
#include <dlfcn.h>
#include <pthread.h>

#include "compactmodel.h"

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

/* a varint of more than one byte (or none: `ok` 0), and where it ends: returned whole, so that
 * the decoder's streams, whose places it updates, stay its own (a pointer to them passed out of
 * line would have every store into the output read them again) */
struct got {
    uint64_t v;
    const unsigned char *p;
    int ok;
};

static struct got get_long(const unsigned char *p, const unsigned char *end)
{
    uint64_t x = 0;
    for (int shift = 0; shift <= 63; shift += 7) {
        if (p >= end)
            break;
        unsigned char b = *p++;
        if (shift == 63 && b > 1)
            break; /* more than 64 bits */
        x |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80)
            return (struct got){x, p, 1};
    }
    return (struct got){0, p, 0};
}

/* a varint of `s` into *v: 0, or -1 when cut short or over 64 bits. Most are one byte (a stack
 * predicted, a small delta or size): read here, inline; the others by get_long */
static inline __attribute__((always_inline)) int get(struct in *s, uint64_t *v)
{
    if (s->p < s->end && *s->p < 0x80) {
        *v = *s->p++;
        return 0;
    }
    struct got g = get_long(s->p, s->end);
    if (!g.ok)
        return -1;
    s->p = g.p;
    *v = g.v;
    return 0;
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
static inline __attribute__((always_inline)) int
dec_ptr(struct model *m, struct in *s, uint64_t *ptr, uint64_t block[3], char *err, size_t elen)
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

/* a record of ours (its tag, up to 5 values) as its text line, made in the output itself: a
 * record's text holds neither a NUL byte nor the event mark, and is at most 2 + 5 * 21 + 1 bytes;
 * 0, or -1 out of memory */
static int sink_record(struct sink *k, const char *tag, const uint64_t *v, int n, int hexes)
{
    if (reserve(k->out, 128))
        return -1;
    size_t len = (size_t)record((char *)k->out->p + k->out->n, tag, v, n, hexes);
    k->out->n += len;
    k->text += len;
    k->tail = 0;
    k->bol = 1;
    return 0;
}

/* a heap record's packed event (compact.h) into the direct output: operation `op`, STACK,
 * RESULT and NARGS arguments (those past NARGS are written too: the next event overwrites them,
 * or they lie past the output's end). 0, -1 out of memory, 1 the direct output cannot hold it
 * (what the text path would leave to Python: a STACK of 32 bits or more, a decimal field of more
 * than 18 digits: `big`). The values come as scalars, not from an array: an array written as
 * pairs and read at an 8-byte offset stalls store forwarding. Inline: it runs for every heap
 * record. */
static inline __attribute__((always_inline)) int
sink_event(struct sink *k, int op, int nargs, uint64_t stack, uint64_t result, uint64_t a0,
           uint64_t a1, uint64_t a2, int big)
{
    if ((stack >> 32) | (uint64_t)big)
        return 1;
    if (reserve(k->out, 40))
        return -1;
    unsigned char *p = k->out->p + k->out->n;
    uint32_t stack32 = (uint32_t)stack;
    p[0] = MDZ_EVENT;
    p[1] = (unsigned char)op;
    p[2] = (unsigned char)nargs;
    p[3] = 0;
    memcpy(p + 4, &stack32, 4);
    memcpy(p + 8, &result, 8);
    memcpy(p + 16, &a0, 8);
    memcpy(p + 24, &a1, 8);
    memcpy(p + 32, &a2, 8); /* reserved: 16 + 24 bytes */
    k->out->n += 8 * (size_t)(2 + nargs);
    k->tail = 0;
    k->bol = 1;
    return 0;
}

/* a decimal field the direct output cannot hold (more than 18 digits) */
static inline int too_big(uint64_t v)
{
    return v >= 1000000000000000000ull;
}

/* a block being decoded: its streams as read so far (s[OPS].p: the next record's operation) */
struct block {
    struct in s[N_STREAMS];
};

/* the block whose payload is `pl` begun into *b (its streams found, none read), the sink's text
 * count reset; 0, or -1 (err says why) */
static int block_start(const unsigned char *pl, size_t plen, struct block *b, struct sink *k,
                       char *err, size_t elen)
{
    struct in hdr = {pl, pl + plen};
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
        b->s[i].p = p;
        b->s[i].end = p + len[i];
        p += len[i];
    }
    if (records != len[OPS])
        BAD("a block's record count is wrong");
    k->text = 0;
    return 0;
}

/* The records of the block begun, whose streams are `s`, into the sink, its output from
 * k->out->n on, up to `piece` bytes of it (then 3: paused, before a record, its state kept in
 * `s` and the model; the direct output hands a block over in pieces that stay in the caches),
 * the block's text at most `limit` bytes. 0 at the block's end (its streams checked); 1 the
 * direct output cannot hold a record; -1 (err says why). */
static inline __attribute__((always_inline)) int
block_run(struct model *m, struct in *s, size_t limit, size_t piece, struct sink *k, char *err,
          size_t elen)
{
    struct buf *out = k->out;
    while (s[OPS].p < s[OPS].end) {
        if (out->n >= piece)
            return 3;
        unsigned char op = *s[OPS].p++;
        int kind = op & 0x0f;
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
            if (sink_record(k, "n", (uint64_t[]){a, b, c}, 3, 0))
                BAD("out of memory");
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
                struct lifo *l = chunk(total) <= MAX_CLASS ? &m->lifo[chunk(total) / 16] : NULL;
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
            /* the arguments after RESULT: SIZE; NMEMB or ALIGN, SIZE; ALIGN, SIZE, RC; PTR, SIZE */
            uint64_t a0 = size, a1 = 0, a2 = 0;
            int nargs = 1, big;
            if (kind == POSIX_MEMALIGN)
                a0 = extra[0], a1 = size, a2 = extra[1], nargs = 3;
            else if (kind >= CALLOC)
                a0 = kind == REALLOC ? ptr : extra[0], a1 = size, nargs = 2;
            big = kind == REALLOC ? too_big(a1) : too_big(a0) | too_big(a1) | too_big(a2);
            int r;
            if (k->direct) {
                r = sink_event(k, op_of[kind], nargs, stack, addr, a0, a1, a2, big);
            } else {
                uint64_t v[5] = {stack, addr, a0, a1, a2};
                r = sink_record(k, tag_of[kind], v, 2 + nargs, kind == REALLOC ? 6 : 2);
            }
            if (r)
                return r < 0 ? fail(err, elen, "out of memory") : 1;
            if (allocated(m, stack, addr, size, code >= 1 && code <= LIFO, total,
                          op & (F_STACK | F_SIZE)))
                BAD("out of memory");
        } else {
            uint64_t ptr = 0, stack, predicted, block[3];
            int r = dec_ptr(m, s, &ptr, block, err, elen);
            if (r < 0)
                return -1;
            if (r == 0 || !stack_get(m, block[2], S_FREE, &predicted))
                predicted = m->last_fstk;
            if (op & F_STACK)
                stack = predicted;
            else if (get(&s[FSTK], &stack))
                BAD("a block's streams are cut short or corrupt");
            int rs;
            if (k->direct) {
                rs = sink_event(k, op_of[kind], 1, stack, 0, ptr, 0, 0, 0);
            } else {
                rs = sink_record(k, tag_of[kind], (uint64_t[]){stack, ptr}, 2, 2);
            }
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

/* block_run on a copy of the block's streams (its places kept in *b after): a local array whose
 * address goes nowhere, which the stores into the output cannot change */
static int block_records(struct model *m, struct block *b, size_t limit, size_t piece,
                         struct sink *k, char *err, size_t elen)
{
    struct in s[N_STREAMS];
    memcpy(s, b->s, sizeof s);
    int r = block_run(m, s, limit, piece, k, err, elen);
    memcpy(b->s, s, sizeof s);
    return r;
}

/* libdeflate's whole-buffer zlib decompression (libdeflate.h, stable since 1.0; `_ex` since
 * 1.2), loaded at run time when installed (setup.sh names libdeflate0): about twice zlib's speed
 * on a block's payload, the same checks (the stream's Adler-32, its end, the bytes it gives).
 * MEMDUMP_INFLATE=zlib keeps zlib (the tests run both). */
struct libdeflate {
    void *(*alloc)(void);
    int (*zlib_decompress_ex)(void *, const void *, size_t, void *, size_t, size_t *, size_t *);
    void (*free)(void *);
};
static struct libdeflate deflater;
static pthread_once_t deflater_once = PTHREAD_ONCE_INIT;

static void load_deflater(void)
{
    const char *want = getenv("MEMDUMP_INFLATE");
    void *h = want && strcmp(want, "zlib") == 0 ? NULL
                                                : dlopen("libdeflate.so.0", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return;
    struct libdeflate lib;
    *(void **)&lib.alloc = dlsym(h, "libdeflate_alloc_decompressor");
    *(void **)&lib.zlib_decompress_ex = dlsym(h, "libdeflate_zlib_decompress_ex");
    *(void **)&lib.free = dlsym(h, "libdeflate_free_decompressor");
    if (lib.alloc && lib.zlib_decompress_ex && lib.free)
        deflater = lib;
    else
        dlclose(h);
}

/* The zlib stream `p` (`n` bytes) into `out` by libdeflate, exactly `plen` bytes and the whole
 * stream: 0; -1 corrupt or out of memory (out->n SIZE_MAX); 1 libdeflate is not there, or the
 * payload is more than deflate could make of `n` bytes (a header is not trusted with memory) */
static int inflated_whole(const unsigned char *p, size_t n, size_t plen, struct buf *out)
{
    pthread_once(&deflater_once, load_deflater);
    if (deflater.alloc == NULL || plen / 1032 > n) /* deflate's ratio is at most 1032:1 */
        return 1;
    void *dec = deflater.alloc();
    if (dec == NULL || reserve(out, plen + 1)) {
        if (dec)
            deflater.free(dec);
        out->n = SIZE_MAX;
        return -1;
    }
    size_t used = 0, got = 0;
    int r = deflater.zlib_decompress_ex(dec, p, n, out->p, plen, &used, &got);
    deflater.free(dec);
    out->n = got;
    return r == 0 && used == n && got == plen ? 0 : -1;
}

/* The payload of a block into `out`: one xz stream (`xz`: compact encoding 1.x, 2.1's flagged
 * blocks) or one zlib stream (RFC 1950, 2.x). 0, or -1 (out->n SIZE_MAX when out of memory). The output grows as the stream
 * gives it (a header's PAYLOAD_LEN is not trusted with memory), up to one byte more than it. */
static int unpacked(int xz, const unsigned char *p, size_t n, size_t plen, struct buf *out)
{
    lzma_stream lz = LZMA_STREAM_INIT;
    z_stream zs = {0};
    int whole = xz ? 1 : inflated_whole(p, n, plen, out);
    if (whole <= 0)
        return whole;
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

/* the direct output's pieces: a block's 7 to 8 MB handed over a MiB at a time, which the replay
 * reads while it is still in the caches (and two such buffers, not two of a block's size) */
#ifndef PIECE /* test_compactfeed.c's build: smaller */
#define PIECE (1u << 20)
#endif

struct mdz_dec {
    struct src src;
    struct model m;
    struct buf packed, payload, out;
    struct sink k;
    int xz, state; /* state: 0 reading, 1 ended, -1 failed */
    struct block blk; /* the block being decoded (`in_block`), its text's length and CRC-32 */
    int in_block;
    uint32_t tlen, crc;
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
    d->m.decoding = d->m.numbers.runs = 1;
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

/* the block begun in d->blk decoded into d->out, to its end (the text output) or a piece of it
 * (the direct output: PIECE bytes, the rest at the next call): as dec_next says */
static int block_end_of(struct mdz_dec *d, char *err, size_t elen)
{
    int r = block_records(&d->m, &d->blk, d->tlen, d->k.direct ? PIECE : SIZE_MAX, &d->k, err,
                          elen);
    if (r == 1 || r < 0)
        return r > 0 ? 2 : -1;
    d->in_block = r == 3;
    if (!d->in_block && !d->k.direct) { /* the direct output has no text to check */
        if (d->k.text != d->tlen || crc32(0, d->out.p, (uInt)d->out.n) != d->crc)
            return fail(err, elen, "a block's text does not match its checksum");
        d->total = crc32_combine(d->total, d->crc, (z_off_t)d->out.n);
    }
    d->state = 0;
    return 1;
}

/* the next block decoded into d->out (the direct output: the next piece of one): 1; 0 at the end
 * block (checked); -1 with `err` said; 2 (direct output) a record the direct output cannot hold:
 * decode the text instead */
static int dec_next(struct mdz_dec *d, char *err, size_t elen)
{
    unsigned char head[16];
    if (d->state)
        return d->state > 0 ? 0 : fail(err, elen, "the decoder failed before");
    d->state = -1;
    d->out.n = 0;
    if (d->in_block) /* the rest of a block paused */
        return block_end_of(d, err, elen);
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
    if (block_start(d->payload.p, plen, &d->blk, &d->k, err, elen))
        return -1;
    d->in_block = 1;
    d->tlen = tlen;
    d->crc = crc;
    return block_end_of(d, err, elen);
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
    m->decoding = m->numbers.runs = 1;
    /* the direct output in pieces of 64 bytes, as the replay's decoder gives it in PIECE's */
    struct block b;
    int rc = block_start(p, n, &b, &k, err, elen);
    if (rc == 0)
        while ((rc = block_records(m, &b, MAX_TEXT, direct ? 64 : SIZE_MAX, &k, err, elen)) == 3)
            out.n = 0;
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

int mdz_dec_exchange(struct mdz_dec *d, unsigned char **buf, size_t *cap, size_t slack)
{
    if (reserve(&d->out, slack))
        return -1;
    struct buf out = d->out;
    d->out = (struct buf){*buf, 0, *buf ? *cap : 0};
    *buf = out.p;
    *cap = out.cap;
    return 0;
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

/* The operations and the literals of the block whose payload is `pl` (the streams follow each
 * other: LITS is the second), its count of records into *records; 0, or 1 when the block's
 * header is malformed */
static int block_streams(const unsigned char *pl, size_t plen, struct in *ops, struct in *lits,
                         uint64_t *records)
{
    struct in hdr = {pl, pl + plen};
    uint64_t len[N_STREAMS];
    if (get(&hdr, records))
        return 1;
    for (int i = 0; i < N_STREAMS; i++)
        if (get(&hdr, &len[i]) || len[i] > (uint64_t)(hdr.end - hdr.p))
            return 1;
    *ops = (struct in){hdr.p, hdr.p + len[OPS]};
    if (len[LITS] > (uint64_t)(hdr.end - ops->end))
        return 1;
    *lits = (struct in){ops->end, ops->end + len[LITS]};
    return 0;
}

/* How the block whose payload is `pl` ends: the literal bytes after its last line end or other
 * record (`tail` of them, `written` when one is not NUL: the recorder's padding is NULs), whether
 * it has such a record at all (`ended`: else the tail may begin in an earlier block), and its last
 * record when that is a literal line (`line`, `n` bytes without the line end; NULL: another
 * record). 0, or 1 when the block is malformed (the decoder will say how). */
struct block_end {
    uint64_t tail, n;
    int written, ended;
    const unsigned char *line;
};

static int block_end(const unsigned char *pl, size_t plen, struct block_end *e)
{
    struct in ops, lits;
    uint64_t a, records;
    if (block_streams(pl, plen, &ops, &lits, &records))
        return 1;
    *e = (struct block_end){0, 0, 0, 0, NULL};
    for (const unsigned char *o = ops.p; o < ops.end; o++) {
        int kind = *o & 0x0f;
        if (kind != LIT && kind != RAW) {
            *e = (struct block_end){0, 0, 0, 1, NULL};
            continue;
        }
        if (get(&lits, &a) || a > (uint64_t)(lits.end - lits.p))
            return 1;
        if (kind == LIT) {
            *e = (struct block_end){0, a, 0, 1, lits.p};
        } else {
            e->tail += a;
            for (uint64_t i = 0; i < a && !e->written; i++)
                e->written = lits.p[i] != 0;
        }
        lits.p += a;
    }
    return 0;
}

/* The trailing literal bytes of the block whose payload is `pl`: their length into *tail and
 * whether one is not NUL into *written; 0, or 1 when the block is all literals without a line end
 * (the tail may begin in an earlier block) or malformed (the decoder will say how). */
static int block_tail(const unsigned char *pl, size_t plen, uint64_t *tail, int *written)
{
    struct block_end e;
    if (block_end(pl, plen, &e) || !e.ended)
        return 1;
    *tail = e.tail;
    *written = e.written;
    return 0;
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
    struct in ops, lits;
    uint64_t records, n;
    if (block_payload(d, head) || block_streams(d->payload.p, d->payload.n, &ops, &lits, &records)
        || records == 0 || ops.p == ops.end || *ops.p != LIT)
        return 1;
    if (get(&lits, &n) || n > (uint64_t)(lits.end - lits.p) || memchr(lits.p, '\n', n))
        return 1;
    memcpy(first, lits.p, n < cap ? n : cap);
    if (n < cap)
        first[n] = '\n';
    *len = n + 1;
    return 0;
}

/* The blocks' headers of the compact dump open as `d` from `fd`: out[0] and out[1] as mdz_info
 * says, the last block's header into `last_head` and its offset into *last_at (-1: none). 0; 1
 * when it takes decoding the whole dump to say; -1 when the file cannot be read (err). */
static int walk_blocks(struct mdz_dec *d, int fd, char *first, size_t cap, uint64_t out[4],
                       unsigned char last_head[16], off_t *last_at, char *err, size_t elen)
{
    uint64_t text = 0;
    off_t pos = 10;
    *last_at = -1;
    memset(out, 0, 4 * sizeof *out);
    for (;;) {
        unsigned char head[16];
        ssize_t got = pread(fd, head, 16, pos);
        if (got < 0)
            return fail(err, elen, "cannot read the file (%s)", strerror(errno));
        if (got < 16)
            return 1;
        uint32_t tlen = get32(head), clen = get32(head + 12) & ~XZ_BLOCK;
        if (tlen == 0)
            break;
        if (pos == 10 && (first_line(d, head, first, cap, &out[0]) || out[0] > tlen))
            return 1; /* the first block's first record is not the version line */
        text += tlen;
        *last_at = pos;
        memcpy(last_head, head, 16);
        pos += 16 + (off_t)clen;
        d->src.pos = (size_t)pos;
    }
    out[1] = text;
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
    unsigned char last_head[16];
    off_t last_at;
    int rc = walk_blocks(d, fd, first, cap, out, last_head, &last_at, err, elen);
    if (rc != 0 || last_at < 0)
        goto done;
    rc = 1;
    d->src.pos = (size_t)last_at;
    if (block_payload(d, last_head))
        goto done;
    uint64_t tail;
    int written;
    if (block_tail(d->payload.p, d->payload.n, &tail, &written) || tail > out[1])
        goto done;
    out[2] = out[1] - tail;
    out[3] = (uint64_t)written;
    rc = 0;
done:
    dec_free(d);
    return rc;
}

/* ---- the dump's last record, before it is read (dumptail.py) ----------------------------- */

/* The last record of the block whose payload is `pl` when it is a literal line with nothing but
 * NUL bytes after it: its text at *line, its length (without the line end) in *n; 0, or 1 when
 * the block ends otherwise or is malformed */
static int block_last_line(const unsigned char *pl, size_t plen, const unsigned char **line,
                           uint64_t *n)
{
    struct block_end e;
    if (block_end(pl, plen, &e) || e.line == NULL || e.written)
        return 1;
    *line = e.line;
    *n = e.n;
    return 0;
}

/* The last record of the compact dump open as `fd` when it is a whole line with nothing but NUL
 * bytes after it (up to `cap` bytes into `line`, its length without the line end into *len);
 * 0, or 1 when it is not, or it takes decoding the whole dump to say (err: the fault, if any).
 * Reads the blocks' headers, and decodes the first block and the last one. */
EXPORT int mdz_last_line(int fd, char *line, size_t cap, uint64_t *len, char *err, size_t elen)
{
    struct mdz_dec *d = dec_open((struct src){fd, NULL, 0, 0}, 0, err, elen);
    if (!d)
        return 1;
    char first[64];
    uint64_t out[4];
    unsigned char last_head[16];
    off_t last_at;
    const unsigned char *p;
    int rc = walk_blocks(d, fd, first, sizeof first, out, last_head, &last_at, err, elen) != 0
             || last_at < 0;
    if (rc == 0) {
        d->src.pos = (size_t)last_at;
        rc = block_payload(d, last_head) || block_last_line(d->payload.p, d->payload.n, &p, len);
    }
    if (rc == 0)
        memcpy(line, p, *len < cap ? *len : cap);
    dec_free(d);
    return rc;
}
