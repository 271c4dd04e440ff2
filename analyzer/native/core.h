/* @brief libmemdump_core's insides, shared by its files: memdump_core.c (the loop over the lines,
 * the API Python calls), records.c (reading the records), heap.c (what an event does to the
 * blocks), figures.c (the views' figures, in place of heap.c's replay), htexport.c (heaptrack's
 * events, in place of either). */
#ifndef MEMDUMP_CORE_INTERNAL_H
#define MEMDUMP_CORE_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "compact.h"
#include "figures.h"
#include "memdump_core.h"
#include "tables.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_TOKENS 10
#ifndef MAX_ID /* the fuzz target (fuzz_replay.c) makes it and BUFFER small, to run faster */
#define MAX_ID (1u << 27)        /* larger ids (never written by the recorders): Python */
#endif
#define MAX_SIZE (1ull << 52)    /* larger sizes: Python, whose integers do not overflow */
#define LINE_BATCH 512
#ifndef BUFFER
#define BUFFER (1u << 22)
#endif
#define SLACK 32 /* zeroed bytes after the buffer's data: quick_short reads 16 at a time */

/* node and frame flags */
#define DEFINED 1u
#define MARKED 2u
#define USED 4u        /* frames: a node refers to it */
#define RT_KNOWN 8u    /* nodes: whether its stack is the runtime's alone is known */
#define RT_YES 16u

enum { FAM_MALLOC, FAM_NEW, FAM_NEW_ARRAY };
enum { E_INVALID_FREE, E_DOUBLE_FREE, E_INVALID_REALLOC, E_MISMATCHED };
enum { RC_OK, RC_ASK, RC_FALLBACK };

/* the operations' names, in the order of enum mdc_op (records.c) */
extern const char *const OP_NAMES[OP_COUNT];

struct tok {
    const char *p;
    uint64_t n;
};

struct event {
    int op;
    int64_t nid;
    uint64_t result;
    uint64_t args[3];
    int64_t tid;
};

struct mdc {
    struct mdc_io io;
    int fd;
    char *buf;                  /* the file's bytes [buf_off, buf_off + buf_len) */
    uint64_t buf_cap, buf_off, buf_len;
    uint64_t pos, end, reported; /* file offsets: reached, the end, given to the progress bar */
    uint64_t *runs; /* (start, end) of each run of NUL bytes read (padding, format 1.3) */
    uint64_t n_runs, cap_runs, run_i; /* run_i: the first at or after `pos` */
    uint64_t *lines;
    uint64_t max_errors;
    struct mdc_counts k;
    struct btab live, custom; /* live and freed blocks; live_n, custom_n: the live ones */
    uint64_t live_n, custom_n;
    uint64_t order;
    struct idtab nodes, frames;
    uint32_t *node_order; /* node ids in the order they were defined */
    uint64_t n_nodes, cap_nodes;
    uint32_t *used; /* frame ids in the order nodes first used them */
    uint64_t n_used, cap_used, used_synced;
    struct mdc_error *errors;
    int64_t tid;
    struct fig *fig; /* the views' pass (figures.c) instead of the replay, or NULL */
    struct htx *ht;  /* `--format heaptrack`'s events (htexport.c) instead of both, or NULL */
    struct feed *feed; /* a compact dump's decoder (mdc_open_compact), or NULL: `buf` holds its
                          direct output (compact.h), and offsets are in that */
    uint64_t read;     /* with `feed`: the compact dump's bytes read */
    uint64_t ahead;    /* with `feed`: the packed events before this offset are prefetched */
    /* the replay's allocations by stack node (mdc_alloc_rows), the exports' figures without a
     * second pass: each node's row index + 1, and the rows (node, blocks, bytes) in the order of
     * each node's first allocation, as figures.c's stacks are made */
    int keep_allocs; /* set by mdc_keep_allocations: these rows and the peak's log are kept */
    uint64_t peak_log_limit; /* the most changes the log keeps */
    int32_t *alloc_of;
    uint64_t cap_alloc_of;
    int64_t *alloc_rows;
    uint64_t n_alloc_rows, cap_alloc_rows;
    /* the live blocks' changes since the peak, (node << 1 | released, bytes, the block's order)
     * each (PEAK_NOTE values), undone from
     * the end's live blocks for the peak's by node (mdc_peak_rows); `peak_log_over`: more than
     * PEAK_LOG of them (or no memory), until the next peak */
    int64_t *peak_log;
    uint64_t n_peak_log, cap_peak_log;
    int peak_log_over;
    uint64_t peak_order;     /* `order` after the peak's event: the blocks made live by then */
    int64_t peak_allocated;  /* the bytes allocated by then */
    struct snaps *snaps;     /* massif's snapshots taken by the replay (snapshots.c), or NULL */
    /* the replay beside the views' pass (mdc_fig_with_replay): `live` holds the pass's blocks,
     * and these the replay's, swapped in around each of its steps (swap_tables) */
    int both;
    struct btab replay_live;
    uint64_t replay_live_n;
    int64_t snap_next;       /* the SEQ of the next one (INT64_MAX: none) */
};

/* the values of a change in mdc.peak_log */
#define PEAK_NOTE 3

/* the replay's blocks and the views' pass's change places (mdc.both) */
static inline void swap_tables(struct mdc *c)
{
    struct btab t = c->live;
    uint64_t n = c->live_n;
    c->live = c->replay_live;
    c->live_n = c->replay_live_n;
    c->replay_live = t;
    c->replay_live_n = n;
}

/* bytes.split()'s whitespace */
static inline int is_ws(unsigned char c)
{
    static const uint8_t WS[256] = {[' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1, ['\v'] = 1,
                                     ['\f'] = 1};
    return WS[c];
}

/* the fields of [p, e) as bytes.split() finds them; returns how many (stores MAX_TOKENS) */
static inline __attribute__((always_inline)) int split(const char *p, const char *e, struct tok *t)
{
    int n = 0;
    while (p < e) {
        while (p < e && is_ws((unsigned char)*p))
            p++;
        if (p == e)
            break;
        const char *s = p;
        while (p < e && !is_ws((unsigned char)*p))
            p++;
        if (n < MAX_TOKENS) {
            t[n].p = s;
            t[n].n = (uint64_t)(p - s);
        }
        n++;
    }
    return n;
}

/* records.c: one line of each kind the library reads (RC_OK, RC_ASK or RC_FALLBACK), and the
 * quick paths of the short event records and of `t` (1 when the line was read, with *next after
 * it) */
int event_line(struct mdc *c, const struct tok *t, int n);
/* the operation of the short record tag of P's N bytes (`+`, `-n`, `+c`...), -1: none */
int short_op(const char *p, uint64_t n);
int node_record(struct mdc *c, const struct tok *t, int n);
int thread_record(struct mdc *c, const struct tok *t, int n);
int quick_short(const struct mdc *c, const char *p, struct event *ev, const char **next);
int quick_thread(const char *p, int64_t *tid, const char **next);

/* figures.c: a run of the views' pass begins (the parts, series, moments and tag views asked
 * for are known); event `ev` in it (RC_OK or RC_FALLBACK); a run of packed events in it (as
 * packed_loop, below, with do_event's step); a line begins (0: out of memory); its memory freed */
void fig_run(struct mdc *c);
int fig_event(struct mdc *c, const struct event *ev);
struct packed_run;
int fig_packed(struct mdc *c, struct packed_run *run);
int fig_line(struct mdc *c);
void fig_free(struct mdc *c);

/* heap.c: event `ev` replayed (beside the views' pass with mdc_fig_with_replay), or as
 * heaptrack's events */
int replay_event(struct mdc *c, const struct event *ev);

/* event `ev`: RC_ASK (nothing done) when a bad pointer's stack must be judged first */
static inline int do_event(struct mdc *c, const struct event *ev)
{
    if (c->fig != NULL && !c->both) {
        c->io.seq++;
        return fig_event(c, ev);
    }
    return replay_event(c, ev);
}

/* ---- the packed events of a compact dump's direct output (compact.h) --------------------- */

/* the packed event at `p` as short_record reads it, the thread `tid` and the nodes' `flags`
 * (`cap` of them) known; its length, 0 when the text path would leave it to Python */
static inline uint64_t packed_event(const unsigned char *p, int64_t tid, const uint8_t *flags,
                                    uint64_t cap, struct event *ev)
{
    uint32_t id;
    unsigned nargs = p[2];
    memcpy(&id, p + 4, 4);
    if (tid < 0 || nargs > 3 || p[1] >= OP_COUNT
        || (id != 0 && (id >= cap || !(flags[id] & DEFINED))))
        return 0;
    ev->op = p[1];
    ev->nid = id != 0 && (flags[id] & MARKED) ? -(int64_t)id : (int64_t)id;
    ev->tid = tid;
    memcpy(&ev->result, p + 8, 8);
    /* all three at once (arguments past NARGS are read by no operation): past the event, the
     * next one's bytes or the buffer's SLACK */
    memcpy(ev->args, p + 16, sizeof ev->args);
    return 16 + 8 * nargs;
}

/* how far ahead of the event replayed the packed events' blocks are prefetched: bytes of the
 * direct output, 6 to 16 events (the time of a few events covers memory's latency; 512 and 1,024
 * bytes were no faster) */
#define AHEAD 256

/* the blocks of the packed events from `at` up to `to` (and the `limit` of the buffer), and in
 * the views' pass their stacks' entries, asked of the memory before the events are replayed;
 * where it stopped. The table of blocks holds every address the heap has used: its slots, read
 * in the order the program used them, would otherwise miss the caches at nearly every event. */
static inline const unsigned char *prefetch_ahead(const struct mdc *c, const unsigned char *at,
                                                  const unsigned char *to,
                                                  const unsigned char *limit)
{
    const struct fig *f = c->fig;
    while (at < to && at + 16 <= limit) {
        unsigned op = at[1], nargs = at[2];
        if (at[0] != MDZ_EVENT || nargs > 3 || at + 16 + 8 * nargs > limit)
            break;
        uint64_t v;
        memcpy(&v, at + 8, 8); /* RESULT */
        if (v != 0)
            btab_prefetch(&c->live, v);
        if (nargs != 0 && (op == OP_FREE || op == OP_DELETE || op == OP_DELETE_ARRAY
                           || op == OP_REALLOC || op == OP_REALLOCARRAY)) {
            memcpy(&v, at + 16, 8); /* PTR */
            btab_prefetch(&c->live, v);
        }
        if (f != NULL) {
            uint32_t id;
            memcpy(&id, at + 4, 4);
            if (id < f->cap_of)
                __builtin_prefetch(&f->st_of[id]);
        }
        at += 16 + 8 * nargs;
    }
    return at;
}

/* a run of packed events in the buffer: the next one (`p`), where the run must stop at the
 * latest (`stop`: the end of the dump's lines, or of the buffer), the buffer's end (`limit`) and
 * how far the events are prefetched (`ahead`) */
struct packed_run {
    const unsigned char *p, *stop, *limit, *ahead;
};

/* The packed events of `run` replayed by `step` (do_event's: the replay's, or the views' pass's
 * with the event counted) up to the first line that is not one (RC_OK) or to the event that
 * stops the run (RC_ASK, RC_FALLBACK), run->p at it. What no event changes is read once, not at
 * each (the thread, the nodes). Inline, `step` a constant at each use: figures.c makes a loop for
 * each kind of views' step, with the step inline in it (its call, its registers saved and
 * restored and fig_event's dispatch were a sixth of `peak`'s instructions per event). */
static inline __attribute__((always_inline)) int
packed_loop(struct mdc *c, struct packed_run *run, int (*step)(struct mdc *, const struct event *))
{
    const unsigned char *p = run->p, *ahead = run->ahead;
    int64_t tid = c->tid;
    const uint8_t *flags = c->nodes.flags;
    uint64_t cap = c->nodes.cap;
    int r = RC_OK;
    do {
        struct event ev;
        uint64_t n = packed_event(p, tid, flags, cap, &ev);
        if (n == 0) {
            r = RC_FALLBACK;
            break;
        }
        ahead = prefetch_ahead(c, ahead, p + AHEAD, run->limit);
        r = step(c, &ev);
        if (r != RC_OK)
            break;
        p += n;
    } while (p < run->stop && *p == MDZ_EVENT); /* (the buffer's SLACK is zeroed) */
    run->p = p;
    run->ahead = ahead;
    return r;
}

/* the size of the block event `ev` asks for (dumpformat.effect's); 0 when it overflows */
static inline int event_size(const struct event *ev, uint64_t *size)
{
    switch (ev->op) {
    case OP_CALLOC:
        return !__builtin_mul_overflow(ev->args[0], ev->args[1], size);
    case OP_REALLOCARRAY:
        return !__builtin_mul_overflow(ev->args[1], ev->args[2], size);
    case OP_REALLOC: case OP_POSIX_MEMALIGN: case OP_ALIGNED_ALLOC: case OP_MEMALIGN:
        *size = ev->args[1];
        return 1;
    default:
        *size = ev->args[0];
        return 1;
    }
}
/* heap.c: an exec drops every live block (noted for the peak's blocks by node) */
void peak_note_exec(struct mdc *c);

/* snapshots.c: the snapshots due before the next event, taken (0: out of memory); a block was
 * returned again while live (the snapshots are not the views' pass's: see mdc_snap_end); the
 * memory freed */
int snaps_due(struct mdc *c);
void snaps_reused(struct mdc *c);
void snaps_free(struct mdc *c);

/* htexport.c: event `ev` as heaptrack's lines (RC_OK or RC_FALLBACK); its memory freed */
int ht_event(struct mdc *c, const struct event *ev);
void ht_free(struct mdc *c);

#endif
