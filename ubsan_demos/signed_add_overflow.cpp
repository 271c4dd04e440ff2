// @brief Signed integer overflow in an addition, and the overflow check the optimiser deletes.
//
// `x + 1 < x` is meant to detect overflow, but signed overflow is undefined, so GCC may assume x + 1 > x:
// at -O2 the check below is folded to false (at -O0 the wrapped sum makes it true).
// -fsanitize=signed-integer-overflow reports the addition.
#include <climits>
#include <cstdio>

__attribute__((noinline)) bool increment_overflows(int x) {
    int next = x + 1;  // UB: signed-add
    return next < x;
}

int main() {
    volatile int big = INT_MAX;
    std::printf("INT_MAX + 1 < INT_MAX: %s\n", increment_overflows(big) ? "true" : "false");
    return 0;
}
