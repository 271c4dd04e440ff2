/* @brief Leaks made by constructors of shared libraries (tests/e2e/test_memdump_ctor_leaks.py):
 * ctor_lib's constructor and ctor_cpp_lib's C++ static initializer run before main (the loader
 * calls them); the plugin named by argv[1], when given, is dlopen()ed and its constructor runs
 * inside dlopen. The plugin is not closed, so its frames keep their symbols in every tool. The
 * program's own allocations are freed: every leak is a constructor's. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

const char *ctor_lib_name(void);
int ctor_cpp_registered(void);

int main(int argc, char **argv)
{
    char *own = malloc(64);  // FREE: own
    snprintf(own, 64, "%.4s %d", ctor_lib_name(), ctor_cpp_registered());
    free(own);
    if (argc > 1 && dlopen(argv[1], RTLD_NOW) == NULL) {  // CALL: dlopen
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    return 0;
}
