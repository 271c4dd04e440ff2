/* @brief libmemdump_core: `--format heaptrack`'s events (heaptrackfile.py's `_Events.run`, the
 * reference and the fallback, whose bytes this keeps): in place of the replay, each heap event
 * read by the library's decoding becomes heaptrack's `a`, `+` and `-` lines, written to a file
 * (heaptrackfile.py's temporary file of the events). Its own tables: the live blocks (address ->
 * allocation info, in the order Python's dict has them; in the replay's table of blocks, which the
 * replay does not use then), the allocation infos by (size, trace),
 * each stack node's trace index and the traces (frame, parent trace) in the order they were made;
 * the lines the library leaves to Python (`c`, `p exec`, `end`) are Python's, which writes the
 * clock's lines through `mdc_ht_put`, between the events. Memory: the live blocks, the infos, the
 * traces, and a buffer of 1 MiB. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "core.h"
#include "figures.h"

#define OUT_BUFFER (1u << 20)

struct htx {
    int fd;
    int error;       /* errno of a write that failed, 0: none */
    char *out;       /* the lines not written yet */
    uint64_t n_out;
    uint64_t offset; /* where the next write goes in the file */
    uint64_t order;  /* of the live blocks: the replay's table (struct mdc's `live`, which the
                        loop prefetches), each block's info in its `size` */
    struct counter infos; /* (size, trace) -> its entry, whose index is the info */
    uint32_t *last_info;  /* trace index -> its latest info + 1 (0: none), tried first: a stack
                             allocates the same size again more often than not */
    uint64_t cap_last;
    int32_t *info_node;   /* each info's stack node */
    uint64_t n_info, cap_info;
    uint32_t *trace_of; /* stack node id -> its trace index (0: none yet) */
    uint64_t cap_trace_of;
    int64_t *traces; /* (frame, parent, stack node) of each trace, from index 1 */
    uint64_t n_traces, cap_traces;
    uint32_t *chain; /* trace(): the nodes without a trace yet */
    uint64_t cap_chain;
};

static int flush(struct htx *h)
{
    uint64_t at = 0;
    while (at < h->n_out && h->error == 0) {
        ssize_t n = pwrite(h->fd, h->out + at, h->n_out - at, (off_t)(h->offset + at));
        if (n < 0 && errno != EINTR)
            h->error = errno;
        else if (n > 0)
            at += (uint64_t)n;
    }
    h->offset += at;
    h->n_out = 0;
    return h->error == 0;
}

/* `TAG HEX\n` or `TAG HEX HEX\n` (n 1 or 2 numbers) */
static inline int line(struct htx *h, char tag, uint64_t a, uint64_t b, int n)
{
    if (h->n_out + 64 > OUT_BUFFER && !flush(h))
        return 0;
    char *p = h->out + h->n_out;
    *p++ = tag;
    uint64_t v[2] = {a, b};
    for (int i = 0; i < n; i++) {
        *p++ = ' ';
        int digits = 1;
        while (digits < 16 && v[i] >> (4 * digits))
            digits++;
        for (int d = digits - 1; d >= 0; d--)
            *p++ = "0123456789abcdef"[(v[i] >> (4 * d)) & 15];
    }
    *p++ = '\n';
    h->n_out = (uint64_t)(p - h->out);
    return 1;
}

/* node `id`'s trace index, its ancestors' made first (heaptrackfile.py's `_Events.trace`); -1
 * when out of memory */
static int64_t trace(struct mdc *c, struct htx *h, uint64_t id)
{
    if (id == 0)
        return 0;
    if (id < h->cap_trace_of && h->trace_of[id] != 0)
        return h->trace_of[id];
    uint64_t n = 0;
    while (id != 0 && (id >= h->cap_trace_of || h->trace_of[id] == 0)) {
        if (!grow_array((void **)&h->chain, &h->cap_chain, n + 1, sizeof *h->chain))
            return -1;
        h->chain[n++] = (uint32_t)id;
        id = (uint64_t)c->nodes.a[id];
    }
    int64_t parent = id != 0 ? h->trace_of[id] : 0;
    uint64_t top = h->chain[0]; /* the largest id is not known: each checked */
    for (uint64_t i = 0; i < n; i++)
        top = h->chain[i] > top ? h->chain[i] : top;
    uint64_t old = h->cap_trace_of;
    if (!grow_array((void **)&h->trace_of, &h->cap_trace_of, top + 1, sizeof *h->trace_of)
        || !grow_array((void **)&h->traces, &h->cap_traces, h->n_traces + n + 2,
                       3 * sizeof *h->traces))
        return -1;
    if (h->cap_traces != h->cap_last) { /* one per trace, and trace 0 */
        uint32_t *last = realloc(h->last_info, h->cap_traces * sizeof *last);
        if (last == NULL)
            return -1;
        memset(last + h->cap_last, 0, (h->cap_traces - h->cap_last) * sizeof *last);
        h->last_info = last;
        h->cap_last = h->cap_traces;
    }
    if (h->cap_trace_of != old)
        memset(h->trace_of + old, 0, (h->cap_trace_of - old) * sizeof *h->trace_of);
    for (uint64_t i = n; i-- > 0;) {
        uint64_t ident = h->chain[i];
        h->n_traces++;
        int64_t *row = &h->traces[3 * h->n_traces];
        row[0] = c->nodes.b[ident];
        row[1] = parent;
        row[2] = (int64_t)ident;
        parent = (int64_t)h->n_traces;
        h->trace_of[ident] = (uint32_t)parent;
    }
    return parent;
}

/* the live block at `ptr` released: its `-` line */
static inline int release(struct mdc *c, uint64_t ptr)
{
    struct block *b = ptr != 0 ? btab_get(&c->live, ptr) : NULL;
    if (b == NULL)
        return 1;
    uint64_t info = b->size;
    btab_del(&c->live, b);
    return line(c->ht, '-', info, 0, 1);
}

/* the info of `size` bytes at trace `t` (made, with its `a` line, when new); -1 when out of
 * memory */
static inline int64_t info_of(struct htx *h, uint64_t size, int64_t t, int64_t nid)
{
    uint32_t hint = (uint64_t)t < h->cap_last ? h->last_info[t] : 0;
    if (hint != 0 && (uint64_t)h->infos.e[hint - 1].a == size)
        return hint - 1;
    uint64_t before = h->infos.n;
    int64_t *entry = counter_at(&h->infos, (int64_t)size, t);
    if (entry == NULL)
        return -1;
    int64_t info = ((char *)entry - (char *)h->infos.e) / (int64_t)sizeof *h->infos.e;
    if (h->infos.n != before) {
        if (!grow_array((void **)&h->info_node, &h->cap_info, h->n_info + 1, sizeof *h->info_node)
            || !line(h, 'a', size, (uint64_t)t, 2))
            return -1;
        h->info_node[h->n_info++] = (int32_t)(nid < 0 ? -nid : nid);
    }
    if ((uint64_t)t < h->cap_last)
        h->last_info[t] = (uint32_t)info + 1;
    return info;
}

int ht_event(struct mdc *c, const struct event *ev)
{
    struct htx *h = c->ht;
    uint64_t made = ev->result, size;
    switch (ev->op) { /* dumpformat.effect */
    case OP_FREE: case OP_DELETE: case OP_DELETE_ARRAY:
        return release(c, ev->args[0]) ? RC_OK : RC_FALLBACK;
    case OP_CUSTOM_ALLOC: case OP_CUSTOM_FREE:
        return RC_OK; /* heaptrack has no custom blocks */
    case OP_POSIX_MEMALIGN:
        made = ev->args[2] == 0 ? made : 0;
        break;
    case OP_REALLOC: case OP_REALLOCARRAY:
        if (!event_size(ev, &size))
            return RC_FALLBACK;
        if (ev->args[0] != 0 && size != 0 && made == 0)
            return RC_OK; /* failed: PTR stays live */
        if (!release(c, ev->args[0]))
            return RC_FALLBACK;
        break;
    default:
        break;
    }
    if (!event_size(ev, &size))
        return RC_FALLBACK; /* calloc's product over 64 bits: Python's integers */
    if (made == 0)
        return RC_OK;
    int64_t t = trace(c, h, (uint64_t)(ev->nid < 0 ? -ev->nid : ev->nid));
    if (t < 0)
        return RC_FALLBACK;
    int64_t info = info_of(h, size, t, ev->nid);
    if (info < 0)
        return RC_FALLBACK;
    int fresh;
    struct block *b = btab_put(&c->live, made, &fresh);
    if (b == NULL)
        return RC_FALLBACK;
    if (fresh) {
        b->order = h->order++;
        b->live = 1;
    }
    b->size = (uint64_t)info;
    return line(h, '+', (uint64_t)info, 0, 1) ? RC_OK : RC_FALLBACK;
}

static void forget(struct htx *h)
{
    counter_free(&h->infos);
    free(h->last_info);
    h->last_info = NULL;
    h->cap_last = 0;
    free(h->info_node);
    free(h->trace_of);
    free(h->traces);
    free(h->chain);
    h->info_node = NULL;
    h->trace_of = NULL;
    h->traces = NULL;
    h->chain = NULL;
    h->n_info = h->cap_info = h->cap_trace_of = h->n_traces = h->cap_traces = h->cap_chain = 0;
    h->order = 0;
}

void ht_free(struct mdc *c)
{
    if (c->ht == NULL)
        return;
    forget(c->ht);
    free(c->ht->out);
    free(c->ht);
    c->ht = NULL;
}

/* the run writes heaptrack's events to `fd` from its start (what it held is cut), in place of
 * the replay, before its first line; 0 when out of memory or the file cannot be cut */
EXPORT int mdc_ht_start(struct mdc *c, int fd)
{
    struct htx *h = calloc(1, sizeof *h);
    if (h == NULL || (h->out = malloc(OUT_BUFFER)) == NULL || ftruncate(fd, 0) != 0) {
        if (h != NULL)
            free(h->out);
        free(h);
        return 0;
    }
    h->fd = fd;
    c->ht = h;
    return 1;
}

/* Python's line (`c`, `R`) between the events; 0 when it cannot be written */
EXPORT int mdc_ht_put(struct mdc *c, const char *text, uint64_t n)
{
    struct htx *h = c->ht;
    if (h->n_out + n > OUT_BUFFER && !flush(h))
        return 0;
    if (n > OUT_BUFFER) {
        ssize_t w = pwrite(h->fd, text, n, (off_t)h->offset);
        if (w != (ssize_t)n) {
            h->error = w < 0 ? errno : ENOSPC;
            return 0;
        }
        h->offset += n;
        return 1;
    }
    memcpy(h->out + h->n_out, text, n);
    h->n_out += n;
    return 1;
}

/* `p exec`: the file holds the last image, as heaptrack records one program: the events so far
 * and the tables forgotten; 0 when the file cannot be cut */
EXPORT int mdc_ht_exec(struct mdc *c)
{
    struct htx *h = c->ht;
    forget(h);
    btab_clear(&c->live);
    h->n_out = h->offset = 0;
    return ftruncate(h->fd, 0) == 0;
}

/* the events are over: the lines written (else errno); out[] the tables, valid until
 * mdc_finish: the traces' (frame, parent, stack node) rows (out[0], from index 1), out[1]
 * traces; the infos' stack nodes (out[2]), out[3] infos; out[4] live blocks (mdc_ht_live) */
EXPORT int mdc_ht_end(struct mdc *c, uint64_t *out)
{
    struct htx *h = c->ht;
    if (!flush(h))
        return h->error;
    out[0] = (uint64_t)(uintptr_t)h->traces;
    out[1] = h->n_traces;
    out[2] = (uint64_t)(uintptr_t)h->info_node;
    out[3] = h->n_info;
    out[4] = c->live.n;
    return 0;
}

static int by_order(const void *a, const void *b)
{
    const struct block *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* the live blocks' infos in the order they were made live (Python's dict's): n of them into
 * `out`; 0 when out of memory or not n */
EXPORT int mdc_ht_live(struct mdc *c, uint64_t *out, uint64_t n)
{
    const struct btab *t = &c->live;
    if (n != t->n)
        return 0;
    struct block *all = malloc((n ? n : 1) * sizeof *all);
    if (all == NULL)
        return 0;
    uint64_t k = 0;
    for (uint64_t i = 0; i < t->cap; i++)
        if (t->slots[i].addr != 0)
            all[k++] = t->slots[i];
    qsort(all, k, sizeof *all, by_order);
    for (uint64_t i = 0; i < k; i++)
        out[i] = all[i].size;
    free(all);
    return 1;
}
