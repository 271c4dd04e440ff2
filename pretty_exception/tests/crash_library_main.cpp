/// @brief The executable for crash_library.cpp: prints a line when it starts, so that a second start (the program re-executed as the crash helper) would show.
#include <cstdio>

extern "C" void pe_test_library_install_and_crash();

int main() {
    std::fputs("main started\n", stderr);
    pe_test_library_install_and_crash();
    return 0;
}
