/* @brief realloc grown twice then leaked, realloc(NULL, n) leaked, realloc(p, 0) freeing its block. */
#include <stdlib.h>
#include <string.h>

int main(void) {
    char *grown = malloc(10);  // ALLOC: first
    strcpy(grown, "abc");
    grown = realloc(grown, 20);  // ALLOC: second
    grown = realloc(grown, 4000);  // LEAK: grown
    char *fresh = realloc(NULL, 50);  // LEAK: from-null
    char *gone = malloc(30);  // ALLOC: gone
    gone[0] = 'x';
    char *volatile zero = realloc(gone, 0);  // FREE: realloc-zero
    return grown == NULL || fresh == NULL || zero != NULL;
}
