/* @brief Interior pointers that valgrind's heuristics explain (argv[1]): new[] of a class with a
 * destructor (the pointer is 8 bytes past the block's start, after the element count), and a pointer
 * to the second base of a class with two polymorphic bases. Both blocks stay still reachable. */
#include <cstring>

struct Counted {
    ~Counted() { value[0] = 0; }
    int value[3];
};

struct Left {
    virtual ~Left() {}
    long left = 1;
};

struct Right {
    virtual ~Right() {}
    long right = 2;
};

struct Both : Left, Right {
    long both = 3;
};

static Counted *counted;
static Right *right;

__attribute__((noinline)) static void scrub() {
    volatile char pad[16384];
    std::memset(const_cast<char *>(pad), 0, sizeof pad);
}

__attribute__((noinline)) static void case_newarray() {
    counted = new Counted[4];  // LEAK: newarray
}

__attribute__((noinline)) static void case_multiple() {
    right = new Both;  // LEAK: multipleinheritance
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "";
    if (std::strcmp(which, "newarray") == 0) {
        case_newarray();
    } else if (std::strcmp(which, "multipleinheritance") == 0) {
        case_multiple();
    } else {
        return 2;
    }
    scrub();
    return 0;
}
