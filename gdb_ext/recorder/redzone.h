/* @brief Red zones and the quarantine at run time (redzone.c, docs/heap-errors.md). */
#ifndef MEMDUMP_RECORDER_REDZONE_H
#define MEMDUMP_RECORDER_REDZONE_H

#include <stddef.h>

#include "guard.h"

/* MEMDUMP_REDZONE's text, `N` or `N,QUARANTINE_BYTES`, into *TAIL and *QUARANTINE; 0 when it
 * is not one. */
__attribute__((visibility("hidden"))) int mdr_rz_parse(const char *text, size_t *tail,
                                                       size_t *quarantine);
/* Red zones turned on from the environment's MEMDUMP_REDZONE: REAL gets redzone.c's functions.
 * Once per process; called before guard pages start (they pass their other blocks on to these). */
__attribute__((visibility("hidden"))) void mdr_rz_start(struct mdr_alloc_fns *real);
/* fork's handlers: the quarantine's lock held across the fork (taken after the writer's) */
__attribute__((visibility("hidden"))) void mdr_rz_atfork(int phase);
/* P, a live red-zoned block: its user size in *OUT, 1; else 0 (malloc_usable_size) */
__attribute__((visibility("hidden"))) int mdr_rz_usable_size(const void *p, size_t *out);

#endif
