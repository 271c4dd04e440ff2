/* @brief Allocations in inlined code, built at -O2 and -O3 by GCC and by Clang: a `new` in a static
 * inline helper, and std::vector::reserve inlined there, called from a noinline function. Each
 * report frame must be the user's function with its call line, as valgrind and GDB's bt show them. */
#include <cstddef>
#include <vector>

struct Session {
    int id;
    std::vector<int> items;
};

static inline Session *open_session(int id) {
    Session *s = new Session{id, {}};  // LEAK: session
    s->items.reserve(static_cast<std::size_t>(id) * 8);  // LEAK: reserve
    return s;
}

__attribute__((noinline)) Session *run(int n) {
    Session *s = open_session(n);  // CALL: open_session
    return s;
}

int main(int argc, char **) {
    Session *s = run(argc + 3);  // CALL: run
    return s == nullptr;  // s leaks: 32 bytes (definitely lost) holding 128 (indirectly lost)
}
