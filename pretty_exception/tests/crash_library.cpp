/// @brief A shared library that installs the crash handler and then crashes: the executable that loads it does not call install_crash_handler(), so the handler must not re-execute it (it would start the program again) and prints raw frames instead.
#include "pretty_exception.h"

#include <csignal>

extern "C" void pe_test_library_install_and_crash();

namespace {
int* volatile g_bad = reinterpret_cast<int*>(16);  // unmapped; not null, which UBSan reports first
[[gnu::noinline]] void library_write() { *g_bad = 1; }
}  // namespace

extern "C" void pe_test_library_install_and_crash() {
    pretty_exception::install_crash_handler(false);
    library_write();
}
