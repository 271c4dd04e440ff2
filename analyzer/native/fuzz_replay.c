/* @brief A libFuzzer target for libmemdump_core's reader, its replay (docs/report-format.md,
 * "Replay") and its views' pass (figures.c, series.c, tagviews.c: when the first byte has bit 1
 * set, with every part, --by-tag's, --phases' and --growth's figures, and few timeline points),
 * with bit 5 too beside the replay, as the HTML page runs them (replaypass.py); the replay with
 * bit 2 with the exports' counts and massif's snapshots (snapshots.c); and `--format
 * heaptrack`'s events (htexport.c: when bits 1 and 2 are clear and bit 3 is set):
 * every input is a dump's bytes after its version line, read as memdump-analyze reads it. The driver plays native.py's and nativepass.py's part
 * between runs, as far as the library can see it: the frames the `f` records define, the SEQ
 * that `p` and `end` records take, `p exec`, clock samples, tags, and the answer to each
 * MDC_ASK. An input may end the run with MDC_FALLBACK (Python replays it then,
 * with its exact error): what must never happen is a crash, a read or write out of bounds, an
 * undefined behaviour or a leak, which the sanitizers it is built with report.
 *
 * Built with -DFUZZ_DIRECT (scripts/fuzz-core.sh -d), the input after its first byte is instead a
 * compact block's payload (docs/dump-format.md, "Compact encoding"), which the driver wraps in a
 * compact file (the signature, one block under deflate, the end block) read through the
 * decoder's direct output, as a compact dump is: its heap records reach the replay and the views'
 * pass as packed events, which no text dump produces, the model's mutations with them.
 *
 * Built and run by scripts/fuzz-core.sh (clang -fsanitize=fuzzer,address,undefined). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef FUZZ_DIRECT
#include <zlib.h>

#include "compactmodel.h"
#endif
#include "figures.h"
#include "moments.h"
#include "memdump_core.h"

struct mdc;
struct mdc *mdc_open(int fd, uint64_t start, uint64_t end, uint64_t max_errors);
struct mdc *mdc_open_compact(int fd, uint64_t max_errors);
int mdc_run(struct mdc *c);
struct mdc_io *mdc_io(struct mdc *c);
int mdc_frames(struct mdc *c, const uint64_t *ids, uint64_t n, int marked);
void mdc_runtime(struct mdc *c, uint64_t id, int yes);
void mdc_exec(struct mdc *c);
void mdc_counts(struct mdc *c, struct mdc_counts *out);
int mdc_blocks(struct mdc *c, int custom, uint64_t *out, uint64_t n);
void mdc_close(struct mdc *c);
void mdc_keep_allocations(struct mdc *c, uint64_t limit);
void mdc_fig_with_replay(struct mdc *c);
void mdc_fig_done(struct mdc *c);
int mdc_snapshots(struct mdc *c, const int64_t *seqs, const int64_t *kinds, uint64_t n, int peak);
int mdc_snap_due(struct mdc *c);
int mdc_snap_end(struct mdc *c);
uint64_t mdc_snap_taken(const struct mdc *c, const struct mom_taken **taken, const int64_t **data);
uint64_t mdc_alloc_rows(const struct mdc *c, const int64_t **out);
int mdc_peak_rows(const struct mdc *c, int64_t *blocks, int64_t *bytes);
int mdc_figures(struct mdc *c, unsigned want, int64_t limit);
int mdc_fig_clock(struct mdc *c, int64_t seq, int64_t ms, int64_t rss);
int mdc_fig_record(struct mdc *c, int64_t seq, int is_exec);
int mdc_fig_tagging(struct mdc *c, int64_t seq);
int mdc_fig_thread_tag(struct mdc *c, int64_t tid, int64_t ident);
int mdc_fig_series_end(struct mdc *c, int64_t seq);
int mdc_fig_end(struct mdc *c, int64_t seq, struct fig_totals *out);
uint64_t mdc_fig_counter(const struct mdc *c, int which, const struct fig_entry **out);
struct fig_lifetimes;
struct fig_lifetimes *mdc_fig_lifetimes(struct mdc *c);
void mdc_lifetimes_free(struct fig_lifetimes *l);
uint64_t mdc_lifetimes_keys(const struct fig_lifetimes *l, int which, uint64_t stack, int64_t *out,
                            uint64_t cap);
uint64_t mdc_lifetimes_entries(const struct fig_lifetimes *l, int which, int64_t *out,
                               uint64_t cap);
int mdc_fig_blocks(struct mdc *c, uint64_t *out, uint64_t n);
int mdc_tv_start(struct mdc *c, unsigned want);
int mdc_moments(struct mdc *c, const int64_t *seqs, const int64_t *kinds, uint64_t n);
int mdc_mom_thread_tag(struct mdc *c, int64_t tid, int64_t ident);
uint64_t mdc_mom_taken(const struct mdc *c, const struct mom_taken **taken, const int64_t **data);
int mdc_tv_thread(struct mdc *c, int64_t tid, int64_t name);
int mdc_tv_phase(struct mdc *c, int64_t seq, int64_t name);
int mdc_tv_end(struct mdc *c);
uint64_t mdc_tv_table(const struct mdc *c, int which, const void **out);
int fig_line(struct mdc *c);
int mdc_ht_start(struct mdc *c, int fd);
int mdc_ht_put(struct mdc *c, const char *text, uint64_t n);
int mdc_ht_exec(struct mdc *c);
int mdc_ht_end(struct mdc *c, uint64_t *out);
int mdc_ht_live(struct mdc *c, uint64_t *out, uint64_t n);

static int fd = -1, ht_fd = -1; /* the dump; heaptrack's events */
static int64_t millis; /* the clock samples' ms: they never go back */

/* the number after the line's tag, or 0 */
static int64_t number(const char *line, uint64_t len, uint64_t from)
{
    int64_t n = 0;
    for (uint64_t i = from; i < len && line[i] >= '0' && line[i] <= '9' && n < (1 << 30); i++)
        n = n * 10 + (line[i] - '0');
    return n;
}

/* What nativepass.py does besides: a sample due before each line, the clock, the tags; 0 when
 * the library gave up (out of memory) */
/* the views' pass runs --by-tag's, --phases' and --growth's tables (tagviews.c); it takes
 * moments (moments.c) */
static int views, moments;

static int figures_line(struct mdc *c, struct mdc_io *io, const char *line, uint64_t len)
{
    if (!fig_line(c))
        return 0;
    if (len > 2 && line[0] == 'c' && line[1] == ' ') {
        millis += number(line, len, 2) & 15;
        return mdc_fig_clock(c, io->seq, millis, number(line, len, 2));
    }
    if (len > 2 && (line[0] == 'g' || line[0] == 'u') && line[1] == ' ') {
        int64_t tid = number(line, len, 2);
        return (line[0] == 'u' || mdc_fig_tagging(c, io->seq))
               && mdc_fig_thread_tag(c, tid, line[0] == 'u' ? -1 : tid & 7)
               && (!moments || mdc_mom_thread_tag(c, tid, line[0] == 'u' ? -1 : tid & 7))
               && (!views || mdc_tv_thread(c, tid, line[0] == 'u' ? -1 : tid & 3));
    }
    return 1;
}

/* What native.py does with one line handed back: `f ID ...` defines frame ID (and marks it when
 * its id is odd, so that both kinds of frame are exercised); `p SEQ` and `end SEQ` take a SEQ. */
static void python_line(struct mdc *c, struct mdc_io *io, const char *line, uint64_t len,
                        int figures, int heaptrack)
{
    if (len > 2 && line[0] == 'f' && line[1] == ' ') {
        uint64_t id = 0;
        for (uint64_t i = 2; i < len && line[i] >= '0' && line[i] <= '9' && id < (1u << 30); i++)
            id = id * 10 + (uint64_t)(line[i] - '0');
        /* native.py defines every frame, then marks those of the mark functions */
        if (id != 0 && mdc_frames(c, &id, 1, 0) && (id & 1))
            mdc_frames(c, &id, 1, 1);
    } else if ((len > 2 && memcmp(line, "p ", 2) == 0) || (len > 4 && memcmp(line, "end ", 4) == 0)) {
        if (!figures && !heaptrack)
            mdc_snap_due(c); /* native.py: the snapshots due before the line */
        io->seq++;
        int is_exec = len > 7 && memmem(line, len, " exec ", 6) != NULL;
        if (figures && mdc_fig_record(c, io->seq, is_exec) && views
            && memmem(line, len, " phase ", 7) != NULL) /* its name: one of 4 */
            mdc_tv_phase(c, io->seq, (int64_t)(len & 3));
        else if (is_exec && !heaptrack) /* heaptrack's: heaptrack_line */
            mdc_exec(c);
    }
}

/* What heaptracknative.py does with a line handed back: a clock sample's line between the
 * events, the file started again at `p exec`; 0 when the library gave up */
static int heaptrack_line(struct mdc *c, const char *line, uint64_t len)
{
    if (len > 2 && line[0] == 'c' && line[1] == ' ')
        return mdc_ht_put(c, line, len);
    if (len > 7 && line[0] == 'p' && memmem(line, len, " exec ", 6) != NULL)
        return mdc_ht_exec(c);
    return 1;
}

/* heaptrack's tables at the end, read as heaptracknative.py reads them */
static void heaptrack_end(struct mdc *c)
{
    uint64_t out[5];
    if (mdc_ht_end(c, out) != 0)
        return;
    const int64_t *traces = (const int64_t *)(uintptr_t)out[0];
    const int32_t *infos = (const int32_t *)(uintptr_t)out[2];
    static volatile int64_t sink; /* every row read, for the address sanitizer */
    for (uint64_t i = 3; i < 3 * (out[1] + 1); i++)
        sink = traces[i];
    for (uint64_t i = 0; i < out[3]; i++)
        sink = infos[i];
    uint64_t *live = calloc(out[4] + 1, sizeof *live);
    if (live != NULL)
        mdc_ht_live(c, live, out[4]);
    free(live);
}

/* the lifetime counters taken from the pass, read as nativepass.py reads them (each stack's
 * keys, with a room too small first, and every entry), then freed */
static void lifetimes_end(struct fig_lifetimes *l, uint64_t n_stacks)
{
    if (l == NULL)
        return;
    for (int which = 0; which < 3; which++) {
        int64_t pairs[8];
        for (uint64_t i = 0; i <= n_stacks; i++) { /* and one stack out of range */
            uint64_t n = mdc_lifetimes_keys(l, which, i, pairs, 4);
            int64_t *all = n > 4 ? malloc(2 * n * sizeof *all) : NULL;
            if (all != NULL)
                mdc_lifetimes_keys(l, which, i, all, n);
            free(all);
        }
        uint64_t n = mdc_lifetimes_entries(l, which, NULL, 0);
        int64_t *all = malloc(3 * n * sizeof *all + 1);
        if (all != NULL)
            mdc_lifetimes_entries(l, which, all, n);
        free(all);
    }
    mdc_lifetimes_free(l);
}

/* the views' figures at the end, read as nativepass.py reads them */
static void figures_end(struct mdc *c, struct mdc_io *io)
{
    struct fig_totals t;
    if (!mdc_fig_series_end(c, io->seq) || !mdc_fig_end(c, io->seq, &t)
        || (views && !mdc_tv_end(c)))
        return;
    const struct mom_taken *taken;
    const int64_t *moment_rows;
    if (moments)
        mdc_mom_taken(c, &taken, &moment_rows);
    const struct fig_entry *e;
    for (int which = 0; which < FIG_COUNTERS; which++)
        mdc_fig_counter(c, which, &e);
    lifetimes_end(mdc_fig_lifetimes(c), (uint64_t)t.n_stacks);
    const void *table;
    for (int which = 0; which < 6 && views; which++)
        mdc_tv_table(c, which, &table);
    uint64_t *blocks = calloc((size_t)t.live_n * 4 + 4, sizeof *blocks);
    if (blocks != NULL)
        mdc_fig_blocks(c, blocks, (uint64_t)t.live_n);
    free(blocks);
}

/* What native.py reads of the replay at the end: the counts, the allocations by node and at the
 * peak, the live blocks */
static void replay_end(struct mdc *c)
{
    struct mdc_counts k;
    mdc_counts(c, &k);
    uint64_t *blocks = calloc((size_t)k.n_live * 3 + 3, sizeof *blocks);
    const int64_t *rows;
    uint64_t n_rows = mdc_alloc_rows(c, &rows);
    int64_t *at_peak = calloc(2 * n_rows + 2, sizeof *at_peak);
    if (at_peak != NULL)
        mdc_peak_rows(c, at_peak, at_peak + n_rows + 1);
    free(at_peak);
    if (blocks != NULL)
        mdc_blocks(c, 0, blocks, (uint64_t)k.n_live);
    free(blocks);
    const struct mom_taken *taken;
    const int64_t *data;
    if (mdc_snap_end(c))
        (void)mdc_snap_taken(c, &taken, &data);
}

#ifdef FUZZ_DIRECT
/* the dump: `n` bytes of a block's payload in a compact file of one block (its text's length
 * the most a block holds, its checksums none: the direct output checks neither), into `fd`;
 * 0 when the payload cannot be such a block */
static int compact_dump(int out, const uint8_t *payload, size_t n)
{
    static const unsigned char head[10] = {0x89, 'M', 'D', 'Z', '\r', '\n', 0x1a, '\n',
                                           VERSION_MAJOR, VERSION_MINOR};
    uLongf clen = compressBound((uLong)n);
    unsigned char *file = malloc(10 + 16 + clen + 16);
    if (file == NULL)
        abort();
    if (compress2(file + 26, &clen, payload, (uLong)n, 1) != Z_OK)
        abort();
    memcpy(file, head, 10);
    put32(file + 10, MAX_TEXT);
    put32(file + 14, 0);
    put32(file + 18, (uint32_t)n);
    put32(file + 22, (uint32_t)clen);
    memset(file + 26 + clen, 0, 16); /* the end block */
    size_t len = 26 + clen + 16;
    int ok = ftruncate(out, 0) == 0 && pwrite(out, file, len, 0) == (ssize_t)len;
    free(file);
    return ok;
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fd < 0)
        fd = memfd_create("fuzz-dump", MFD_CLOEXEC);
    if (ht_fd < 0)
        ht_fd = memfd_create("fuzz-heaptrack", MFD_CLOEXEC);
#ifdef FUZZ_DIRECT
    if (size == 0 || size > 2 * (size_t)MAX_TEXT)
        return 0;
    if (fd < 0 || ht_fd < 0 || !compact_dump(fd, data + 1, size - 1) || lseek(fd, 0, SEEK_SET) != 0)
        abort();
    struct mdc *c = mdc_open_compact(fd, 8);
#else
    if (fd < 0 || ht_fd < 0 || ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
        abort();
    struct mdc *c = mdc_open(fd, 0, size, 8);
#endif
    if (c == NULL)
        return 0;
    struct mdc_io *io = mdc_io(c);
    io->attached = size > 0 && (data[0] & 1);
    int figures = size > 0 && (data[0] & 2);
    int both = figures && (data[0] & 32); /* the replay beside the views' pass (replaypass.py) */
    int heaptrack = size > 0 && (data[0] & 14) == 8;
    if (heaptrack && !mdc_ht_start(c, ht_fd)) {
        mdc_close(c);
        return 0;
    }
    if (!figures && size > 0 && (data[0] & 4)) { /* the exports' counts, a log of 0 to 64
                                                     changes, and massif's snapshots */
        static const int64_t seqs[] = {2, 5, 9, 30}, kinds[] = {1, 0, 1, 1};
        mdc_keep_allocations(c, (uint64_t)(data[0] >> 3 & 7) * 9);
        mdc_snapshots(c, seqs, kinds, 4, 1);
    }
    millis = 0;
    /* the views' step as each view makes it (figures.c's fig_event): every part with the tag
     * views, the stacks' figures alone (`peak`), the lifetimes alone, the moments alone (the
     * heap map: at two events, the peak and the end) */
    static const unsigned parts[] = {FIG_TEMPORARY | FIG_LIFETIMES | FIG_SIZES | FIG_TIMELINE, 0,
                                     FIG_LIFETIMES, 0};
    static const int64_t mom_seqs[] = {3, 11, MOM_PEAK, MOM_END};
    static const int64_t mom_kinds[] = {MOM_BY_NODE, MOM_BLOCKS, MOM_BLOCKS, MOM_TOTALS};
    int mode = size > 0 ? data[0] >> 6 : 0;
    views = mode == 0;
    moments = mode == 3;
    if (figures && (!mdc_figures(c, parts[mode], 2 * (1 + (data[0] >> 2 & 7)))
                    || (views && !mdc_tv_start(c, FIG_TAGS | FIG_PHASES | FIG_GROWTH))
                    || (moments && !mdc_moments(c, mom_seqs, mom_kinds, 4)))) {
        mdc_close(c);
        return 0;
    }
    if (both) {
        mdc_keep_allocations(c, 9);
        mdc_fig_with_replay(c);
    }
    int status;
    while ((status = mdc_run(c)) != MDC_DONE && status != MDC_FALLBACK) {
        if (status == MDC_ASK) {
            mdc_runtime(c, (uint64_t)io->ask_node, (int)(io->ask_node & 1));
            continue;
        }
        const uint64_t *pairs = (const uint64_t *)(uintptr_t)io->lines;
        for (uint64_t i = 0; i < io->n_lines; i++) {
            const char *line = (const char *)(uintptr_t)pairs[2 * i];
            if (figures && !figures_line(c, io, line, pairs[2 * i + 1]))
                break;
            if (heaptrack && !heaptrack_line(c, line, pairs[2 * i + 1]))
                break;
            python_line(c, io, line, pairs[2 * i + 1], figures, heaptrack);
        }
    }
    if (status == MDC_DONE && figures) {
        figures_end(c, io);
        if (both) {
            mdc_fig_done(c);
            replay_end(c);
        }
    } else if (status == MDC_DONE && heaptrack) {
        heaptrack_end(c);
    } else if (status == MDC_DONE) {
        replay_end(c);
    }
    mdc_close(c);
    return 0;
}
