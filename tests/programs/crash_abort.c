/* @brief Leaks 56 bytes, then abort()s. */
#include <stdlib.h>

int main(void) {
    char *leaked = malloc(56);  // LEAK: before-abort
    leaked[0] = 'x';
    abort();
}
