// @brief A value-returning function that falls off its end (the seed's second example).
//
// Flowing off the end of a non-void function is undefined in C++. GCC and Clang then emit a trap or
// nothing at all at -O2; -fsanitize=return reports it, naming the function's declaration.
#include <cstdio>

__attribute__((noinline)) int sign_of(int x) {  // UB: missing-return
    if (x > 0) {
        return 1;
    }
    if (x < 0) {
        return -1;
    }
}

int main() {
    volatile int zero = 0;
    std::printf("sign %d\n", sign_of(zero));
    return 0;
}
