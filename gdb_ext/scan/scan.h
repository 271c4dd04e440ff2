/* @brief What the files of libmemdump_scan share (memdump_scan.c says what the library does).
 * memory.c: the page directory, the reads and the heuristics; memdump_scan.c: the marking;
 * snapshot.c: the copy of the blocks taken before the marking. */
#ifndef MEMDUMP_SCAN_H
#define MEMDUMP_SCAN_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum { UNREACHED = 0, POSSIBLE = 1, REACHABLE = 2, INDIRECT = 3 };
/* heuristics: the bit a caller sets in mds_args.heuristics is 1 << (code - 1) */
enum { H_STDSTRING = 1, H_LENGTH64 = 2, H_NEWARRAY = 3, H_MULTIPLE = 4 };
#define HBIT(code) (1u << ((code) - 1))
enum { FIRST_UNKNOWN = 0, FIRST_VTABLE = 1, FIRST_OTHER = 2 };

#define PAGE 4096u
#define PAGE_SHIFT 12
#define WINDOW (1u << 20)        /* roots and big blocks are read in pieces of this size */
#define SMALL_BITS 16
#define SMALL (1u << SMALL_BITS) /* a block up to this size is read whole (or not at all) */
#define WORD_BITS 12             /* the heuristics read words through 4 KiB pages... */
#define WORD_CACHED 1024         /* ...1024 of them cached (4 MiB), direct-mapped */
#define RUNS 16
#define RUN_MIN PAGE
#define RUN_MAX WINDOW
#define VTABLE_MAX_CHECK 20
/* glibc's malloc (malloc/malloc.c): chunks 16-byte aligned, at least MINSIZE; the flags in the
 * low bits of a chunk's size word */
#define CHUNK_ALIGN 16
#define MINSIZE 32
#define IS_MMAPPED 2
#define SIZE_FLAGS 7
#define VT_SLOTS 4096
#define TICK_EVERY (8u * WINDOW)
#define NO_OWNER UINT32_MAX
#define AHEAD 8                  /* words() prefetches a word's page directory entry 2 * AHEAD
                                  * words ahead, its block record AHEAD words ahead (power of 2) */
#define BATCH 512                /* words() picks the pointers out of this many words at once */
#define MERGE_GAP PAGE           /* the snapshot reads two blocks at most this far apart at once */
#define BATCH_IOVS 1024          /* IOV_MAX: remote iovecs per process_vm_readv */
#define BATCH_BYTES (256u << 20) /* and bytes per call (the kernel takes up to 2 GiB) */

typedef int (*mds_tick_fn)(uint64_t scanned, uint64_t pending);

/* Every field is 8 bytes: ctypes mirrors it as a list of c_uint64 / c_void_p. */
struct mds_args {
    int64_t fd;                        /* /proc/PID/mem (or any file where the offset is the address) */
    int64_t pid;                       /* the process, for process_vm_readv; 0: read FD only */
    uint64_t budget;                   /* most bytes the snapshot may hold; 0: no snapshot */
    uint64_t heuristics;               /* HBIT(code) of each heuristic to try */
    uint64_t n_blocks;
    const uint64_t *starts;            /* sorted, distinct */
    const uint64_t *sizes;
    uint64_t n_roots;
    const uint64_t *roots;             /* start, end per root */
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
    uint64_t snapshot;                 /* out: SNAP_*, how the blocks were read */
    uint64_t snapshot_bytes;           /* out: bytes of the process the snapshot holds */
    uint64_t snapshot_calls;           /* out: system calls that filled it */
    uint64_t snapshot_ns;              /* out: nanoseconds it took (mmap, copy, pieces) */
    uint64_t memo_cap;                 /* most entries of the memo (replay); 0: the default */
    uint64_t replayed;                 /* out: blocks whose scan as reachable was replayed */
    uint64_t copy_split;               /* a snapshot this large is copied by two threads;
                                        * 0: the default, SPLIT_MIN */
};

/* how the blocks were read: no snapshot (over budget, or none asked), a snapshot filled by
 * process_vm_readv, or one filled by pread on FD (no pid, or process_vm_readv refused) */
enum { SNAP_NONE = 0, SNAP_VM = 1, SNAP_PREAD = 2 };

/* what the marking needs of a block, in one 16-byte record (one cache miss): its start, its
 * extent (size, 1 for 0 bytes: a pointer to its start finds it; EXTENT_BIG from 4 GiB, then
 * sizes[] tells), its state (UNREACHED..INDIRECT), whether it is on the stack, the heuristic it
 * was reached through, and FIRST_* (multipleinheritance's test of its first word) */
struct span { uint64_t start; uint32_t extent; uint8_t state, pending, heur, first; };
#define EXTENT_BIG UINT32_MAX
/* key: page + 1 (0: free); bits: the 32-byte granules where a block starts; low: bits[0]'s
 * count; multi: some granule of the page holds two starts */
struct page_entry { uint64_t key; uint32_t first; uint16_t low, multi; uint64_t bits[2]; };
struct window { uint64_t key; uint64_t len; int valid; };
struct run { uint64_t lo, hi, used; uint8_t *data; };
struct seg { uint64_t lo, hi; const uint8_t *data; }; /* a piece of the snapshot */

struct scanner {
    struct mds_args *a;
    int fd;
    pid_t pid; /* process_vm_readv's, 0 when it is not to be used */
    const uint64_t *starts, *sizes;
    struct span *blk;
    uint64_t n, lo, hi;
    struct page_entry *pages;
    uint64_t page_mask;
    uint32_t *owner, *stack;
    uint64_t sp;
    unsigned hmask;
    struct window small[WORD_CACHED];
    uint8_t *small_mem;
    struct run runs[RUNS];
    unsigned run_next;
    uint64_t run_size;
    uint8_t *chunk, *exact;
    uint64_t vt_key[VT_SLOTS];
    uint8_t vt_val[VT_SLOTS];
    uint64_t scanned, next_check;
    struct seg *segs; /* the snapshot: sorted, disjoint */
    uint64_t n_segs, seg_hint;
    uint8_t *snap;
    uint64_t snap_len;
    /* what the scan of a possibly lost block found that its scan as reachable needs, per block
     * (MEMO_NONE, or entry index << 32 | count), and the entries (block << 32 | offset) */
    uint64_t *memo, *memo_entries;
    uint64_t memo_used, memo_cap;
    int memo_open; /* the block being scanned keeps its memo */
};
#define MEMO_NONE UINT64_MAX
#define MEMO_MAX_COUNT 0xFFFFFFFEu

static inline uint64_t block_end(const struct scanner *s, uint64_t i)
{
    /* a block of 0 bytes is found by a pointer to its start (mc_leakcheck.c) */
    return s->starts[i] + (s->sizes[i] ? s->sizes[i] : 1);
}

/* block_end - start, from the block's record */
static inline uint64_t extent_of(const struct scanner *s, uint64_t i)
{
    uint32_t e = s->blk[i].extent;
    return e != EXTENT_BIG ? e : s->sizes[i];
}

/* LEN bytes at ADDR in the snapshot, or NULL when it does not hold all of them */
static inline const uint8_t *snapped(struct scanner *s, uint64_t addr, uint64_t len)
{
    if (!s->n_segs)
        return NULL;
    const struct seg *g = &s->segs[s->seg_hint];
    if (addr < g->lo || addr >= g->hi) {
        uint64_t lo = 0, hi = s->n_segs; /* the first piece starting above addr */
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (s->segs[mid].lo <= addr)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == 0)
            return NULL;
        g = &s->segs[lo - 1];
        s->seg_hint = lo - 1;
    }
    return addr >= g->lo && addr < g->hi && len <= g->hi - addr ? g->data + (addr - g->lo) : NULL;
}

/* -- the page directory: page -> the blocks that may hold an address in it ------------------ */

/* Block i is "the last block starting at or below p, with p inside it" for p in
 * [start, min(end, next start)): every page of that range has an entry. An entry knows `first`,
 * the first block starting at or above the page, and which 32-byte granules of the page hold a
 * block's start (glibc's chunks are 32 bytes at least): the block holding p is first - 1 + (starts
 * in granules up to p's), one popcount, corrected by a step when two blocks start in one granule
 * or one starts above p in p's. An entry is 32 bytes: two in a cache line. */

/* bits set in x: the popcnt instruction in words()' clone for the CPUs that have it, a call to
 * libgcc's __popcountdi2 elsewhere (Debian's x86-64 baseline has no popcnt) */
static inline int64_t popcount(uint64_t x)
{
    return __builtin_popcountll(x);
}

static inline uint64_t page_hash(uint64_t key, uint64_t mask)
{
    return (key * 0x9E3779B97F4A7C15ull) >> 17 & mask;
}

/* ptr's slot in the page directory, where its probe starts; NO_SLOT outside [lo, hi) */
#define NO_SLOT UINT64_MAX
static inline uint64_t slot_of(const struct scanner *s, uint64_t ptr)
{
    if (ptr < s->lo || ptr >= s->hi)
        return NO_SLOT;
    return page_hash((ptr >> PAGE_SHIFT) + 1, s->page_mask);
}

/* The block the page directory names for ptr (its slot H), as a candidate: (i + 1) * 2 + multi,
 * i the right block but when a block starts above ptr in its granule, or (multi) two blocks
 * start in one granule of its page: settle corrects it. -1 when ptr is outside [lo, hi) or its
 * page has no entry. It does not depend on the marking: words() looks it up ahead. */
static inline int64_t lookup_at(const struct scanner *s, uint64_t ptr, uint64_t h)
{
    if (h == NO_SLOT)
        return -1;
    uint64_t key = (ptr >> PAGE_SHIFT) + 1;
    const struct page_entry *e;
    for (;;) {
        e = &s->pages[h];
        if (e->key == key)
            break;
        if (!e->key)
            return -1;
        h = (h + 1) & s->page_mask;
    }
    unsigned g = (unsigned)(ptr & (PAGE - 1)) >> 5, word = g / 64;
    int64_t rank = popcount(e->bits[word] & (~(uint64_t)0 >> (63 - g % 64)))
                   + (word ? e->low : 0);
    return ((int64_t)e->first + rank) * 2 + (e->multi != 0);
}

static inline int64_t lookup(const struct scanner *s, uint64_t ptr)
{
    return lookup_at(s, ptr, slot_of(s, ptr));
}

/* The block record a candidate names (to prefetch), or NULL */
static inline const struct span *candidate_block(const struct scanner *s, int64_t c)
{
    return c >= 2 ? &s->blk[(c >> 1) - 1] : NULL;
}

/* The block holding ptr, from lookup's candidate C, or -1. */
static inline int64_t settle(const struct scanner *s, uint64_t ptr, int64_t c)
{
    if (c < 0)
        return -1;
    const struct span *blk = s->blk;
    int64_t i = (c >> 1) - 1;
    while (i >= 0 && blk[i].start > ptr) /* it starts above ptr in ptr's granule */
        i--;
    if (c & 1) /* the next one may start in the same granule */
        while ((uint64_t)(i + 1) < s->n && blk[i + 1].start <= ptr)
            i++;
    if (i < 0)
        return -1;
    uint64_t d = ptr - blk[i].start;
    uint32_t e = blk[i].extent;
    if (d < e)
        return i;
    return e == EXTENT_BIG && d < s->sizes[i] ? i : -1;
}

/* The block holding ptr (reach's find: the last block starting at or below it), or -1. */
static inline int64_t find(const struct scanner *s, uint64_t ptr)
{
    return settle(s, ptr, lookup(s, ptr));
}

int build_pages(struct scanner *s);
int read_exact(struct scanner *s, void *buf, uint64_t addr, uint64_t size);
int take_snapshot(struct scanner *s);
void drop_snapshot(struct scanner *s);
int get_small(struct scanner *s, void *out, uint64_t addr, uint64_t size);
int word_at(struct scanner *s, uint64_t addr, uint64_t *out);
int64_t in_ranges(const uint64_t *pairs, uint64_t n, uint64_t addr);
const uint8_t *block_data(struct scanner *s, uint64_t first, uint64_t len);
int heuristic_for(struct scanner *s, uint64_t ptr, uint64_t i);
int first_word_of(struct scanner *s, uint64_t i);

/* FIRST_VTABLE when block i's first word is a vtable's address, else FIRST_OTHER (memory.c works
 * it out once: it depends on memory alone) */
static inline int first_word(struct scanner *s, uint64_t i)
{
    int first = s->blk[i].first;
    return first != FIRST_UNKNOWN ? first : first_word_of(s, i);
}

#endif
