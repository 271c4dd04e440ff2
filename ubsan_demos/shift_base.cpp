// @brief Shift base: left-shifting a negative value is undefined before C++20.
#include <cstdio>

__attribute__((noinline)) int shift_left(int value, int by) {
    return value << by;  // UB: shift-base
}

int main() {
    volatile int value = -1;
    std::printf("-1 << 1 = %d\n", shift_left(value, 1));
    return 0;
}
