// @brief Misaligned access: an int read from an odd address (x86 allows it; other CPUs trap).
#include <cstdio>
#include <cstring>

__attribute__((noinline)) int read_int(const int *p) {
    return *p;  // UB: misaligned
}

int main() {
    alignas(int) char buffer[8];
    std::memset(buffer, 0, sizeof buffer);
    const char *volatile odd = buffer + 1;
    std::printf("value %d\n", read_int(reinterpret_cast<const int *>(odd)));
    return 0;
}
