/* @brief libmemdump_core.so: the replay of a dump's heap events (memdump_core.h; the semantics
 * are memdump_analyzer/replay.py's, which is the reference: docs/dump-format.md, "Heap
 * operations"). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compactfeed.h"
#include "core.h"
#include "figures.h"

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
        case 'e': return L_EVENT;
        case 't': return L_THREAD;
        case 'n': return L_NODE;
        }
    }
    /* the short records: `+`, `-` (2.0), the C++ operators' (2.1), the others of 2.5 */
    return short_op(p, t[0].n) >= 0 ? L_EVENT : L_PYTHON;
}

/* the bytes since the last report, for the progress bar (a compact dump's: none, io.pos says
 * how far the decoder read) */
static void report(struct mdc *c)
{
    c->io.chunk = (uint64_t)(uintptr_t)(c->buf + (c->reported - c->buf_off));
    c->io.chunk_len = c->feed ? 0 : c->pos - c->reported;
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
        } else if (!push_pair(&c->runs, &c->n_runs, &c->cap_runs, start, stop)) {
            return 0;
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

/* a compact dump's buffer from `pos` on, with its next block's direct output; at the end, `end`
 * set after the last line end; 0 on an error or what the direct output cannot hold (the text
 * path then says it, or replays it) */
static int refill_compact(struct mdc *c)
{
    uint64_t keep = c->buf_off + c->buf_len - c->pos, tail;
    memmove(c->buf, c->buf + (c->pos - c->buf_off), keep);
    c->buf_off = c->pos;
    c->buf_len = keep;
    int r = feed_take(c->feed, &c->buf, &c->buf_len, &c->buf_cap, SLACK, &c->read, &tail);
    if (r == 0 && c->end == UINT64_MAX) {
        c->end = c->buf_off + c->buf_len - tail;
        return 1;
    }
    if (r != 1)
        return 0;
    memset(c->buf + c->buf_len, 0, SLACK);
    if (c->pos == 0) { /* the first line is dumpio's, read before */
        const char *nl = memchr(c->buf, '\n', c->buf_len);
        if (nl == NULL || c->buf[0] == MDZ_EVENT)
            return 0;
        c->pos = c->reported = (uint64_t)(nl + 1 - c->buf);
    }
    return 1;
}

/* the packed events from `pos` on, replayed up to the first line that is not one (RC_OK), or to
 * the event that stops the run (RC_ASK, RC_FALLBACK), `pos` at it: a loop of their own (core.h's
 * packed_loop), as they are most of a compact dump's lines, without the other lines' tests at
 * each; the views' pass's loop is figures.c's, its step inline in it */
static int packed_events(struct mdc *c)
{
    const unsigned char *buf = (const unsigned char *)c->buf;
    struct packed_run run;
    run.p = buf + (c->pos - c->buf_off);
    run.limit = buf + c->buf_len;
    run.stop = c->end - c->buf_off < c->buf_len ? buf + (c->end - c->buf_off) : run.limit;
    run.ahead = c->ahead > c->pos ? buf + (c->ahead - c->buf_off) : run.p;
    int r = c->fig != NULL && !c->both ? fig_packed(c, &run) : packed_loop(c, &run, replay_event);
    c->pos = c->buf_off + (uint64_t)(run.p - buf);
    c->ahead = c->buf_off + (uint64_t)(run.ahead - buf);
    return r;
}

/* the buffer from `pos` on, with more of the file; 0 when the file cannot be read */
static int refill(struct mdc *c)
{
    if (c->feed != NULL)
        return refill_compact(c);
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
    if (c->fig != NULL)
        fig_run(c);
    while (c->pos < c->end) {
        char *line = c->buf + (c->pos - c->buf_off);
        const char *next;
        struct event ev;
        while (c->run_i < c->n_runs && c->runs[2 * c->run_i] < c->pos)
            c->run_i++;
        int64_t tid;
        if (*line == 't' && c->io.n_lines == 0 && quick_thread(line, &tid, &next)
            && !has_nul(c, (uint64_t)(next - line))) {
            if (c->fig != NULL && !fig_line(c)) {
                c->io.fallback_pos = c->pos;
                return MDC_FALLBACK;
            }
            c->tid = tid;
            c->io.other++;
            c->pos += (uint64_t)(next - line);
            continue;
        }
        int step = -1; /* the step of the events read on a quick path, -1: none */
        if (*line == MDZ_EVENT && c->feed != NULL) { /* packed events: Python's lines first */
            if (c->io.n_lines != 0) {
                status = MDC_LINES;
                break;
            }
            step = packed_events(c);
        } else if ((*line == '+' || *line == '-') && c->io.n_lines == 0
                   && quick_short(c, line, &ev, &next) && !has_nul(c, (uint64_t)(next - line))) {
            step = do_event(c, &ev);
            if (step == RC_OK)
                c->pos += (uint64_t)(next - line);
        }
        if (step == RC_OK)
            continue;
        if (step == RC_ASK) {
            status = MDC_ASK;
            break;
        }
        if (step == RC_FALLBACK) {
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
        int r = c->fig != NULL && kind != L_EVENT && !fig_line(c) ? RC_FALLBACK : RC_OK;
        if (r != RC_OK)
            ;
        else if (kind == L_COMMENT)
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
    c->io.pos = c->feed ? c->read : c->pos;
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
    c->snap_next = INT64_MAX;
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

EXPORT void mdc_close(struct mdc *c);

/* the compact dump open as `fd` is read through its decoder (compact.h), from its start; its
 * first line is skipped, as dumpio.DumpFile read it */
EXPORT struct mdc *mdc_open_compact(int fd, uint64_t max_errors)
{
    struct mdc *c = mdc_open(fd, 0, UINT64_MAX, max_errors);
    if (c != NULL && (c->feed = feed_open(fd)) == NULL) {
        mdc_close(c);
        return NULL;
    }
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
    if (c->both)
        swap_tables(c);
    peak_note_exec(c);
    btab_clear(&c->live);
    btab_clear(&c->custom);
    c->live_n = c->custom_n = 0;
    c->k.live_bytes = 0;
    if (c->both)
        swap_tables(c);
}

/* the replay runs beside the views' pass (mdc_figures first): each event applied to both, each
 * to its own blocks */
EXPORT void mdc_fig_with_replay(struct mdc *c)
{
    c->both = 1;
}

/* the views' pass's results are read: its blocks freed, the replay's back in place for its own
 * results (mdc_counts, mdc_blocks...) */
EXPORT void mdc_fig_done(struct mdc *c)
{
    if (!c->both)
        return;
    swap_tables(c);
    btab_free(&c->replay_live);
    c->replay_live_n = 0;
    c->both = 0;
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
    btab_free(&c->replay_live);
    fig_free(c);
    ht_free(c);
    idtab_free(&c->frames);
    free(c->used);
    free(c->buf);
    free(c->lines);
    free(c->errors);
    free(c->runs);
    free(c->alloc_of); /* read by then (mdc_alloc_rows, mdc_peak_rows) */
    free(c->alloc_rows);
    free(c->peak_log);
    snaps_free(c);
    c->alloc_of = NULL;
    c->alloc_rows = NULL;
    c->peak_log = NULL;
    c->cap_alloc_of = c->n_alloc_rows = c->cap_alloc_rows = c->n_peak_log = c->cap_peak_log = 0;
    feed_close(c->feed);
    c->feed = NULL;
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

/* the replay counts the allocations by stack node and logs the changes after the peak, `limit`
 * of them at most (for mdc_alloc_rows and mdc_peak_rows), before its first line */
EXPORT void mdc_keep_allocations(struct mdc *c, uint64_t limit)
{
    c->keep_allocs = 1;
    c->peak_log_limit = limit;
}

/* the replay's allocations by stack node: *out their rows (node, blocks, bytes), in the order
 * of each node's first allocation; how many (valid until mdc_finish) */
EXPORT uint64_t mdc_alloc_rows(const struct mdc *c, const int64_t **out)
{
    *out = c->alloc_rows;
    return c->n_alloc_rows;
}

/* the blocks live at the peak, by allocating node: for each row of mdc_alloc_rows, its blocks
 * and bytes into blocks[] and bytes[] (the live blocks at the end, the changes since the peak
 * undone); 0 when not known (no peak, more changes after it than were kept) */
EXPORT int mdc_peak_rows(const struct mdc *c, int64_t *blocks, int64_t *bytes)
{
    if (!c->keep_allocs || c->k.peak_seq == 0 || c->peak_log_over || c->live.slots == NULL)
        return 0;
    memset(blocks, 0, c->n_alloc_rows * sizeof *blocks);
    memset(bytes, 0, c->n_alloc_rows * sizeof *bytes);
    for (uint64_t i = 0; i < c->live.cap; i++) {
        const struct block *b = &c->live.slots[i];
        if (b->addr == 0 || !b->live)
            continue;
        uint64_t id = (uint64_t)(b->node < 0 ? -(int64_t)b->node : b->node);
        int32_t row = id < c->cap_alloc_of ? c->alloc_of[id] - 1 : -1;
        if (row < 0)
            return 0;
        blocks[row]++;
        bytes[row] += (int64_t)b->size;
    }
    for (uint64_t i = c->n_peak_log; i-- > 0;) {
        const int64_t *note = &c->peak_log[PEAK_NOTE * i];
        uint64_t id = (uint64_t)note[0] >> 1;
        int64_t sign = note[0] & 1 ? 1 : -1; /* undone: a release adds back */
        int32_t row = id < c->cap_alloc_of ? c->alloc_of[id] - 1 : -1;
        if (row < 0)
            return 0;
        blocks[row] += sign;
        bytes[row] += sign * note[1];
    }
    return 1;
}

EXPORT const struct mdc_error *mdc_errors(const struct mdc *c)
{
    return c->errors;
}
