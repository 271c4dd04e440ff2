// @brief Loading an enum value outside the enumeration's range (no fixed underlying type: 0..3).
#include <cstdio>
#include <cstring>

enum Colour { red, green, blue };

__attribute__((noinline)) int to_int(const Colour *c) {
    return static_cast<int>(*c);  // UB: enum-load
}

int main() {
    Colour c;
    int raw = 7;
    std::memcpy(&c, &raw, sizeof c);
    std::printf("colour %d\n", to_int(&c));
    return 0;
}
