/* @brief libmemdump_core's views' pass (figures.c): what heappass.py computes inline, per
 * allocating stack, per size and per lifetime, in C, on the replay's decoding (records.c) and its
 * table of blocks (tables.c). memdump_analyzer/nativepass.py reads these tables. */
#ifndef MEMDUMP_CORE_FIGURES_H
#define MEMDUMP_CORE_FIGURES_H

#include <stdint.h>

/* what mdc_figures() computes besides the stacks' live, peak and allocated figures (PARTS) */
#define FIG_TEMPORARY 1
#define FIG_LIFETIMES 2
#define FIG_SIZES 4

/* one allocating stack's figures (passapi.py's list: CUR ... GONE, then its node); every field 8
 * bytes, in the order Python reads them */
struct fig_stack {
    int64_t cur, cur_n, changed, peak, peak_n, allocs, alloc_bytes, temp, temp_bytes, gone, node;
};

/* a counter's entry, in the order its keys were first counted: (a, b) -> n */
struct fig_entry {
    int64_t a, b, n;
};

/* the counters (mdc_fig_counter) */
enum { FIG_LIFE, FIG_LIFE_MS, FIG_FREED_BY, FIG_SIZES_BY, FIG_COUNTERS };

/* the pass's figures at the end; every field 8 bytes */
struct fig_totals {
    int64_t cur, peak, peak_seq, peak_blocks, peak_ms, temporary, temporary_bytes, live_n,
        n_stacks, clocked, ms;
};

#endif
