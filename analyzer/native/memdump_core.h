/* @brief libmemdump_core.so: the replay of a memdump dump's heap events in C (the analyser's
 * memdump_analyzer/native.py loads it with ctypes; memdump_analyzer/replay.py is the reference).
 *
 * The library reads the dump through a read-only mapping and does what replay.py's `_Replayer`
 * does for the records that are most of a dump: the events (`e`, `+`, `-`, `+n`, `+a`, `-n`,
 * `-a`), the thread records (`t`), the stack nodes (`n`) and comments. Every other line goes back
 * to Python in runs (`MDC_LINES`), so that `DumpReader` keeps its one implementation of the
 * definitions and of their checks. Whatever the library cannot decide exactly as Python would (a
 * malformed or unusual field) ends the run with `MDC_FALLBACK`: the caller then replays the dump
 * in Python from the start, which gives the answer or the exact error.
 */
#ifndef MEMDUMP_CORE_H
#define MEMDUMP_CORE_H

#include <stdint.h>

/* the layout version; mdc_abi() gives it << 32 | sizeof(struct mdc_io). The file is read with
 * pread into a buffer of 4 MiB (longer lines grow it): the memory used is that and the tables. */
#define MDC_ABI 1

/* what mdc_run() stopped for */
enum mdc_status {
    MDC_DONE = 0,     /* the end of the dump's complete lines */
    MDC_LINES = 1,    /* io.n_lines lines for Python (io.lines), or none (progress) */
    MDC_ASK = 2,      /* is the stack io.ask_node the runtime's alone? mdc_runtime() answers */
    MDC_FALLBACK = 3, /* replay this dump in Python */
};

/* The heap operations in the order of dumpformat.OPERATIONS (mdc_op_name checks it). */
enum mdc_op {
    OP_MALLOC, OP_CALLOC, OP_REALLOC, OP_REALLOCARRAY, OP_FREE, OP_POSIX_MEMALIGN,
    OP_ALIGNED_ALLOC, OP_MEMALIGN, OP_VALLOC, OP_PVALLOC, OP_CUSTOM_ALLOC, OP_CUSTOM_FREE,
    OP_NEW, OP_NEW_ARRAY, OP_DELETE, OP_DELETE_ARRAY, OP_COUNT
};

/* shared with Python between runs; every field 8 bytes */
struct mdc_io {
    int64_t seq;              /* the last SEQ (Python's `p` and `end` records move it too) */
    uint64_t other;           /* lines the library read that DumpReader counts in `_other` */
    uint64_t node_read;       /* an `n` record was read since the last stop (`_open_fs` ends) */
    uint64_t n_lines;         /* MDC_LINES: how many lines */
    uint64_t lines;           /* MDC_LINES: address of their (address, length) pairs */
    uint64_t pos;             /* file offset reached */
    uint64_t chunk;           /* with `progress`: the bytes read since the last stop (address */
    uint64_t chunk_len;       /* and length), for the progress bar */
    int64_t ask_node;         /* MDC_ASK: the stack node */
    uint64_t attached;        /* set by Python: the recording began on a running process */
    uint64_t progress;        /* set by Python: give each chunk read to the progress bar (a
                                 stop with MDC_LINES and no line at least every 4 MiB) */
    uint64_t fallback_pos;    /* MDC_FALLBACK: offset of the line (for the tests) */
};

/* the counts at the end; every field 8 bytes */
struct mdc_counts {
    int64_t calls[OP_COUNT];
    int64_t allocations, frees, allocated_bytes, live_bytes, peak_bytes, peak_blocks, peak_seq,
        peak_node;
    int64_t error_count, untracked_frees, runtime_internal_frees, reused_live;
    int64_t free_null, free_runtime, free_errors, free_untracked;
    int64_t custom_allocations, custom_frees, delete_frees;
    int64_t n_live, n_custom, n_errors, n_nodes, n_used;
    int64_t tid; /* the last `t` record's TID, -1: none */
};

/* a heap error; every field 8 bytes */
struct mdc_error {
    int64_t kind; /* 0 invalid-free, 1 double-free, 2 invalid-realloc, 3 mismatched-free */
    int64_t seq, tid, op;
    uint64_t ptr;
    int64_t node, freed_node; /* signed as in node_ids; freed_node: has_freed says */
    int64_t has_freed;
    int64_t alloc_size, alloc_node, alloc_family; /* mismatched-free: the block; family 0 malloc
                                                     1 new 2 new[], -1 none */
    int64_t freed_seq; /* has_freed: the SEQ of the release of the freed block (0: unknown) */
};

#endif
