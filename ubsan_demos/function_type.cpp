// @brief Calling a function through a pointer of the wrong function type. Clang only (-fsanitize=function).
#include <cstdio>

__attribute__((noinline)) int twice(int x) {
    return 2 * x;
}

using long_fn = long (*)(long);

__attribute__((noinline)) long call(long_fn f) {
    return f(21);  // UB: function
}

int main() {
    std::printf("result %ld\n", call(reinterpret_cast<long_fn>(&twice)));
    return 0;
}
