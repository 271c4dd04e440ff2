// @brief An uninitialised bool that tests both true and false (the seed's third example).
//
// A default-initialised bool has an indeterminate value; here its storage holds the byte 2. The code
// for `if (b)` tests "non-zero" while `if (!b)` flips the low bit, so both branches run at -O0.
// -fsanitize=bool reports the load of a value that is neither 0 nor 1.
#include <cstdio>
#include <new>

__attribute__((noinline)) void report(const bool *flag) {
    bool b = *flag;  // UB: uninit-bool
    if (b) {
        std::puts("b is true");
    }
    if (!b) {
        std::puts("b is false");
    }
}

int main() {
    alignas(bool) unsigned char storage[1] = {2};
    bool *flag = new (storage) bool;  // default-initialised: indeterminate, the old byte stays
    report(flag);
    return 0;
}
