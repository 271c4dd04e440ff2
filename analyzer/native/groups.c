/* @brief libmemdump_core: the views' stacks grouped as they show (views/common.py's
 * `trimmed_nodes` and `group_stacks`, whose semantics this keeps exactly), and the frames the
 * stacks of a set of nodes reach (symbolize.py's `frames_without_symbols`), on the tables of stack
 * nodes (PARENT, FRAME per node) the library hands Python. Neither needs the library's context:
 * Python passes the arrays.
 *
 * A stack shows as its frames (each node's frame with the code inlined into it, Python's keys of
 * them) trimmed of its leading allocator frames and of what is below its outermost `main`. Each
 * node's trimmed stack is made once, from its parent's, as a list of interned cells (key, tail):
 * two stacks that show alike are then the same cell, which is the group's id. Memory: 32 bytes a
 * node and about 28 a distinct cell. */
#include <stdlib.h>

#include "core.h"
#include "figures.h"

/* the cell (key, tail) as its id (the empty list: -1) (its entry's index + 1); 0 when out of memory */
static int64_t cons(struct counter *cells, int64_t key, int64_t tail)
{
    int64_t *n = counter_at(cells, key, tail);
    if (n == NULL)
        return 0;
    return (int64_t)(((char *)n - (char *)cells->e) / (int64_t)sizeof *cells->e) + 1;
}

/* `list` with the keys keys[from..to) before it, the first one first; 0 when out of memory */
static int64_t cons_all(struct counter *cells, const int32_t *keys, int64_t from, int64_t to,
                        int64_t list)
{
    for (int64_t i = to - 1; i >= from && list != 0; i--)
        list = cons(cells, keys[i], list);
    return list;
}

/* per node: its whole stack (UNKNOWN until asked for, when it has a main: see full_of), that
 * stack cut below its outermost main (the whole without one), its length, its leading allocator
 * frames, the index of its outermost main (-1: none) */
struct memo {
    int64_t full, cut;
    int32_t len, lead, main, done;
};
#define UNKNOWN INT64_MIN

/* the nodes' arrays and what the grouping keeps */
struct walk {
    const int32_t *parents, *frames;
    const int64_t *off;
    const int32_t *keys;
    struct memo *m;
    uint64_t *path;
    struct counter cells;
};

/* node's whole stack, made from the nearest ancestor's that is known (a node without a main
 * has its own); 0 when out of memory. Only a stack whose main is among its leading allocator
 * frames needs it: a stack cut below its main is interned alone. */
static int64_t full_of(struct walk *w, uint64_t node)
{
    uint64_t depth = 0;
    while (w->m[node].full == UNKNOWN) {
        w->path[depth++] = node;
        node = (uint64_t)w->parents[node];
    }
    int64_t list = w->m[node].full;
    while (depth && list != 0) {
        uint64_t id = w->path[--depth];
        int64_t f = w->frames[id];
        list = w->m[id].full = cons_all(&w->cells, w->keys, w->off[f], w->off[f + 1], list);
    }
    return list;
}

/* Each node's group (gid[node]: the id of its trimmed stack, 0 for an empty one; -1 for a node
 * not defined). Frame f's frames have the keys keys[off[f]..off[f+1]) (none: no such frame
 * defined), of which lead[f] lead as allocator frames and main[f] is its outermost main (-1:
 * none). Returns 1, or 0 when out of memory or when a node's frame or parent is not defined or
 * a node is its own ancestor (Python's grouping then says what is wrong). */
EXPORT int mdc_group_nodes(const int32_t *parents, const int32_t *frames, const uint8_t *flags,
                           uint64_t cap, const int64_t *off, const int32_t *keys,
                           const int32_t *lead, const int32_t *main, uint64_t n_frames,
                           int64_t *gid)
{
    struct walk w = {parents, frames, off, keys, calloc(cap ? cap : 1, sizeof *w.m),
                     malloc((cap ? cap : 1) * sizeof *w.path), {0}};
    struct memo *m = w.m;
    uint64_t *path = w.path;
    int ok = m != NULL && path != NULL;
    if (ok && cap)
        m[0] = (struct memo){-1, -1, 0, 0, -1, 1};
    for (uint64_t node = 0; ok && node < cap; node++) {
        gid[node] = -1;
        if (node && !(flags[node] & DEFINED))
            continue;
        uint64_t depth = 0, at = node;
        while (ok && !m[at].done) {
            if (depth == cap || !(flags[at] & DEFINED)) {
                ok = 0;
                break;
            }
            path[depth++] = at;
            int64_t parent = parents[at];
            ok = parent >= 0 && (uint64_t)parent < cap;
            at = (uint64_t)parent;
        }
        while (ok && depth) {
            uint64_t id = path[--depth];
            const struct memo *p = &m[parents[id]];
            int64_t f = frames[id];
            if (f < 0 || (uint64_t)f >= n_frames || off[f + 1] <= off[f]) {
                ok = 0;
                break;
            }
            int64_t from = off[f], n = off[f + 1] - off[f];
            struct memo x = {UNKNOWN, 0, (int32_t)(p->len + n),
                             lead[f] == n ? (int32_t)(lead[f] + p->lead) : lead[f],
                             p->main >= 0 ? (int32_t)(n + p->main) : main[f], 1};
            if (p->main >= 0)
                x.cut = cons_all(&w.cells, keys, from, from + n, p->cut);
            else if (main[f] >= 0)
                x.cut = cons_all(&w.cells, keys, from, from + main[f] + 1, -1);
            else /* without a main, its parent's whole stack is known */
                x.full = x.cut = cons_all(&w.cells, keys, from, from + n, p->full);
            ok = x.cut != 0;
            m[id] = x;
        }
        if (!ok)
            break;
        /* a stack of allocator frames alone is kept whole */
        const struct memo *x = &m[node];
        int32_t start = x->lead < x->len ? x->lead : 0;
        int64_t list = x->main >= start ? x->cut : full_of(&w, node);
        ok = list != 0;
        for (int32_t i = 0; i < start && list > 0; i++)
            list = w.cells.e[list - 1].b;
        gid[node] = list > 0 ? list : 0;
    }
    free(m);
    free(path);
    counter_free(&w.cells);
    return ok;
}

/* The frames of the stacks of nodes starts[0..n) (a node negated: marked), each once, in the
 * order frames_without_symbols meets them, into out (room for cap); their number, or
 * UINT64_MAX when out of memory or a node or its frame is not defined (Python then says
 * what). */
EXPORT uint64_t mdc_reached_frames(const int32_t *parents, const int32_t *frames,
                                   const uint8_t *flags, uint64_t cap, uint64_t n_frames,
                                   const int64_t *starts, uint64_t n, int32_t *out)
{
    uint8_t *done = calloc(cap ? cap : 1, 1), *seen = calloc(n_frames ? n_frames : 1, 1);
    uint64_t got = 0;
    int ok = done != NULL && seen != NULL;
    for (uint64_t i = 0; ok && i < n; i++) {
        int64_t node = starts[i] < 0 ? -starts[i] : starts[i];
        while (node && ok) {
            if (node < 0 || (uint64_t)node >= cap || !(flags[node] & DEFINED)) {
                ok = 0;
                break;
            }
            if (done[node])
                break;
            done[node] = 1;
            int64_t frame = frames[node];
            node = parents[node];
            if (frame < 0 || (uint64_t)frame >= n_frames) {
                ok = 0;
                break;
            }
            if (!seen[frame]) {
                seen[frame] = 1;
                out[got++] = (int32_t)frame;
            }
        }
    }
    free(done);
    free(seen);
    return ok ? got : UINT64_MAX;
}

/* The exports' rows (exports/profile.py's `StackProfileOutput._profile`): the stacks of nodes
 * wanted[0..n) by their group (gid, mdc_group_nodes's), one row per group numbered as the groups
 * are first met (row_of[i]: wanted[i]'s row), and each row's trimmed stack, that of its first
 * node, as the entries of its frames (frame f's i-th frame is entry off[f] + i, as the keys
 * are): row r's are out[row_off[r]..row_off[r+1]) (row_off: room for n + 1). *need is the
 * number of entries; when it is more than room, out holds only the first room of them (call
 * again with more). Returns the number of rows, or -1 when out of memory or a wanted node is not
 * one (Python's walk then says what is wrong). The trimming is `trimmed_nodes`'s: the leading
 * allocator frames and what is below the outermost main removed, a stack of allocator frames
 * alone kept whole. */
EXPORT int64_t mdc_stack_rows(const int32_t *parents, const int32_t *frames, uint64_t cap,
                              const int64_t *off, const int32_t *lead, const int32_t *main,
                              const int64_t *gid, const int64_t *wanted, uint64_t n,
                              int64_t *row_of, int64_t *row_off, int32_t *out, uint64_t room,
                              uint64_t *need)
{
    struct counter rows = {0};
    int64_t *buf = NULL;
    uint64_t buf_cap = 0, got = 0;
    int ok = 1;
    row_off[0] = 0;
    for (uint64_t i = 0; ok && i < n; i++) {
        int64_t node = wanted[i];
        if (node < 0 || (uint64_t)node >= cap || gid[node] < 0) {
            ok = 0;
            break;
        }
        uint64_t before = rows.n;
        int64_t *at = counter_at(&rows, gid[node], 0);
        if (at == NULL) {
            ok = 0;
            break;
        }
        row_of[i] = (int64_t)(((char *)at - (char *)rows.e) / (int64_t)sizeof *rows.e);
        if (rows.n == before)
            continue;
        /* a new row: its first node's whole stack, innermost first, with its leading allocator
         * frames and its outermost main (mdc_group_nodes checked the nodes and frames) */
        uint64_t len = 0;
        int64_t lead_n = 0, main_at = -1;
        int leading = 1;
        for (int64_t id = node; id != 0; id = parents[id]) {
            int64_t f = frames[id], from = off[f], k = off[f + 1] - off[f];
            if (len + (uint64_t)k > buf_cap) {
                uint64_t c = buf_cap ? 2 * buf_cap : 256;
                while (c < len + (uint64_t)k)
                    c *= 2;
                int64_t *b = realloc(buf, c * sizeof *b);
                if (b == NULL) {
                    ok = 0;
                    break;
                }
                buf = b;
                buf_cap = c;
            }
            for (int64_t j = 0; j < k; j++)
                buf[len + (uint64_t)j] = from + j;
            if (leading) {
                lead_n += lead[f];
                leading = lead[f] == k;
            }
            if (main[f] >= 0)
                main_at = (int64_t)len + main[f];
            len += (uint64_t)k;
        }
        if (!ok)
            break;
        int64_t start = lead_n < (int64_t)len ? lead_n : 0;
        int64_t end = main_at >= start ? main_at + 1 : (int64_t)len;
        for (int64_t j = start; j < end; j++, got++)
            if (got < room)
                out[got] = (int32_t)buf[j];
        row_off[rows.n] = (int64_t)got;
    }
    free(buf);
    int64_t n_rows = (int64_t)rows.n;
    counter_free(&rows);
    *need = got;
    return ok ? n_rows : -1;
}
