/* @brief Every allocator call on blocks that may be guarded (tests/e2e/test_memdump_guard.py, under
 * `--guard all` and `--guard all,under`): malloc_usable_size is at least the size asked for, calloc
 * zeroes (a reused slot too), realloc keeps the contents as it grows and shrinks (a guarded block
 * to a guarded one, and across the C library's), the aligned allocations are aligned, realloc to 0
 * frees. Each check that fails prints its line and the program exits 1; it prints "ok" at the end.
 * It allocates more live blocks than the pool has slots (5,000), so that some come from the C
 * library, then frees them all. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed;

#define CHECK(cond)                                                  \
    do {                                                             \
        if (!(cond)) {                                               \
            printf("guard_calls.c:%d: %s\n", __LINE__, #cond);       \
            failed = 1;                                              \
        }                                                            \
    } while (0)

static int all_are(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

int main(void)
{
    enum { MANY = 5000 };
    static char *blocks[MANY];
    for (int round = 0; round < 2; round++) {
        for (size_t size = 1; size <= 600; size += 13) {
            char *p = malloc(size);
            CHECK(p != NULL && malloc_usable_size(p) >= size);
            memset(p, 0x5a, size);
            free(p);
            unsigned char *z = calloc(size, 3);  /* the slot just freed, reused or not: zero */
            CHECK(z != NULL && all_are(z, size * 3, 0));
            free(z);
        }
    }
    char *r = NULL;
    size_t had = 0;
    static const size_t steps[] = {8, 100, 3000, 5000, 40, 1, 700};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        r = realloc(r, steps[i]);
        CHECK(r != NULL);
        size_t keep = had < steps[i] ? had : steps[i];
        CHECK(all_are((unsigned char *)r, keep, (unsigned char)i));
        memset(r, (int)(i + 1), steps[i]);
        had = steps[i];
    }
    CHECK(realloc(r, 0) == NULL);
    for (size_t align = 16; align <= 4096; align *= 4) {
        void *a = NULL;
        CHECK(posix_memalign(&a, align, 24) == 0 && (uintptr_t)a % align == 0);
        free(a);
        a = aligned_alloc(align, align * 2);
        CHECK(a != NULL && (uintptr_t)a % align == 0);
        free(a);
        a = memalign(align, 40);
        CHECK(a != NULL && (uintptr_t)a % align == 0);
        free(a);
    }
    for (int i = 0; i < MANY; i++) {
        blocks[i] = malloc(32);
        CHECK(blocks[i] != NULL);
        memset(blocks[i], i & 0xff, 32);
    }
    for (int i = 0; i < MANY; i++) {
        CHECK(all_are((unsigned char *)blocks[i], 32, (unsigned char)(i & 0xff)));
        free(blocks[i]);
    }
    if (!failed)
        puts("ok");
    return failed;
}
