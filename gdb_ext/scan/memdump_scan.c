/* libmemdump_scan: the heavy part of memdump's pointer scan at exit (dbgkit.core.reach), in C.
 *
 * dbgkit/core/reach.py is the reference: this file does what its _Scanner does (marking from the
 * roots, block scanning, the heuristics, the glibc chunk-header exception, cliques and their
 * leaders) with the same rules in the same order, so that both give the same answer, word for
 * word. Python chooses the roots and turns the arrays this fills into a ScanResult
 * (dbgkit/core/reach_fast.py).
 *
 * Order matters in one place: which heuristic a block is credited with (a start pointer found
 * after a heuristic one clears it). Both implementations look at a block's words in memory order
 * and take the blocks to scan from one stack, last pushed first.
 *
 * Memory of the process is read with pread(2) on the /proc/PID/mem descriptor the caller passes
 * (the address is the offset; a short read means unreadable memory, as in reach.py).
 *
 * Cost, per live block: its address and size (16 bytes, the caller's arrays), state, pending flag
 * and heuristic (3 bytes), owner/leader (4 bytes, the caller's array), a stack slot (4 bytes),
 * and at most one entry of the page directory (16 bytes, at most 2 slots of it per distinct page
 * holding or covered by a block). Plus fixed buffers: 4 MiB of 64 KiB windows for the heuristics'
 * small reads, 16 read-ahead runs of up to 1 MiB for small blocks, 1 MiB for roots and big blocks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum { UNREACHED = 0, POSSIBLE = 1, REACHABLE = 2, INDIRECT = 3 };
/* heuristics: the bit a caller sets in mds_args.heuristics is 1 << (code - 1) */
enum { H_STDSTRING = 1, H_LENGTH64 = 2, H_NEWARRAY = 3, H_MULTIPLE = 4 };
#define HBIT(code) (1u << ((code) - 1))

#define PAGE 4096u
#define PAGE_SHIFT 12
#define WINDOW (1u << 20)        /* roots and big blocks are read in pieces of this size */
#define SMALL_BITS 16
#define SMALL (1u << SMALL_BITS) /* a block up to this size is read whole (or not at all) */
#define SMALL_CACHED 64
#define RUNS 16
#define RUN_MIN PAGE
#define RUN_MAX WINDOW
#define VTABLE_MAX_CHECK 20
#define VT_SLOTS 4096
#define TICK_EVERY (8u * WINDOW)
#define NO_OWNER UINT32_MAX

typedef int (*mds_tick_fn)(uint64_t scanned, uint64_t pending);

/* Every field is 8 bytes: ctypes mirrors it as a list of c_uint64 / c_void_p. */
struct mds_args {
    int64_t fd;
    uint64_t heuristics;               /* HBIT(code) of each heuristic to try */
    uint64_t n_blocks;
    const uint64_t *starts;            /* sorted, distinct */
    const uint64_t *sizes;
    uint64_t n_roots;
    const uint64_t *roots;             /* start, end, allocator (0/1) per root */
    uint64_t n_registers;
    const uint64_t *registers;
    uint64_t n_exec;
    const uint64_t *exec_maps;         /* start, end: executable file mappings, sorted */
    uint64_t n_file;
    const uint64_t *file_maps;         /* start, end: readable file mappings, sorted */
    uint64_t n_maps;
    const uint64_t *maps;              /* start, end: every mapping, sorted (bounds read-ahead) */
    mds_tick_fn tick;                  /* every 8 MiB scanned; non-zero return stops the scan */
    uint8_t *state;                    /* out: UNREACHED..INDIRECT per block */
    uint8_t *heuristic;                /* out: heuristic code of a block reached through one */
    uint32_t *leader;                  /* out: an indirect block's clique leader, else NO_OWNER */
    uint64_t root_bytes, block_bytes, skipped_bytes; /* out */
};

struct page_entry { uint64_t key; uint32_t lo, hi; }; /* key: page number + 1, 0 free */
struct window { uint64_t key; uint64_t len; int valid; };
struct run { uint64_t lo, hi, used; uint8_t *data; };

struct scanner {
    struct mds_args *a;
    int fd;
    const uint64_t *starts, *sizes;
    uint64_t n, lo, hi;
    struct page_entry *pages;
    uint64_t page_mask;
    uint8_t *state, *pending, *heur;
    uint32_t *owner, *stack;
    uint64_t sp;
    unsigned hmask;
    struct window small[SMALL_CACHED];
    uint8_t *small_mem;
    struct run runs[RUNS];
    unsigned run_next;
    uint64_t run_size;
    uint8_t *chunk, *exact;
    uint64_t vt_key[VT_SLOTS];
    uint8_t vt_val[VT_SLOTS];
    uint64_t scanned, next_check;
};

static uint64_t block_end(const struct scanner *s, uint64_t i)
{
    /* a block of 0 bytes is found by a pointer to its start (mc_leakcheck.c) */
    return s->starts[i] + (s->sizes[i] ? s->sizes[i] : 1);
}

static int read_exact(const struct scanner *s, void *buf, uint64_t addr, uint64_t size)
{
    return pread(s->fd, buf, size, (off_t)addr) == (ssize_t)size;
}

/* -- the page directory: page -> the blocks that may hold an address in it ------------------ */

static uint64_t page_hash(uint64_t key, uint64_t mask)
{
    return (key * 0x9E3779B97F4A7C15ull) >> 17 & mask;
}

/* Block i may be "the last block starting at or below p, with p inside it" for p in
 * [start, min(end, next start)): every page of that range lists it (lo: the first such block
 * of the page, hi: the last). The ranges of successive blocks follow each other. */
static uint64_t cover_end(const struct scanner *s, uint64_t i)
{
    uint64_t end = block_end(s, i);
    if (i + 1 < s->n && s->starts[i + 1] < end)
        end = s->starts[i + 1];
    return end;
}

static int build_pages(struct scanner *s)
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
        uint64_t end = cover_end(s, i);
        if (end <= s->starts[i])
            continue;
        for (uint64_t p = s->starts[i] >> PAGE_SHIFT; p <= (end - 1) >> PAGE_SHIFT; p++) {
            uint64_t h = page_hash(p + 1, s->page_mask);
            while (s->pages[h].key && s->pages[h].key != p + 1)
                h = (h + 1) & s->page_mask;
            if (!s->pages[h].key) {
                s->pages[h].key = p + 1;
                s->pages[h].lo = (uint32_t)i;
            }
            s->pages[h].hi = (uint32_t)i;
        }
    }
    return 0;
}

/* The block holding ptr (reach's find: the last block starting at or below it), or -1. */
static inline int64_t find(const struct scanner *s, uint64_t ptr)
{
    if (ptr < s->lo || ptr >= s->hi)
        return -1;
    uint64_t key = (ptr >> PAGE_SHIFT) + 1, h = page_hash(key, s->page_mask);
    const struct page_entry *e;
    for (;;) {
        e = &s->pages[h];
        if (e->key == key)
            break;
        if (!e->key)
            return -1;
        h = (h + 1) & s->page_mask;
    }
    uint64_t lo = e->lo, hi = e->hi;
    if (s->starts[lo] > ptr)
        return -1;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2;
        if (s->starts[mid] <= ptr)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (lo + 1 < s->n && s->starts[lo + 1] <= ptr)
        return -1; /* a later block starts below ptr and does not reach it */
    return ptr < block_end(s, lo) ? (int64_t)lo : -1;
}

/* -- reading ------------------------------------------------------------------------------ */

/* SIZE bytes at ADDR (SIZE <= SMALL) through cached 64 KiB windows; 0 when unreadable. */
static int get_small(struct scanner *s, void *out, uint64_t addr, uint64_t size)
{
    uint64_t key = addr >> SMALL_BITS;
    if ((addr + size - 1) >> SMALL_BITS == key) {
        unsigned slot = key % SMALL_CACHED;
        struct window *w = &s->small[slot];
        uint8_t *data = s->small_mem + (uint64_t)slot * SMALL;
        if (!w->valid || w->key != key) {
            ssize_t r = pread(s->fd, data, SMALL, (off_t)(key << SMALL_BITS));
            w->key = key;
            w->len = r > 0 ? (uint64_t)r : 0;
            w->valid = 1;
        }
        uint64_t off = addr - (key << SMALL_BITS);
        if (off + size <= w->len) {
            memcpy(out, data + off, size);
            return 1;
        }
    }
    return read_exact(s, out, addr, size);
}

static int word_at(struct scanner *s, uint64_t addr, uint64_t *out)
{
    return get_small(s, out, addr, 8);
}

/* index of the range in PAIRS (start, end, sorted) holding ADDR, or -1 */
static int64_t in_ranges(const uint64_t *pairs, uint64_t n, uint64_t addr)
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

/* A small block's LEN bytes at FIRST, whole, or NULL when any is unreadable. Small blocks are
 * read in runs: a window around the block (within its mapping) whose size follows how much of
 * the previous windows the scan used, from one page (blocks taken far apart) to 1 MiB (blocks
 * taken in address order, the common case). */
static const uint8_t *block_data(struct scanner *s, uint64_t first, uint64_t len)
{
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

static int tick(struct scanner *s, uint64_t nbytes)
{
    s->scanned += nbytes;
    if (s->scanned >= s->next_check) {
        s->next_check = s->scanned + TICK_EVERY;
        if (s->a->tick && s->a->tick(s->scanned, s->sp))
            return -1;
    }
    return 0;
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

static int heuristic_for(struct scanner *s, uint64_t ptr, uint64_t i)
{
    uint64_t start = s->starts[i], size = s->sizes[i], w0, w1;
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
        if (word_at(s, ptr, &w1) && w1 % 8 == 0 && w1 >= PAGE && word_at(s, start, &w0)
            && w0 % 8 == 0 && w0 >= PAGE && is_vtable(s, w1) && is_vtable(s, w0))
            return H_MULTIPLE;
    }
    return 0;
}

/* -- marking ------------------------------------------------------------------------------ */

static void push(struct scanner *s, uint64_t i)
{
    if (!s->pending[i]) {
        s->pending[i] = 1;
        s->stack[s->sp++] = (uint32_t)i;
    }
}

/* ptr is the glibc chunk header that follows block i (main_arena.top, bins) */
static int is_header_after(struct scanner *s, uint64_t ptr, uint64_t i)
{
    uint64_t size_field, base = s->starts[i] - 16;
    if (!word_at(s, s->starts[i] - 8, &size_field))
        return 0;
    uint64_t add = size_field & ~(uint64_t)7;
    return add <= UINT64_MAX - base && ptr == base + add;
}

static void mark(struct scanner *s, uint64_t ptr, int definite, int allocator)
{
    int64_t found = find(s, ptr);
    if (found < 0)
        return;
    uint64_t i = (uint64_t)found;
    uint8_t state = s->state[i];
    uint64_t start = s->starts[i];
    if (state == REACHABLE) {
        if (ptr == start)
            s->heur[i] = 0;
        return;
    }
    int via_start;
    if (ptr == start) {
        via_start = 1;
    } else {
        if (allocator && is_header_after(s, ptr, i))
            return;
        int name = s->hmask ? heuristic_for(s, ptr, i) : 0;
        via_start = name != 0;
        if (name && definite)
            s->heur[i] = (uint8_t)name;
    }
    if (via_start && definite) {
        s->state[i] = REACHABLE;
        push(s, i);
    } else if (state == UNREACHED) {
        s->state[i] = POSSIBLE;
        push(s, i);
    }
}

static void words(struct scanner *s, const uint8_t *data, uint64_t len, int64_t clique,
                  int definite, int allocator)
{
    uint64_t lo = s->lo, hi = s->hi;
    for (uint64_t off = 0; off + 8 <= len; off += 8) {
        uint64_t w;
        memcpy(&w, data + off, 8);
        if (w < lo || w >= hi)
            continue;
        if (clique < 0) {
            mark(s, w, definite, allocator);
            continue;
        }
        int64_t j = find(s, w);
        if (j >= 0 && j != clique && s->state[j] == UNREACHED) {
            s->state[j] = INDIRECT;
            s->owner[j] = (uint32_t)clique;
            push(s, (uint64_t)j);
        }
    }
}

/* [start, end) in WINDOW pieces, page by page where a piece is unreadable (reach's chunks) */
static int chunks(struct scanner *s, uint64_t start, uint64_t end, int root, int64_t clique,
                  int definite, int allocator)
{
    for (uint64_t addr = start; addr < end; addr += WINDOW) {
        uint64_t n = end - addr < WINDOW ? end - addr : WINDOW;
        if (read_exact(s, s->chunk, addr, n)) {
            if (root) {
                s->a->root_bytes += n;
                if (tick(s, n))
                    return -1;
            }
            words(s, s->chunk, n, clique, definite, allocator);
            continue;
        }
        for (uint64_t page = addr; page < addr + n; page += PAGE) {
            uint64_t size = PAGE - page % PAGE;
            if (size > addr + n - page)
                size = addr + n - page;
            if (!read_exact(s, s->chunk, page, size)) {
                s->a->skipped_bytes += size;
                continue;
            }
            if (root) {
                s->a->root_bytes += size;
                if (tick(s, size))
                    return -1;
            }
            words(s, s->chunk, size, clique, definite, allocator);
        }
    }
    return 0;
}

static int scan_block(struct scanner *s, uint64_t i, int64_t clique, int definite)
{
    uint64_t start = s->starts[i];
    uint64_t first = (start + 7) & ~(uint64_t)7, end = (start + s->sizes[i]) & ~(uint64_t)7;
    if (end <= first)
        return 0;
    s->a->block_bytes += end - first;
    if (end - first <= SMALL) {
        const uint8_t *data = block_data(s, first, end - first);
        if (tick(s, end - first))
            return -1;
        if (data)
            words(s, data, end - first, clique, definite, 0);
        return 0;
    }
    if (tick(s, end - first))
        return -1;
    return chunks(s, first, end, 0, clique, definite, 0);
}

static int process(struct scanner *s, int64_t clique)
{
    while (s->sp) {
        uint64_t top = s->stack[--s->sp];
        s->pending[top] = 0;
        if (scan_block(s, top, clique, s->state[top] != POSSIBLE))
            return -1;
    }
    return 0;
}

static int run(struct scanner *s)
{
    struct mds_args *a = s->a;
    for (uint64_t r = 0; r < a->n_roots; r++) {
        uint64_t first = (a->roots[3 * r] + 7) & ~(uint64_t)7;
        uint64_t end = a->roots[3 * r + 1] & ~(uint64_t)7;
        if (chunks(s, first, end, 1, -1, 1, a->roots[3 * r + 2] != 0))
            return -1;
    }
    for (uint64_t k = 0; k < a->n_registers; k++)
        if (a->registers[k] >= s->lo && a->registers[k] < s->hi)
            mark(s, a->registers[k], 1, 0);
    if (process(s, -1))
        return -1;
    for (uint64_t i = 0; i < s->n; i++) {
        if (s->state[i] == UNREACHED) {
            push(s, i);
            if (process(s, (int64_t)i))
                return -1;
        }
    }
    return 0;
}

/* Each indirect block's final leader: its owner, or the owner's, until a definite one. */
static void resolve_leaders(struct scanner *s)
{
    uint32_t *owner = s->owner;
    for (uint64_t i = 0; i < s->n; i++) {
        if (s->state[i] != INDIRECT)
            continue;
        uint32_t j = owner[i];
        while (s->state[j] == INDIRECT)
            j = owner[j];
        for (uint32_t k = (uint32_t)i; s->state[k] == INDIRECT && owner[k] != j;) {
            uint32_t next = owner[k];
            owner[k] = j;
            k = next;
        }
    }
}

/* 0: done; 1: the tick callback stopped it; -1: out of memory or too many blocks. */
EXPORT int mds_scan(struct mds_args *a)
{
    struct scanner *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    int rc = -1;
    s->a = a;
    s->fd = (int)a->fd;
    s->starts = a->starts;
    s->sizes = a->sizes;
    s->n = a->n_blocks;
    s->state = a->state;
    s->heur = a->heuristic;
    s->owner = a->leader;
    s->hmask = (unsigned)a->heuristics;
    s->run_size = 64 * 1024;
    a->root_bytes = a->block_bytes = a->skipped_bytes = 0;
    if (s->n >= NO_OWNER)
        goto out;
    memset(s->state, UNREACHED, s->n);
    memset(s->heur, 0, s->n);
    for (uint64_t i = 0; i < s->n; i++)
        s->owner[i] = NO_OWNER;
    if (s->n == 0) {
        rc = 0;
        goto out;
    }
    s->lo = s->starts[0];
    for (uint64_t i = 0; i < s->n; i++)
        if (block_end(s, i) > s->hi)
            s->hi = block_end(s, i);
    s->pending = calloc(s->n, 1);
    s->stack = malloc(s->n * sizeof *s->stack);
    s->small_mem = malloc((uint64_t)SMALL_CACHED * SMALL);
    s->chunk = malloc(WINDOW);
    s->exact = malloc(SMALL);
    int ok = s->pending && s->stack && s->small_mem && s->chunk && s->exact;
    for (unsigned k = 0; ok && k < RUNS; k++)
        ok = (s->runs[k].data = malloc(RUN_MAX + SMALL + PAGE)) != NULL;
    if (!ok || build_pages(s))
        goto out;
    rc = run(s) ? 1 : 0;
    if (rc == 0)
        resolve_leaders(s);
out:
    for (unsigned k = 0; k < RUNS; k++)
        free(s->runs[k].data);
    free(s->pages);
    free(s->pending);
    free(s->stack);
    free(s->small_mem);
    free(s->chunk);
    free(s->exact);
    free(s);
    return rc;
}

/* The layout this file was built with, checked by the loader: 1 and sizeof(struct mds_args). */
EXPORT uint64_t mds_abi(void)
{
    return (uint64_t)1 << 32 | sizeof(struct mds_args);
}
