/* @brief Blocks live at a breakpoint: `kept` (freed after it), `leaked`; `temp` is freed before it.
 * After the breakpoint another block leaks. */
#include <stdlib.h>

int main(void) {
    char *kept = malloc(11);  // LIVE: kept
    char *temp = malloc(22);  // FREE: temp
    char *leaked = malloc(33);  // LEAK: leaked
    free(temp);
    kept[0] = leaked[0] = 'x';  // BREAK: here
    free(kept);
    char *late = malloc(44);  // LEAK: late
    late[0] = 'y';
    return 0;
}
