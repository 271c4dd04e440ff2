/// @brief The translation unit linked first: its copy of pe_test::large<int> is the one the program keeps; it installs the terminate handler.
#include "discarded_copy.h"
#include "pretty_exception.h"

namespace pe_test {

volatile unsigned g_discarded_sink = 0;

int other_unit(int x) {
    pretty_exception::install_terminate_handler();
    return large<int>(x);
}

}  // namespace pe_test
