/* @brief The region allocator's interface (region.c): memory the recorder allocates for itself,
 * mmap only, never the allocator it records, in one range the pointer scan leaves out. */
#ifndef MEMDUMP_RECORDER_REGION_H
#define MEMDUMP_RECORDER_REGION_H

#include <stddef.h>

/* BYTES readable and writable, zero (fresh pages), in the recorder's region; NULL when full. */
__attribute__((visibility("hidden"))) void *mdr_map(size_t bytes);
/* BYTES at P given back: PROT_NONE, the pages freed, the addresses not reused. */
__attribute__((visibility("hidden"))) void mdr_unmap(void *p, size_t bytes);
/* Address space in the recorder's region, for a file mapping (MAP_FIXED over it). */
__attribute__((visibility("hidden"))) void *mdr_reserve(size_t bytes);

#endif
