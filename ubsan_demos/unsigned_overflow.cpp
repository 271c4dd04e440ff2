// @brief Unsigned wrap-around: defined behaviour, but often a bug. Clang only, not in "undefined".
#include <cstdio>

__attribute__((noinline)) unsigned next(unsigned x) {
    return x + 1;  // UB: unsigned-add
}

int main() {
    volatile unsigned max = 4294967295u;
    std::printf("UINT_MAX + 1 = %u\n", next(max));
    return 0;
}
