// @brief Signed integer overflow in a multiplication: 65536 * 65536 does not fit in a 32-bit int.
#include <cstdio>

__attribute__((noinline)) int square(int x) {
    return x * x;  // UB: signed-mul
}

int main() {
    volatile int x = 65536;
    std::printf("65536 * 65536 = %d\n", square(x));
    return 0;
}
