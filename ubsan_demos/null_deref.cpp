// @brief Null pointer dereference: the seed's first example.
//
// Reading through a null pointer is undefined. Without a sanitizer the MMU usually turns it into SIGSEGV;
// with -fsanitize=undefined (check `null`) both compilers report the load before it happens.
#include <cstdio>

__attribute__((noinline)) int read_value(const int *p) {
    return *p;  // UB: null-load
}

int main() {
    const int *volatile p = nullptr;
    std::printf("value %d\n", read_value(p));
    return 0;
}
