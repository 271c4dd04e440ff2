/* @brief libmemdump_core's moments (moments.c): the live heap after chosen events of the views'
 * pass (figures.c), as heappass.py hands it to an accumulator's `take` (passapi.py's `Moment`):
 * the live bytes, the bytes allocated and dropped so far, and when asked the live bytes by stack
 * or the live blocks with their threads' tags. memdump_analyzer/nativepass.py reads them. */
#ifndef MEMDUMP_CORE_MOMENTS_H
#define MEMDUMP_CORE_MOMENTS_H

#include <stdint.h>

#include "figures.h"

/* what a moment holds besides its totals (passapi.py's MOMENT_ kinds) */
enum { MOM_TOTALS, MOM_BY_NODE, MOM_BLOCKS };
/* a moment's SEQ for the dump's end (passapi.END) */
#define MOM_END (-1)
/* a moment's SEQ for the peak of the live heap, known at the end (passapi.AT_PEAK): the blocks live
 * after the peak's event are those of the end allocated by then and those released since, which
 * the pass keeps from the latest peak on (at most the blocks live at the peak) */
#define MOM_PEAK (-2)

/* (mirrored) a moment taken: the index of its SEQ among those asked for, after event `seq`, its
 * totals, and its `n` rows from `first` in the
 * moments' data (MOM_BY_NODE: (node, blocks, bytes) each, the nodes in the order of their first
 * live block by SEQ allocated; MOM_BLOCKS: (address, size, node, tag string id or -1) each, by
 * address) */
struct mom_taken {
    int64_t index, seq, cur, allocated, dropped, kind, first, n;
};

struct moments;
struct block;
/* the moments due after event `seq` (the line before), if any (0: out of memory) */
int moments_due(struct mdc *c, int64_t seq);
/* the dump ends after event `seq`: the moments due, and those at MOM_END (0: out of memory) */
int moments_end(struct mdc *c, int64_t seq);
/* the tag index of a block allocated by thread `tid` when no series keeps tags (0: out of
 * memory) */
int moments_tag(struct moments *m, int64_t tid, uint16_t *tag);
/* the live heap reached a new peak (figures.c's t.peak_seq, the event just applied) */
void moments_peak(struct mdc *c);
/* live block `b` stops being live (released, returned again, dropped by an exec): kept when a
 * moment is at the peak and `b` was live at the latest (0: out of memory) */
int moments_gone(struct mdc *c, const struct block *b);
void moments_free(struct moments *m);

#endif
