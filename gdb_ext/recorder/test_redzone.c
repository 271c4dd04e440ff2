/* @brief recorder.redzone: a red-zoned block's layout and the check of its zones (rzcheck.c),
 * exact: which bytes changed, where, against rzcheck.h's spec. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rzcheck.h"

static int failures;

#define EXPECT(cond)                                                    \
    do {                                                                \
        if (!(cond)) {                                                  \
            fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                 \
        }                                                               \
    } while (0)

/* A block of SIZE with a 16-byte tail asked for, as redzone.c's malloc makes it */
static char *block(size_t size, size_t offset)
{
    void *raw = aligned_alloc(offset > 16 ? offset : 16, offset + size + 16);
    return mdr_rz_place(raw, offset, size, 16);
}

static void expect_damage(const char *user, uint64_t bo, uint64_t bb, uint64_t ao, uint64_t ab,
                          uint64_t io, uint64_t ib, int line)
{
    struct mdr_rz_damage d;
    int any = mdr_rz_check(user, &d);
    if (any != ((bb | ab | ib) != 0) || d.before_offset != bo || d.before_bytes != bb ||
        d.after_offset != ao || d.after_bytes != ab || d.inside_offset != io ||
        d.inside_bytes != ib) {
        fprintf(stderr, "line %d: damage %d: before %llu+%llu after %llu+%llu inside %llu+%llu\n",
                line, any, (unsigned long long)d.before_offset,
                (unsigned long long)d.before_bytes, (unsigned long long)d.after_offset,
                (unsigned long long)d.after_bytes, (unsigned long long)d.inside_offset,
                (unsigned long long)d.inside_bytes);
        failures++;
    }
}
#define DAMAGE(u, bo, bb, ao, ab, io, ib) expect_damage(u, bo, bb, ao, ab, io, ib, __LINE__)

int main(void)
{
    /* the layout: size, tag, the user block 16-aligned, the tail to the usable end */
    char *u = block(24, MDR_RZ_HEAD);
    EXPECT(((uintptr_t)u & 15) == 0);
    EXPECT(mdr_rz_size(u) == 24);
    EXPECT(mdr_rz_state(u) == MDR_RZ_LIVE);
    EXPECT(mdr_rz_tail(u) == 16);
    EXPECT(malloc_usable_size(mdr_rz_raw(u)) >= MDR_RZ_HEAD + 24 + 16);
    DAMAGE(u, 0, 0, 0, 0, 0, 0);
    memset(u, 0x41, 24);  /* the whole block written: no damage */
    DAMAGE(u, 0, 0, 0, 0, 0, 0);

    /* one byte past: 0 bytes after, 1 byte; three bytes: 0, 3; one byte at +2: 2, 1 */
    u[24] = 0;
    DAMAGE(u, 0, 0, 0, 1, 0, 0);
    u[25] = u[26] = 7;
    DAMAGE(u, 0, 0, 0, 3, 0, 0);
    u[24] = (char)MDR_RZ_PATTERN;
    u[25] = (char)MDR_RZ_PATTERN;
    DAMAGE(u, 0, 0, 2, 1, 0, 0);
    /* the tail zone's last byte */
    u[26] = (char)MDR_RZ_PATTERN;
    size_t tail = mdr_rz_tail(u);
    u[24 + tail - 1] = 1;
    DAMAGE(u, 0, 0, tail - 1, 1, 0, 0);
    u[24 + tail - 1] = (char)MDR_RZ_PATTERN;

    /* an underrun: the byte before the block is 0 bytes before; bytes -3 and -1: 0, 3 */
    u[-1] = 0;
    DAMAGE(u, 0, 1, 0, 0, 0, 0);
    u[-3] = 0;
    DAMAGE(u, 0, 3, 0, 0, 0, 0);
    u[-1] = (char)MDR_RZ_PATTERN;
    DAMAGE(u, 2, 1, 0, 0, 0, 0);
    u[-3] = (char)MDR_RZ_PATTERN;
    EXPECT(mdr_rz_state(u) == MDR_RZ_LIVE);

    /* freed: the bytes filled, the tag says so; a write after free at 8..11 */
    mdr_rz_retire(u);
    EXPECT(mdr_rz_state(u) == MDR_RZ_DEAD);
    for (int i = 0; i < 24; i++)
        EXPECT((unsigned char)u[i] == MDR_RZ_FREED);
    DAMAGE(u, 0, 0, 0, 0, 0, 0);
    memcpy(u + 8, "abcd", 4);
    DAMAGE(u, 0, 0, 0, 0, 8, 4);
    u[0] = 1;
    u[24] = 0;
    DAMAGE(u, 0, 0, 0, 1, 0, 12);
    mdr_rz_repair(u);  /* reported once: the patterns again */
    DAMAGE(u, 0, 0, 0, 0, 0, 0);
    EXPECT(mdr_rz_state(u) == MDR_RZ_DEAD);
    free(mdr_rz_raw(u));

    /* a block of 0 bytes: any write at it is an overrun */
    u = block(0, MDR_RZ_HEAD);
    DAMAGE(u, 0, 0, 0, 0, 0, 0);
    u[0] = 0;
    DAMAGE(u, 0, 0, 0, 1, 0, 0);
    free(mdr_rz_raw(u));

    /* aligned: the header in the ALIGN bytes before the block; a long block's words */
    u = block(1000, 64);
    EXPECT(((uintptr_t)u & 63) == 0);
    EXPECT((char *)mdr_rz_raw(u) == u - 64);
    mdr_rz_retire(u);
    DAMAGE(u, 0, 0, 0, 0, 0, 0);
    u[517] = 0;
    DAMAGE(u, 0, 0, 0, 0, 517, 1);
    u[999] = 0;
    DAMAGE(u, 0, 0, 0, 0, 517, 483);
    free(mdr_rz_raw(u));

    /* a C library block is not ours */
    char *volatile plain = malloc(40);  /* volatile: the 16 bytes before it are its header */
    EXPECT(mdr_rz_state(plain) == MDR_RZ_FOREIGN);
    free(plain);

    if (failures == 0)
        printf("recorder.redzone: ok\n");
    return failures != 0;
}
