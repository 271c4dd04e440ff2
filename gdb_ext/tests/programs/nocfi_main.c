/* Calls into a library that has no CFI (see nocfi_lib.c). */
#include <stdlib.h>

void *nocfi_alloc(size_t n);

__attribute__((noinline)) static void *caller(size_t n) {
    void *p = nocfi_alloc(n);
    return p;
}

int main(void) {
    free(caller(40));
    return 0;
}
