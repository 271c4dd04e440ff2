// @brief __builtin_unreachable() reached: the optimiser may fall through into whatever code comes next.
#include <cstdio>

__attribute__((noinline)) const char *name_of(int colour) {
    switch (colour) {
    case 0:
        return "red";
    case 1:
        return "green";
    }
    __builtin_unreachable();  // UB: unreachable
}

int main() {
    volatile int colour = 2;
    std::printf("name %s\n", name_of(colour) != nullptr ? "non-null" : "null");
    return 0;
}
