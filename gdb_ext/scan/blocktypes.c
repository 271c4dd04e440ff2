/* @brief What each block of the heap walk is (dbgkit.core.heap.blocktypes is the reference, in
 * Python, and documents the rules): a C++ class by the vptr at its offset 0, a C string filling
 * it, an array of pointers into the walk's blocks, or unknown. gdb_ext/tests/
 * test_heapwalk_blocktypes.py holds both to the same answer on random heaps. */
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum { UNKNOWN = -1, CHAR_ARRAY = -2, POINTER_ARRAY = -3, MIN_STRING = 4 };

static uint64_t word_at(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

/* index of the last element <= KEY in the ascending A (N), or -1 */
static int64_t last_at_most(const uint64_t *a, uint64_t n, uint64_t key)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (a[mid] <= key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (int64_t)lo - 1;
}

static int is_string(const uint8_t *b, uint64_t usable)
{
    const uint8_t *nul = memchr(b, 0, usable);
    if (!nul)
        return 0;
    uint64_t len = (uint64_t)(nul - b);
    if (len < MIN_STRING || (len + 1 + 16 <= usable && usable != 24))
        return 0;
    for (uint64_t i = 0; i < len; i++)
        if (!((b[i] >= 32 && b[i] < 127) || b[i] == 9 || b[i] == 10 || b[i] == 13))
            return 0;
    return 1;
}

static int is_pointer_array(const uint8_t *b, uint64_t usable, const uint64_t *all_starts,
                            const uint64_t *all_sizes, uint64_t n_all)
{
    uint64_t words = usable / 8, nonzero = 0;
    if (words < 2 || word_at(b) == 0)
        return 0;
    for (uint64_t i = 0; i + 1 < words; i++) {
        uint64_t w = word_at(b + 8 * i);
        if (!w)
            continue;
        int64_t j = last_at_most(all_starts, n_all, w);
        if (j < 0 || w > all_starts[j] + all_sizes[j])
            return 0;
        nonzero++;
    }
    return nonzero >= 2;
}

/* The type code of each block STARTS, SIZES (N, ascending, inside DATA: LEN bytes from address
 * BASE) into OUT: the index of its first word in VPTRS (sorted, N_VPTRS), else POINTER_ARRAY
 * (pointers into ALL_STARTS, ALL_SIZES: every block), CHAR_ARRAY or UNKNOWN. Returns 0, or -1
 * when a block lies outside DATA (its code is then UNKNOWN). */
EXPORT int mds_block_types(const uint8_t *data, uint64_t len, uint64_t base,
                           const uint64_t *starts, const uint64_t *sizes, uint64_t n,
                           const uint64_t *vptrs, uint64_t n_vptrs, const uint64_t *all_starts,
                           const uint64_t *all_sizes, uint64_t n_all, int32_t *out)
{
    int rc = 0;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t off = starts[k] - base, usable = sizes[k];
        out[k] = UNKNOWN;
        if (starts[k] < base || off > len || usable > len - off || usable < 8) {
            rc = -1;
            continue;
        }
        const uint8_t *b = data + off;
        uint64_t first = word_at(b);
        int64_t i = last_at_most(vptrs, n_vptrs, first);
        if (i >= 0 && vptrs[i] == first)
            out[k] = (int32_t)i;
        else if (is_pointer_array(b, usable, all_starts, all_sizes, n_all))
            out[k] = POINTER_ARRAY; /* before strings: blocktypes.py says why */
        else if (is_string(b, usable))
            out[k] = CHAR_ARRAY;
    }
    return rc;
}
