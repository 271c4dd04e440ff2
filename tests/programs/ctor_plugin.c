/* @brief A plugin that ctor_main dlopen()s: its constructor leaks one block
 * (tests/e2e/test_memdump_ctor_leaks.py). */
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static void ctor_plugin_setup(void)
{
    char *lost = malloc(57);  // LEAK: plugin-ctor
    memset(lost, 'p', 57);
}

__attribute__((constructor)) static void ctor_plugin_init(void)
{
    ctor_plugin_setup();
}
