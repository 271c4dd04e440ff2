/* @brief One malloc leaked, one freed: the smallest leak. Also built without -g, stripped and -static. */
#include <stdlib.h>
#include <string.h>

int main(void) {
    char *freed = malloc(100);  // FREE: freed
    char *leaked = malloc(24);  // LEAK: block
    memset(freed, 1, 100);
    memset(leaked, 2, 24);
    free(freed);
    return 0;
}
