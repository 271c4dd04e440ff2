/* @brief libmemdump_core: the timeline's series in the views' pass (series.py's `Timeline` and
 * `FragSamples`, fed as heappass.py feeds them): the live heap's highest and lowest point in each
 * span of events, with each tag's live bytes at those points, and the fragmentation of the live
 * blocks, sampled. Memory: at most 2 x points spans and samples, a row per tag. */
#include <stdlib.h>

#include "core.h"
#include "figures.h"

#define NO_LOW (1ll << 62) /* passapi.NO_LOW: a span's lowest point before it has one */
#define REGION_GAP (1ll << 20) /* heapmap.REGION_GAP */
#define SPACING 8 /* series.py's: the fewest events between two samples, per live block */
#define FEW 64    /* below this many live blocks, a sample every `width` events */

__extension__ typedef __int128 wide;

struct series *series_new(int64_t limit, int64_t frag_limit)
{
    struct series *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->limit = limit;
    s->width = s->frag_width = 1;
    s->span_end = s->next_sample = 1;
    s->frag_limit = frag_limit;
    s->high.bytes = -1;
    s->low.bytes = NO_LOW;
    return s;
}

void series_free(struct series *s)
{
    if (s == NULL)
        return;
    for (uint64_t i = 0; i < s->n_spans; i++) {
        free(s->spans[i].high.tags);
        free(s->spans[i].low.tags);
    }
    free(s->spans);
    free(s->rows);
    counter_free(&s->row_of);
    counter_free(&s->thread_tag);
    free(s->samples);
    free(s);
}

/* the rows' bytes at the span's highest or lowest point so far are kept before they change */
static inline void snap(const struct series *s, struct tag_row *r)
{
    if (r->changed <= s->high.seq)
        r->at_high = r->live;
    if (r->changed <= s->low.seq)
        r->at_low = r->live;
}

static int64_t new_row(struct series *s, int64_t ident, int64_t seq)
{
    if (s->n_rows == s->cap_rows) {
        uint64_t cap = s->cap_rows ? 2 * s->cap_rows : 16;
        struct tag_row *rows = cap <= UINT16_MAX ? realloc(s->rows, cap * sizeof *rows) : NULL;
        if (rows == NULL)
            return -1;
        s->rows = rows;
        s->cap_rows = cap;
    }
    int64_t *at = counter_at(&s->row_of, ident, 0);
    if (at == NULL)
        return -1;
    *at = (int64_t)s->n_rows;
    s->rows[s->n_rows] = (struct tag_row){0, seq, 0, (int64_t)s->n_rows, 0, ident};
    return (int64_t)s->n_rows++;
}

/* the first `g` record, after event `seq`: the blocks live so far are untagged (row 0) */
EXPORT int mdc_fig_tagging(struct mdc *c, int64_t seq)
{
    struct series *s = c->fig->series;
    if (s == NULL || s->tagging)
        return 1;
    int64_t cur = c->fig->t.cur;
    if (new_row(s, -1, seq) < 0)
        return 0;
    struct tag_row *r = &s->rows[0];
    r->live = cur;
    r->at_high = s->high.bytes >= 0 ? s->high.bytes : cur;
    r->at_low = s->low.bytes == NO_LOW ? cur : s->low.bytes;
    s->tagging = 1;
    return 1;
}

/* thread `tid`'s innermost tag is now string `ident` (-1: none) */
EXPORT int mdc_fig_thread_tag(struct mdc *c, int64_t tid, int64_t ident)
{
    struct series *s = c->fig->series;
    if (s == NULL)
        return 1;
    int64_t *at = counter_at(&s->thread_tag, tid, 0);
    if (at == NULL)
        return 0;
    *at = ident + 2;
    return 1;
}

int64_t series_row(struct series *s, int64_t tid, int64_t seq)
{
    int64_t *tag = counter_at(&s->thread_tag, tid, 0);
    if (tag == NULL)
        return -1;
    int64_t ident = *tag >= 2 ? *tag - 2 : -1;
    int64_t *row = counter_at(&s->row_of, ident, 0);
    if (row == NULL)
        return -1;
    if (*row != 0 || ident == -1)
        return *row;
    return new_row(s, ident, seq); /* the counter made it 0: row 0 is the untagged one's */
}

void series_add(struct series *s, int64_t row, int64_t delta, int64_t seq)
{
    struct tag_row *r = &s->rows[row];
    snap(s, r);
    r->live += delta;
    r->changed = seq;
}

/* the tags' bytes at point `p` (SEQ at), as Timeline.close takes them */
static int point_tags(const struct series *s, struct span_point *p, int high)
{
    p->n_tags = (int64_t)s->n_rows;
    p->tags = s->n_rows ? malloc(s->n_rows * sizeof *p->tags) : NULL;
    if (s->n_rows && p->tags == NULL)
        return 0;
    for (uint64_t i = 0; i < s->n_rows; i++) {
        const struct tag_row *r = &s->rows[i];
        p->tags[i] = r->changed <= p->seq ? r->live : high ? r->at_high : r->at_low;
    }
    return 1;
}

/* Timeline.merge: spans twice as wide */
static void merge(struct series *s)
{
    s->width *= 2;
    uint64_t n = 0;
    for (uint64_t i = 0; i < s->n_spans; i++) {
        struct span span = s->spans[i];
        span.index /= 2;
        struct span *last = n ? &s->spans[n - 1] : NULL;
        if (last != NULL && last->index == span.index) {
            struct span_point *keep = &last->high, *drop = &span.high;
            if (span.high.bytes > last->high.bytes) {
                keep = &span.high;
                drop = &last->high;
            }
            free(drop->tags);
            last->high = *keep;
            keep = &last->low;
            drop = &span.low;
            if (span.low.bytes < last->low.bytes) {
                keep = &span.low;
                drop = &last->low;
            }
            free(drop->tags);
            last->low = *keep;
        } else {
            s->spans[n++] = span;
        }
    }
    s->n_spans = n;
}

/* Timeline.close at `seq`: the open span kept (when it has a point) and the next one's end */
static int close_span(struct series *s, int64_t seq)
{
    if (s->high.bytes >= 0) {
        if (s->n_spans == s->cap_spans) { /* spans far apart may not merge: more than limit */
            uint64_t cap = s->cap_spans ? 2 * s->cap_spans : (uint64_t)s->limit;
            struct span *spans = realloc(s->spans, cap * sizeof *spans);
            if (spans == NULL)
                return 0;
            s->spans = spans;
            s->cap_spans = cap;
        }
        struct span *span = &s->spans[s->n_spans];
        span->index = s->high.seq / s->width;
        span->high = s->high;
        span->low = s->low;
        if (!point_tags(s, &span->high, 1) || !point_tags(s, &span->low, 0)) {
            free(span->high.tags);
            return 0;
        }
        if ((int64_t)++s->n_spans >= s->limit)
            merge(s);
    }
    s->span_end = (seq / s->width + 1) * s->width;
    return 1;
}

static inline void set(struct span_point *p, int64_t seq, int64_t bytes, int64_t ms, int64_t rss)
{
    p->seq = seq;
    p->bytes = bytes;
    p->ms = ms;
    p->rss = rss;
}

int series_event(struct series *s, int alloc, int64_t seq, int64_t cur, int64_t ms, int64_t rss)
{
    if (seq >= s->span_end) {
        if (!close_span(s, seq))
            return 0;
        s->high.bytes = -1;
        s->low.bytes = NO_LOW;
    }
    if (cur < s->low.bytes) {
        set(&s->low, seq, cur, ms, rss);
        if (!alloc && s->high.bytes < 0)
            set(&s->high, seq, cur, ms, rss);
    }
    if (alloc && cur > s->high.bytes)
        set(&s->high, seq, cur, ms, rss);
    return 1;
}

int series_exec(struct series *s, int64_t seq, int64_t ms, int64_t rss)
{
    for (uint64_t i = 0; i < s->n_rows; i++) {
        struct tag_row *r = &s->rows[i];
        snap(s, r);
        r->live = 0;
        r->changed = seq;
    }
    if (seq >= s->span_end) {
        if (!close_span(s, seq))
            return 0;
        s->high.bytes = -1;
    }
    set(&s->low, seq, 0, ms, rss);
    if (s->high.bytes < 0)
        set(&s->high, seq, 0, ms, rss);
    return 1;
}

/* a live block's address and size */
struct pair {
    uint64_t addr, size;
};

/* the `n` blocks at `p` by address (distinct ones): a radix sort, 11 bits a pass, on the bits
 * that differ among them (a heap's addresses share their top bits); 0 when out of memory */
static int by_address(struct pair *p, uint64_t n)
{
    uint64_t any = 0, all = ~(uint64_t)0;
    for (uint64_t i = 0; i < n; i++) {
        any |= p[i].addr;
        all &= p[i].addr;
    }
    uint64_t differ = any ^ all;
    if (differ == 0)
        return 1;
    struct pair *tmp = malloc(n * sizeof *tmp), *from = p, *to = tmp;
    if (tmp == NULL)
        return 0;
    for (int shift = 0; shift < 64; shift += 11) {
        if (((differ >> shift) & 0x7FF) == 0)
            continue;
        uint64_t at[2048] = {0};
        for (uint64_t i = 0; i < n; i++)
            at[(from[i].addr >> shift) & 0x7FF]++;
        for (uint64_t d = 0, sum = 0; d < 2048; d++) {
            uint64_t count = at[d];
            at[d] = sum;
            sum += count;
        }
        for (uint64_t i = 0; i < n; i++)
            to[at[(from[i].addr >> shift) & 0x7FF]++] = from[i];
        struct pair *was = from;
        from = to;
        to = was;
    }
    if (from != p)
        memcpy(p, from, n * sizeof *p);
    free(tmp);
    return 1;
}

/* series.py's free_runs over the live blocks: (free bytes, largest free run, heap bytes) */
static int free_runs(const struct mdc *c, int64_t *out)
{
    out[0] = out[1] = out[2] = 0;
    uint64_t n = c->live_n, k = 0;
    if (n == 0)
        return 1;
    struct pair *pairs = malloc(n * sizeof *pairs);
    if (pairs == NULL)
        return 0;
    for (uint64_t i = 0; i < c->live.cap && k < n; i++) {
        const struct block *b = &c->live.slots[i];
        if (b->addr != 0 && b->live)
            pairs[k++] = (struct pair){b->addr, b->size};
    }
    if (!by_address(pairs, k)) {
        free(pairs);
        return 0;
    }
    wide gaps = 0, largest = 0, heap = 0, end = 0;
    for (uint64_t i = 0; i < k; i++) {
        wide length = (wide)((pairs[i].size + 8 + 15) & ~(uint64_t)15); /* heapmap.chunk_of */
        if (length < 32)
            length = 32;
        if (i != 0) {
            wide gap = (wide)pairs[i].addr - end;
            if (gap > 0 && gap <= REGION_GAP) {
                gaps += gap;
                largest = gap > largest ? gap : largest;
            }
        }
        wide stop = (wide)pairs[i].addr + length;
        end = i == 0 || stop > end ? stop : end;
        heap += length;
    }
    free(pairs);
    heap += gaps;
    if (heap >= ((wide)1 << 62))
        return 0; /* Python's integers: its figures */
    out[0] = (int64_t)gaps;
    out[1] = (int64_t)largest;
    out[2] = (int64_t)heap;
    return 1;
}

int series_sample(struct mdc *c, struct series *s, int64_t seq, int force)
{
    if (!(force ? s->frag_limit > 0 : series_due(s, seq)))
        return 1;
    if (s->n_samples != 0 && s->samples[4 * (s->n_samples - 1)] == seq) {
        s->next_sample = seq + s->frag_width;
        return 1;
    }
    if (s->n_samples == s->cap_samples) {
        uint64_t cap = s->cap_samples ? 2 * s->cap_samples : 64;
        int64_t *samples = realloc(s->samples, 4 * cap * sizeof *samples);
        if (samples == NULL)
            return 0;
        s->samples = samples;
        s->cap_samples = cap;
    }
    int64_t *sample = &s->samples[4 * s->n_samples];
    sample[0] = seq;
    if (!free_runs(c, sample + 1))
        return 0;
    if ((int64_t)++s->n_samples >= s->frag_limit) { /* every other one goes */
        s->frag_width *= 2;
        uint64_t n = 0;
        for (uint64_t i = 0; i < s->n_samples; i += 2, n++)
            memmove(&s->samples[4 * n], &s->samples[4 * i], 4 * sizeof *s->samples);
        s->n_samples = n;
    }
    int64_t live = (int64_t)c->live_n;
    int64_t spaced = SPACING * live > s->frag_width ? SPACING * live : s->frag_width;
    s->next_sample = seq + (live < FEW ? s->frag_width : spaced);
    return 1;
}

/* no fragmentation sample is taken (series.py's FragSamples not `wanted`: --by-tag's series
 * reads the tags' bytes alone; a sample sorts the live blocks, 5% of its CPU on cppcheck's dump) */
EXPORT int mdc_fig_no_samples(struct mdc *c)
{
    struct series *s = c->fig->series;
    if (s == NULL)
        return 0;
    s->frag_limit = s->next_sample = 0;
    return 1;
}

/* the series at the end, after event `seq`: the last span closed, the last sample taken */
EXPORT int mdc_fig_series_end(struct mdc *c, int64_t seq)
{
    struct series *s = c->fig->series;
    return s == NULL || (close_span(s, seq) && series_sample(c, s, seq, 1));
}

/* the spans (*out, how many) and the width of a span */
EXPORT uint64_t mdc_fig_spans(const struct mdc *c, const struct span **out, int64_t *width)
{
    const struct series *s = c->fig->series;
    *out = s->spans;
    *width = s->width;
    return s->n_spans;
}

/* the fragmentation samples (*out, how many) and the events between two */
EXPORT uint64_t mdc_fig_samples(const struct mdc *c, const int64_t **out, int64_t *width)
{
    const struct series *s = c->fig->series;
    *out = s->samples;
    *width = s->frag_width;
    return s->n_samples;
}

/* the tags' rows (*out), how many */
EXPORT uint64_t mdc_fig_tag_rows(const struct mdc *c, const struct tag_row **out)
{
    const struct series *s = c->fig->series;
    *out = s->rows;
    return s->n_rows;
}
