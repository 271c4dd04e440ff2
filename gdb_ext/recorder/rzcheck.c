/* @brief Red zones: a block's layout and the check of its zones (rzcheck.h). */
#include <string.h>

#include "rzcheck.h"

#define WORD(b) (0x0101010101010101ull * (uint64_t)(b))

void *mdr_rz_place(void *raw, size_t offset, size_t size, size_t tail)
{
    char *user = (char *)raw + offset;
    uint64_t *head = (uint64_t *)user;
    head[-4] = size;
    head[-3] = (uint64_t)offset | (uint64_t)tail << 32;
    head[-2] = (uint64_t)(uintptr_t)user ^ MDR_RZ_KEY_LIVE;
    head[-1] = WORD(MDR_RZ_PATTERN);
    memset(user + size, MDR_RZ_PATTERN, tail);
    return user;
}

void mdr_rz_retire(void *user)
{
    ((uint64_t *)user)[-2] = (uint64_t)(uintptr_t)user ^ MDR_RZ_KEY_FREED;
    memset(user, MDR_RZ_FREED, mdr_rz_size(user));
}

/* The first byte of P[0..N) that is not B (N when none), a word at a time */
static size_t first_other(const unsigned char *p, size_t n, unsigned char b)
{
    size_t i = 0;
    uint64_t w = WORD(b), v;
    for (; i < n && ((uintptr_t)(p + i) & 7) != 0; i++)
        if (p[i] != b)
            return i;
    for (; i + 8 <= n; i += 8) {
        memcpy(&v, p + i, 8);
        if (v != w)
            break;
    }
    for (; i < n; i++)
        if (p[i] != b)
            return i;
    return n;
}

/* The last byte of P[0..N) that is not B, plus one (0 when none) */
static size_t last_other(const unsigned char *p, size_t n, unsigned char b)
{
    while (n > 0 && p[n - 1] == b)
        n--;
    return n;
}

/* P[0..N)'s changed bytes against B: the first one's index and the span to the last one */
static void span(const unsigned char *p, size_t n, unsigned char b, uint64_t *first,
                 uint64_t *bytes)
{
    size_t i = first_other(p, n, b);
    *first = i;
    *bytes = i == n ? 0 : last_other(p, n, b) - i;
}

int mdr_rz_check(const void *user, struct mdr_rz_damage *out)
{
    const unsigned char *u = user;
    uint64_t size = mdr_rz_size(user);
    memset(out, 0, sizeof *out);
    uint64_t first, bytes;
    span(u - MDR_RZ_FRONT, MDR_RZ_FRONT, MDR_RZ_PATTERN, &first, &bytes);
    if (bytes) {  /* distances before the start: the last changed byte is the nearest */
        out->before_offset = MDR_RZ_FRONT - (first + bytes);
        out->before_bytes = bytes;
    }
    span(u + size, mdr_rz_tail(user), MDR_RZ_PATTERN, &out->after_offset, &out->after_bytes);
    if (!out->after_bytes)
        out->after_offset = 0;
    if (mdr_rz_state(user) == MDR_RZ_DEAD) {
        span(u, size, MDR_RZ_FREED, &out->inside_offset, &out->inside_bytes);
        if (!out->inside_bytes)
            out->inside_offset = 0;
    }
    return (out->before_bytes | out->after_bytes | out->inside_bytes) != 0;
}

void mdr_rz_repair(void *user)
{
    char *u = user;
    uint64_t size = mdr_rz_size(user);
    memset(u - MDR_RZ_FRONT, MDR_RZ_PATTERN, MDR_RZ_FRONT);
    memset(u + size, MDR_RZ_PATTERN, mdr_rz_tail(user));
    if (mdr_rz_state(user) == MDR_RZ_DEAD)
        memset(u, MDR_RZ_FREED, size);
}
