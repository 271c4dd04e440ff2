// @brief Pointer overflow: pointer arithmetic that wraps around the address space.
#include <cstdint>
#include <cstdio>

__attribute__((noinline)) const char *advance(const char *p, std::uintptr_t n) {
    return p + n;  // UB: pointer-overflow
}

int main() {
    char buffer[4] = {};
    volatile std::uintptr_t huge = UINTPTR_MAX;
    std::printf("wrapped below: %s\n", advance(buffer + 1, huge) < buffer + 1 ? "yes" : "no");
    return 0;
}
