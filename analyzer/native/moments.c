/* @brief libmemdump_core: the moments of the views' pass (heappass.py's `Accumulator.moments`):
 * after each SEQ asked for, before the next line, the live heap's totals and, when asked, the live
 * bytes by stack (massif's detailed snapshots, the blocks live at the peak) or the live blocks
 * with their threads' innermost tags (the heap map). The SEQs are known before the pass (the
 * analysis ran first): no call into Python at a moment.
 *
 * A block's tag: with the timeline (series.c), its tag row's string id; without, an index into
 * this file's table of the tags seen (block.tag), from the threads' tags nativepass.py hands
 * over at `g` and `u` records.
 *
 * Memory: per moment its totals, and its rows (by stack: 24 bytes a stack live then; blocks: 32
 * bytes a live block), while taking one 24 bytes a live block. */
#include <stdlib.h>

#include "core.h"
#include "moments.h"

struct moments {
    int64_t *seqs; /* the SEQs asked for, ascending, and each one's kind */
    int64_t *kinds;
    uint64_t n, next;
    int tagged; /* a moment asks for the live blocks: the blocks' tags are kept */
    struct mom_taken *taken;
    uint64_t n_taken, cap_taken;
    int64_t *data;
    uint64_t n_data, cap_data;
    struct counter thread; /* TID -> its innermost tag's index (0: untagged) */
    struct counter index_of; /* tag string id -> its index */
    int64_t *idents;        /* tag index -> its string id (index 0: untagged, -1) */
    uint64_t n_idents, cap_idents;
    int peak;                  /* a moment is at MOM_PEAK */
    struct mom_taken at_peak;  /* the totals after the latest peak's event */
    struct block *gone;        /* the blocks live then and no longer (at most those) */
    uint64_t n_gone, cap_gone;
    int32_t *row_of;           /* stack index -> its row in a moment (rows_by_first's) */
    uint64_t cap_row_of;
};

static int put(struct moments *m, const int64_t *row, int width)
{
    if (!grow_array((void **)&m->data, &m->cap_data, m->n_data + (uint64_t)width, sizeof *m->data))
        return 0;
    memcpy(m->data + m->n_data, row, (size_t)width * sizeof *row);
    m->n_data += (uint64_t)width;
    return 1;
}

/* the string id of live block `b`'s tag (-1: untagged) */
static int64_t tag_of(const struct fig *f, const struct block *b)
{
    const struct series *s = f->series;
    if (s != NULL)
        return s->tagging && b->tag < s->n_rows ? s->rows[b->tag].ident : -1;
    return b->tag < f->mom->n_idents ? f->mom->idents[b->tag] : -1;
}

static int by_addr(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return (uint64_t)x[0] < (uint64_t)y[0] ? -1 : (uint64_t)x[0] > (uint64_t)y[0];
}

/* the live bytes and blocks by stack of the live blocks among `slots` (`n`, at most `live` of
 * them live), the stacks in the order of their first block by SEQ allocated (the order of
 * Python's dict of live blocks) */
static int by_node(struct mdc *c, struct moments *m, const struct block *slots, uint64_t n,
                   uint64_t live)
{
    struct fig *f = c->fig;
    struct key_row *rows;
    uint64_t k;
    if (!rows_by_first(slots, n, live, f->n_st, &m->row_of, &m->cap_row_of, &rows, &k))
        return 0;
    uint64_t start = m->n_data;
    int ok = 1;
    for (uint64_t i = 0; ok && i < k; i++) {
        int64_t row[3] = {f->st[rows[i].key].node, rows[i].blocks, rows[i].bytes};
        ok = put(m, row, 3);
    }
    free(rows);
    m->taken[m->n_taken - 1].n = (int64_t)(m->n_data - start) / 3;
    return ok;
}

/* the live blocks among `slots` (`n`) by address */
static int blocks(struct mdc *c, struct moments *m, const struct block *slots, uint64_t n_slots)
{
    struct fig *f = c->fig;
    uint64_t start = m->n_data;
    for (uint64_t i = 0; i < n_slots; i++) {
        const struct block *b = &slots[i];
        if (b->addr == 0 || !b->live)
            continue;
        int64_t row[4] = {(int64_t)b->addr, (int64_t)b->size, f->st[b->node].node, tag_of(f, b)};
        if (!put(m, row, 4))
            return 0;
    }
    uint64_t n = (m->n_data - start) / 4;
    if (n > 1)
        qsort(m->data + start, n, 4 * sizeof *m->data, by_addr);
    m->taken[m->n_taken - 1].n = (int64_t)n;
    return 1;
}

/* the moment asked for at index `i` with totals `t`, of the live blocks among `slots` (`n`, at
 * most `live` of them live) */
static int take_of(struct mdc *c, struct moments *m, uint64_t i, struct mom_taken t,
                   const struct block *slots, uint64_t n, uint64_t live)
{
    if (!grow_array((void **)&m->taken, &m->cap_taken, m->n_taken + 1, sizeof *m->taken))
        return 0;
    t.index = (int64_t)i;
    t.kind = m->kinds[i];
    t.first = (int64_t)m->n_data;
    t.n = 0;
    m->taken[m->n_taken++] = t;
    switch (m->kinds[i]) {
    case MOM_BY_NODE:
        return by_node(c, m, slots, n, live);
    case MOM_BLOCKS:
        return blocks(c, m, slots, n);
    default:
        return 1;
    }
}

/* the moment asked for at index `i`, taken now (after event `seq`) */
static int take(struct mdc *c, struct moments *m, uint64_t i, int64_t seq)
{
    const struct fig *f = c->fig;
    struct mom_taken t = {0, seq, f->t.cur, f->allocated, f->dropped, 0, 0, 0};
    return take_of(c, m, i, t, c->live.slots, c->live.cap, c->live_n);
}

void moments_peak(struct mdc *c)
{
    struct moments *m = c->fig->mom;
    if (m == NULL || !m->peak)
        return;
    const struct fig *f = c->fig;
    m->at_peak = (struct mom_taken){0, f->t.peak_seq, f->t.cur, f->allocated, f->dropped, 0, 0, 0};
    m->n_gone = 0;
}

int moments_gone(struct mdc *c, const struct block *b)
{
    struct moments *m = c->fig->mom;
    if (m == NULL || !m->peak || c->fig->t.peak == 0 || b->order > (uint64_t)c->fig->t.peak_seq)
        return 1;
    if (!grow_array((void **)&m->gone, &m->cap_gone, m->n_gone + 1, sizeof *m->gone))
        return 0;
    m->gone[m->n_gone] = *b;
    m->gone[m->n_gone++].live = 1;
    return 1;
}

/* the moment asked for at index `i`, at the peak: the blocks of the end allocated by its event
 * and those gone since */
static int take_peak(struct mdc *c, struct moments *m, uint64_t i)
{
    uint64_t n = 0, cap = c->live_n + m->n_gone;
    struct block *all = cap ? malloc(cap * sizeof *all) : NULL;
    if (cap && all == NULL)
        return 0;
    uint64_t peak_seq = (uint64_t)c->fig->t.peak_seq;
    for (uint64_t j = 0; j < c->live.cap && n < c->live_n; j++) {
        const struct block *b = &c->live.slots[j];
        if (b->addr != 0 && b->live && b->order <= peak_seq && c->fig->t.peak != 0)
            all[n++] = *b;
    }
    if (m->n_gone)
        memcpy(all + n, m->gone, m->n_gone * sizeof *all);
    n += m->n_gone;
    int ok = take_of(c, m, i, m->at_peak, all, n, n);
    free(all);
    return ok;
}

int moments_due(struct mdc *c, int64_t seq)
{
    struct moments *m = c->fig->mom;
    while (m != NULL && m->next < m->n && m->seqs[m->next] >= 0 && m->seqs[m->next] <= seq)
        if (!take(c, m, m->next++, seq))
            return 0;
    c->fig->mom_due = m != NULL && m->next < m->n && m->seqs[m->next] >= 0 ? m->seqs[m->next]
                                                                           : INT64_MAX;
    return 1;
}

int moments_end(struct mdc *c, int64_t seq)
{
    struct moments *m = c->fig->mom;
    if (!moments_due(c, seq))
        return 0;
    for (; m != NULL && m->next < m->n; m->next++) { /* past the last event: never taken */
        if (m->seqs[m->next] == MOM_END && !take(c, m, m->next, seq))
            return 0;
        if (m->seqs[m->next] == MOM_PEAK && !take_peak(c, m, m->next))
            return 0;
    }
    return 1;
}

int moments_tag(struct moments *m, int64_t tid, uint16_t *tag)
{
    if (!m->tagged)
        return 1;
    int64_t *at = counter_at(&m->thread, tid, 0);
    if (at == NULL)
        return 0;
    *tag = (uint16_t)*at;
    return 1;
}

void moments_free(struct moments *m)
{
    if (m == NULL)
        return;
    free(m->seqs);
    free(m->kinds);
    free(m->taken);
    free(m->data);
    free(m->idents);
    free(m->gone);
    free(m->row_of);
    counter_free(&m->thread);
    counter_free(&m->index_of);
    free(m);
}

/* ---- the API nativepass.py calls ------------------------------------------------------- */

/* the pass (mdc_figures first) takes the `n` moments of `seqs` (ascending, then MOM_END's and
 * MOM_PEAK's), each of its kind;
 * 0 when out of memory */
EXPORT int mdc_moments(struct mdc *c, const int64_t *seqs, const int64_t *kinds, uint64_t n)
{
    struct moments *m = calloc(1, sizeof *m);
    if (m == NULL)
        return 0;
    c->fig->mom = m;
    m->seqs = malloc((n ? n : 1) * sizeof *m->seqs);
    m->kinds = malloc((n ? n : 1) * sizeof *m->kinds);
    m->idents = malloc(sizeof *m->idents);
    if (m->seqs == NULL || m->kinds == NULL || m->idents == NULL)
        return 0;
    memcpy(m->seqs, seqs, n * sizeof *seqs);
    memcpy(m->kinds, kinds, n * sizeof *kinds);
    m->n = n;
    for (uint64_t i = 0; i < n; i++) {
        m->tagged |= kinds[i] == MOM_BLOCKS;
        m->peak |= seqs[i] == MOM_PEAK;
    }
    m->idents[0] = -1;
    m->n_idents = m->cap_idents = 1;
    return 1;
}

/* thread `tid`'s innermost tag is now string id `ident` (-1: none); 0 when out of memory or
 * past the block's 65,535 tags */
EXPORT int mdc_mom_thread_tag(struct mdc *c, int64_t tid, int64_t ident)
{
    struct moments *m = c->fig->mom;
    int64_t index = 0;
    if (ident >= 0) {
        int64_t *at = counter_at(&m->index_of, ident, 0);
        if (at == NULL)
            return 0;
        if (*at == 0) {
            if (m->n_idents > UINT16_MAX
                || !grow_array((void **)&m->idents, &m->cap_idents, m->n_idents + 1,
                               sizeof *m->idents))
                return 0;
            m->idents[m->n_idents] = ident;
            *at = (int64_t)m->n_idents++;
        }
        index = *at;
    }
    int64_t *tag = counter_at(&m->thread, tid, 0);
    if (tag == NULL)
        return 0;
    *tag = index;
    return 1;
}

/* the moments taken: *taken, and the data their rows index; how many */
EXPORT uint64_t mdc_mom_taken(const struct mdc *c, const struct mom_taken **taken,
                              const int64_t **data)
{
    const struct moments *m = c->fig->mom;
    *taken = m->taken;
    *data = m->data;
    return m->n_taken;
}

/* the bytes allocated so far and those dropped while live (passapi's `Figures.allocated`,
 * `dropped`) into out[0], out[1] */
EXPORT void mdc_fig_allocated(const struct mdc *c, int64_t *out)
{
    out[0] = c->fig->allocated;
    out[1] = c->fig->dropped;
}
