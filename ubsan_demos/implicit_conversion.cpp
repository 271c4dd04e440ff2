// @brief An implicit conversion that changes the value: int 300 into unsigned char. Clang only.
#include <cstdio>

__attribute__((noinline)) unsigned char to_byte(int x) {
    unsigned char b = x;  // UB: implicit-conversion
    return b;
}

int main() {
    volatile int x = 300;
    std::printf("byte %d\n", to_byte(x));
    return 0;
}
