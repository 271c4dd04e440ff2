/* @brief The replay's tables: blocks by address (open addressing, linear probing; a released
 * block stays, marked freed, for the double frees), and the stack nodes and frames by id. */
#ifndef MEMDUMP_CORE_TABLES_H
#define MEMDUMP_CORE_TABLES_H

#include <stddef.h>
#include <stdint.h>

/* a block, live or freed (one look-up finds either): `order` keeps the order in which Python's
 * dict of live blocks would have it */
struct block {
    uint64_t addr; /* 0: an empty slot (a block at address 0 is never made live) */
    uint64_t size;
    uint64_t order; /* live: when made live (Python's dict order); freed: the releasing SEQ */
    int32_t node;  /* live: the STACK's id, negated when marked; freed: the releasing STACK's */
    uint8_t family; /* 0 malloc, 1 new, 2 new[] */
    uint8_t live;   /* 1 live, 0 freed */
    uint16_t tag;   /* the views' pass (figures.c): its tag's row */
};

struct btab {
    struct block *slots;
    uint64_t cap; /* a power of two, or 0 */
    uint64_t n;
};

/* where `addr`'s probe starts in a table of `mask` + 1 slots */
static inline uint64_t btab_slot(uint64_t addr, uint64_t mask)
{
    uint64_t h = addr * 0x9E3779B97F4A7C15ull;
    return (h ^ (h >> 29)) & mask;
}

/* `addr`'s slot asked of the memory, for a look-up soon (the table is far larger than the
 * caches: most look-ups would wait on memory) */
static inline void btab_prefetch(const struct btab *t, uint64_t addr)
{
    if (t->cap != 0)
        __builtin_prefetch(&t->slots[btab_slot(addr, t->cap - 1)], 1);
}

/* the table with twice the slots (1,024 when it had none); 0 when out of memory */
int btab_grow(struct btab *t);

/* (btab_get and btab_put are inline: they are a step of every heap event, whose calls' saving and
 * restoring of registers cost as much as their probes) */

/* the slot of `addr`, or NULL */
static inline struct block *btab_get(const struct btab *t, uint64_t addr)
{
    if (t->n == 0)
        return NULL;
    uint64_t mask = t->cap - 1;
    for (uint64_t i = btab_slot(addr, mask);; i = (i + 1) & mask) {
        struct block *b = &t->slots[i];
        if (b->addr == addr)
            return b;
        if (b->addr == 0)
            return NULL;
    }
}

/* the slot of `addr`, made when missing (*made set); NULL when out of memory */
static inline struct block *btab_put(struct btab *t, uint64_t addr, int *made)
{
    if ((t->n + 1) * 4 > t->cap * 3 && !btab_grow(t)) /* at most 3/4 full */
        return NULL;
    uint64_t mask = t->cap - 1;
    for (uint64_t i = btab_slot(addr, mask);; i = (i + 1) & mask) {
        struct block *b = &t->slots[i];
        if (b->addr == addr) {
            *made = 0;
            return b;
        }
        if (b->addr == 0) {
            *b = (struct block){.addr = addr};
            t->n++;
            *made = 1;
            return b;
        }
    }
}
/* slot `b` of table `t` emptied, the slots after it moved back where their probes reach them
 * (linear probing's deletion: no tombstone); a pointer into the table is stale after it */
void btab_del(struct btab *t, struct block *b);
void btab_clear(struct btab *t);
void btab_free(struct btab *t);

/* the growable array *a of items of `size` bytes (room for *cap, doubled from 256) made room for
`need`; 0 when out of memory */
int grow_array(void **a, uint64_t *cap, uint64_t need, size_t size);
/* a row of blocks grouped by their node (rows_by_first): the order of its first block, its key
 * (the node, its sign dropped), its blocks and their bytes */
struct key_row {
    uint64_t first;
    int64_t key, blocks, bytes;
};
/* the live blocks among `slots` (`n`, at most `live` of them live) grouped by their node, each
 * below `keys`, the rows in the order of their first block: into *rows (malloc'd; *n_rows of
 * them). *row_of (room for *cap_row_of) is grown to `keys` entries of -1, and left so. 0 when out
 * of memory or a node is not below `keys`. (The moments' live bytes by stack, moments.c, and
 * massif's snapshots, snapshots.c.) */
int rows_by_first(const struct block *slots, uint64_t n, uint64_t live, uint64_t keys,
                  int32_t **row_of, uint64_t *cap_row_of, struct key_row **rows,
                  uint64_t *n_rows);
/* (x, y) appended to the *n pairs of the growable array *a (room for *cap pairs); 0 when out of
 * memory */
int push_pair(uint64_t **a, uint64_t *n, uint64_t *cap, uint64_t x, uint64_t y);

/* a growable array of bytes indexed by id (flags), and of int32 (parents, frames) */
struct idtab {
    uint8_t *flags;
    int32_t *a, *b;
    uint64_t cap;
};

/* make room for id `id` (zeroed); 0 when out of memory */
int idtab_reserve(struct idtab *t, uint64_t id, int with_pairs);
void idtab_free(struct idtab *t);

#endif
