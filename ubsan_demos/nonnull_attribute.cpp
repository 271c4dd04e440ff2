// @brief A null pointer passed to a parameter declared nonnull (the check the callee may then drop).
#include <cstdio>

__attribute__((noinline, nonnull(1))) int length(const char *s) {
    int n = 0;
    if (s == nullptr) {  // GCC drops this check: s is declared non-null
        return -1;
    }
    while (s[n] != '\0') {
        n++;
    }
    return n;
}

__attribute__((noinline)) int call_with(const char *s) {
    return length(s);  // UB: nonnull-arg
}

int main() {
    const char *volatile s = nullptr;
    std::printf("length %d\n", call_with(s));
    return 0;
}
