/* @brief calloc(7, 9): one 63-byte leak. */
#include <stdlib.h>

int main(void) {
    int *p = calloc(7, 9);  // LEAK: calloc
    return p == NULL;
}
