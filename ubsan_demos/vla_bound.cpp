// @brief A variable-length array (a GNU extension in C++) with a negative bound.
#include <cstdio>

__attribute__((noinline)) int fill(int n) {
    int values[n];  // UB: vla-bound
    for (int i = 0; i < n; i++) {
        values[i] = i;
    }
    return n > 0 ? values[0] : -1;
}

int main() {
    volatile int n = -1;
    std::printf("fill %d\n", fill(n));
    return 0;
}
