/* @brief The in-process recorder's lock table, as GDB and the tests read it (locks.c;
 * gdb_ext/dbgkit/core/locktable.py reads the same words).
 */
#ifndef MEMDUMP_RECORDER_LOCKS_H
#define MEMDUMP_RECORDER_LOCKS_H

#include <stdint.h>

#define MDR_LOCKS_MAGIC "MDLOCK01"
#define MDR_LOCKS_CAPACITY 4096u   /* a power of two */
#define MDR_LOCK_WORDS 16          /* words per entry */
#define MDR_LOCKS_STACKS_CAPACITY 4096u  /* (lock, waiting stack) entries; a power of two */
#define MDR_LOCK_STACK_DEPTH 16    /* return addresses kept per waiting stack */
#define MDR_LOCK_STACK_WORDS 24    /* words per stack entry */

enum mdr_lock_kind { MDR_LOCK_MUTEX = 1, MDR_LOCK_RWLOCK = 2 };

/* One lock's counters; every field 8 bytes, little-endian (GDB reads them without debug info:
 * gdb_ext/dbgkit/core/locktable.py). */
struct mdr_lock_entry {
    uint64_t key;            /*  0: the lock's address, 0 for a free slot */
    uint64_t kind;           /*  1: enum mdr_lock_kind */
    uint64_t locked;         /*  2: acquisitions (lock, timedlock, a trylock that got it) */
    uint64_t read_locked;    /*  3: of which read locks (rwlock) */
    uint64_t owner_changes;  /*  4: exclusive acquisitions by another thread than the last */
    uint64_t contended;      /*  5: blocking acquisitions whose first try found it taken */
    uint64_t wait_ns;        /*  6: time those waited, summed */
    uint64_t max_wait_ns;    /*  7: the longest of them */
    uint64_t try_busy;       /*  8: trylock calls that found it taken */
    uint64_t last_owner;     /*  9: pthread_self() of the last exclusive acquirer */
    uint64_t reserved[MDR_LOCK_WORDS - 10];
};

/* One (lock, waiting stack): the contended acquisitions of a lock from one call stack (version
 * 2). Claimed by the first thread that waited from there: KEY first, then its frames, NPCS last
 * (0 while they are written). */
struct mdr_lock_stack {
    uint64_t key;            /*  0: hash of the lock's address and the stack, 0 for a free slot */
    uint64_t lock;           /*  1: the lock's address */
    uint64_t npcs;           /*  2: return addresses in pcs, innermost first (0: being written) */
    uint64_t contended;      /*  3: contended acquisitions from this stack */
    uint64_t wait_ns;        /*  4: time they waited, summed */
    uint64_t max_wait_ns;    /*  5: the longest of them */
    uint64_t partial;        /*  6: 1 when the walk stopped before the outermost frame */
    uint64_t reserved;       /*  7 */
    uint64_t pcs[MDR_LOCK_STACK_DEPTH]; /* 8: the caller's return address first */
};

/* What GDB reads first (field N at offset 8 * N). */
struct mdr_locks {
    char magic[8];           /* 0: MDR_LOCKS_MAGIC */
    uint64_t version;        /* 1 */
    uint64_t capacity;       /* 2: entries in the table */
    uint64_t entry_words;    /* 3: MDR_LOCK_WORDS */
    volatile uint64_t enabled; /* 4: GDB writes 1 to count (`set memdump locks on`) */
    uint64_t used;           /* 5: entries taken */
    uint64_t dropped;        /* 6: acquisitions not counted: the table was full */
    uint64_t table;          /* 7: address of the entries (0 until the first counted call) */
    /* version 2: the waiting stacks */
    uint64_t stacks;         /* 8: address of the stack entries (0 until the first contention) */
    uint64_t stack_capacity; /* 9: MDR_LOCKS_STACKS_CAPACITY */
    uint64_t stack_words;    /* 10: MDR_LOCK_STACK_WORDS */
    uint64_t stacks_used;    /* 11: stack entries taken */
    uint64_t stacks_dropped; /* 12: contended acquisitions not counted by stack: table full */
};

extern struct mdr_locks memdump_recorder_locks;

#endif
