// @brief Signed integer overflow in a negation: -INT_MIN has no int value.
#include <climits>
#include <cstdio>

__attribute__((noinline)) int negate(int x) {
    return -x;  // UB: signed-negate
}

int main() {
    volatile int small = INT_MIN;
    std::printf("-INT_MIN = %d\n", negate(small));
    return 0;
}
