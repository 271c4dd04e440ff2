// @brief Array index out of bounds, and the loop GCC turns into `return true`.
//
// The loop reads table[4], one past the end. Since that read is undefined, GCC at -O2 assumes the loop
// returns before i reaches 4, so the function returns true for any value. -fsanitize=bounds reports
// the index.
#include <cstdio>

int table[4] = {1, 2, 3, 4};

__attribute__((noinline)) bool exists_in_table(int v) {
    for (int i = 0; i <= 4; i++) {
        if (table[i] == v) {  // UB: index
            return true;
        }
    }
    return false;
}

int main() {
    volatile int v = 42;
    std::printf("42 in table: %s\n", exists_in_table(v) ? "true" : "false");
    return 0;
}
