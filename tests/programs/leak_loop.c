/* @brief Many blocks from two sites: ten of 32 bytes from one line, three of 100 bytes from another. */
#include <stdlib.h>

static void *keep[16];

int main(void) {
    for (int i = 0; i < 10; i++) {
        keep[i] = malloc(32);  // LEAK: loop32
    }
    for (int i = 10; i < 13; i++) {
        keep[i] = malloc(100);  // LEAK: loop100
    }
    return keep[0] == NULL;
}
