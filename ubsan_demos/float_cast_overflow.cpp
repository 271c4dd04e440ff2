// @brief Float-to-int conversion out of range: 1e10 does not fit an int (x86 gives INT_MIN).
//
// Clang's -fsanitize=undefined includes float-cast-overflow; GCC's does not (enable it by name).
#include <cstdio>

__attribute__((noinline)) int to_int(double d) {
    return static_cast<int>(d);  // UB: float-cast
}

int main() {
    volatile double d = 1e10;
    std::printf("int(1e10) = %d\n", to_int(d));
    return 0;
}
