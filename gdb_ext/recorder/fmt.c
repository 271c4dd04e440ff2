/* @brief The record formatting beside recorder.h's inline writers: the tables of its number
 * formatting (mdr_fmt_dec, mdr_fmt_hex, mdr_fmt_hex_wide), two digits a step, and the escaped TEXT
 * of a record (mdr_fmt_str). A file of its own, so that test_fmt.c checks the formatting without the
 * rest of the recorder. */
#include "recorder.h"

#define D10(x) #x "0" #x "1" #x "2" #x "3" #x "4" #x "5" #x "6" #x "7" #x "8" #x "9"
#define H16(x) D10(x) #x "a" #x "b" #x "c" #x "d" #x "e" #x "f"
const char mdr_dec_pairs[200] = D10(0) D10(1) D10(2) D10(3) D10(4) D10(5) D10(6) D10(7) D10(8)
    D10(9);
const char mdr_hex_pairs[512] = H16(0) H16(1) H16(2) H16(3) H16(4) H16(5) H16(6) H16(7) H16(8)
    H16(9) H16(a) H16(b) H16(c) H16(d) H16(e) H16(f);
const uint64_t mdr_pow10[20] = {
    1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
    1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull, 10000000000000ull,
    100000000000000ull, 1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
    1000000000000000000ull, 10000000000000000000ull,
};
const unsigned char mdr_hex_mask[32] = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
};

/* TEXT escaped as docs/dump-format.md says: backslash, newline, carriage return. */
char *mdr_fmt_str(char *p, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\') {
            *p++ = '\\';
            *p++ = '\\';
        } else if (*s == '\n') {
            *p++ = '\\';
            *p++ = 'n';
        } else if (*s == '\r') {
            *p++ = '\\';
            *p++ = 'r';
        } else {
            *p++ = *s;
        }
    }
    return p;
}
