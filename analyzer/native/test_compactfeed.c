/* @brief compactfeed.c's thread against the decoder read in line: a dump of many small blocks,
 * compacted here, read through the feed whole and stopped after each of its first blocks, gives
 * the decoder's own output block for block. Run by CTest, and so in the sanitizer builds (TSan
 * included: the feed's one shared state is under its mutex). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "compactfeed.h"

static int fail(const char *what)
{
    fprintf(stderr, "test_compactfeed: %s\n", what);
    return 1;
}

int main(void)
{
    char err[256];
    int text = memfd_create("text", 0), packed = memfd_create("packed", 0);
    if (text < 0 || packed < 0)
        return fail("memfd_create");
    dprintf(text, "MEMDUMP 2.5\nf 1 0x401000\nn 1 0 1\nt 7\n");
    for (int i = 0; i < 20000; i++)
        dprintf(text, "+ 1 0x%x %d\n- 1 0x%x\n", 0x10000 + 32 * (i % 50), 8 + i % 24,
                0x10000 + 32 * (i % 50));
    dprintf(text, "end 40001 exit 0\n");
    if (lseek(text, 0, SEEK_SET) != 0 || mdz_encode(text, packed, 2, 4096, err, sizeof err) != 0)
        return fail(err);
    /* the decoder's output, in line */
    struct mdz_dec *d = mdz_dec_open(packed, err, sizeof err);
    char *want = NULL;
    size_t want_len = 0, blocks = 0, ends[8192];
    const unsigned char *p;
    size_t n;
    int r;
    while ((r = mdz_dec_next(d, &p, &n, err, sizeof err)) == 1 && blocks < 8192) {
        want = realloc(want, want_len + n);
        memcpy(want + want_len, p, n);
        want_len += n;
        ends[blocks++] = want_len;
    }
    mdz_dec_close(d);
    if (r != 0 || blocks < 50)
        return fail("the dump did not decode into many blocks");
    /* the pieces make the text's records: its heap records, 40,000 packed events of 24 bytes */
    size_t events = 0;
    for (size_t at = 0; at < want_len; at += want[at] == 1 ? 24 : 1)
        events += want[at] == 1;
    if (events != 40000)
        return fail("the decoder's pieces are not the dump's records");
    /* stop: read that many blocks, 0 all of them; the last run, a reader that keeps nothing of
     * a block when it takes the next: each block in the buffer alone (the decoder's buffer
     * handed over), `slack` bytes after it its own */
    for (size_t run = 0; run < 9; run++) {
        size_t stop = run < 8 ? run : 0, consume = run == 8;
        struct feed *f = feed_open(packed);
        char *buf = NULL;
        uint64_t len = 0, cap = 0, read, tail;
        size_t k = 0;
        if (f == NULL)
            return fail("feed_open");
        while ((r = feed_take(f, &buf, &len, &cap, 16, &read, &tail)) == 1) {
            size_t from = consume && k ? ends[k - 1] : 0;
            if (k >= blocks || len != ends[k] - from || len > cap
                || memcmp(buf, want + from, len) != 0)
                return fail("a block differs from the decoder's");
            if (consume) {
                memset(buf + len, 0, 16);
                len = 0;
            }
            if (++k == stop)
                break;
        }
        if (stop == 0 && (r != 0 || k != blocks || tail != 0))
            return fail("the feed did not end where the decoder did");
        if (stop == 0 && feed_take(f, &buf, &len, &cap, 16, &read, &tail) != 0)
            return fail("the end is not said again");
        feed_close(f);
        free(buf);
    }
    free(want);
    puts("test_compactfeed: the feed gives the decoder's blocks");
    return 0;
}
