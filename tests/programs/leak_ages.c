/* @brief Two blocks live at the line marked `BREAK: check`, one allocated 2.5 s before the other
 * (GDB's `memdump leaks --older-than`); both freed at the end. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(void) {
    char *old = malloc(30);  // LEAK: old
    memset(old, 1, 30);
    struct timespec pause = {2, 500000000};
    nanosleep(&pause, NULL);
    char *young = malloc(20);  // LEAK: young
    memset(young, 2, 20);
    free(young);  // BREAK: check
    free(old);
    return 0;
}
