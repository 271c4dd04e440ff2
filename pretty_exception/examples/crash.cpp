/// @brief pretty_exception example: the crash handler reports a write through a stale pointer with the faulting thread's stack, then the process dies of SIGSEGV; and any exception's throw site after trace_all_exceptions().
#include "pretty_exception.h"

#include <cstring>

#include <sys/mman.h>
#include <iostream>
#include <string>
#include <vector>

namespace settings {

struct entry {
    std::string key;
    int value;
};

[[gnu::noinline]] int lookup(const std::vector<entry>& entries, std::size_t i) { return entries.at(i).value; }

// e points into an unmapped page below: SIGSEGV. (A volatile store: GCC 12 drops a call whose only effect is a plain store
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
    // A stale pointer: into a page that is gone (unmapped) by the time it is used.
    void* page = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    settings::entry* volatile stale = static_cast<settings::entry*>(page);
    ::munmap(page, 4096);
    if (crash) settings::store(stale, 8080);
    return port;
}
