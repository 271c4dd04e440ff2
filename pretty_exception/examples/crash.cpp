/// @brief pretty_exception example: the crash handler reports a null-pointer write with the faulting thread's stack, then the process dies of SIGSEGV; and any exception's throw site after trace_all_exceptions().
#include "pretty_exception.h"

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace settings {

struct entry {
    std::string key;
    int value;
};

[[gnu::noinline]] int lookup(const std::vector<entry>& entries, std::size_t i) { return entries.at(i).value; }

// e is null below: SIGSEGV. (A volatile store: GCC 12 drops a call whose only effect is a plain store
// to memory nothing reads afterwards.)
[[gnu::noinline]] void store(entry* e, int value) { *static_cast<volatile int*>(&e->value) = value; }

}  // namespace settings

int main(int argc, char** argv) {
    pretty_exception::trace_all_exceptions();
    pretty_exception::install_crash_handler();
    const bool crash = argc > 1 && std::strcmp(argv[1], "--crash") == 0;
    const std::vector<settings::entry> entries{{"port", 80}};
    int port = 0;
    try {
        port = settings::lookup(entries, 3);  // std::vector::at throws
    } catch (const std::exception& e) {
        std::cerr << pretty_exception::describe(e);
    }
    settings::entry* volatile missing = nullptr;  // volatile: the compiler may not see it is null
    if (crash) settings::store(missing, 8080);
    return port;
}
