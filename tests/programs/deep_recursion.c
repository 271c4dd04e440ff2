/* @brief Recurses 50 frames deep and leaks 77 bytes at the bottom. */
#include <stdlib.h>

__attribute__((noinline)) static void *descend(int depth) {
    if (depth == 0) {
        return malloc(77);  // LEAK: bottom
    }
    void *block = descend(depth - 1);  // CALL: descend
    return block;
}

int main(void) {
    void *block = descend(49);  // CALL: main
    return block == NULL;
}
