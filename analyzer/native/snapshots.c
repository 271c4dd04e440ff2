/* @brief libmemdump_core: massif's snapshots taken by the leak report's replay (heap.c), so that
 * `--format massif` reads the dump once. The SEQs are known before the replay from the dump's
 * last SEQ (memdump_analyzer/dumptail.py); each snapshot is the moment the views' pass would take
 * there (moments.c, passapi.py's `Moment`): after the event, before the next line, the live
 * bytes, the bytes allocated so far and, when asked, the live bytes by stack node, the nodes in
 * the order of their first live block by allocation. The peak's is made at the end from the
 * blocks live then and the changes logged since the peak (heap.c's peak log, with each released
 * block's order).
 *
 * The replay keeps a block's place in the order when a new block is returned at its address
 * while it is live (Python's dict keeps the key's), where the views' pass orders it as new: after
 * such a block the snapshots are not told (mdc_snap_end says 0) and the caller reads the dump
 * again with the views' pass, as it does without this file. Memory: the snapshots' rows (24
 * bytes a stack live then) and, while one is taken, 56 bytes a live block. */
#include <stdlib.h>

#include "core.h"
#include "moments.h"

struct snaps {
    int64_t *seqs, *kinds; /* the SEQs asked for, ascending, and each one's kind (MOM_) */
    uint64_t n, next;
    int peak;              /* the peak's too, by node (mdc_snap_end) */
    int reused;            /* a block was returned again while live */
    struct mom_taken *taken;
    uint64_t n_taken, cap_taken;
    int64_t *data; /* each taken moment's rows (node, blocks, bytes) */
    uint64_t n_data, cap_data;
    int32_t *row_of; /* node id -> its row in the snapshot being taken (-1: none) */
    uint64_t cap_row_of;
};

/* a live block as a snapshot counts it */
struct seen {
    uint64_t order, size;
    int64_t node;
};

/* a node's row while a snapshot is taken: its first live block's order, blocks and bytes */
struct row {
    uint64_t first;
    int64_t node, blocks, bytes;
};

static int by_first(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

static int64_t abs_node(int64_t nid)
{
    return nid < 0 ? -nid : nid;
}

/* snapshot `t`, with MOM_BY_NODE the live bytes by node of the `k` blocks of `all`: each node's
 * row found by its id (`row_of`, as many as the node table's ids, all -1 again after) and the rows
 * sorted by their first block */
static int take(struct mdc *c, struct snaps *s, struct mom_taken t, const struct seen *all,
                uint64_t k)
{
    if (!grow_array((void **)&s->taken, &s->cap_taken, s->n_taken + 1, sizeof *s->taken))
        return 0;
    t.first = (int64_t)s->n_data;
    t.n = 0;
    if (t.kind == MOM_BY_NODE && k != 0) {
        uint64_t cap = c->nodes.cap + 1, had = s->cap_row_of;
        if (!grow_array((void **)&s->row_of, &s->cap_row_of, cap, sizeof *s->row_of))
            return 0;
        memset(s->row_of + had, 0xff, (s->cap_row_of - had) * sizeof *s->row_of); /* -1 */
        struct row *rows = malloc(k * sizeof *rows);
        if (rows == NULL)
            return 0;
        uint64_t n = 0;
        int ok = 1;
        for (uint64_t i = 0; ok && i < k; i++) {
            const struct seen *b = &all[i];
            if ((uint64_t)b->node >= cap) { /* not a node of the table: not told */
                ok = 0;
                break;
            }
            int32_t r = s->row_of[b->node];
            if (r < 0) {
                r = s->row_of[b->node] = (int32_t)n;
                rows[n++] = (struct row){b->order, b->node, 0, 0};
            }
            if (b->order < rows[r].first)
                rows[r].first = b->order;
            rows[r].blocks++;
            rows[r].bytes += (int64_t)b->size;
        }
        for (uint64_t i = 0; i < n; i++)
            s->row_of[rows[i].node] = -1;
        if (n > 1)
            qsort(rows, n, sizeof *rows, by_first);
        ok = ok && grow_array((void **)&s->data, &s->cap_data, s->n_data + 3 * n, sizeof *s->data);
        for (uint64_t i = 0; ok && i < n; i++) {
            s->data[s->n_data++] = rows[i].node;
            s->data[s->n_data++] = rows[i].blocks;
            s->data[s->n_data++] = rows[i].bytes;
        }
        free(rows);
        if (!ok)
            return 0;
        t.n = (int64_t)n;
    }
    s->taken[s->n_taken++] = t;
    return 1;
}

/* the live blocks into a new array (*all, *k); 0 when out of memory */
static int live_blocks(const struct mdc *c, struct seen **all, uint64_t *k, uint64_t extra)
{
    *k = 0;
    *all = malloc((c->live_n + extra + 1) * sizeof **all);
    if (*all == NULL)
        return 0;
    for (uint64_t i = 0; i < c->live.cap && *k < c->live_n; i++) {
        const struct block *b = &c->live.slots[i];
        if (b->addr != 0 && b->live)
            (*all)[(*k)++] = (struct seen){b->order, b->size, abs_node(b->node)};
    }
    return 1;
}

int snaps_due(struct mdc *c)
{
    struct snaps *s = c->snaps;
    while (s->next < s->n && s->seqs[s->next] <= c->io.seq) {
        struct mom_taken t = {(int64_t)s->next, c->io.seq, c->k.live_bytes,
                              c->k.allocated_bytes, 0, s->kinds[s->next], 0, 0};
        struct seen *all = NULL;
        uint64_t k = 0;
        int ok = (t.kind != MOM_BY_NODE || live_blocks(c, &all, &k, 0)) && take(c, s, t, all, k);
        free(all);
        if (!ok)
            return 0;
        s->next++;
    }
    c->snap_next = s->next < s->n ? s->seqs[s->next] : INT64_MAX;
    return 1;
}

void snaps_reused(struct mdc *c)
{
    if (c->snaps != NULL)
        c->snaps->reused = 1;
}

void snaps_free(struct mdc *c)
{
    struct snaps *s = c->snaps;
    if (s == NULL)
        return;
    free(s->seqs);
    free(s->kinds);
    free(s->taken);
    free(s->data);
    free(s->row_of);
    free(s);
    c->snaps = NULL;
    c->snap_next = INT64_MAX;
}

/* the peak's snapshot, by node: the blocks of the end made live by the peak's event, and those
 * released since (the log's, made live by then); 0 when out of memory */
static int take_peak(struct mdc *c, struct snaps *s)
{
    struct seen *all;
    uint64_t k;
    if (!live_blocks(c, &all, &k, c->n_peak_log))
        return 0;
    uint64_t n = 0;
    for (uint64_t i = 0; i < k; i++)
        if (all[i].order < c->peak_order)
            all[n++] = all[i];
    for (uint64_t i = 0; i < c->n_peak_log; i++) {
        const int64_t *note = &c->peak_log[PEAK_NOTE * i];
        if ((note[0] & 1) && (uint64_t)note[2] < c->peak_order)
            all[n++] = (struct seen){(uint64_t)note[2], (uint64_t)note[1], note[0] >> 1};
    }
    struct mom_taken t = {(int64_t)s->n, c->k.peak_seq, c->k.peak_bytes, c->peak_allocated, 0,
                          MOM_BY_NODE, 0, 0};
    int ok = take(c, s, t, all, n);
    free(all);
    return ok;
}

/* ---- the API native.py calls ----------------------------------------------------------- */

/* the replay (mdc_keep_allocations first) takes the `n` snapshots of `seqs` (ascending), each of
 * its kind (MOM_TOTALS or MOM_BY_NODE), and with `peak` the peak's by node at the end; 0 when out
 * of memory */
EXPORT int mdc_snapshots(struct mdc *c, const int64_t *seqs, const int64_t *kinds, uint64_t n,
                         int peak)
{
    struct snaps *s = calloc(1, sizeof *s);
    if (s == NULL)
        return 0;
    c->snaps = s;
    s->seqs = malloc((n ? n : 1) * sizeof *s->seqs);
    s->kinds = malloc((n ? n : 1) * sizeof *s->kinds);
    if (s->seqs == NULL || s->kinds == NULL) {
        snaps_free(c);
        return 0;
    }
    memcpy(s->seqs, seqs, n * sizeof *seqs);
    memcpy(s->kinds, kinds, n * sizeof *kinds);
    s->n = n;
    s->peak = peak;
    c->snap_next = n ? seqs[0] : INT64_MAX;
    return 1;
}

/* the snapshots due after the records Python read (their SEQs in io.seq); 0 when out of memory */
EXPORT int mdc_snap_due(struct mdc *c)
{
    return c->snaps == NULL || snaps_due(c);
}

/* the dump is read (its last SEQ in io.seq): the snapshots due, and the peak's (its index n);
 * 1, or 0 when they cannot be told (out of memory; a block returned again while live; the peak's
 * blocks when more changes followed it than the log keeps) */
EXPORT int mdc_snap_end(struct mdc *c)
{
    struct snaps *s = c->snaps;
    if (s == NULL || s->reused || !snaps_due(c))
        return 0;
    if (!s->peak || c->k.peak_seq == 0)
        return 1;
    return !c->peak_log_over && take_peak(c, s);
}

/* the snapshots taken: *taken, and the data their rows index; how many (valid until mdc_finish) */
EXPORT uint64_t mdc_snap_taken(const struct mdc *c, const struct mom_taken **taken,
                               const int64_t **data)
{
    const struct snaps *s = c->snaps;
    *taken = s != NULL ? s->taken : NULL;
    *data = s != NULL ? s->data : NULL;
    return s != NULL ? s->n_taken : 0;
}
