/* @brief libmemdump_core's views' pass (figures.c, series.c): what heappass.py computes inline,
 * per allocating stack, per size, per lifetime and over time, in C, on the replay's decoding
 * (records.c) and its table of blocks (tables.c). memdump_analyzer/nativepass.py reads these
 * tables (the structures it mirrors are marked). */
#ifndef MEMDUMP_CORE_FIGURES_H
#define MEMDUMP_CORE_FIGURES_H

#include <stdint.h>

/* what mdc_figures() computes besides the stacks' live, peak and allocated figures (PARTS) */
#define FIG_TEMPORARY 1
#define FIG_LIFETIMES 2
#define FIG_SIZES 4
#define FIG_TIMELINE 8
/* and the accumulators of tagviews.c (mdc_tv_start) */
#define FIG_TAGS 16
#define FIG_PHASES 32
#define FIG_GROWTH 64

/* (mirrored) one allocating stack's figures (passapi.py's list: CUR ... GONE, then its node); every field 8
 * bytes, in the order Python reads them */
struct fig_stack {
    int64_t cur, cur_n, changed, peak, peak_n, allocs, alloc_bytes, temp, temp_bytes, gone, node;
};

/* (mirrored) a counter's entry, in the order its keys were first counted: (a, b) -> n */
struct fig_entry {
    int64_t a, b, n;
};

/* the counters (mdc_fig_counter; the lifetime counters' keys are kept by stack, struct fig_keys,
 * and read from mdc_fig_lifetimes) */
enum { FIG_LIFE, FIG_LIFE_MS, FIG_FREED_BY, FIG_SIZES_BY, FIG_COUNTERS };

/* (mirrored) the pass's figures at the end; every field 8 bytes */
struct fig_totals {
    int64_t cur, peak, peak_seq, peak_blocks, peak_ms, temporary, temporary_bytes, live_n,
        n_stacks, clocked, ms;
};

/* (mirrored) a tag's row (stream.py's: live bytes, SEQ changed, bytes at the span's highest
 * point, its index, bytes at its lowest) and its string id (-1: untagged) */
struct tag_row {
    int64_t live, changed, at_high, index, at_low, ident;
};

/* (mirrored) one extreme of a span: SEQ, live heap bytes, ms, RSS, and its tags' bytes (n_tags
 * of them, at tags) */
struct span_point {
    int64_t seq, bytes, ms, rss, n_tags;
    int64_t *tags;
};

/* (mirrored) a span of series.py's `Timeline`: [index, HIGH, LOW] */
struct span {
    int64_t index;
    struct span_point high, low;
};

/* (a, b) -> a count, its entries in the order the keys were first counted (Python's dicts'
 * order), found through an open-addressing table of entry indexes + 1 (with their hash's top
 * bits) */
struct counter {
    struct fig_entry *e;
    uint64_t n, cap_e;
    uint64_t *slots;
    uint64_t cap; /* a power of two, or 0 */
};

/* the count of (a, b), made 0 when missing (the entries may move); NULL when out of memory */
int64_t *counter_at(struct counter *k, int64_t a, int64_t b);
void counter_clear(struct counter *k);
void counter_free(struct counter *k);

/* the timeline's series (series.c): series.py's `Timeline` and `FragSamples`, the tags' rows */
struct series {
    int64_t limit, width, span_end;
    struct span *spans;
    uint64_t n_spans, cap_spans;
    struct span_point high, low; /* the open span's (bytes -1, NO_LOW: none yet) */
    int tagging;
    struct tag_row *rows;
    uint64_t n_rows, cap_rows;
    struct counter row_of;     /* tag string id -> its row's index */
    struct counter thread_tag; /* TID -> its innermost tag's string id + 2 (0: none known) */
    int64_t frag_limit, frag_width, next_sample; /* frag_limit 0: no samples */
    int64_t *samples; /* (SEQ, free bytes, largest free run, heap bytes) each */
    uint64_t n_samples, cap_samples;
};

/* a key of one stack in a lifetime counter (FIG_LIFE, FIG_LIFE_MS, FIG_FREED_BY): its b, its
 * rank among the stack's keys in the counter (1: the first counted; 0: an empty slot) and its
 * count (what reaches UINT32_MAX is carried into struct fig's k[counter], by (stack, b)) */
struct fig_key {
    int64_t b;
    uint32_t at, n;
};

/* a stack's keys in the lifetime counters, in two cache lines: its first keys (three of
 * FIG_LIFE, one of FIG_LIFE_MS, one of FIG_FREED_BY: most stacks have no other), and per counter
 * a table of the others (open addressing, at most half full, 1 << log[c] slots; NULL: none) */
struct fig_keys {
    _Alignas(64) struct fig_key in[5];
    struct fig_key *more[3];
    uint32_t n_more[3];
    uint8_t log[3];
};

struct fig {
    unsigned want;
    unsigned has; /* what an event's step does besides the stacks' figures (figures.c's HAS_) */
    struct fig_stack *st;
    /* with FIG_LIFETIMES (else NULL), beside st (the same index): each stack's first keys in the
     * lifetime counters (64-byte aligned) */
    struct fig_keys *keys;
    /* with FIG_LIFETIMES: the blocks' ends not counted yet in the lifetime counters (figures.c's
     * struct life_end, LIFE_BATCH of them at most) */
    struct life_end *ends;
    uint32_t n_ends;
    uint64_t n_st, cap_st;
    int32_t *st_of; /* node id -> its stack's index + 1 (0: none yet) */
    uint64_t cap_of;
    struct fig_totals t;
    int64_t allocated, rss;
    int64_t dropped;    /* bytes of blocks returned again while live (moments.c) */
    int64_t tid;        /* the thread of `last` (-1: none yet) */
    uint64_t last;      /* the block its last heap operation made (0: none) */
    struct counter threads; /* TID -> its last operation's block, when it was another's turn */
    struct counter k[FIG_COUNTERS];
    uint64_t *clock;    /* (SEQ, ms) of each clock sample: the ms of the events after SEQ */
    uint64_t n_clock, cap_clock;
    int clock_back;     /* a sample's SEQ was below the one before (ms_at) */
    struct series *series; /* with FIG_TIMELINE */
    struct tagviews *tv;   /* --by-tag, --phases, --growth (tagviews.c), or NULL */
    struct moments *mom;   /* the moments asked for (moments.c), or NULL */
    /* moments.c: the SEQ of the next moment due after an event (0: not known yet, INT64_MAX:
     * none before the end), so that the step asks moments_due only then */
    int64_t mom_due;
};

struct mdc;
/* series.c, for figures.c: each returns 0 when out of memory (or a figure out of range) */
struct series *series_new(int64_t limit, int64_t frag_limit);
void series_free(struct series *s);
/* the tag row of an allocation by thread `tid` at `seq` (its bytes counted by series_add) */
int64_t series_row(struct series *s, int64_t tid, int64_t seq);
/* row `row` changes by `delta` bytes at `seq` */
void series_add(struct series *s, int64_t row, int64_t delta, int64_t seq);
/* the live heap is `cur` after an allocation (`alloc`) or a free at `seq` */
int series_event(struct series *s, int alloc, int64_t seq, int64_t cur, int64_t ms, int64_t rss);
int series_exec(struct series *s, int64_t seq, int64_t ms, int64_t rss);
/* the fragmentation sample after `seq`, if one is due (`force`: at the end, whatever) */
int series_sample(struct mdc *c, struct series *s, int64_t seq, int force);
/* whether a sample is due after `seq`: asked before each event, inline (a call to
 * series_sample was 2% of --by-tag's samples on cppcheck's dump, where one is rarely due) */
static inline int series_due(const struct series *s, int64_t seq)
{
    return s->next_sample > 0 && seq >= s->next_sample;
}

/* tagviews.c, for figures.c: live block `b` released (`made`: the block the same realloc makes
 * next, 0: none); block `p` made live by event `seq` at stack index `idx` (`resize`: by a
 * realloc), replacing `old` (NULL: none) whose release the dump does not have; the image gone
 * (an exec). Each returns 0 when out of memory. */
struct block;
int tv_release(struct mdc *c, const struct block *b, uint64_t made);
int tv_alloc(struct mdc *c, uint64_t p, uint64_t size, int64_t seq, int64_t idx, int resize,
             const struct block *old);
void tv_exec(struct mdc *c);
void tv_free(struct tagviews *tv);

#endif
