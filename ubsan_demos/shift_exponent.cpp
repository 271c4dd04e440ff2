// @brief Shift exponent too large: shifting a 32-bit int by 32 (x86 masks the count to 0).
#include <cstdio>

__attribute__((noinline)) int shift_left(int value, int by) {
    return value << by;  // UB: shift-exponent
}

int main() {
    volatile int by = 32;
    std::printf("1 << 32 = %d\n", shift_left(1, by));
    return 0;
}
