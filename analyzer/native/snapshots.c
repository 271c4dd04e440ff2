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

/* snapshot `t`, with MOM_BY_NODE the live bytes by node of the `k` live blocks of `all` (copies
 * of the replay's, and of those the peak's log gives back) */
static int take(struct mdc *c, struct snaps *s, struct mom_taken t, const struct block *all,
                uint64_t k)
{
    if (!grow_array((void **)&s->taken, &s->cap_taken, s->n_taken + 1, sizeof *s->taken))
        return 0;
    t.first = (int64_t)s->n_data;
    t.n = 0;
    if (t.kind == MOM_BY_NODE) {
        struct key_row *rows;
        uint64_t n;
        if (!rows_by_first(all, k, k, c->nodes.cap + 1, &s->row_of, &s->cap_row_of, &rows, &n))
            return 0;
        int ok = grow_array((void **)&s->data, &s->cap_data, s->n_data + 3 * n, sizeof *s->data);
        for (uint64_t i = 0; ok && i < n; i++) {
            s->data[s->n_data++] = rows[i].key;
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

/* the live blocks into a new array (*all, *k), with room for `extra` more; 0 when out of
 * memory */
static int live_blocks(const struct mdc *c, struct block **all, uint64_t *k, uint64_t extra)
{
    *k = 0;
    *all = malloc((c->live_n + extra + 1) * sizeof **all);
    if (*all == NULL)
        return 0;
    for (uint64_t i = 0; i < c->live.cap && *k < c->live_n; i++) {
        const struct block *b = &c->live.slots[i];
        if (b->addr != 0 && b->live)
            (*all)[(*k)++] = *b;
    }
    return 1;
}

int snaps_due(struct mdc *c)
{
    struct snaps *s = c->snaps;
    while (s->next < s->n && s->seqs[s->next] <= c->io.seq) {
        struct mom_taken t = {(int64_t)s->next, c->io.seq, c->k.live_bytes,
                              c->k.allocated_bytes, 0, s->kinds[s->next], 0, 0};
        struct block *all = NULL;
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
    struct block *all;
    uint64_t k;
    if (!live_blocks(c, &all, &k, c->n_peak_log))
        return 0;
    uint64_t n = 0;
    for (uint64_t i = 0; i < k; i++)
        if (all[i].order < c->peak_order)
            all[n++] = all[i];
    for (uint64_t i = 0; i < c->n_peak_log; i++) {
        const int64_t *note = &c->peak_log[PEAK_NOTE * i];
        if ((note[0] & 1) && (uint64_t)note[2] < c->peak_order) /* (any address but 0) */
            all[n++] = (struct block){1, (uint64_t)note[1], (uint64_t)note[2],
                                      (int32_t)(note[0] >> 1), 0, 1, 0};
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
