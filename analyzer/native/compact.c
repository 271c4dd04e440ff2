/* @brief The compact encoding of a dump (docs/dump-format.md, "Compact encoding"), its encoder:
 * memdump_analyzer/compact.py is the readable reference, byte for byte; this is the same model
 * (compactmodel.h) at C speed. The decoder is compactdec.c. */
#include "compactmodel.h"

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
                return put(&s[OPS], &op, 1) || allocated(m, stack, 0, size, 0, size, 0);
            }
        }
        if (addr && addr == m->top) {
            code = 0;
        } else if (addr && chunk(total) <= MAX_CLASS && m->lifo[chunk(total) / 16].n) {
            struct lifo *l = &m->lifo[chunk(total) / 16];
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
        return allocated(m, stack, addr, size, code >= 1 && code <= LIFO, total, 0);
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
