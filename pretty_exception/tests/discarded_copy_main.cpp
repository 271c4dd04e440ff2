/// @brief An uncaught exception in main, whose unit's copy of pe_test::large<int> the linker discards: the stack at std::terminate ends at _start, which has no file:line (not one of the discarded copy's, nor main's last).
#include "discarded_copy.h"

#include <stdexcept>

int main(int argc, char**) {
    const int r = pe_test::other_unit(argc) + pe_test::large<int>(argc);
    if (argc > 0) throw std::runtime_error("uncaught in main");
    return r;
}
