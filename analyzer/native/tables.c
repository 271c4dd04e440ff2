/* @brief The replay's tables (tables.h). */
#include "tables.h"

#include <stdlib.h>
#include <string.h>

int btab_grow(struct btab *t)
{
    uint64_t cap = t->cap ? t->cap * 2 : 1024;
    struct block *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return 0;
    uint64_t mask = cap - 1;
    for (uint64_t j = 0; j < t->cap; j++) {
        struct block *old = &t->slots[j];
        if (old->addr == 0)
            continue;
        uint64_t i = btab_slot(old->addr, mask);
        while (slots[i].addr != 0)
            i = (i + 1) & mask;
        slots[i] = *old;
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 1;
}

void btab_del(struct btab *t, struct block *b)
{
    uint64_t mask = t->cap - 1, hole = (uint64_t)(b - t->slots);
    for (uint64_t j = (hole + 1) & mask; t->slots[j].addr != 0; j = (j + 1) & mask) {
        uint64_t home = btab_slot(t->slots[j].addr, mask);
        /* the slot stays where its probe from `home` reaches it without crossing the hole */
        int stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
        if (!stays) {
            t->slots[hole] = t->slots[j];
            hole = j;
        }
    }
    memset(&t->slots[hole], 0, sizeof t->slots[hole]);
    t->n--;
}

void btab_clear(struct btab *t)
{
    if (t->slots != NULL)
        memset(t->slots, 0, t->cap * sizeof *t->slots);
    t->n = 0;
}

void btab_free(struct btab *t)
{
    free(t->slots);
    memset(t, 0, sizeof *t);
}

int idtab_reserve(struct idtab *t, uint64_t id, int with_pairs)
{
    if (id < t->cap)
        return 1;
    uint64_t cap = t->cap ? t->cap : 4096;
    while (cap <= id)
        cap *= 2;
    uint8_t *flags = realloc(t->flags, cap);
    if (flags == NULL)
        return 0;
    memset(flags + t->cap, 0, cap - t->cap);
    t->flags = flags;
    if (with_pairs) {
        int32_t *a = realloc(t->a, cap * sizeof *a);
        if (a == NULL)
            return 0;
        t->a = a;
        int32_t *b = realloc(t->b, cap * sizeof *b);
        if (b == NULL)
            return 0;
        t->b = b;
    }
    t->cap = cap;
    return 1;
}

void idtab_free(struct idtab *t)
{
    free(t->flags);
    free(t->a);
    free(t->b);
    memset(t, 0, sizeof *t);
}

int grow_array(void **a, uint64_t *cap, uint64_t need, size_t size)
{
    if (need <= *cap)
        return 1;
    uint64_t cap2 = *cap ? *cap : 256;
    while (cap2 < need)
        cap2 *= 2;
    void *p = realloc(*a, cap2 * size);
    if (p == NULL)
        return 0;
    *a = p;
    *cap = cap2;
    return 1;
}

int push_pair(uint64_t **a, uint64_t *n, uint64_t *cap, uint64_t x, uint64_t y)
{
    if (*n == *cap) {
        uint64_t ncap = *cap ? 2 * *cap : 64;
        uint64_t *na = realloc(*a, 2 * ncap * sizeof *na);
        if (na == NULL)
            return 0;
        *a = na;
        *cap = ncap;
    }
    (*a)[2 * *n] = x;
    (*a)[2 * *n + 1] = y;
    ++*n;
    return 1;
}

static int by_first(const void *a, const void *b)
{
    const struct key_row *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

int rows_by_first(const struct block *slots, uint64_t n, uint64_t live, uint64_t keys,
                  int32_t **row_of, uint64_t *cap_row_of, struct key_row **rows,
                  uint64_t *n_rows)
{
    uint64_t had = *cap_row_of;
    *rows = NULL;
    *n_rows = 0;
    if (!grow_array((void **)row_of, cap_row_of, keys + 1, sizeof **row_of))
        return 0;
    memset(*row_of + had, 0xff, (*cap_row_of - had) * sizeof **row_of); /* -1 */
    struct key_row *out = live ? malloc(live * sizeof *out) : NULL;
    if (live && out == NULL)
        return 0;
    uint64_t k = 0, seen = 0;
    int ok = 1;
    for (uint64_t i = 0; i < n && seen < live; i++) {
        const struct block *b = &slots[i];
        if (b->addr == 0 || !b->live)
            continue;
        seen++;
        uint64_t key = (uint64_t)(b->node < 0 ? -(int64_t)b->node : b->node);
        if (key >= keys) {
            ok = 0;
            break;
        }
        int32_t r = (*row_of)[key];
        if (r < 0) {
            r = (*row_of)[key] = (int32_t)k;
            out[k++] = (struct key_row){b->order, (int64_t)key, 0, 0};
        }
        if (b->order < out[r].first)
            out[r].first = b->order;
        out[r].blocks++;
        out[r].bytes += (int64_t)b->size;
    }
    for (uint64_t i = 0; i < k; i++)
        (*row_of)[out[i].key] = -1;
    if (!ok) {
        free(out);
        return 0;
    }
    if (k > 1)
        qsort(out, k, sizeof *out, by_first);
    *rows = out;
    *n_rows = k;
    return 1;
}
