/* @brief Frames, stack nodes and the live blocks, all under the recorder's lock.
 *
 * A stack is named by its innermost node of a prefix tree rooted at the outermost frame, as the
 * dump defines it. A direct-mapped cache from a whole stack's hash to its node makes a repeated
 * stack one probe; a new one walks the tree (one hash probe per frame) and writes the `s`, `f`
 * and `n` records it needs just before the event that uses them. Tables are open-addressing
 * arrays in mmap'd memory, doubled at half load.
 *
 * Memory: 16 bytes per distinct frame and per stack node (twice that for the tables' slack),
 * 8 bytes per frame for the pc table GDB reads, 1.5 MiB for the stack cache, and 48 bytes per
 * live block (24 bytes an entry, at most half full).
 */
#define _GNU_SOURCE
#include <string.h>

#include "recorder.h"
#include "region.h"

#define C (memdump_recorder_control)

struct table {
    uint64_t *keys;   /* 2 words per entry: key, value */
    size_t cap, used;
};

static struct table frames;   /* pc -> frame id */
static struct table nodes;    /* (parent << 32 | frame) -> node id */

struct stack_cache_entry {
    uint64_t hash;
    uint64_t node;
    uint64_t check;   /* n, innermost and outermost pc folded */
};
#define STACK_CACHE_BITS 16
static struct stack_cache_entry *stack_cache;

static uint64_t *frame_pcs;
static size_t frame_pcs_cap;

struct module_string {
    const char *path;
    uint64_t id;
};
static struct module_string *module_strings;
static size_t module_strings_used, module_strings_cap;

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static int table_init(struct table *t, size_t cap)
{
    t->keys = mdr_map(cap * 2 * sizeof(uint64_t));
    t->cap = cap;
    t->used = 0;
    return t->keys != NULL;
}

static uint64_t *table_slot(const struct table *t, uint64_t key)
{
    size_t mask = t->cap - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
        uint64_t *e = &t->keys[2 * i];
        if (e[0] == key || e[0] == 0)
            return e;
    }
}

static int table_grow(struct table *t)
{
    struct table bigger;
    if (!table_init(&bigger, t->cap * 2))
        return 0;
    for (size_t i = 0; i < t->cap; i++) {
        uint64_t *e = &t->keys[2 * i];
        if (e[0] != 0) {
            uint64_t *n = table_slot(&bigger, e[0]);
            n[0] = e[0];
            n[1] = e[1];
            bigger.used++;
        }
    }
    mdr_unmap(t->keys, t->cap * 2 * sizeof(uint64_t));
    *t = bigger;
    return 1;
}

int mdr_intern_init(void)
{
    stack_cache = mdr_map(sizeof(struct stack_cache_entry) << STACK_CACHE_BITS);
    frame_pcs_cap = 1 << 16;
    frame_pcs = mdr_map(frame_pcs_cap * sizeof(uint64_t));
    module_strings_cap = 1024;
    module_strings = mdr_map(module_strings_cap * sizeof *module_strings);
    if (!stack_cache || !frame_pcs || !module_strings || !table_init(&frames, 1 << 14) ||
        !table_init(&nodes, 1 << 14))
        return 0;
    C.frame_pcs = (uint64_t)(uintptr_t)frame_pcs;
    if (C.next_string == 0)
        C.next_string = 1;
    if (C.next_frame == 0)
        C.next_frame = 1;
    if (C.next_node == 0)
        C.next_node = 1;
    return 1;
}

uint64_t mdr_stack_hash(const uintptr_t *pcs, int n)
{
    uint64_t h = 0x84222325cbf29ce4ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++)
        h = (h ^ pcs[i]) * 0x100000001b3ull + (h >> 29);
    return mix(h) | 1;
}

/* Writes one record of at most BYTES; 0 when the dump cannot grow. */
#define RECORD(p, bytes)                  \
    char *p = mdr_out_reserve(bytes);     \
    if (MDR_UNLIKELY(p == NULL))          \
        return 0;                         \
    char *p##_start = p
#define COMMIT(p) mdr_out_commit((size_t)(p - p##_start))

static uint64_t module_string(const char *path)
{
    for (size_t i = 0; i < module_strings_used; i++)
        if (module_strings[i].path == path || strcmp(module_strings[i].path, path) == 0)
            return module_strings[i].id;
    size_t len = strlen(path);
    RECORD(p, len * 2 + 32);
    uint64_t id = C.next_string++;
    *p++ = MEMDUMP_TAG_S_CHAR;
    *p++ = ' ';
    p = mdr_fmt_dec(p, id);
    *p++ = ' ';
    p = mdr_fmt_str(p, path);
    *p++ = '\n';
    COMMIT(p);
    if (module_strings_used < module_strings_cap)
        module_strings[module_strings_used++] = (struct module_string){path, id};
    return id;
}

static uint64_t frame_of(uintptr_t pc)
{
    uint64_t *e = table_slot(&frames, pc);
    if (MDR_LIKELY(e[0] == pc))
        return e[1];
    const char *path = NULL;
    uintptr_t bias = 0;
    uint64_t module = 0;
    if (mdr_module_of(pc, &path, &bias))
        module = module_string(path);
    else
        bias = 0;
    if (path != NULL && module == 0)
        return 0;
    RECORD(p, 128);
    uint64_t id = C.next_frame++;
    memcpy(p, MEMDUMP_TAG_F " ", 2);
    p = mdr_fmt_dec(p + 2, id);
    *p++ = ' ';
    p = mdr_fmt_hex(p, pc);
    *p++ = ' ';
    p = mdr_fmt_dec(p, module);
    *p++ = ' ';
    p = mdr_fmt_hex(p, pc - bias);
    memcpy(p, " 0 0 0\n", 7);
    p += 7;
    COMMIT(p);
    if (id >= frame_pcs_cap) {
        uint64_t *bigger = mdr_map(frame_pcs_cap * 2 * sizeof(uint64_t));
        if (bigger != NULL) {
            memcpy(bigger, frame_pcs, frame_pcs_cap * sizeof(uint64_t));
            C.frame_pcs = (uint64_t)(uintptr_t)bigger;
            mdr_unmap(frame_pcs, frame_pcs_cap * sizeof(uint64_t));
            frame_pcs = bigger;
            frame_pcs_cap *= 2;
        }
    }
    if (id < frame_pcs_cap)
        frame_pcs[id] = pc;
    e = table_slot(&frames, pc);  /* the write may not move the table, but be plain */
    e[0] = pc;
    e[1] = id;
    if (++frames.used * 2 > frames.cap)
        table_grow(&frames);
    return id;
}

static uint64_t node_of(uint64_t parent, uint64_t frame)
{
    uint64_t key = (parent << 32 | frame) + 1;
    uint64_t *e = table_slot(&nodes, key);
    if (MDR_LIKELY(e[0] == key))
        return e[1];
    RECORD(p, 72);
    uint64_t id = C.next_node++;
    *p++ = MEMDUMP_TAG_N_CHAR;
    *p++ = ' ';
    p = mdr_fmt_dec(p, id);
    *p++ = ' ';
    p = mdr_fmt_dec(p, parent);
    *p++ = ' ';
    p = mdr_fmt_dec(p, frame);
    *p++ = '\n';
    COMMIT(p);
    e[0] = key;
    e[1] = id;
    if (++nodes.used * 2 > nodes.cap)
        table_grow(&nodes);
    return id;
}

uint64_t mdr_intern_stack(const uintptr_t *pcs, int n, uint64_t hash)
{
    if (n == 0)
        return 0;
    uint64_t check = (uint64_t)n ^ mix(pcs[0]) ^ (pcs[n - 1] << 1);
    struct stack_cache_entry *ce = &stack_cache[hash >> (64 - STACK_CACHE_BITS)];
    if (MDR_LIKELY(ce->hash == hash && ce->check == check))
        return ce->node;
    uint64_t node = 0;
    for (int i = n - 1; i >= 0; i--) {
        uint64_t frame = frame_of(pcs[i]);
        if (frame == 0)
            return 0;
        node = node_of(node, frame);
        if (node == 0)
            return 0;
    }
    ce->hash = hash;
    ce->check = check;
    ce->node = node;
    return node;
}

/* -- the live blocks (recorder.h: their look-ups, inline on every event) -- */

uint64_t *mdr_live;
size_t mdr_live_cap;
int mdr_live_shift = 64;

int mdr_live_grow(void)
{
    uint64_t *old = mdr_live;
    size_t old_cap = mdr_live_cap, cap = old_cap ? 2 * old_cap : (size_t)1 << 16;
    uint64_t *fresh = mdr_map(cap * 3 * sizeof(uint64_t));
    if (fresh == NULL)
        return 0;
    mdr_live = fresh;
    mdr_live_cap = cap;
    mdr_live_shift = 64 - __builtin_ctzll(cap);
    for (size_t i = 0; i < old_cap; i++) {
        uint64_t *e = &old[3 * i];
        if (e[0] > 1)
            memcpy(mdr_live_probe(e[0]), e, 3 * sizeof(uint64_t));
    }
    C.live_table = (uint64_t)(uintptr_t)mdr_live;
    C.live_capacity = mdr_live_cap;
    mdr_unmap(old, old_cap * 3 * sizeof(uint64_t));
    return 1;
}

void mdr_intern_reset(void)
{
    mdr_live = NULL;  /* the old table stays mapped: GDB may be reading it */
    mdr_live_cap = 0;
    mdr_live_shift = 64;
    module_strings_used = 0;
    C.live_table = 0;
    C.live_capacity = 0;
    C.live_count = 0;
    C.live_bytes = 0;
}
