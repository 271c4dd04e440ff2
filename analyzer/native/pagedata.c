/* @brief libmemdump_core: the HTML page's figures that are many (htmltrees.py's and mapsvg.py's
 * Python, the reference, whose semantics this keeps exactly): its tree of stacks and its heap
 * maps' cells. Neither needs the library's context: Python passes the arrays.
 *
 * The tree (htmltrees.stack_tree): the stacks that name the same functions summed into one,
 * sorted by their allocations (most first), then by their functions' names, and their prefixes
 * by function made a tree whose nodes and functions are numbered as the sorted stacks first use
 * them. Each stack's functions, outermost first, are interned once as cells (parent cell,
 * function) in a counter (figures.c's table): two stacks that name the same functions end at the
 * same cell, and a cell is a node of the tree, numbered when a sorted stack first reaches it.
 * Memory: 8 bytes a frame, 24 (and 16 of table) a distinct prefix, 56 a stack. Before it, the
 * frames are told apart by their identity (mdc_distinct_ids), so that Python names each distinct
 * frame once.
 *
 * The heap maps' cells (mapsvg._cells): each cell's used bytes by colour key, the key with most
 * of them, its blocks and the first four. */
#include <stdlib.h>

#include "core.h"
#include "figures.h"

#define FIGURES 4 /* allocations, temporary, peak bytes, leaked bytes (htmltrees.COLUMNS) */

/* a merged stack: its frames [start, end) in the input (innermost first), and its figures */
struct tree_row {
    int64_t start, end;
    int64_t fig[FIGURES];
};

/* what the sort reads: the frames and their functions' ranks */
struct tree_order {
    const int32_t *funcs, *rank;
};

/* (allocations descending, then the functions outermost first, as Python's tuples compare) */
static int by_allocations(const void *pa, const void *pb, void *ctx)
{
    const struct tree_order *o = ctx;
    const int32_t *funcs = o->funcs, *rank = o->rank;
    const struct tree_row *a = pa, *b = pb;
    if (a->fig[0] != b->fig[0])
        return a->fig[0] > b->fig[0] ? -1 : 1;
    int64_t i = a->end - 1, j = b->end - 1;
    for (; i >= a->start && j >= b->start; i--, j--)
        if (rank[funcs[i]] != rank[funcs[j]])
            return rank[funcs[i]] < rank[funcs[j]] ? -1 : 1;
    return (i >= a->start) - (j >= b->start);
}

/* The tree of n stacks: stack s's frames are funcs[ends[s-1]..ends[s]) (ends[-1] = 0), its
 * innermost first, each an index into rank[0..n_index) (its function's rank among the names, <
 * n_functions), its figures figs[4s..4s+4). Writes nodes[2k], nodes[2k+1] (how many nodes back
 * node k's parent is, and its function's number), stacks[5r..5r+5) (the r-th merged stack's
 * innermost node, -1 when it has no frame, and its figures), functions[] (each function number's
 * rank), counts[0] the merged stacks and counts[1] the functions; returns the nodes, -1 when out
 * of memory, -2 for an index or rank out of range, ends not ascending or a sum past int64. The
 * output arrays hold ends[n-1] * 2, n * 5 and n_functions entries. */
EXPORT int64_t mdc_stack_tree(const int32_t *funcs, const int64_t *ends, const int64_t *figs, int64_t n,
                              const int32_t *rank, int64_t n_index, int64_t n_functions, int32_t *nodes,
                              int64_t *stacks, int32_t *functions, int64_t *counts)
{
    int64_t total = n > 0 ? ends[n - 1] : 0, result = -1, m = 0, nn = 0, nf = 0;
    struct counter cells = {0};
    int64_t *cell_of = malloc((size_t)(total > 0 ? total : 1) * sizeof *cell_of);
    int64_t *leaf = malloc((size_t)(n > 0 ? n : 1) * sizeof *leaf);
    struct tree_row *rows = malloc((size_t)(n > 0 ? n : 1) * sizeof *rows);
    int64_t *row_of = NULL, *out_node = NULL;
    int32_t *fmap = malloc((size_t)(n_functions > 0 ? n_functions : 1) * sizeof *fmap);
    if (cell_of == NULL || leaf == NULL || rows == NULL || fmap == NULL)
        goto out;
    for (int64_t s = 0, start = 0; s < n; start = ends[s++]) {
        int64_t c = 0; /* the root */
        if (ends[s] < start) {
            result = -2;
            goto out;
        }
        for (int64_t i = ends[s] - 1; i >= start; i--) {
            if (funcs[i] < 0 || funcs[i] >= n_index || rank[funcs[i]] < 0 || rank[funcs[i]] >= n_functions) {
                result = -2;
                goto out;
            }
            int64_t *cell = counter_at(&cells, c, rank[funcs[i]]);
            if (cell == NULL)
                goto out;
            c = cell_of[i] = (int64_t)(((char *)cell - (char *)cells.e) / (int64_t)sizeof *cells.e) + 1;
        }
        leaf[s] = c;
    }
    row_of = malloc((size_t)(cells.n + 1) * sizeof *row_of);
    out_node = malloc((size_t)(cells.n + 1) * sizeof *out_node);
    if (row_of == NULL || out_node == NULL)
        goto out;
    memset(row_of, 0xff, (size_t)(cells.n + 1) * sizeof *row_of);
    memset(out_node, 0xff, (size_t)(cells.n + 1) * sizeof *out_node);
    memset(fmap, 0xff, (size_t)(n_functions > 0 ? n_functions : 1) * sizeof *fmap);
    for (int64_t s = 0, start = 0; s < n; start = ends[s++]) {
        int64_t r = row_of[leaf[s]];
        if (r < 0) {
            r = row_of[leaf[s]] = m++;
            rows[r] = (struct tree_row){start, ends[s], {0}};
        }
        for (int k = 0; k < FIGURES; k++)
            if (__builtin_add_overflow(rows[r].fig[k], figs[FIGURES * s + k], &rows[r].fig[k])) {
                result = -2; /* Python's integers do not overflow */
                goto out;
            }
    }
    struct tree_order order = {funcs, rank};
    qsort_r(rows, (size_t)m, sizeof *rows, by_allocations, &order);
    for (int64_t r = 0; r < m; r++) {
        int64_t at = -1;
        for (int64_t i = rows[r].end - 1; i >= rows[r].start; i--) {
            int64_t c = cell_of[i];
            if (out_node[c] < 0) { /* a function's first use here makes a node */
                int32_t f = rank[funcs[i]];
                if (fmap[f] < 0)
                    functions[fmap[f] = (int32_t)nf++] = f;
                out_node[c] = nn;
                nodes[2 * nn] = (int32_t)(nn - at);
                nodes[2 * nn + 1] = fmap[f];
                nn++;
            }
            at = out_node[c];
        }
        stacks[5 * r] = at;
        memcpy(&stacks[5 * r + 1], rows[r].fig, sizeof rows[r].fig);
    }
    counts[0] = m;
    counts[1] = nf;
    result = nn;
out:
    counter_free(&cells);
    free(cell_of);
    free(leaf);
    free(rows);
    free(row_of);
    free(out_node);
    free(fmap);
    return result;
}

/* The n items of list (Python's list of frames) numbered as first met by identity: index[i] the
 * number of item i, firsts[k] where number k was first met; returns how many, -1 when out of
 * memory. item is Python's PyList_GetItem, whose answer's address is the item's identity (called
 * with the GIL held: Python loads this through PyDLL), so that Python makes no integer a frame. */
EXPORT int64_t mdc_distinct_ids(void *list, void *(*item)(void *, int64_t), int64_t n, int32_t *index,
                                int64_t *firsts)
{
    struct counter seen = {0};
    int64_t result = -1;
    for (int64_t i = 0; i < n; i++) {
        uint64_t before = seen.n;
        int64_t id = (int64_t)(intptr_t)item(list, i);
        int64_t *e = counter_at(&seen, id, 0);
        if (e == NULL)
            goto out;
        int64_t k = (int64_t)(((char *)e - (char *)seen.e) / (int64_t)sizeof *seen.e);
        if (seen.n != before)
            firsts[k] = i;
        index[i] = (int32_t)k;
    }
    result = (int64_t)seen.n;
out:
    counter_free(&seen);
    return result;
}

#define MAX_CELLS 512
#define MAP_LIMIT ((int64_t)1 << 52)

/* Python's a // b for b > 0 */
static inline int64_t floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* The heap map's cells of region [lo, hi) in n cells (mapsvg.py's `_cells`, the reference): the
 * nb blocks at addr[] of size[] (by address), each coloured by key[] (a number < n_keys), their
 * glibc chunks drawn where they meet the region. For each cell: total[c] its used bytes,
 * best[c] the key with most of them (the first so counted on a tie; -1 when none), count[c] its
 * blocks and first4[4c..4c+4) the first four (-1 past them). Returns 0, -1 when out of memory,
 * -2 for a key out of range or figures past its bounds (left to Python). */
EXPORT int mdc_map_cells(const int64_t *addr, const int64_t *size, const int32_t *key, int64_t nb,
                         int64_t n_keys, int64_t lo, int64_t hi, int64_t n, int64_t *total, int32_t *best,
                         int64_t *count, int64_t *first4)
{
    int64_t span = hi - lo, memberships = 0;
    /* the products below stay far within int64: addresses, sizes and bounds under 2^52 (a
     * process's are under 2^47), cells under 2^9; others are left to Python */
    if (n <= 0 || n > MAX_CELLS || span <= 0 || lo < 0 || hi > MAP_LIMIT)
        return -2;
    for (int64_t b = 0; b < nb; b++)
        if (addr[b] < 0 || addr[b] > MAP_LIMIT || size[b] < 0 || size[b] > MAP_LIMIT)
            return -2;
    for (int64_t c = 0; c < n; c++) {
        total[c] = count[c] = 0;
        best[c] = -1;
        for (int k = 0; k < 4; k++)
            first4[4 * c + k] = -1;
    }
    /* each block's cells [first, last], clipped to the region, as `_cells` computes them */
#define CHUNK(b, c_lo, c_hi)                                                                       \
    int64_t c_lo = addr[b] - 16, c_hi_len = (size[b] + 23) & ~(int64_t)15;                         \
    int64_t c_hi = c_lo + (c_hi_len > 32 ? c_hi_len : 32);                                         \
    int64_t first = floordiv((c_lo - lo) * n, span), last = floordiv((c_hi - 1 - lo) * n, span); \
    if (first < 0)                                                                                 \
        first = 0;                                                                                 \
    if (last > n - 1)                                                                              \
        last = n - 1
    for (int64_t b = 0; b < nb; b++) {
        if (key[b] < 0 || key[b] >= n_keys)
            return -2;
        CHUNK(b, c_lo, c_hi);
        if (last >= first)
            memberships += last - first + 1;
    }
    /* each cell's bytes by key, in the order its keys were first counted: a segment of entries a
     * cell (at most its blocks), scanned for the key (a cell's keys are few) */
    int64_t *off = calloc((size_t)n + 1, sizeof *off);
    int64_t *used = malloc((size_t)(memberships > 0 ? memberships : 1) * sizeof *used);
    int32_t *ukey = malloc((size_t)(memberships > 0 ? memberships : 1) * sizeof *ukey);
    int64_t *distinct = calloc((size_t)n, sizeof *distinct);
    if (off == NULL || used == NULL || ukey == NULL || distinct == NULL) {
        free(off), free(used), free(ukey), free(distinct);
        return -1;
    }
    for (int64_t b = 0; b < nb; b++) {
        CHUNK(b, c_lo, c_hi);
        for (int64_t c = first; c <= last; c++)
            off[c + 1]++;
    }
    for (int64_t c = 0; c < n; c++)
        off[c + 1] += off[c];
    for (int64_t b = 0; b < nb; b++) {
        CHUNK(b, c_lo, c_hi);
        for (int64_t c = first; c <= last; c++) {
            int64_t start = lo + floordiv(c * span, n), end = lo + floordiv((c + 1) * span, n);
            int64_t bytes = (c_hi < end ? c_hi : end) - (c_lo > start ? c_lo : start);
            int64_t *seg = &used[off[c]], j = 0;
            int32_t *segkey = &ukey[off[c]];
            while (j < distinct[c] && segkey[j] != key[b])
                j++;
            if (j == distinct[c]) {
                segkey[j] = key[b];
                seg[j] = 0;
                distinct[c]++;
            }
            seg[j] += bytes;
            if (count[c] < 4)
                first4[4 * c + count[c]] = b;
            count[c]++;
        }
    }
#undef CHUNK
    for (int64_t c = 0; c < n; c++) {
        const int64_t *seg = &used[off[c]];
        int64_t most = -1; /* Python's max: the first of the largest */
        for (int64_t j = 0; j < distinct[c]; j++) {
            total[c] += seg[j];
            if (most < 0 || seg[j] > seg[most])
                most = j;
        }
        best[c] = most < 0 ? -1 : ukey[off[c] + most];
    }
    free(off), free(used), free(ukey), free(distinct);
    return 0;
}
