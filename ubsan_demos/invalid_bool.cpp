// @brief Loading a bool whose byte is neither 0 nor 1 (copied in with memcpy).
#include <cstdio>
#include <cstring>

__attribute__((noinline)) int as_int(const bool *b) {
    return *b ? 1 : 0;  // UB: bool-load
}

int main() {
    bool b;
    unsigned char byte = 5;
    std::memcpy(&b, &byte, 1);
    std::printf("as int %d\n", as_int(&b));
    return 0;
}
