/* @brief Guard pages (guard.c, docs/heap-errors.md): the guarded pool, its SPEC, the fault
 * handler's error record. */
#ifndef MEMDUMP_RECORDER_GUARD_H
#define MEMDUMP_RECORDER_GUARD_H

#include <stddef.h>
#include <stdint.h>

/* The allocator's functions the hooks call (recorder.c's `real`): the C library's, or guard.c's
 * once guarding is on (they place chosen blocks in the pool and pass the others on). */
struct mdr_alloc_fns {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*reallocarray)(void *, size_t, size_t);
    void (*free)(void *);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
};

/* A parsed SPEC: which blocks go to the pool, and how they are placed. */
struct mdr_guard_spec {
    uint32_t ppm;          /* sampled share in parts per million, 1 (`0.0001%`) to 1,000,000
                            * (`100%`, `all`) */
    int all;               /* `all`: every block while the pool lasts */
    uint64_t size_min, size_max;  /* `MIN-MAX` bytes; 0 and UINT64_MAX by default */
    int under;             /* `under`: the guard page before the block; `over` (default) after */
    int align16;           /* `align16`: blocks start 16-aligned (slack overflows missed) */
    uint64_t tag;          /* `tag:NAME`: only blocks allocated while the thread's innermost
                            * memdump_api.h tag is NAME (FNV-1a of the name); 0: any */
    char fn[128];          /* `fn:NAME`: only blocks allocated while the function NAME is on
                            * the stack; "": any */
    uintptr_t fn_lo, fn_hi; /* NAME's code, [fn_lo, fn_hi) (mdr_guard_start finds it) */
};

/* Whether one of the return addresses PCS[0..N) lies in SPEC's `fn:NAME` (a return address is
 * one past its call: PC - 1 is tested); 1 without a `fn:` term. Pure: the unit test calls it. */
int mdr_guard_fn_on_stack(const struct mdr_guard_spec *spec, const uintptr_t *pcs, int n);

/* SPEC (comma-separated terms) into OUT; 0 on success, else -1 with a message in ERR (its
 * first LEN bytes). Pure: the unit test calls it. */
int mdr_guard_parse(const char *spec, struct mdr_guard_spec *out, char *err, size_t len);

/* A thread's sampling state (recorder.c keeps one in each thread's state: no allocation, no
 * shared cache line): an xorshift64 generator, 0 until its first draw seeds it. */
struct mdr_guard_sampler {
    uint64_t x;
};
/* Whether the next block is chosen, at PPM parts per million (a draw of S, seeded from SEED and
 * S's address when S is 0): lock-free, syscall-free. Pure: the unit test calls it. */
int mdr_guard_sample(struct mdr_guard_sampler *s, uint32_t ppm, uint64_t seed);

/* The pool, for the unit test: SLOTS slots of PAGES data pages each; 0 when it cannot be made. */
int mdr_guard_pool_init(const struct mdr_guard_spec *spec, size_t slots, size_t pages);
/* A block of SIZE (aligned to ALIGN, 0: malloc's) in the pool; NULL when it does not fit or no
 * slot is free (the caller then asks the C library). */
void *mdr_guard_alloc(size_t size, size_t align);
/* The pool's mapping (guard pages included); 0 when there is none. */
int mdr_guard_region(uintptr_t *base, size_t *bytes);
/* P lies in the pool (its guard pages included). */
int mdr_guard_owns(const void *p);
/* P, a block of the pool, released: its pages inaccessible, its slot at the end of the queue.
 * Returns 0 for a pointer that is no live block of the pool (double or interior free). */
int mdr_guard_release(void *p);
/* The size of the pool block P (0 when P is none). */
size_t mdr_guard_size(const void *p);

/* What an address in the pool is, as the fault handler reports it. */
struct mdr_guard_hit {
    uintptr_t block;
    uint64_t size;
    uint64_t offset;      /* bytes after its end, before its start, or from its start */
    const char *relation; /* "after", "before", "inside" */
    const char *state;    /* "allocated", "freed" */
};
/* ADDR's block (the nearest one a guard page or a freed slot belongs to); 0 when none. */
int mdr_guard_classify(uintptr_t addr, struct mdr_guard_hit *out);

/* Guarding turned on from the control block's `guard` (GDB) or, when it is empty, from the
 * environment's MEMDUMP_GUARD (ENVIRONMENT: 1): REAL gets guard.c's functions. Once per process:
 * later calls do nothing. */
void mdr_guard_start(struct mdr_alloc_fns *real, int environment);
/* fork's handlers: the pool's lock held across the fork */
void mdr_guard_atfork(int phase);

#endif
