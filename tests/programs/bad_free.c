/* @brief Heap misuse glibc aborts on: `bad_free double` frees a block twice, `bad_free invalid` frees a
 * pointer into the middle of a block, `bad_free realloc` reallocs a pointer into the middle of a block. */
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"

int main(int argc, char **argv) {
    if (argc < 2) {
        return 2;
    }
    if (strcmp(argv[1], "double") == 0) {
        char *twice = malloc(32);  // ALLOC: double
        free(twice);  // FREE: first
        free(twice);  // DOUBLE-FREE: second
    } else if (strcmp(argv[1], "invalid") == 0) {
        char *block = malloc(40);  // LEAK: invalid-base
        free(block + 8);  // INVALID-FREE: middle
    } else if (strcmp(argv[1], "realloc") == 0) {
        char *block = malloc(24);  // LEAK: realloc-base
        char *moved = realloc(block + 8, 48);  // INVALID-REALLOC: middle
        return moved != NULL;
    }
    return 3;
}
