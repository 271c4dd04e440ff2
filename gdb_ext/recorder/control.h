/* @brief The recorder's control block: what GDB reads and writes in the process (docs/recorder.md).
 *
 * Every field is 8 bytes, little-endian, so that GDB reads the block with one pread(2) of
 * /proc/PID/mem and no debug information: field N is at offset 8 * N (path at the end).
 */
#ifndef MEMDUMP_RECORDER_CONTROL_H
#define MEMDUMP_RECORDER_CONTROL_H

#include <stdint.h>

#include "memdump_format.h"

#define MDR_MAGIC "MDREC001"
#define MDR_VERSION 1
#define MDR_MAX_DEPTH 256
#define MDR_PATH_MAX 4096
#define MDR_GUARD_MAX 256

/* DRAINING (GDB, before a detach): no new call is recorded, the calls in progress still are. */
enum mdr_state { MDR_UNCONFIGURED = 0, MDR_RECORDING = 1, MDR_DISABLED = 2, MDR_DRAINING = 3 };

/* Why the recorder stopped by itself (field `failure`). */
enum mdr_failure { MDR_OK = 0, MDR_NO_GDB = 1, MDR_OPEN = 2, MDR_SPACE = 3, MDR_MEMORY = 4 };

struct mdr_control {
    char magic[8];               /*  0: MDR_MAGIC */
    uint64_t version;            /*  1 */
    uint64_t size;               /*  2: sizeof(struct mdr_control) */
    volatile uint64_t state;     /*  3: enum mdr_state; GDB writes MDR_DISABLED to stop */
    volatile uint64_t lock;      /*  4: non-zero while a thread writes records */
    uint64_t depth;              /*  5: frames per stack (GDB) */
    uint64_t end;                /*  6: file offset after the last complete record */
    uint64_t seq;                /*  7: SEQ of the last sequenced record */
    uint64_t next_string;        /*  8 */
    uint64_t next_frame;         /*  9 */
    uint64_t next_node;          /* 10 */
    uint64_t events;             /* 11: e records written by the recorder */
    uint64_t live_count;         /* 12 */
    uint64_t live_bytes;         /* 13 */
    uint64_t unrecorded;         /* 14: calls made inside the recorder (not recorded) */
    uint64_t live_table;         /* 15: address of {address, size, stack} entries */
    uint64_t live_capacity;      /* 16: entries (a power of two) */
    uint64_t slots;              /* 17: address of the in-flight slots */
    uint64_t slot_count;         /* 18 */
    uint64_t frame_pcs;          /* 19: address of the pc of frame id I (index I, 0 unused) */
    uint64_t failure;            /* 20: enum mdr_failure */
    uint64_t failure_errno;      /* 21 */
    uint64_t inherit;            /* 22: GDB: 1 = children and exec'd programs keep the recorder */
    uint64_t pid;                /* 23: the process that configured the recorder */
    uint64_t region;             /* 24: the recorder's own memory: not a root of the scan */
    uint64_t region_size;        /* 25 */
    uint64_t partial_stacks;     /* 26: events whose stack walk stopped before its end */
    uint64_t attach;             /* 27: GDB: 1 = loaded into a running process: redirect the
                                  *     modules' GOT entries to the hooks (got.c) */
    uint64_t patched;            /* 28: GOT slots redirected so far */
    uint64_t patched_modules;    /* 29: modules redirected so far */
    uint64_t clock_base;         /* 30: time(NULL) when the recording began: each live-block
                                  *     entry's stack word keeps time(NULL) - clock_base at the
                                  *     allocation in bits 32 to 62 */
    uint64_t clock_start;        /* 31: CLOCK_MONOTONIC in milliseconds when the recording
                                  *     began: the base of the dump's `c` records */
    char path[MDR_PATH_MAX];     /* 32: the dump, NUL-terminated (GDB) */
    /* guard pages (docs/heap-errors.md): after the path, so that a GDB that knows only the
     * fields above reads them where they were; field N is still at byte 8 * N,
     * the path counting as its 512 words */
    uint64_t guard_pool;         /* 544: the pool's first byte (guard pages included); 0: off */
    uint64_t guard_pool_size;    /* 545 */
    uint64_t guard_slots;        /* 546: slots of the pool */
    uint64_t guard_slot_bytes;   /* 547: the data bytes of a slot: larger blocks are not guarded */
    uint64_t guard_blocks;       /* 548: blocks placed in the pool so far */
    uint64_t guard_missed;       /* 549: chosen blocks that found no free slot */
    uint64_t guard_errors;       /* 550: `ae` records written */
    char guard[MDR_GUARD_MAX];   /* 551: SPEC, NUL-terminated (GDB); empty: MEMDUMP_GUARD */
    uint64_t guard_let_through;  /* 583: GDB (batch): 1 = after its record the fault handler
                                  *     makes the faulting page accessible and returns, the
                                  *     access completes, and GDB protects the page again */
    /* red zones (redzone.c, docs/heap-errors.md "Red zones") */
    uint64_t rz_tail;            /* 584: the tail zone's bytes asked for; 0: red zones off */
    uint64_t rz_quarantine;      /* 585: the quarantine's bound, in user bytes */
    uint64_t rz_errors;          /* 586: `hc` records written */
};

/* An in-flight call: the slot of a thread inside a hooked call (GDB reads them at a fatal
 * signal: a call that never returned is written with RESULT 0x0). */
struct mdr_slot {
    uint64_t tid;                /* 0: owner's kernel thread id, 0 free */
    volatile uint64_t op;        /* 1: enum mdr_op + 1 while in a call, 0 otherwise */
    uint64_t args[3];            /* 2..4 */
    uint64_t npcs;               /* 5 */
    uint64_t pcs;                /* 6: address of the call's return addresses (its stack) */
    uint64_t reserved;           /* 7 */
};

enum mdr_op {
    MDR_MALLOC, MDR_CALLOC, MDR_REALLOC, MDR_REALLOCARRAY, MDR_FREE, MDR_POSIX_MEMALIGN,
    MDR_ALIGNED_ALLOC, MDR_MEMALIGN, MDR_VALLOC, MDR_PVALLOC,
    MDR_CUSTOM_ALLOC, MDR_CUSTOM_FREE,  /* memdump_api.h's MEMDUMP_ALLOC, MEMDUMP_FREE */
    MDR_NEW, MDR_NEW_ARRAY, MDR_DELETE, MDR_DELETE_ARRAY,  /* the C++ operators (cxx.c) */
    MDR_OP_COUNT
};
/* GDB reads these numbers (core/recorder.py's OPS): they are the format's order of the
 * operations, memdump_format.h's enum memdump_op, generated from the analyser's table */
#define MDR_SAME_OP_(ident, name, len, tag, tag_len) \
    _Static_assert((int)MDR_##ident == (int)MEMDUMP_OP_##ident, "enum mdr_op: " name " misplaced");
MEMDUMP_OPS(MDR_SAME_OP_)
_Static_assert((int)MDR_OP_COUNT == (int)MEMDUMP_OP_COUNT, "enum mdr_op: an operation is missing");
#undef MDR_SAME_OP_

/* `memdump break`: the condition GDB writes into memdump_recorder_break_at, which the recorder
 * tests after each event it writes; on a match it calls memdump_recorder_break(), where GDB
 * stops (docs/recorder.md, "Breaks"). Every field 8 bytes, GDB reads and writes it as the
 * control block. */
#define MDR_BREAK_RANGES 8
#define MDR_BREAK_PCS 64
struct mdr_break {
    volatile uint64_t ops;       /*  0: bit (1 << enum mdr_op) of each operation; 0: no break */
    uint64_t size_min;           /*  1: the allocation's size at least... */
    uint64_t size_max;           /*  2: ...and at most */
    uint64_t seq;                /*  3: the event's SEQ; 0: any */
    uint64_t tag;                /*  4: the hash of the thread's innermost tag (FNV-1a of its
                                  *     name); 0: any */
    uint64_t count;              /*  5: stop at the COUNT-th match only; 0: at every one */
    uint64_t hits;               /*  6: matches so far (the recorder) */
    uint64_t n_ranges;           /*  7: a frame's pc in one of these [lo, hi) ranges (--function) */
    uint64_t ranges[2 * MDR_BREAK_RANGES]; /* 8 */
    uint64_t n_pcs;              /* 24: the stack's first pcs are these (--leak); 0: any */
    uint64_t pcs[MDR_BREAK_PCS]; /* 25 */
    uint64_t last_seq;           /* 89: the matching event (the recorder, for GDB's message) */
    uint64_t last_op;            /* 90 */
    uint64_t last_size;          /* 91 */
    uint64_t last_address;       /* 92: the block allocated or released */
};

/* A custom block's entry in the live-block table: its address with this bit set, so that an
 * object at the start of its pool's malloc'd block (same address) has its own entry. */
#define MDR_CUSTOM_KEY (UINT64_C(1) << 63)

#endif
