// @brief Integer division by zero: x86's idiv raises SIGFPE.
#include <cstdio>

__attribute__((noinline)) int divide(int a, int b) {
    return a / b;  // UB: int-divide
}

int main() {
    volatile int zero = 0;
    std::printf("1 / 0 = %d\n", divide(1, zero));
    return 0;
}
