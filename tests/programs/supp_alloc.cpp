/* @brief Suppressions' allocation functions and subtrees: a calloc'd and a new'd block from one
 * function, a lost tree whose children another function allocated (the root names neither), and
 * leaks under C++ names (a member function, a template, a lambda). */
#include <cstdlib>
#include <cstring>

struct Name {
    char text[47];
};

struct Root {
    void *kids[2];
    char pad[48];
};

static void *table;
static Name *name;

/* One caller, two allocation functions: a `fun:calloc` line is the calloc'd block's only. */
__attribute__((noinline)) static void make_both() {
    table = calloc(16, 8);  // LEAK: calloc
    name = new Name();      // LEAK: new
}

__attribute__((noinline)) static void *make_kid(size_t size) {
    return malloc(size);  // LEAK: kid
}

/* A 64-byte root holding the only pointers to two 112-byte blocks main had make_kid allocate:
 * lost, the root definitely, the kids indirectly; no kid's stack has make_tree in it. */
__attribute__((noinline)) static void make_tree(void *kid1, void *kid2) {
    Root *root = static_cast<Root *>(malloc(sizeof(Root)));  // LEAK: root
    root->kids[0] = kid1;
    root->kids[1] = kid2;
}

/* C++ names: valgrind's suppressions name these frames by their mangled names. */
namespace app {
struct Registry {
    void *slots[3];
    __attribute__((noinline)) void add(int n);
};

void Registry::add(int n) {
    slots[n] = malloc(static_cast<size_t>(20 + n));  // LEAK: member
}

template <typename T>
__attribute__((noinline)) T *make_many(int n) {
    return static_cast<T *>(malloc(sizeof(T) * static_cast<size_t>(n)));  // LEAK: template
}
}  // namespace app

static app::Registry registry;

__attribute__((noinline)) static void cxx_names() {
    registry.add(1);
    (void)app::make_many<long>(3);
    auto grow = [](size_t n) __attribute__((noinline)) { return malloc(n); };  // LEAK: lambda
    (void)grow(33);
    registry.slots[1] = nullptr;
}

/* Overwrite the stack the calls used: no stale copy of a pointer survives below main's frame. */
__attribute__((noinline)) static void scrub() {
    volatile char pad[16384];
    memset(const_cast<char *>(pad), 0, sizeof pad);
}

int main() {
    make_both();
    make_tree(make_kid(112), make_kid(112));
    cxx_names();
    scrub();
    table = nullptr;
    name = nullptr;
    return 0;
}
