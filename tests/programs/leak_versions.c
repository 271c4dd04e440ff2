/* @brief Two versions of one program for `memdump-analyze diff` (argv[1]: 1 or 2). Both leak a
 * 16-byte name; version N leaks N+1 32-byte records from one line (version 2: a group that grew);
 * version 2 also leaks a 64-byte cache (a new leak). Every block stays reachable from `kept`, so
 * that the kinds do not depend on stale copies of pointers. */
#include <stdlib.h>

static void *kept[8];

__attribute__((noinline)) static void *make_record(void) {
    return malloc(32);  // LEAK: record
}

__attribute__((noinline)) static void *make_cache(void) {
    return malloc(64);  // LEAK: cache
}

int main(int argc, char **argv) {
    int version = argc > 1 ? atoi(argv[1]) : 1;
    int n = 0;
    kept[n++] = malloc(16);  // LEAK: name
    for (int i = 0; i < version + 1 && n < 7; i++) {
        kept[n++] = make_record();
    }
    if (version >= 2) {
        kept[n++] = make_cache();
    }
    return 0;
}
