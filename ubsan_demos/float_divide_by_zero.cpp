// @brief Floating-point division by zero: undefined in C++, infinity in IEEE 754.
//
// Neither compiler's -fsanitize=undefined includes float-divide-by-zero; it has to be named.
#include <cstdio>

__attribute__((noinline)) double divide(double a, double b) {
    return a / b;  // UB: float-divide
}

int main() {
    volatile double zero = 0.0;
    std::printf("1.0 / 0.0 = %g\n", divide(1.0, zero));
    return 0;
}
