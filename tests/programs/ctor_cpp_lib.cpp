/* @brief A C++ shared library linked into ctor_main whose static initializer leaks a block
 * (tests/e2e/test_memdump_ctor_leaks.py). */
#include <cstring>

namespace {

__attribute__((noinline)) int register_codecs()
{
    char *codecs = new char[27];  // LEAK: cpp-static-init
    std::memset(codecs, 'c', 27);
    return codecs[0];
}

int registered = register_codecs();

}  // namespace

extern "C" int ctor_cpp_registered();

int ctor_cpp_registered()
{
    return registered;
}
