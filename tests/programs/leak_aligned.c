/* @brief One leak from each of posix_memalign, aligned_alloc, memalign, valloc, pvalloc, reallocarray. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>

int main(void) {
    void *pm = NULL;
    int rc = posix_memalign(&pm, 64, 40);  // LEAK: posix_memalign
    void *aa = aligned_alloc(128, 256);  // LEAK: aligned_alloc
    void *ma = memalign(32, 72);  // LEAK: memalign
    void *va = valloc(88);  // LEAK: valloc
    void *pv = pvalloc(104);  // LEAK: pvalloc
    void *ra = reallocarray(NULL, 7, 8);  // LEAK: reallocarray
    return rc != 0 || !aa || !ma || !va || !pv || !ra;
}
