/* @brief libmemdump_scan: the heavy part of memdump's pointer scan at exit (dbgkit.core.reach), in C.
 *
 * dbgkit/core/reach.py is the reference: this file does what its _Scanner does (marking from the
 * roots, block scanning, the heuristics, glibc's chunk headers (is_next_header), cliques and
 * their leaders) with the same rules in the same order, so that both give the same answer, word
 * for word. Python chooses the roots and turns the arrays this fills into a ScanResult
 * (dbgkit/core/reach_fast.py). memory.c holds the page directory, the reads and the heuristics.
 *
 * Order matters in one place: which heuristic a block is credited with (a start pointer found
 * after a heuristic one clears it). Both implementations look at a block's words in memory order
 * and take the blocks to scan from one stack, last pushed first.
 *
 * Memory of the process: before the marking, the blocks are copied into a snapshot in this
 * process with few process_vm_readv(2) calls (snapshot.c); the marking then finds a block's
 * bytes there, without a system call. Whatever the snapshot does not hold whole (no snapshot:
 * over the caller's budget; pages process_vm_readv cannot copy) is read as before with pread(2) on
 * the /proc/PID/mem descriptor the caller passes (the address is the offset; a short read means
 * unreadable memory, as in reach.py): the answer is the same either way. Roots are read with
 * process_vm_readv, then pread if it fails.
 *
 * Cost, per live block: its address and size (16 bytes, the caller's arrays), state and
 * heuristic (2 bytes, the caller's arrays), owner/leader (4 bytes, the caller's array), a stack
 * slot (4 bytes), its record (16 bytes: start, extent, state, pending flag, heuristic, the test
 * of its first word), and at most one entry of the page directory (32 bytes, up to 3 slots per
 * distinct page holding or covered by a block: at most 96 bytes per block and 24 per KiB of
 * heap). The snapshot: the blocks' bytes with their 16-byte chunk headers and the gaps of less
 * than a page between neighbours (on scan_bench's heap 1.02 times the live bytes; a sparse heap
 * costs more, up to a page per block), plus 24 bytes per piece of it (at most one per block),
 * only while the scan runs and only when it fits in the caller's budget (reach_fast: half of
 * MemAvailable), else none. Plus fixed buffers: 4 MiB of 4 KiB pages for the heuristics' word
 * reads, 16 read-ahead runs of up to 1 MiB for small blocks, 1 MiB for roots and big blocks.
 */
#include "scan.h"

#include <sys/mman.h>

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

/* -- marking ------------------------------------------------------------------------------ */

static void push(struct scanner *s, uint64_t i)
{
    if (!s->blk[i].pending) {
        s->blk[i].pending = 1;
        s->stack[s->sp++] = (uint32_t)i;
    }
}

/* ptr, inside block i, is the address of glibc's chunk header that follows it (reach.py's
 * is_next_header): the allocator's word (a bin, the top, a free chunk's fd/bk or what it left in
 * recycled memory), not the program's pointer into block i. Block i must fill its chunk (24, 40,
 * 56 ... bytes) and its size word be glibc's: in use, not IS_MMAPPED, its usable bytes holding
 * it. */
static int is_next_header(struct scanner *s, uint64_t ptr, uint64_t i)
{
    uint64_t start = s->blk[i].start, off = ptr - start, size = s->sizes[i], size_field;
    if (off < MINSIZE - 16 || off % CHUNK_ALIGN || size - off > 8)
        return 0;
    if (!word_at(s, start - 8, &size_field) || (size_field & IS_MMAPPED))
        return 0;
    uint64_t chunk = size_field & ~(uint64_t)SIZE_FLAGS;
    return off == chunk - 16 && size <= chunk - 8;
}

/* ptr, found in block I: mark's cases that change something or need a look */
static __attribute__((noinline)) void mark_slow(struct scanner *s, uint64_t ptr, uint64_t i,
                                                int definite)
{
    uint8_t state = s->blk[i].state;
    uint64_t start = s->blk[i].start;
    if (state == REACHABLE) {
        if (ptr == start)
            s->blk[i].heur = 0;
        return;
    }
    int via_start;
    if (ptr == start) {
        via_start = 1;
    } else {
        if (is_next_header(s, ptr, i))
            return;
        /* from a possibly lost block a heuristic changes nothing: no need to look */
        int name = s->hmask && definite ? heuristic_for(s, ptr, i) : 0;
        via_start = name != 0;
        if (name && definite)
            s->blk[i].heur = (uint8_t)name;
    }
    if (via_start && definite) {
        s->blk[i].state = REACHABLE;
        push(s, i);
    } else if (state == UNREACHED) {
        s->blk[i].state = POSSIBLE;
        push(s, i);
    }
}

/* ptr, found in block FOUND (or -1: none) */
static inline void mark(struct scanner *s, uint64_t ptr, int64_t found, int definite)
{
    if (found < 0)
        return;
    struct span *b = &s->blk[found];
    if (b->state == REACHABLE) {
        if (ptr == b->start)
            b->heur = 0;
        return;
    }
    if (b->state == POSSIBLE) { /* cases where mark_slow would change nothing */
        if (!definite)
            return;
        /* no heuristic can apply: they look at pointers to start + 8 and start + 24, and at
         * any word of a block whose first word is a vtable's address */
        uint64_t off = ptr - b->start;
        if (off != 0 && off != 8 && off != 24
            && (b->first == FIRST_OTHER || !(s->hmask & HBIT(H_MULTIPLE))))
            return;
    }
    mark_slow(s, ptr, (uint64_t)found, definite);
}

/* A pointer at OFF into block J, found while a block is scanned as possibly lost, that may
 * change something when that block is scanned again as reachable: one to a block's start, or one
 * a heuristic looks at. Every other pointer then finds its block possibly lost or reachable (the
 * first scan left no block it points to unreached) and changes nothing: mark's fast path. */
static inline int matters_later(struct scanner *s, uint64_t off, uint64_t j)
{
    return off == 0 || off == 8 || off == 24
           || ((s->hmask & HBIT(H_MULTIPLE)) && first_word(s, j) != FIRST_OTHER);
}

/* Keeps what the pointer at OFF into block J means for the block being scanned (memo_open) */
static inline void remember(struct scanner *s, uint64_t off, uint64_t j)
{
    if (!matters_later(s, off, j))
        return;
    if (s->memo_used == s->memo_cap || off > UINT32_MAX) {
        s->memo_open = 0; /* this block is read again when it is scanned as reachable */
        return;
    }
    s->memo_entries[s->memo_used++] = j << 32 | off;
}

/* ptr, found in a block (or a root), in block J (or -1): what it changes */
static inline void found(struct scanner *s, uint64_t ptr, int64_t j, int64_t clique,
                         int definite)
{
    if (clique < 0) {
        if (s->memo_open && j >= 0)
            remember(s, ptr - s->blk[j].start, (uint64_t)j);
        mark(s, ptr, j, definite);
        return;
    }
    if (j >= 0 && j != clique && s->blk[j].state == UNREACHED
        && !is_next_header(s, ptr, (uint64_t)j)) {
        s->blk[j].state = INDIRECT;
        s->owner[j] = (uint32_t)clique;
        push(s, (uint64_t)j);
    }
}

/* Built twice, the loader's ifunc choosing: with popcnt where the CPU has it, and without */
#if defined(__x86_64__) && !defined(__POPCNT__)
#define CLONED __attribute__((target_clones("popcnt", "default")))
#else
#define CLONED
#endif

CLONED static void words(struct scanner *s, const uint8_t *data, uint64_t len, int64_t clique,
                         int definite)
{
    /* A batch of words at a time: first the words inside [lo, hi) are picked out (most of a
     * heap's words are not pointers: that costs a compare), then each one's lookup is
     * pipelined: the page directory's entry of the pointer 2 * AHEAD on is fetched, and the
     * block record of the candidate of the one AHEAD on, while this one is settled and marked.
     * Memory order is kept: it decides which heuristic a block is credited with. */
    uint64_t ptr[BATCH], slot[BATCH];
    int64_t cand[BATCH];
    const uint64_t lo = s->lo, range = s->hi - s->lo, n = len / 8;
    for (uint64_t base = 0; base < n; base += BATCH) {
        uint64_t m = n - base < BATCH ? n - base : BATCH, k = 0;
        for (uint64_t t = 0; t < m; t++) {
            uint64_t w;
            memcpy(&w, data + 8 * (base + t), 8);
            ptr[k] = w;
            k += w - lo < range;
        }
        for (uint64_t t = 0; t < k + 2 * AHEAD; t++) {
            if (t < k) {
                slot[t] = page_hash((ptr[t] >> PAGE_SHIFT) + 1, s->page_mask);
                __builtin_prefetch(&s->pages[slot[t]]);
            }
            if (t >= AHEAD && t - AHEAD < k) {
                uint64_t u = t - AHEAD;
                cand[u] = lookup_at(s, ptr[u], slot[u]);
                const struct span *b = candidate_block(s, cand[u]);
                if (b)
                    __builtin_prefetch(b);
            }
            if (t >= 2 * AHEAD) {
                uint64_t u = t - 2 * AHEAD;
                if (cand[u] >= 0)
                    found(s, ptr[u], settle(s, ptr[u], cand[u]), clique, definite);
            }
        }
    }
}

/* [start, end) in WINDOW pieces, page by page where a piece is unreadable (reach's chunks) */
static int chunks(struct scanner *s, uint64_t start, uint64_t end, int root, int64_t clique,
                  int definite)
{
    for (uint64_t addr = start; addr < end; addr += WINDOW) {
        uint64_t n = end - addr < WINDOW ? end - addr : WINDOW;
        const uint8_t *data = snapped(s, addr, n);
        if (data || read_exact(s, s->chunk, addr, n)) {
            if (root) {
                s->a->root_bytes += n;
                if (tick(s, n))
                    return -1;
            }
            words(s, data ? data : s->chunk, n, clique, definite);
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
            words(s, s->chunk, size, clique, definite);
        }
    }
    return 0;
}

/* Block i, scanned as possibly lost before and now as reachable: the pointers its first scan
 * kept, in the same order (valgrind's order scans such a block twice; the second reading would
 * find the same words, and only these can change anything). */
static void replay(struct scanner *s, uint64_t i)
{
    uint64_t at = s->memo[i] >> 32, n = s->memo[i] & UINT32_MAX;
    for (uint64_t k = at; k < at + n; k++) {
        uint64_t j = s->memo_entries[k] >> 32;
        mark(s, s->blk[j].start + (s->memo_entries[k] & UINT32_MAX), (int64_t)j, 1);
    }
}

static int read_block(struct scanner *s, uint64_t first, uint64_t end, int64_t clique,
                      int definite);

static int scan_block(struct scanner *s, uint64_t i, int64_t clique, int definite)
{
    uint64_t start = s->blk[i].start;
    uint64_t first = (start + 7) & ~(uint64_t)7, end = (start + s->sizes[i]) & ~(uint64_t)7;
    if (end <= first)
        return 0;
    s->a->block_bytes += end - first;
    if (clique >= 0 || !s->memo)
        return read_block(s, first, end, clique, definite);
    if (definite && s->memo[i] != MEMO_NONE) {
        replay(s, i);
        s->a->replayed++;
        return tick(s, end - first);
    }
    uint64_t at = s->memo_used;
    s->memo_open = !definite;
    int rc = read_block(s, first, end, clique, definite);
    if (s->memo_open && !rc)
        s->memo[i] = at << 32 | (s->memo_used - at);
    else
        s->memo_used = at;
    s->memo_open = 0;
    return rc;
}

static int read_block(struct scanner *s, uint64_t first, uint64_t end, int64_t clique,
                      int definite)
{
    if (end - first <= SMALL) {
        const uint8_t *data = block_data(s, first, end - first);
        if (tick(s, end - first))
            return -1;
        if (data)
            words(s, data, end - first, clique, definite);
        return 0;
    }
    if (tick(s, end - first))
        return -1;
    return chunks(s, first, end, 0, clique, definite);
}

static int process(struct scanner *s, int64_t clique)
{
    while (s->sp) {
        uint64_t top = s->stack[--s->sp];
        s->blk[top].pending = 0;
        if (scan_block(s, top, clique, s->blk[top].state != POSSIBLE))
            return -1;
    }
    return 0;
}

static int run(struct scanner *s)
{
    struct mds_args *a = s->a;
    for (uint64_t r = 0; r < a->n_roots; r++) {
        uint64_t first = (a->roots[2 * r] + 7) & ~(uint64_t)7;
        uint64_t end = a->roots[2 * r + 1] & ~(uint64_t)7;
        if (chunks(s, first, end, 1, -1, 1))
            return -1;
    }
    for (uint64_t k = 0; k < a->n_registers; k++)
        if (a->registers[k] >= s->lo && a->registers[k] < s->hi)
            mark(s, a->registers[k], find(s, a->registers[k]), 1);
    if (process(s, -1))
        return -1;
    for (uint64_t i = 0; i < s->n; i++) {
        if (s->blk[i].state == UNREACHED) {
            push(s, i);
            if (process(s, (int64_t)i))
                return -1;
        }
    }
    return 0;
}

/* The memo of the possibly lost blocks' scans (replay), if memory allows: an entry per pointer
 * that matters_later, up to one per 8 words of the heap (touched as used: a heap of possibly
 * lost blocks full of start pointers keeps some blocks' memos, and the others are read again). */
static void start_memo(struct scanner *s)
{
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < s->n; i++)
        bytes += extent_of(s, i);
    uint64_t cap = s->a->memo_cap ? s->a->memo_cap : bytes / 64 + 65536;
    if (cap > MEMO_MAX_COUNT)
        cap = MEMO_MAX_COUNT;
    s->memo = malloc(s->n * sizeof *s->memo);
    void *mem = mmap(NULL, cap * sizeof *s->memo_entries, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!s->memo || mem == MAP_FAILED) {
        free(s->memo);
        s->memo = NULL;
        if (mem != MAP_FAILED)
            munmap(mem, cap * sizeof *s->memo_entries);
        return;
    }
    memset(s->memo, 0xFF, s->n * sizeof *s->memo); /* MEMO_NONE */
    s->memo_entries = mem;
    s->memo_cap = cap;
}

/* Each indirect block's final leader: its owner, or the owner's, until a definite one. */
static void resolve_leaders(struct scanner *s)
{
    uint32_t *owner = s->owner;
    for (uint64_t i = 0; i < s->n; i++) {
        if (s->blk[i].state != INDIRECT)
            continue;
        uint32_t j = owner[i];
        while (s->blk[j].state == INDIRECT)
            j = owner[j];
        for (uint32_t k = (uint32_t)i; s->blk[k].state == INDIRECT && owner[k] != j;) {
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
    s->pid = (pid_t)a->pid;
    s->starts = a->starts;
    s->sizes = a->sizes;
    s->n = a->n_blocks;
    s->owner = a->leader;
    s->hmask = (unsigned)a->heuristics;
    s->run_size = 64 * 1024;
    a->root_bytes = a->block_bytes = a->skipped_bytes = 0;
    a->snapshot = SNAP_NONE;
    a->snapshot_bytes = a->snapshot_calls = a->snapshot_ns = a->replayed = 0;
    if (s->n >= NO_OWNER)
        goto out;
    memset(a->state, UNREACHED, s->n);
    memset(a->heuristic, 0, s->n);
    for (uint64_t i = 0; i < s->n; i++)
        s->owner[i] = NO_OWNER;
    if (s->n == 0) {
        rc = 0;
        goto out;
    }
    s->lo = s->starts[0];
    s->blk = calloc(s->n, sizeof *s->blk);
    if (!s->blk)
        goto out;
    for (uint64_t i = 0; i < s->n; i++) {
        uint64_t end = block_end(s, i), extent = end - s->starts[i];
        s->blk[i].start = s->starts[i];
        s->blk[i].extent = extent < EXTENT_BIG ? (uint32_t)extent : EXTENT_BIG;
        if (end > s->hi)
            s->hi = end;
    }
    s->stack = malloc(s->n * sizeof *s->stack);
    s->small_mem = malloc((uint64_t)WORD_CACHED << WORD_BITS);
    s->chunk = malloc(WINDOW);
    s->exact = malloc(SMALL);
    int ok = s->stack && s->small_mem && s->chunk && s->exact;
    for (unsigned k = 0; ok && k < RUNS; k++)
        ok = (s->runs[k].data = malloc(RUN_MAX + SMALL + PAGE)) != NULL;
    if (!ok || build_pages(s))
        goto out;
    start_memo(s);
    rc = take_snapshot(s);
    if (rc)
        goto out;
    rc = run(s) ? 1 : 0;
    if (rc == 0) {
        resolve_leaders(s);
        for (uint64_t i = 0; i < s->n; i++) {
            a->state[i] = s->blk[i].state;
            a->heuristic[i] = s->blk[i].heur;
        }
    }
out:
    drop_snapshot(s);
    for (unsigned k = 0; k < RUNS; k++)
        free(s->runs[k].data);
    free(s->memo);
    if (s->memo_entries)
        munmap(s->memo_entries, s->memo_cap * sizeof *s->memo_entries);
    free(s->pages);
    free(s->blk);
    free(s->stack);
    free(s->small_mem);
    free(s->chunk);
    free(s->exact);
    free(s);
    return rc;
}

/* The layout this file was built with, checked by the loader: 4 and sizeof(struct mds_args). */
EXPORT uint64_t mds_abi(void)
{
    return (uint64_t)4 << 32 | sizeof(struct mds_args);
}

/* Sorts the N pairs STARTS[k], SIZES[k] by start, in place (the caller's live blocks come as a
 * dictionary: Python's sort of 800,000 addresses takes longer than the scan's copy of 400 MiB).
 * A least-significant-digit radix sort, 16 bits a pass, as many passes as the largest start
 * needs. 0, or -1 when out of memory (the arrays unchanged). */
EXPORT int mds_sort(uint64_t *starts, uint64_t *sizes, uint64_t n)
{
    uint64_t top = 0;
    for (uint64_t k = 0; k < n; k++)
        top |= starts[k];
    uint64_t *tmp_starts = malloc(n * sizeof *tmp_starts), *tmp_sizes = malloc(n * sizeof *tmp_sizes);
    uint64_t *count = malloc(((size_t)1 << 16) * sizeof *count);
    int rc = -1;
    if (n && (!tmp_starts || !tmp_sizes || !count))
        goto out;
    uint64_t *from_starts = starts, *from_sizes = sizes, *to_starts = tmp_starts,
             *to_sizes = tmp_sizes;
    for (unsigned shift = 0; shift < 64 && top >> shift; shift += 16) {
        memset(count, 0, ((size_t)1 << 16) * sizeof *count);
        for (uint64_t k = 0; k < n; k++)
            count[from_starts[k] >> shift & 0xFFFF]++;
        for (uint64_t d = 0, sum = 0; d < ((uint64_t)1 << 16); d++) {
            uint64_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (uint64_t k = 0; k < n; k++) {
            uint64_t at = count[from_starts[k] >> shift & 0xFFFF]++;
            to_starts[at] = from_starts[k];
            to_sizes[at] = from_sizes[k];
        }
        uint64_t *t = from_starts;
        from_starts = to_starts;
        to_starts = t;
        t = from_sizes;
        from_sizes = to_sizes;
        to_sizes = t;
    }
    if (from_starts != starts) {
        memcpy(starts, from_starts, n * sizeof *starts);
        memcpy(sizes, from_sizes, n * sizeof *sizes);
    }
    rc = 0;
out:
    free(tmp_starts);
    free(tmp_sizes);
    free(count);
    return rc;
}
