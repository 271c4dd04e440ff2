// @brief Signed integer overflow in a subtraction: INT_MIN - 1.
#include <climits>
#include <cstdio>

__attribute__((noinline)) int decrement(int x) {
    return x - 1;  // UB: signed-sub
}

int main() {
    volatile int small = INT_MIN;
    std::printf("INT_MIN - 1 = %d\n", decrement(small));
    return 0;
}
