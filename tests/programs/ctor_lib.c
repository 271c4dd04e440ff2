/* @brief A shared library linked into ctor_main whose constructor leaks one block and keeps one
 * (tests/e2e/test_memdump_ctor_leaks.py): the constructor is the library's code, not the loader's. */
#include <stdlib.h>
#include <string.h>

static char *ctor_lib_table;

__attribute__((noinline)) static void ctor_lib_register(void)
{
    char *lost = malloc(41);  // LEAK: lib-ctor
    memset(lost, 'l', 41);
    ctor_lib_table = malloc(19);  // LEAK: lib-ctor-kept
    memset(ctor_lib_table, 'k', 19);
}

__attribute__((constructor)) static void ctor_lib_init(void)
{
    ctor_lib_register();
}

const char *ctor_lib_name(void);

const char *ctor_lib_name(void)
{
    return ctor_lib_table;
}
