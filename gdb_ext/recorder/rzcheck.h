/* @brief Red zones (redzone.c, docs/heap-errors.md "Red zones"): a block's layout, its
 * patterns, and the check of its zones. Pure: the unit test (test_redzone.c) calls them. */
#ifndef MEMDUMP_RECORDER_RZCHECK_H
#define MEMDUMP_RECORDER_RZCHECK_H

#include <stddef.h>
#include <stdint.h>

/* A red-zoned block: the C library's block RAW holds, from its start,
 *
 *     [pad][size][offset|tail][tag][canary 8] user block [tail red zone]
 *                                          ^ the pointer the program gets (raw + offset)
 *
 * The header's 32 bytes end at the user block: its size, the offset back to RAW (low 32 bits)
 * and the tail zone's length (high 32 bits), then the tag (the user pointer XOR a key: the block is one of
 * ours, live or freed) and the front zone, 8 bytes of pattern. Only the tag and the front zone
 * lie in the 16 bytes before the user block, which any glibc block has (its chunk header): a
 * pointer from before the red zones, or from valloc, is read there safely and is not ours. */
#define MDR_RZ_HEAD 32
#define MDR_RZ_FRONT 8
#define MDR_RZ_PATTERN 0xfc  /* the front and tail zones */
#define MDR_RZ_FREED 0xfd    /* a freed block in the quarantine */
#define MDR_RZ_KEY_LIVE 0x5a4d52445a4f4e45ull
#define MDR_RZ_KEY_FREED 0xa5b2adbba5b0b1baull

enum { MDR_RZ_FOREIGN = 0, MDR_RZ_LIVE = 1, MDR_RZ_DEAD = 2 };

/* USER, the start of a block the C library made, or of one of ours: which it is. */
static inline int mdr_rz_state(const void *user)
{
    uint64_t tag = ((const uint64_t *)user)[-2] ^ (uint64_t)(uintptr_t)user;
    return tag == MDR_RZ_KEY_LIVE ? MDR_RZ_LIVE : tag == MDR_RZ_KEY_FREED ? MDR_RZ_DEAD
                                                                             : MDR_RZ_FOREIGN;
}
static inline uint64_t mdr_rz_size(const void *user)
{
    return ((const uint64_t *)user)[-4];
}
static inline void *mdr_rz_raw(void *user)
{
    return (char *)user - (uint32_t)((const uint64_t *)user)[-3];
}
static inline size_t mdr_rz_tail(const void *user)
{
    return (size_t)(((const uint64_t *)user)[-3] >> 32);
}

/* The user block of SIZE at RAW + OFFSET (OFFSET at least MDR_RZ_HEAD, a multiple of 16), a
 * tail zone of TAIL bytes after it: the header written, the zones filled. */
void *mdr_rz_place(void *raw, size_t offset, size_t size, size_t tail);
/* USER (live) marked freed, its bytes filled with MDR_RZ_FREED. */
void mdr_rz_retire(void *user);

/* What a check found: a zone's changed bytes, OFFSET the first one's distance from the block
 * (after its end, before its start, or from its start for a freed block's bytes), BYTES from
 * it to the farthest one, inclusive; BYTES 0: none changed. */
struct mdr_rz_damage {
    uint64_t before_offset, before_bytes;
    uint64_t after_offset, after_bytes;
    uint64_t inside_offset, inside_bytes;  /* a freed block only */
};
/* USER's zones (and, freed, its bytes) against their patterns; 1 when anything changed. */
int mdr_rz_check(const void *user, struct mdr_rz_damage *out);
/* USER's zones (and, freed, its bytes) filled with their patterns again: damage reported is
 * not reported twice (at its free, then as it leaves the quarantine or at exit). */
void mdr_rz_repair(void *user);

#endif
