/* @brief A libFuzzer target for libmemdump_core's reader and replay (docs/report-format.md,
 * "Replay"): every input is a dump's bytes after its version line, read as memdump-analyze reads
 * it. The driver plays native.py's part between runs, as far as the library can see it: the
 * frames the `f` records define, the SEQ that `p` and `end` records take, `p exec`, and the
 * answer to each MDC_ASK. An input may end the run with MDC_FALLBACK (Python replays it then,
 * with its exact error): what must never happen is a crash, a read or write out of bounds, an
 * undefined behaviour or a leak, which the sanitizers it is built with report.
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

#include "memdump_core.h"

struct mdc;
struct mdc *mdc_open(int fd, uint64_t start, uint64_t end, uint64_t max_errors);
int mdc_run(struct mdc *c);
struct mdc_io *mdc_io(struct mdc *c);
int mdc_frames(struct mdc *c, const uint64_t *ids, uint64_t n, int marked);
void mdc_runtime(struct mdc *c, uint64_t id, int yes);
void mdc_exec(struct mdc *c);
void mdc_counts(struct mdc *c, struct mdc_counts *out);
int mdc_blocks(struct mdc *c, int custom, uint64_t *out, uint64_t n);
void mdc_close(struct mdc *c);

static int fd = -1;

/* What native.py does with one line handed back: `f ID ...` defines frame ID (marked when its
 * id is odd, so that both kinds of frame are exercised); `p SEQ` and `end SEQ` take a SEQ. */
static void python_line(struct mdc *c, struct mdc_io *io, const char *line, uint64_t len)
{
    if (len > 2 && line[0] == 'f' && line[1] == ' ') {
        uint64_t id = 0;
        for (uint64_t i = 2; i < len && line[i] >= '0' && line[i] <= '9' && id < (1u << 30); i++)
            id = id * 10 + (uint64_t)(line[i] - '0');
        if (id != 0)
            mdc_frames(c, &id, 1, (int)(id & 1));
    } else if ((len > 2 && memcmp(line, "p ", 2) == 0) || (len > 4 && memcmp(line, "end ", 4) == 0)) {
        io->seq++;
        if (len > 7 && memmem(line, len, " exec ", 6) != NULL)
            mdc_exec(c);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fd < 0)
        fd = memfd_create("fuzz-dump", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
        abort();
    struct mdc *c = mdc_open(fd, 0, size, 8);
    if (c == NULL)
        return 0;
    struct mdc_io *io = mdc_io(c);
    io->attached = size > 0 && (data[0] & 1);
    int status;
    while ((status = mdc_run(c)) != MDC_DONE && status != MDC_FALLBACK) {
        if (status == MDC_ASK) {
            mdc_runtime(c, (uint64_t)io->ask_node, (int)(io->ask_node & 1));
            continue;
        }
        const uint64_t *pairs = (const uint64_t *)(uintptr_t)io->lines;
        for (uint64_t i = 0; i < io->n_lines; i++)
            python_line(c, io, (const char *)(uintptr_t)pairs[2 * i], pairs[2 * i + 1]);
    }
    if (status == MDC_DONE) {
        struct mdc_counts k;
        mdc_counts(c, &k);
        uint64_t *blocks = calloc((size_t)k.n_live * 3 + 3, sizeof *blocks);
        if (blocks != NULL)
            mdc_blocks(c, 0, blocks, (uint64_t)k.n_live);
        free(blocks);
    }
    mdc_close(c);
    return 0;
}
