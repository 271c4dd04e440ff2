/* @brief Leaks 64 bytes, then dies of SIGSEGV. */
#include <stdlib.h>

int main(void) {
    char *leaked = malloc(64);  // LEAK: before-crash
    leaked[0] = 'x';
    volatile int *null = NULL;
    *null = 1;  // CRASH: segv
    return 0;
}
