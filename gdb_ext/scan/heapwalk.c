/* @brief The heap walk's loops (dbgkit.core.heap.chunks is the reference, in Python): glibc's
 * chunks of one heap read by their size words, and the blocks in use among them.
 *
 * A heap of 10M chunks is walked here in half a second (most of it zeroing the caller's arrays);
 * the same loop in Python takes 15 s. gdb_ext/tests/test_heapwalk_chunks.py holds both to the same answer on random heaps,
 * corrupt ones included. */
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum { PREV_INUSE = 1, IS_MMAPPED = 2, MINSIZE = 32, ALIGNMENT = 16 };
/* how a walk ended: at LIMIT (the top chunk), at glibc's fencepost (an older heap's end), at a
 * size word that is no chunk's (its offset in *at), with CAP chunks written */
enum { END_LIMIT = 0, END_FENCEPOST = 1, END_BAD = 2, END_FULL = 3 };

static uint64_t word_at(const uint8_t *data, uint64_t off)
{
    uint64_t w;
    memcpy(&w, data + off, sizeof w);
    return w;
}

/* Chunks of the heap whose LEN bytes DATA holds, from address BASE, up to offset LIMIT (the top
 * chunk's: DATA then holds its header too; or the heap's end when FENCEPOST, where a chunk of 16
 * bytes ends it). Writes each chunk's address, size and whether it is in use (its next chunk's
 * PREV_INUSE; the last one before a fencepost or a bad word: in use) into ADDRS, SIZES, USED (CAP
 * entries at most). Returns the number written; *END says why it stopped, *AT the offset of a bad
 * size word. */
EXPORT uint64_t mds_heap_chunks(const uint8_t *data, uint64_t len, uint64_t base, uint64_t limit,
                                int fencepost, uint64_t *addrs, uint64_t *sizes, uint8_t *used,
                                uint64_t cap, int *end, uint64_t *at)
{
    uint64_t n = 0, p = 0;
    int open = 0; /* a chunk written whose in-use bit is the next one's */
    *end = END_LIMIT;
    *at = 0;
    while (p < limit) {
        if (p + 16 > len) {
            *end = END_BAD;
            *at = p;
            break;
        }
        uint64_t size = word_at(data, p + 8), csize = size & ~(uint64_t)7;
        if (open) {
            used[n - 1] = (size & PREV_INUSE) != 0;
            open = 0;
        }
        if (csize == 16 && fencepost) {
            *end = END_FENCEPOST;
            return n;
        }
        if (csize < MINSIZE || csize % ALIGNMENT || p + csize > limit || (size & IS_MMAPPED)) {
            *end = END_BAD;
            *at = p;
            return n;
        }
        if (n == cap) {
            *end = END_FULL;
            *at = p;
            return n;
        }
        addrs[n] = base + p;
        sizes[n] = csize;
        used[n] = 1;
        n++;
        open = 1;
        p += csize;
    }
    if (open && !fencepost && p == limit && p + 16 <= len)
        used[n - 1] = (word_at(data, p + 8) & PREV_INUSE) != 0;
    return n;
}

/* The blocks of the chunks in use that SKIP (sorted addresses, N_SKIP: free on a list, glibc's
 * own) does not name: block address (chunk + 16) and usable size (chunk size - 8) into STARTS and
 * BSIZES; returns how many. */
EXPORT uint64_t mds_heap_blocks(const uint64_t *addrs, const uint64_t *sizes, const uint8_t *used,
                                uint64_t n, const uint64_t *skip, uint64_t n_skip,
                                uint64_t *starts, uint64_t *bsizes)
{
    uint64_t out = 0, k = 0;
    for (uint64_t i = 0; i < n; i++) {
        while (k < n_skip && skip[k] < addrs[i])
            k++;
        if (!used[i] || (k < n_skip && skip[k] == addrs[i]))
            continue;
        starts[out] = addrs[i] + 16;
        bsizes[out] = sizes[i] - 8;
        out++;
    }
    return out;
}

/* Follow a safe-linked list (glibc >= 2.32: a fastbin; its `fd` is stored as
 * ((its own address >> 12) ^ next)) from chunk HEAD while its chunks lie in the heap DATA holds
 * from BASE (LEN bytes) and are chunks of it (ADDRS, N: ascending) of CSIZE bytes. Writes them
 * into OUT (CAP at most); returns how many; *NEXT is where it stopped: 0 at the list's end, else
 * the chunk not taken (outside this heap, no chunk of it, of another size, or CAP reached). */
EXPORT uint64_t mds_heap_list(const uint8_t *data, uint64_t len, uint64_t base, uint64_t head,
                              uint64_t csize, const uint64_t *addrs, const uint64_t *sizes,
                              uint64_t n, uint64_t *out, uint64_t cap, uint64_t *next)
{
    uint64_t count = 0, p = head;
    while (p) {
        if (p < base || p - base + 24 > len || count == cap)
            break;
        uint64_t lo = 0, hi = n;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (addrs[mid] < p)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == n || addrs[lo] != p || sizes[lo] != csize)
            break;
        out[count++] = p;
        p = ((p + 16) >> 12) ^ word_at(data, p - base + 16);
    }
    *next = p;
    return count;
}
