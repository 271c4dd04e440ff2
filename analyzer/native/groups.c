/* @brief libmemdump_core: the views' stacks grouped as they show (views/common.py's
 * `trimmed_nodes` and `group_stacks`, whose semantics this keeps exactly), and the frames the
 * stacks of a set of nodes reach (symbolize.py's `frames_without_symbols`), on the tables of stack
 * nodes (PARENT, FRAME per node) the library hands Python. Neither needs the library's context:
 * Python passes the arrays.
 *
 * A stack shows as its frames (each node's frame with the code inlined into it, Python's keys of
 * them) trimmed of its leading allocator frames and of what is below its outermost `main`. Each
 * node's trimmed stack is made once, from its parent's, as a list of interned cells (key, tail):
 * two stacks that show alike are then the same cell, which is the group's id. Memory: 24 bytes a
 * node id and 27 to 50 a distinct cell. */
#include <stdlib.h>

#include "core.h"
#include "figures.h"

/* The interned cells (key, tail), a cell's id its number from 1 in the order made (the empty
 * list: -1); tails[id - 1] is cell id's tail. A table of the cells themselves, without entries
 * apart (a look-up reads one line), whose slots are placed by tail: a cell's first 16 probes are
 * the slots from 4 x its tail (plus its key's top 4 bits), then it goes on from a slot its whole
 * hash chooses. A node's tail is mostly the cell made just before it (its parent's, on the same
 * walk), whose slots are in the caches, so that a walk misses about once where a table placed by
 * hash missed at each node (two thirds of the grouping's time before, on cppcheck's 248k nodes:
 * 22 ms to 6); the jump after 16 probes keeps a tail with many keys (a function's callees) from
 * making a run the others probe through. */
struct cell {
    int32_t key, tail, id, unused;
};
struct cells {
    struct cell *slot;
    int32_t *tails;
    uint64_t mask, n;
};
#define NEAR 16

/* the slot of cell (key, tail) in slot[0..mask], or the empty one where it goes */
static inline uint64_t cell_slot(const struct cell *slot, uint64_t mask, int32_t key,
                                 int32_t tail)
{
    uint64_t h = (uint64_t)(uint32_t)key * 0x9E3779B97F4A7C15ull;
    uint64_t j = ((uint64_t)(int64_t)tail * 4 + (h >> 60)) & mask;
    for (int step = 1; slot[j].id != 0; step++) {
        if (slot[j].key == key && slot[j].tail == tail)
            break;
        if (step == NEAR) {
            uint64_t far = (h ^ (uint64_t)(uint32_t)tail * 0xC2B2AE3D27D4EB4Full);
            j = (far ^ far >> 29) & mask;
        } else {
            j = (j + 1) & mask;
        }
    }
    return j;
}

/* room for n cells at most 7/10 full: 0 when out of memory */
static int cells_room(struct cells *c, uint64_t n)
{
    uint64_t cap = c->mask + 1;
    if (c->slot != NULL && n * 10 <= cap * 7)
        return 1;
    while (n * 10 > cap * 7)
        cap *= 2;
    if (n >= INT32_MAX || cap > UINT64_MAX / sizeof(struct cell))
        return 0;
    struct cell *slot = calloc(cap, sizeof *slot);
    int32_t *tails = realloc(c->tails, cap * sizeof *tails);
    if (slot == NULL || tails == NULL) {
        free(slot);
        if (tails != NULL)
            c->tails = tails;
        return 0;
    }
    for (uint64_t i = 0; c->slot != NULL && i <= c->mask; i++) {
        const struct cell *x = &c->slot[i];
        if (x->id != 0)
            slot[cell_slot(slot, cap - 1, x->key, x->tail)] = *x;
    }
    free(c->slot);
    c->slot = slot;
    c->tails = tails;
    c->mask = cap - 1;
    return 1;
}

/* the cell (key, tail) as its id; 0 when out of memory */
static int32_t cons(struct cells *c, int32_t key, int32_t tail)
{
    uint64_t j = cell_slot(c->slot, c->mask, key, tail);
    if (c->slot[j].id != 0)
        return c->slot[j].id;
    if ((c->n + 1) * 10 > (c->mask + 1) * 7) { /* the table grows: the cell's place moves */
        if (!cells_room(c, c->n + 1))
            return 0;
        j = cell_slot(c->slot, c->mask, key, tail);
    }
    c->tails[c->n] = tail;
    c->slot[j] = (struct cell){key, tail, (int32_t)++c->n, 0};
    return (int32_t)c->n;
}

/* `list` with the keys keys[from..to) before it, the first one first; 0 when out of memory */
static int32_t cons_all(struct cells *c, const int32_t *keys, int64_t from, int64_t to,
                        int32_t list)
{
    for (int64_t i = to - 1; i >= from && list != 0; i--)
        list = cons(c, keys[i], list);
    return list;
}

/* per node: its whole stack (UNKNOWN until asked for, when it has a main: see full_of), that
 * stack cut below its outermost main (the whole without one; 0: the node not walked yet), its
 * length, its leading allocator frames, the index of its outermost main (-1: none). 20 bytes a
 * node: the table spans every node id, and its pages are most of what the grouping touches. */
struct memo {
    int32_t full, cut, len, lead, main;
};
#define UNKNOWN INT32_MIN

/* the nodes' arrays and what the grouping keeps */
struct walk {
    const int32_t *parents, *frames;
    const uint8_t *flags;
    uint64_t cap, n_frames;
    const int64_t *off;
    const int32_t *keys, *lead, *main;
    struct memo *m;
    uint32_t *path;
    struct cells cells;
};

/* node's whole stack, made from the nearest ancestor's that is known (a node without a main
 * has its own); 0 when out of memory. Only a stack whose main is among its leading allocator
 * frames needs it: a stack cut below its main is interned alone. */
static int32_t full_of(struct walk *w, uint64_t node)
{
    uint64_t depth = 0;
    while (w->m[node].full == UNKNOWN) {
        w->path[depth++] = (uint32_t)node;
        node = (uint64_t)w->parents[node];
    }
    int32_t list = w->m[node].full;
    while (depth && list != 0) {
        uint64_t id = w->path[--depth];
        int64_t f = w->frames[id];
        list = w->m[id].full = cons_all(&w->cells, w->keys, w->off[f], w->off[f + 1], list);
    }
    return list;
}

/* node's group (its trimmed stack's cell, 0 for an empty one), its ancestors walked first; -1
 * when out of memory or when it or an ancestor is not defined, or its own ancestor */
static int64_t group_of(struct walk *w, uint64_t node)
{
    struct memo *m = w->m;
    uint64_t depth = 0, at = node;
    while (m[at].cut == 0) {
        if (depth == w->cap || !(w->flags[at] & DEFINED))
            return -1;
        w->path[depth++] = (uint32_t)at;
        int64_t parent = w->parents[at];
        if (parent < 0 || (uint64_t)parent >= w->cap)
            return -1;
        at = (uint64_t)parent;
    }
    while (depth) {
        uint64_t id = w->path[--depth];
        const struct memo *p = &m[w->parents[id]];
        int64_t f = w->frames[id];
        if (f < 0 || (uint64_t)f >= w->n_frames || w->off[f + 1] <= w->off[f])
            return -1;
        int64_t from = w->off[f], n = w->off[f + 1] - w->off[f];
        int32_t lead = w->lead[f], main = w->main[f];
        struct memo x = {UNKNOWN, 0, (int32_t)(p->len + n),
                         lead == n ? (int32_t)(lead + p->lead) : lead,
                         p->main >= 0 ? (int32_t)(n + p->main) : main};
        if (p->main >= 0)
            x.cut = cons_all(&w->cells, w->keys, from, from + n, p->cut);
        else if (main >= 0)
            x.cut = cons_all(&w->cells, w->keys, from, from + main + 1, -1);
        else /* without a main, its parent's whole stack is known */
            x.full = x.cut = cons_all(&w->cells, w->keys, from, from + n, p->full);
        if (x.cut == 0)
            return -1;
        m[id] = x;
    }
    /* a stack of allocator frames alone is kept whole */
    const struct memo *x = &m[node];
    int32_t start = x->lead < x->len ? x->lead : 0;
    int32_t list = x->main >= start ? x->cut : full_of(w, node);
    if (list == 0)
        return -1;
    for (int32_t i = 0; i < start && list > 0; i++)
        list = w->cells.tails[list - 1];
    return list > 0 ? list : 0;
}

/* Nodes' groups (gid[node]: the id of its trimmed stack, 0 for an empty one): of every node
 * when starts is NULL (-1 for a node not defined), else of the nodes starts[0..n_starts) (a
 * node negated: marked) alone, the other entries of gid left as they are. Frame f's frames have
 * the keys keys[off[f]..off[f+1]) (none: no such frame defined), of which lead[f] lead as
 * allocator frames and main[f] is its outermost main (-1: none). Returns 1, or 0 when out of
 * memory or when a node's frame or parent is not defined or a node is its own ancestor
 * (Python's grouping then says what is wrong). A view's stacks reach about three quarters of
 * the nodes (cppcheck: 248k of 332k), which it walks alone. */
EXPORT int mdc_group_nodes(const int32_t *parents, const int32_t *frames, const uint8_t *flags,
                           uint64_t cap, const int64_t *off, const int32_t *keys,
                           const int32_t *lead, const int32_t *main, uint64_t n_frames,
                           const int64_t *starts, uint64_t n_starts, int64_t *gid)
{
    if (cap >= INT32_MAX)
        return 0;
    struct walk w = {parents, frames, flags, cap, n_frames, off, keys, lead, main,
                     calloc(cap ? cap : 1, sizeof *w.m), malloc((cap ? cap : 1) * sizeof *w.path),
                     {0}};
    uint64_t n = starts != NULL ? n_starts : cap;
    int ok = w.m != NULL && w.path != NULL && cells_room(&w.cells, 2 * (n < cap ? n : cap));
    if (ok && cap)
        w.m[0] = (struct memo){-1, -1, 0, 0, -1};
    for (uint64_t i = 0; ok && i < n; i++) {
        uint64_t node = i;
        if (starts != NULL) {
            int64_t s = starts[i] < 0 ? -starts[i] : starts[i];
            ok = s >= 0 && (uint64_t)s < cap && (s == 0 || (flags[s] & DEFINED));
            node = (uint64_t)s;
        } else if (node && !(flags[node] & DEFINED)) {
            gid[node] = -1;
            continue;
        }
        int64_t g = ok ? group_of(&w, node) : -1;
        ok = g >= 0;
        if (ok)
            gid[node] = g;
    }
    free(w.m);
    free(w.path);
    free(w.cells.slot);
    free(w.cells.tails);
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
