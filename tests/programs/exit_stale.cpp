/* @brief Blocks whose only pointer died with a function that returned before the program exits
 * (argv[1]): the exit path (exit, its handlers, static destructors) grows the stack again over
 * that function's frame and may leave a copy of the pointer there, which valgrind does not scan
 * (undefined: never written by the exit path) and memdump must not either.
 *   object  a C++ object whose members own heap blocks (a string, a vector, a map)
 *   string  a std::string* holding a long string
 *   exit    an object lost the same way, then exit(3) from a function main calls
 *   _exit   the same, then _exit(4) from main */
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

struct Holder {
    std::string name;
    std::vector<int> values;
    std::map<int, int> index;
};

__attribute__((noinline)) static void lose_object() {
    Holder *h = new Holder;  // LEAK: object
    h->name.assign(100, 'n');
    h->values.assign(40, 7);
    h->index[1] = 2;
    asm volatile("" : : "r"(h) : "memory");
}

__attribute__((noinline)) static void lose_string() {
    std::string *s = new std::string(200, 's');  // LEAK: string
    asm volatile("" : : "r"(s) : "memory");
}

__attribute__((noinline)) static void leave(int code) {
    std::exit(code);
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "object";
    if (std::strcmp(what, "string") == 0) {
        lose_string();
    } else {
        lose_object();
    }
    if (std::strcmp(what, "exit") == 0)
        leave(3);
    if (std::strcmp(what, "_exit") == 0)
        _exit(4);
    return 0;
}
