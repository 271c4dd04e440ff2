/* @brief recorder.h's number formatting against printf's: every value to 2^20, each power of ten and
 * of two and its neighbours, and a million pseudo-random values of every width. Each must print
 * exactly printf's text, return its end, and write nothing past it (the wide hexadecimal form:
 * NULs to its 18th byte, nothing after). Exit 1 at the first difference (printed), 0 when all
 * agree. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "recorder.h"

static int check(uint64_t v)
{
    char want[48], got[48];
    int fails = 0;
    for (int hex = 0; hex < 2; hex++) {
        int len = snprintf(want, sizeof want, hex ? "0x%" PRIx64 : "%" PRIu64, v);
        memset(got, '#', sizeof got);
        char *end = hex ? mdr_fmt_hex(got, v) : mdr_fmt_dec(got, v);
        if (end - got != len || memcmp(got, want, (size_t)len) != 0 || got[len] != '#') {
            printf("%s of %" PRIu64 ": %.*s (%d bytes), printf: %s\n", hex ? "hex" : "dec", v,
                   (int)(end - got), got, (int)(end - got), want);
            fails++;
        }
    }
    /* the record buffer's form: the same text, then NULs to its 18th byte, nothing after */
    int len = snprintf(want, sizeof want, "0x%" PRIx64, v);
    memset(got, '#', sizeof got);
    char *end = mdr_fmt_hex_wide(got, v);
    int nuls = 1;
    for (int i = len; i < 18; i++)
        nuls &= got[i] == '\0';
    if (end - got != len || memcmp(got, want, (size_t)len) != 0 || !nuls || got[18] != '#') {
        printf("wide hex of %" PRIu64 ": %.*s (%d bytes), printf: %s\n", v, (int)(end - got), got,
               (int)(end - got), want);
        fails++;
    }
    return fails;
}

int main(void)
{
    int fails = 0;
    for (uint64_t v = 0; v <= (1u << 20); v++)
        fails += check(v);
    uint64_t p = 1;
    for (int i = 0; i < 20; i++, p *= 10)
        fails += check(p - 1) + check(p) + check(p + 1);
    for (int i = 0; i < 64; i++)
        fails += check((1ull << i) - 1) + check(1ull << i) + check((1ull << i) + 1);
    fails += check(UINT64_MAX) + check(UINT64_MAX - 1);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 1000000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        fails += check(x >> (i % 64));
    }
    if (fails)
        printf("%d differences\n", fails);
    return fails != 0;
}
