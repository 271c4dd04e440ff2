/* @brief libmemdump_scan's page directory (which block holds an address), its reads of the
 * process (from the snapshot, else pread on /proc/PID/mem) and valgrind's heuristics
 * (memdump_scan.c says the rest). */
#include "scan.h"

#include <errno.h>
#include <sys/uio.h>

static uint64_t cover_end(const struct scanner *s, uint64_t i)
{
    uint64_t end = block_end(s, i);
    if (i + 1 < s->n && s->starts[i + 1] < end)
        end = s->starts[i + 1];
    return end;
}

static struct page_entry *page_slot(const struct scanner *s, uint64_t key)
{
    uint64_t h = page_hash(key, s->page_mask);
    while (s->pages[h].key && s->pages[h].key != key)
        h = (h + 1) & s->page_mask;
    return &s->pages[h];
}

int build_pages(struct scanner *s)
{
    uint64_t distinct = 0, last = UINT64_MAX;
    for (uint64_t i = 0; i < s->n; i++) {
        uint64_t first = s->starts[i] >> PAGE_SHIFT, end = cover_end(s, i);
        if (end <= s->starts[i])
            continue;
        uint64_t final = (end - 1) >> PAGE_SHIFT;
        distinct += final - first + 1 - (first == last);
        last = final;
    }
    uint64_t cap = 16;
    while (cap < distinct + distinct / 2)
        cap <<= 1;
    s->pages = calloc(cap, sizeof *s->pages);
    if (!s->pages)
        return -1;
    s->page_mask = cap - 1;
    for (uint64_t i = 0; i < s->n; i++) {
        uint64_t start = s->starts[i], end = cover_end(s, i);
        uint64_t final = end > start ? (end - 1) >> PAGE_SHIFT : start >> PAGE_SHIFT;
        for (uint64_t p = start >> PAGE_SHIFT; p <= final; p++) {
            struct page_entry *e = page_slot(s, p + 1);
            if (!e->key) {
                e->key = p + 1;
                e->first = (uint32_t)(start >> PAGE_SHIFT == p ? i : i + 1);
            }
        }
        struct page_entry *e = page_slot(s, (start >> PAGE_SHIFT) + 1); /* its start's page */
        unsigned g = (unsigned)(start & (PAGE - 1)) >> 5;
        if (e->bits[g / 64] & (uint64_t)1 << (g % 64))
            e->multi = 1;
        e->bits[g / 64] |= (uint64_t)1 << (g % 64);
    }
    for (uint64_t h = 0; h <= s->page_mask; h++)
        s->pages[h].low = (uint16_t)popcount(s->pages[h].bits[0]);
    return 0;
}

/* -- reading ------------------------------------------------------------------------------ */

/* SIZE bytes at ADDR, all of them or 0: with process_vm_readv when there is a pid (one system
 * call without the page walk of /proc/PID/mem), else, or when it fails, with pread (which also
 * reads what process_vm_readv cannot, such as PROT_NONE pages: the same answer as reach.py). */
int read_exact(struct scanner *s, void *buf, uint64_t addr, uint64_t size)
{
    if (s->pid > 0) {
        struct iovec local = {buf, size}, remote = {(void *)(uintptr_t)addr, size};
        ssize_t got = process_vm_readv(s->pid, &local, 1, &remote, 1, 0);
        if (got == (ssize_t)size)
            return 1;
        if (got < 0 && errno != EFAULT)
            s->pid = 0; /* refused: pread from now on */
    }
    return pread(s->fd, buf, size, (off_t)addr) == (ssize_t)size;
}

/* SIZE bytes at ADDR from the snapshot, else through cached 4 KiB pages (the heuristics look at
 * words scattered over the heap: a page costs one pread as a word does); 0 when unreadable. */
int get_small(struct scanner *s, void *out, uint64_t addr, uint64_t size)
{
    const uint8_t *held = snapped(s, addr, size);
    if (held) {
        memcpy(out, held, size);
        return 1;
    }
    uint64_t key = addr >> WORD_BITS;
    if ((addr + size - 1) >> WORD_BITS == key) {
        unsigned slot = (unsigned)(key % WORD_CACHED);
        struct window *w = &s->small[slot];
        uint8_t *data = s->small_mem + ((uint64_t)slot << WORD_BITS);
        if (!w->valid || w->key != key) {
            ssize_t r = pread(s->fd, data, (size_t)1 << WORD_BITS, (off_t)(key << WORD_BITS));
            w->key = key;
            w->len = r > 0 ? (uint64_t)r : 0;
            w->valid = 1;
        }
        uint64_t off = addr - (key << WORD_BITS);
        if (off + size <= w->len) {
            memcpy(out, data + off, size);
            return 1;
        }
    }
    return read_exact(s, out, addr, size);
}

int word_at(struct scanner *s, uint64_t addr, uint64_t *out)
{
    return get_small(s, out, addr, 8);
}

/* index of the range in PAIRS (start, end, sorted) holding ADDR, or -1 */
int64_t in_ranges(const uint64_t *pairs, uint64_t n, uint64_t addr)
{
    uint64_t lo = 0, hi = n; /* first range starting above addr */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (pairs[2 * mid] <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || addr >= pairs[2 * (lo - 1) + 1])
        return -1;
    return (int64_t)(lo - 1);
}

/* A small block's LEN bytes at FIRST, whole, or NULL when any is unreadable: from the snapshot,
 * else read in runs: a window around the block (within its mapping) whose size follows how much of
 * the previous windows the scan used, from one page (blocks taken far apart) to 1 MiB (blocks
 * taken in address order, the common case). */
const uint8_t *block_data(struct scanner *s, uint64_t first, uint64_t len)
{
    const uint8_t *held = snapped(s, first, len);
    if (held)
        return held;
    for (unsigned k = 0; k < RUNS; k++) {
        struct run *r = &s->runs[k];
        if (first >= r->lo && first + len <= r->hi) {
            r->used += len;
            return r->data + (first - r->lo);
        }
    }
    int64_t m = in_ranges(s->a->maps, s->a->n_maps, first);
    if (m >= 0 && first + len <= s->a->maps[2 * m + 1]) {
        struct run *r = &s->runs[s->run_next];
        s->run_next = (s->run_next + 1) % RUNS;
        if (r->hi > r->lo) { /* the run it replaces tells how far to read ahead */
            if (r->used * 4 < r->hi - r->lo && s->run_size > RUN_MIN)
                s->run_size /= 2;
            else if (r->used * 2 >= r->hi - r->lo && s->run_size < RUN_MAX)
                s->run_size *= 2;
        }
        uint64_t map_lo = s->a->maps[2 * m], map_hi = s->a->maps[2 * m + 1];
        uint64_t lo = first & ~(s->run_size - 1), hi = lo + s->run_size;
        if (lo < map_lo)
            lo = map_lo;
        if (hi < first + len) /* the block crosses the grid: the run ends on its last page */
            hi = ((first + len) + PAGE - 1) & ~(uint64_t)(PAGE - 1);
        if (hi > map_hi)
            hi = map_hi;
        ssize_t got = pread(s->fd, r->data, hi - lo, (off_t)lo);
        r->lo = lo;
        r->hi = lo + (got > 0 ? (uint64_t)got : 0);
        r->used = 0;
        if (first >= r->lo && first + len <= r->hi) {
            r->used = len;
            return r->data + (first - r->lo);
        }
    }
    return read_exact(s, s->exact, first, len) ? s->exact : NULL;
}

/* -- heuristics (mc_leakcheck.c heuristic_reachedness) --------------------------------------- */

static int is_vtable(struct scanner *s, uint64_t addr)
{
    unsigned slot = (unsigned)(addr >> 3) % VT_SLOTS;
    if (s->vt_key[slot] == addr + 1)
        return s->vt_val[slot];
    int result = 0;
    int64_t k = in_ranges(s->a->file_maps, s->a->n_file, addr);
    if (k >= 0) {
        uint64_t last = addr + VTABLE_MAX_CHECK * 8, map_end = s->a->file_maps[2 * k + 1];
        if (map_end - 8 < last)
            last = map_end - 8;
        uint64_t table[VTABLE_MAX_CHECK + 1];
        if (last >= addr && get_small(s, table, addr, last - addr + 8)) {
            uint64_t words = (last - addr + 8) / 8, found = 0;
            for (uint64_t w = 0; w < words; w++) {
                if (table[w] == 0)
                    continue;
                if (in_ranges(s->a->exec_maps, s->a->n_exec, table[w]) < 0)
                    break;
                if (++found == 2) {
                    result = 1;
                    break;
                }
            }
        }
    }
    s->vt_key[slot] = addr + 1;
    s->vt_val[slot] = (uint8_t)result;
    return result;
}

/* FIRST_VTABLE when block i's first word is a vtable's address, else FIRST_OTHER (worked out
 * once: it depends on memory alone) */
int first_word_of(struct scanner *s, uint64_t i)
{
    uint64_t w0;
    if (s->blk[i].first == FIRST_UNKNOWN)
        s->blk[i].first = extent_of(s, i) >= 8 && word_at(s, s->blk[i].start, &w0) && w0 % 8 == 0
                                  && w0 >= PAGE && is_vtable(s, w0)
                              ? FIRST_VTABLE
                              : FIRST_OTHER;
    return s->blk[i].first;
}

int heuristic_for(struct scanner *s, uint64_t ptr, uint64_t i)
{
    /* ptr is not the start: the block is not empty and its extent is its size */
    uint64_t start = s->blk[i].start, size = extent_of(s, i), w0, w1;
    unsigned h = s->hmask;
    if ((h & HBIT(H_STDSTRING)) && ptr == start + 24 && size >= 16) {
        if (word_at(s, start + 8, &w1) && size >= 25 && w1 == size - 25 && word_at(s, start, &w0)
            && w0 <= w1)
            return H_STDSTRING;
    }
    if ((h & (HBIT(H_LENGTH64) | HBIT(H_NEWARRAY))) && ptr == start + 8) {
        if (word_at(s, start, &w0) && w0) {
            if ((h & HBIT(H_LENGTH64)) && size - 8 == w0)
                return H_LENGTH64;
            if ((h & HBIT(H_NEWARRAY)) && (size - 8) % w0 == 0)
                return H_NEWARRAY;
        }
    }
    if ((h & HBIT(H_MULTIPLE)) && ptr % 8 == 0 && ptr + 8 <= start + size && size >= 8) {
        /* reach.py's test, its terms taken in another order (none has an effect): the one on
         * the block's first word, known once per block, comes first */
        if (first_word(s, i) == FIRST_VTABLE && word_at(s, ptr, &w1) && w1 % 8 == 0
            && w1 >= PAGE && is_vtable(s, w1))
            return H_MULTIPLE;
    }
    return 0;
}

