// @brief A null pointer returned from a function declared returns_nonnull.
#include <cstdio>

static int the_value = 3;

__attribute__((noinline, returns_nonnull)) int *find(bool present) {
    if (present) {
        return &the_value;
    }
    return nullptr;  // UB: returns-nonnull
}

int main() {
    volatile bool present = false;
    int *p = find(present);
    std::printf("found: %s\n", p != nullptr ? "yes" : "no");
    return 0;
}
