/* @brief The region allocator: all the recorder's memory, the dump's windows included, comes
 * from one reservation of address space, so that the pointer scan leaves it out of the roots in
 * one range (control.h's region, region_size): the recorder's tables hold the address of every
 * live block. Pieces are made readable as they are handed out; released ones go back to PROT_NONE
 * (their pages are freed, their addresses not reused). mmap only: never the allocator it records.
 */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "recorder.h"
#include "region.h"

#define C (memdump_recorder_control)

static char *region;
static size_t region_size, region_used;

static int region_init(void)
{
    static const size_t sizes[] = {(size_t)1 << 40, (size_t)1 << 36, (size_t)1 << 33};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = mmap(NULL, sizes[i], PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (p != MAP_FAILED) {
            char *expected = NULL;
            if (!__atomic_compare_exchange_n(&region, &expected, (char *)p, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE)) {
                munmap(p, sizes[i]);
                return 1;
            }
            region_size = sizes[i];
            C.region = (uint64_t)(uintptr_t)p;
            C.region_size = sizes[i];
            return 1;
        }
    }
    return 0;
}

/* BYTES of address space in the region, not yet accessible. */
MDR_HIDDEN void *mdr_reserve(size_t bytes)
{
    if (MDR_UNLIKELY(__atomic_load_n(&region, __ATOMIC_ACQUIRE) == NULL) && !region_init())
        return NULL;
    while (__atomic_load_n(&region_size, __ATOMIC_ACQUIRE) == 0)
        ;  /* another thread is publishing the region */
    bytes = (bytes + 4095) & ~(size_t)4095;
    size_t at = __atomic_fetch_add(&region_used, bytes, __ATOMIC_RELAXED);
    if (at + bytes > region_size)
        return NULL;
    return region + at;
}

void *mdr_map(size_t bytes)
{
    char *p = mdr_reserve(bytes);
    if (p == NULL || mprotect(p, (bytes + 4095) & ~(size_t)4095, PROT_READ | PROT_WRITE) != 0)
        return NULL;
    return p;
}

void mdr_unmap(void *p, size_t bytes)
{
    if (p != NULL)
        mmap(p, (bytes + 4095) & ~(size_t)4095, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}
